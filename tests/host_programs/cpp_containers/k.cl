__kernel void shift(__global const float *in, __global float *out) {
    int i = get_global_id(0);
    out[i] = in[i] + OFFSET;
}
__kernel void square(__global const float *in, __global float *out) {
    int i = get_global_id(0);
    out[i] = in[i] * in[i];
}
