/* Parboil-style kernels: a scaled histogram-free saxpy pipeline */
__kernel void saxpy(__global const float *x, __global float *y, const float a, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        y[i] = a * x[i] + y[i];
}

__kernel void square(__global const float *y, __global float *z, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        z[i] = y[i] * y[i];
}
