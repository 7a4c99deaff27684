/* helper_index: the kernels' work goes through helper functions that ask for their own
 * work-item (as the AMD APP SDK's ConcurrentKernel does): the fused kernel must answer each
 * helper for the launch that calls it. */

float load_mine(__global const float* in)
{
    return in[get_global_id(0)];
}

void store_mine(__global float* out, float v, int n)
{
    int i = get_global_id(0);
    if (i < n)
        out[i] = v;
}

__kernel void smooth(__global const float* x, __global float* a, const int n)
{
    store_mine(a, 0.5f * load_mine(x) + 1.0f, n);
}

__kernel void mirror(__global const float* a, __global float* b, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        b[i] = a[n - 1 - i];
}

__kernel void square(__global const float* b, __global float* out, const int n)
{
    float v = load_mine(b);
    store_mine(out, v * v, n);
}
