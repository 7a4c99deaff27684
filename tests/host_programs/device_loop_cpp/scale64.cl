#pragma OPENCL EXTENSION cl_khr_fp64 : enable
__kernel void scale(int n, __global const double *a, __global double *b) {
    int i = get_global_id(0);
    if (i < n)
        b[i] = 2.0 * a[i] + 1.0;
}
