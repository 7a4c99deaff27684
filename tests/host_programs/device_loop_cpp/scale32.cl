__kernel void scale(int n, __global const float *a, __global float *b) {
    int i = get_global_id(0);
    if (i < n)
        b[i] = 2.0f * a[i] + 1.0f;
}
