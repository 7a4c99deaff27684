/* OpenCL C built-in types and constants for polyfuse's front-end.
 *
 * Force-included (gcc -include) before every OpenCL source polyfuse parses, so kernels parse
 * with pycparser without an OpenCL SDK.  Vector types are opaque structs: member access
 * (.x, .s0, .lo, .xy) parses, nothing is type-checked.  The memory-fence flags are distinct bits
 * so the front-end can decode them after preprocessing.
 */
#ifndef POLYFUSE_OPENCL_C_H
#define POLYFUSE_OPENCL_C_H

#define __OPENCL_VERSION__ 120
#define __OPENCL_C_VERSION__ 120
#define CL_VERSION_1_0 100
#define CL_VERSION_1_1 110
#define CL_VERSION_1_2 120
#define CL_VERSION_2_0 200
#define CL_VERSION_2_1 210
#define CL_VERSION_2_2 220
#define CL_VERSION_3_0 300
#define __ENDIAN_LITTLE__ 1
#define __IMAGE_SUPPORT__ 0
#define cl_khr_fp64 1
#define cl_khr_global_int32_base_atomics 1
#define cl_khr_local_int32_base_atomics 1

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef unsigned long size_t;
typedef long ptrdiff_t;
typedef long intptr_t;
typedef unsigned long uintptr_t;
typedef unsigned short half;

#define POLYFUSE_VEC(T) \
  typedef struct __polyfuse_##T##2 T##2; \
  typedef struct __polyfuse_##T##3 T##3; \
  typedef struct __polyfuse_##T##4 T##4; \
  typedef struct __polyfuse_##T##8 T##8; \
  typedef struct __polyfuse_##T##16 T##16;

POLYFUSE_VEC(char)
POLYFUSE_VEC(uchar)
POLYFUSE_VEC(short)
POLYFUSE_VEC(ushort)
POLYFUSE_VEC(int)
POLYFUSE_VEC(uint)
POLYFUSE_VEC(long)
POLYFUSE_VEC(ulong)
POLYFUSE_VEC(float)
POLYFUSE_VEC(double)
POLYFUSE_VEC(half)
#undef POLYFUSE_VEC

typedef struct __polyfuse_image2d_t *image2d_t;
typedef struct __polyfuse_image3d_t *image3d_t;
typedef unsigned int sampler_t;
typedef struct __polyfuse_event_t *event_t;

/* cl_mem_fence_flags: distinct bits, decoded by polyfuse.frontend.opencl */
#define CLK_LOCAL_MEM_FENCE 1
#define CLK_GLOBAL_MEM_FENCE 2
#define CLK_IMAGE_MEM_FENCE 4

#define CHAR_BIT 8
#define CHAR_MAX 127
#define CHAR_MIN (-127 - 1)
#define SCHAR_MAX 127
#define SCHAR_MIN (-127 - 1)
#define UCHAR_MAX 255
#define SHRT_MAX 32767
#define SHRT_MIN (-32767 - 1)
#define USHRT_MAX 65535
#define INT_MAX 2147483647
#define INT_MIN (-2147483647 - 1)
#define UINT_MAX 0xffffffffU
#define LONG_MAX 0x7fffffffffffffffL
#define LONG_MIN (-0x7fffffffffffffffL - 1)
#define ULONG_MAX 0xffffffffffffffffUL

#define FLT_DIG 6
#define FLT_MANT_DIG 24
#define FLT_MAX_10_EXP 38
#define FLT_MAX_EXP 128
#define FLT_MIN_10_EXP (-37)
#define FLT_MIN_EXP (-125)
#define FLT_RADIX 2
#define FLT_MAX 0x1.fffffep127f
#define FLT_MIN 0x1.0p-126f
#define FLT_EPSILON 0x1.0p-23f
#define DBL_MAX 0x1.fffffffffffffp1023
#define DBL_MIN 0x1.0p-1022
#define DBL_EPSILON 0x1.0p-52

#define MAXFLOAT 0x1.fffffep127f
#define HUGE_VALF (1.0f / 0.0f)
#define HUGE_VAL (1.0 / 0.0)
#define INFINITY (1.0f / 0.0f)
#define NAN (0.0f / 0.0f)

#define M_E_F 2.71828183f
#define M_LOG2E_F 1.44269504f
#define M_LOG10E_F 0.43429448f
#define M_LN2_F 0.69314718f
#define M_LN10_F 2.30258509f
#define M_PI_F 3.14159265f
#define M_PI_2_F 1.57079633f
#define M_PI_4_F 0.78539816f
#define M_1_PI_F 0.31830989f
#define M_2_PI_F 0.63661977f
#define M_2_SQRTPI_F 1.12837917f
#define M_SQRT2_F 1.41421356f
#define M_SQRT1_2_F 0.70710678f
#define M_E 2.718281828459045
#define M_LOG2E 1.4426950408889634
#define M_LOG10E 0.4342944819032518
#define M_LN2 0.6931471805599453
#define M_LN10 2.302585092994046
#define M_PI 3.141592653589793
#define M_PI_2 1.5707963267948966
#define M_PI_4 0.7853981633974483
#define M_1_PI 0.3183098861837907
#define M_2_PI 0.6366197723675814
#define M_2_SQRTPI 1.1283791670955126
#define M_SQRT2 1.4142135623730951
#define M_SQRT1_2 0.7071067811865476

#endif
