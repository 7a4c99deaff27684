/* Standardize a signal of n samples (n from the command line): centre it, sum the squares of
 * each work-group of 64 in __local memory (a tree reduction with barriers), scale it. */
#define WG 64

__kernel void centre(__global const float* x, __global float* y, const float mean, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        y[i] = x[i] - mean;
}

__kernel void sumsq(__global const float* y, __global float* partial,
                    __local float* scratch, const int n)
{
    int gid = get_global_id(0);
    int lid = get_local_id(0);
    scratch[lid] = gid < n ? y[gid] * y[gid] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s)
            scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        partial[get_group_id(0)] = scratch[0];
}

__kernel void scale(__global const float* y, __global float* z, const float s, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        z[i] = y[i] * s;
}
