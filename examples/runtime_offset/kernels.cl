/* runtime_offset: out[i] = a[i] + a[i + m] with an offset m known only at run time. */

__kernel void produce(__global const float* x, __global float* a, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        a[i] = 3.0f * x[i] - 1.0f;
}

__kernel void offset_add(__global const float* a, __global float* out, const int n, const int m)
{
    int i = get_global_id(0);
    if (i < n) {
        float v = a[i];
        if (i + m >= 0 && i + m < n)
            v += a[i + m];
        out[i] = v;
    }
}
