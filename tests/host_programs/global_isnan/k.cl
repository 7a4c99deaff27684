__kernel void scale(__global float *x, const float a)
{
    int i = get_global_id(0);
    x[i] = a * x[i];
}
