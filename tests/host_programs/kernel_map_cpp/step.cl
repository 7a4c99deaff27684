__kernel void step(__global const int *src, __global int *dst, int cols) {
    int i = get_global_id(0);
    int left = i > 0 ? src[i - 1] : src[i];
    dst[i] = min(left, src[i]) + 1;
}
