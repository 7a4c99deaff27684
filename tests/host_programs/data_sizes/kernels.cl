/* A relaxation step, the residual of each point, and a sum of the residuals. */
__kernel void relax(__global const float* x, __global float* y, const int n)
{
    int i = get_global_id(0);
    if (i > 0 && i < n - 1) y[i] = 0.5f * (x[i - 1] + x[i + 1]);
}

__kernel void residual(__global const float* x, __global const float* y, __global float* r,
                       const int n)
{
    int i = get_global_id(0);
    if (i < n) r[i] = y[i] - x[i];
}
