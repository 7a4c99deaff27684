/* A STREAM-style benchmark's kernels: copy, scale, and a plain fill the base class runs. */
__kernel void copy(__global const float* a, __global float* c)
{
    int i = get_global_id(0);
    c[i] = a[i];
}

__kernel void scale(__global float* b, __global const float* c, const float s)
{
    int i = get_global_id(0);
    b[i] = s * c[i];
}

__kernel void fill(__global float* b)
{
    int i = get_global_id(0);
    b[i] = 0.0f;
}
