__kernel void copy(__global const float* a, __global float* c)
{
    int i = get_global_id(0);
    c[i] = a[i];
}

__kernel void scale(__global const float* c, __global float* b)
{
    int i = get_global_id(0);
    b[i] = 2.0f * c[i];
}
