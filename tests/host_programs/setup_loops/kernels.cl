/* Masked scaling: out[i] = flags[i] ? in[i] * s : 0 over the flags the host set up. */
__kernel void masked(__global const float* in, __global const int* flags, __global float* out,
                     const float s, const int n)
{
    int i = get_global_id(0);
    if (i < n) out[i] = flags[i] ? in[i] * s : 0.0f;
}
