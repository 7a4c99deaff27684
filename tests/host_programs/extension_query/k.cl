#ifdef DOUBLE
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double real;
#else
typedef float real;
#endif
__kernel void scale(__global real *a, real s) {
    int i = get_global_id(0);
    a[i] = a[i] * s;
}
