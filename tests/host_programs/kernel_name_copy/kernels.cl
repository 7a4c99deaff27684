__kernel void scale_rows(__global float *a) {
    int i = get_global_id(0);
    a[i] = 2.0f * a[i];
}

__kernel void scale_tiled(__global float *a) {
    int i = get_global_id(0);
    a[i] = 3.0f * a[i];
}
