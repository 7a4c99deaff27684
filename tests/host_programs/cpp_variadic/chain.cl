__kernel void vadd(__global float *a, __global float *b, __global float *c, const unsigned int count)
{
    int i = get_global_id(0);
    if (i < count)
        c[i] = a[i] + b[i];
}

__kernel void scale(__global float *c, __global float *d, const float s, const unsigned int count)
{
    int i = get_global_id(0);
    if (i < count)
        d[i] = s * c[i];
}

__kernel void shift(__global float *d, __global float *e, const float s)
{
    int i = get_global_id(0);
    e[i] = d[i] + s;
}
