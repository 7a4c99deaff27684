__kernel void step(__global float *a, __global const float *b, int n)
{
    int i = get_global_id(0);
    if (i < n) a[i] = a[i] + 2.0f * b[i];
}
