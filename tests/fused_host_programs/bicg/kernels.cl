/* PolyBench-ACC bicg (OpenCL): q = A p (kernel 1), s = A^T r (kernel 2): independent. */

__kernel void bicgKernel1(__global float* A, __global float* p, __global float* q, int nx, int ny)
{
    int i = get_global_id(0);
    if (i < nx) {
        q[i] = 0.0f;
        int j;
        for (j = 0; j < ny; j++)
            q[i] += A[i * ny + j] * p[j];
    }
}

__kernel void bicgKernel2(__global float* A, __global float* r, __global float* s, int nx, int ny)
{
    int j = get_global_id(0);
    if (j < ny) {
        s[j] = 0.0f;
        int i;
        for (i = 0; i < nx; i++)
            s[j] += r[i] * A[i * ny + j];
    }
}
