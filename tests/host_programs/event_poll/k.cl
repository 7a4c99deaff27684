__kernel void fill(__global int *out, __global const int *mask, int round) {
    int i = get_global_id(0);
    out[i] = mask[i] + round;
}
