/* stencil3: a producer, then a 3-point stencil whose border work-items of each work-group
 * read elements written by the neighbouring work-groups (a halo). */

__kernel void produce(__global const float* x, __global float* b, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        b[i] = x[i] * x[i] + 1.0f;
}

__kernel void stencil3(__global const float* b, __global float* y, const int n)
{
    int i = get_global_id(0);
    if (i > 0 && i < n - 1)
        y[i] = (b[i - 1] + b[i] + b[i + 1]) * (1.0f / 3.0f);
    else if (i == 0 || i == n - 1)
        y[i] = b[i];
}
