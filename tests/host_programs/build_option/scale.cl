/* y = SCALE * x + OFFSET, then z = y * y: SCALE comes from the build options, OFFSET from a
 * second source string; both have defaults here that the original program does not use. */
#ifndef SCALE
#define SCALE 1.0f
#endif
#ifndef OFFSET
#define OFFSET 0.0f
#endif

__kernel void scale_shift(__global const float *x, __global float *y, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        y[i] = SCALE * x[i] + OFFSET;
}

__kernel void square(__global const float *y, __global float *z, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        z[i] = y[i] * y[i];
}
