/* gemm_bias_relu_transpose: E = transpose(relu(A B + bias)).
 *   gemm      : 16x16 tiles in __local memory, two barriers per tile step, 2-D NDRange
 *               (dimension 0 = column, dimension 1 = row)
 *   bias_relu : 1-D NDRange of M*N work-items, row = i / N, col = i % N
 *   transpose : 2-D NDRange, out is N x M
 */
#define TILE 16

__kernel void gemm(__global const float* A, __global const float* B, __global float* C,
                   const int M, const int N, const int K)
{
    __local float As[TILE][TILE];
    __local float Bs[TILE][TILE];
    int col = get_global_id(0);
    int row = get_global_id(1);
    int lx = get_local_id(0);
    int ly = get_local_id(1);
    float acc = 0.0f;
    for (int t = 0; t < K / TILE; t++) {
        As[ly][lx] = A[row * K + t * TILE + lx];
        Bs[ly][lx] = B[(t * TILE + ly) * N + col];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TILE; k++)
            acc += As[ly][k] * Bs[k][lx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N)
        C[row * N + col] = acc;
}

__kernel void bias_relu(__global const float* C, __global const float* bias, __global float* D,
                        const int M, const int N)
{
    int i = get_global_id(0);
    if (i < M * N) {
        int row = i / N;
        int col = i % N;
        float v = C[row * N + col] + bias[col];
        D[row * N + col] = v > 0.0f ? v : 0.0f;
    }
}

__kernel void transpose(__global const float* in, __global float* out, const int rows,
                        const int cols)
{
    int c = get_global_id(0);
    int r = get_global_id(1);
    if (r < rows && c < cols)
        out[c * rows + r] = in[r * cols + c];
}
