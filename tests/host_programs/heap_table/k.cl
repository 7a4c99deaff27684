__kernel void slab_sum(__global const float *in, __global float *out, uint height,
                       __local float *scratch) {
    uint slab = get_group_id(0), l = get_local_id(0);
    scratch[l] = in[slab * height + l];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l == 0) {
        float s = 0.0f;
        for (uint k = 0; k < height; k++)
            s += scratch[k];
        out[slab] = s;
    }
}
