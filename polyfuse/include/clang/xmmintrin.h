/* polyfuse stand-in for the x86 SSE intrinsics header: the vector types host headers
 * (CL/cl_platform.h) name, and what the real header brings in through <mm_malloc.h>
 * (<stdlib.h>: hosts use EXIT_FAILURE without including it; _mm_malloc/_mm_free).  gcc's own
 * intrinsics headers call gcc builtins clang does not know. */
#ifndef _POLYFUSE_XMMINTRIN_H
#define _POLYFUSE_XMMINTRIN_H
#include <stdlib.h>
void *_mm_malloc(size_t size, size_t align);
void _mm_free(void *ptr);
typedef int __m64 __attribute__((__vector_size__(8)));
typedef float __m128 __attribute__((__vector_size__(16)));
typedef double __m128d __attribute__((__vector_size__(16)));
typedef long long __m128i __attribute__((__vector_size__(16)));
typedef float __m256 __attribute__((__vector_size__(32)));
typedef double __m256d __attribute__((__vector_size__(32)));
typedef long long __m256i __attribute__((__vector_size__(32)));
#endif
