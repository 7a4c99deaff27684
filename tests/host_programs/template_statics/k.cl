__kernel void twice(__global const float *in, __global float *out) {
    int i = get_global_id(0);
    out[i] = 2.0f * in[i];
}
