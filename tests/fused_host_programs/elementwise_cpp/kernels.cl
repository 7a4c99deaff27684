/* elementwise_chain: four element-wise kernels, each work-item touches element i only. */

__kernel void scale(__global const float* x, __global float* a, const float alpha, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        a[i] = alpha * x[i];
}

__kernel void add(__global const float* a, __global const float* y, __global float* b, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        b[i] = a[i] + y[i];
}

/* leaky ReLU */
__kernel void relu(__global const float* b, __global float* c, const int n)
{
    int i = get_global_id(0);
    if (i < n) {
        float v = b[i];
        c[i] = v > 0.0f ? v : 0.01f * v;
    }
}

__kernel void copy(__global const float* c, __global float* out, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        out[i] = c[i];
}
