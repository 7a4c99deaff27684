__kernel void scale(__global const float *in, __global float *out) {
    int i = get_global_id(0);
    out[i] = in[i] * SCALE;
}
__kernel void bump(__global float *a) {
    int i = get_global_id(0);
    a[i] = a[i] + 1.0f;
}
