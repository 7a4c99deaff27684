/* stride_helper: two passes whose work is a grid-stride loop in a helper (as the AMD APP SDK's
 * ConcurrentKernel writes it): each work-item steps by get_global_size(0). */

void work(__global const float* in, __global float* out, int n, float m)
{
    int stride = get_global_size(0);
    for (int i = get_global_id(0); i < n; i += stride)
        out[i] = m * in[i] + 1.0f;
}

__kernel void K1(__global const float* in, __global float* out, int n)
{
    work(in, out, n, 2.0f);
}

__kernel void K2(__global const float* in, __global float* out, int n)
{
    work(in, out, n, 0.5f);
}
