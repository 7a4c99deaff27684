/* reduction: sum of n floats in two launches.
 *   reduce_partial : each work-group reduces its 64 elements in __local memory (tree, barriers)
 *                    and work-item 0 writes partial[group]
 *   reduce_final   : one work-group of 64; work-item l accumulates partial[l], partial[l+64], ...
 *                    then the same tree reduction; work-item 0 writes result[0]
 */
#define WG 64

__kernel void reduce_partial(__global const float* x, __global float* partial,
                             __local float* scratch, const int n)
{
    int gid = get_global_id(0);
    int lid = get_local_id(0);
    scratch[lid] = gid < n ? x[gid] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s)
            scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        partial[get_group_id(0)] = scratch[0];
}

__kernel void reduce_final(__global const float* partial, __global float* result, const int nparts)
{
    __local float scratch[WG];
    int lid = get_local_id(0);
    float acc = 0.0f;
    for (int j = lid; j < nparts; j += WG)
        acc += partial[j];
    scratch[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s)
            scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        result[0] = scratch[0];
}
