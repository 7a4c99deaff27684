/* helper: a chain of three kernels all enqueued by one helper function of the host. */

__kernel void scale(__global const float* x, __global float* a, const float alpha, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        a[i] = alpha * x[i];
}

__kernel void shift_add(__global const float* a, __global const float* y, __global float* b,
                        const int n)
{
    int i = get_global_id(0);
    if (i < n)
        b[i] = a[i] + y[i] + 1.0f;
}

__kernel void square(__global const float* b, __global float* out, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        out[i] = b[i] * b[i];
}
