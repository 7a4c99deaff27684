__kernel void twice(__global const uint *in, __global uint *out)
{
    int i = get_global_id(0);
    out[i] = 2 * in[i];
}
