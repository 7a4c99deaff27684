__kernel void sweep(__global float *a, int off) {
    int i = get_global_id(0);
    a[off + i] = a[off + 16 + i] * 0.5f + a[off + i];
}
