/* 2-D convolution, as in PolyBench-ACC's OpenCL version (2DConvolution.cl). */
typedef float DATA_TYPE;

__kernel void Convolution2D_kernel(__global DATA_TYPE *A, __global DATA_TYPE *B, int ni, int nj)
{
    int j = get_global_id(0);
    int i = get_global_id(1);

    DATA_TYPE c11, c12, c13, c21, c22, c23, c31, c32, c33;
    c11 = +0.2f;  c21 = +0.5f;  c31 = -0.8f;
    c12 = -0.3f;  c22 = +0.6f;  c32 = -0.9f;
    c13 = +0.4f;  c23 = +0.7f;  c33 = +0.10f;

    if ((i < ni - 1) && (j < nj - 1) && (i > 0) && (j > 0))
    {
        B[i * nj + j] = c11 * A[(i - 1) * nj + (j - 1)] + c21 * A[(i - 1) * nj + (j + 0)] +
                        c31 * A[(i - 1) * nj + (j + 1)] + c12 * A[(i + 0) * nj + (j - 1)] +
                        c22 * A[(i + 0) * nj + (j + 0)] + c32 * A[(i + 0) * nj + (j + 1)] +
                        c13 * A[(i + 1) * nj + (j - 1)] + c23 * A[(i + 1) * nj + (j + 0)] +
                        c33 * A[(i + 1) * nj + (j + 1)];
    }
}
