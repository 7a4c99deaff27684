/* Right-looking LU without pivoting on the trailing sub-matrix of each step, launched with a
 * global work offset (the work-item ids are the matrix indices), then row sums taken with an
 * offset and scaled by a launch without one. */
__kernel void col_ratio(__global const float* a, __global float* l, const int n, const int k)
{
    int i = get_global_id(0);
    l[i] = a[i * n + k] / a[k * n + k];
}

__kernel void trail_update(__global float* a, __global const float* l, const int n)
{
    int j = get_global_id(0);
    int i = get_global_id(1);
    int k = get_global_offset(1) - 1;
    a[i * n + j] -= l[i] * a[k * n + j];
}

__kernel void row_sum(__global const float* a, __global float* s, const int n)
{
    int i = get_global_id(0);
    float t = 0.0f;
    for (int j = 0; j < n; j++)
        t += a[i * n + j];
    s[i] = t;
}

__kernel void row_scale(__global const float* s, __global float* out, const int n)
{
    int i = get_global_id(0);
    out[i] = i > 0 ? s[i] / (float)n : 1.0f;
}
