/* first kernel file: the producer */
#ifndef SCALE
#define SCALE 1.0f
#endif
__kernel void produce(__global const float *in, __global float *mid, int n)
{
    int i = get_global_id(0);
    if (i < n) mid[i] = SCALE * in[i];
}
