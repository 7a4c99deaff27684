__kernel void smooth(__global float *u, int n, float scale)
{
    int i = get_global_id(0);
    if (i < n) u[i] = u[i] * scale + N;
}

__kernel void shift(__global const float *u, __global float *v, int n)
{
    int i = get_global_id(0);
    if (i < n) v[i] = u[i] + 1.0f;
}
