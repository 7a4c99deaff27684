/* Parallel reduction, "reduce3" of the NVIDIA OpenCL SDK: each work-item adds two elements
 * while loading, then a tree in __local memory with a barrier per level. */
__kernel void reduce(__global const float *g_idata, __global float *g_odata,
                     __local float* sdata, unsigned int n)
{
    unsigned int tid = get_local_id(0);
    unsigned int i = get_group_id(0) * (get_local_size(0) * 2) + get_local_id(0);

    sdata[tid] = (i < n) ? g_idata[i] : 0;
    if (i + get_local_size(0) < n)
        sdata[tid] += g_idata[i + get_local_size(0)];

    barrier(CLK_LOCAL_MEM_FENCE);

    for (unsigned int s = get_local_size(0) / 2; s > 0; s >>= 1)
    {
        if (tid < s)
        {
            sdata[tid] += sdata[tid + s];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    if (tid == 0)
        g_odata[get_group_id(0)] = sdata[0];
}
