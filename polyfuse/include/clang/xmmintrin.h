/* polyfuse stand-in for the x86 SSE intrinsics header: only the vector types host headers
 * (CL/cl_platform.h) name.  gcc's own intrinsics headers call gcc builtins clang does not know. */
#ifndef _POLYFUSE_XMMINTRIN_H
#define _POLYFUSE_XMMINTRIN_H
typedef int __m64 __attribute__((__vector_size__(8)));
typedef float __m128 __attribute__((__vector_size__(16)));
typedef double __m128d __attribute__((__vector_size__(16)));
typedef long long __m128i __attribute__((__vector_size__(16)));
typedef float __m256 __attribute__((__vector_size__(32)));
typedef double __m256d __attribute__((__vector_size__(32)));
typedef long long __m256i __attribute__((__vector_size__(32)));
#endif
