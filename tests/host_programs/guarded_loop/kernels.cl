/* One elimination-style sweep per step: scale reads the panel, update folds it back into the
 * trailing data except after the last step, where finish copies the result out. */
__kernel void scale(__global const float* a, __global float* p, const int n, const int k)
{
    int i = get_global_id(0);
    if (i < n) p[i] = a[i] * 0.5f + (float)k;
}

__kernel void update(__global const float* p, __global float* a, const int n)
{
    int i = get_global_id(0);
    if (i < n) a[i] += p[i];
}

__kernel void finish(__global const float* p, __global float* c, const int n)
{
    int i = get_global_id(0);
    if (i < n) c[i] = p[i];
}
