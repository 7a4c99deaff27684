__kernel void twice(__global float *a) {
    int i = get_global_id(0);
    a[i] = 2.0f * a[i];
}
