/* calibrate: a sensor trace is scaled by its gain, then shifted by its offset.  Both kernels
 * take a float `c` and an int `n`: different values, read at run time. */

__kernel void gain(__global float* x, const float c, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        x[i] = c * x[i];
}

__kernel void offset(__global float* x, const float c, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        x[i] = x[i] + c;
}
