__kernel void blur(__global const float *in, __global float *out, __local float *tile) {
    int i = get_global_id(0);
    tile[get_local_id(0)] = in[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    out[i] = 0.5f * tile[get_local_id(0)];
}
