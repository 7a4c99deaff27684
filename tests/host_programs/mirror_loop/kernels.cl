/* An iterative reflect-and-accumulate filter: c is cleared once, then each step adds c into a
 * and writes a, halved and mirrored (c[n-1-i]), back into c. */
__kernel void init(__global float* c, const int n)
{
    int i = get_global_id(0);
    if (i < n) c[i] = 0.0f;
}

__kernel void mirror(__global const float* a, __global float* c, const int n)
{
    int i = get_global_id(0);
    if (i < n) c[n - 1 - i] = a[i] * 0.5f;
}

__kernel void accumulate(__global const float* c, __global float* acc, const int n)
{
    int i = get_global_id(0);
    if (i < n) acc[i] += c[i];
}
