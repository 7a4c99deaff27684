/* second kernel file: the consumer reads a shifted neighbour */
__kernel void consume(__global const float *mid, __global float *out, int n)
{
    int i = get_global_id(0);
    if (i < n - 1) out[i] = mid[i] + mid[i + 1];
}
