/* PolyBench-ACC mvt (OpenCL): x1 = x1 + A * y1,  x2 = x2 + A^T * y2, then a scaled sum. */

__kernel void mvt_kernel1(__global float* a, __global float* x1, __global float* y1, int n)
{
    int i = get_global_id(0);
    if (i < n) {
        int j;
        for (j = 0; j < n; j++)
            x1[i] += a[i * n + j] * y1[j];
    }
}

__kernel void mvt_kernel2(__global float* a, __global float* x2, __global float* y2, int n)
{
    int i = get_global_id(0);
    if (i < n) {
        int j;
        for (j = 0; j < n; j++)
            x2[i] += a[j * n + i] * y2[j];
    }
}

/* not in PolyBench: combine both results element-wise */
__kernel void mvt_combine(__global const float* x1, __global const float* x2,
                          __global float* out, float alpha, int n)
{
    int i = get_global_id(0);
    if (i < n)
        out[i] = alpha * x1[i] + x2[i];
}
