#ifndef SINGLE_PRECISION
#error "the host defines the precision"
#endif
__kernel void tile(__global const float *in, __global float *out) {
    int i = get_global_id(0);
    out[i] = in[i] * (float)(LROWS * LCOLS);
}
