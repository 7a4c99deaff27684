/* A Jacobi-style step: resid computes r = v - A u, correct adds c0 r + c1 (r's neighbours). */
__kernel void resid(__global const float* u, __global const float* v, __global float* r,
                    const int n)
{
    int i = get_global_id(0);
    if (i > 0 && i < n - 1) r[i] = v[i] - (2.0f * u[i] - u[i - 1] - u[i + 1]);
    else if (i < n) r[i] = 0.0f;
}

__kernel void correct(__global const float* r, __global const float* c, __global float* u,
                      const int n)
{
    int i = get_global_id(0);
    if (i > 0 && i < n - 1) u[i] += c[0] * r[i] + c[1] * (r[i - 1] + r[i + 1]);
}
