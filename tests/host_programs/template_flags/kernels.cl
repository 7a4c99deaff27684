/* scale is built twice: with -DUSE_SHIFT (the template's bool argument true) it adds one. */
__kernel void scale(__global const REAL* a, __global REAL* b, const int n)
{
    int i = get_global_id(0);
#ifdef USE_SHIFT
    if (i < n) b[i] = a[i] * (REAL)2 + (REAL)1;
#else
    if (i < n) b[i] = a[i] * (REAL)2;
#endif
}
