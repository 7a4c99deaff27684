#ifndef BS
#define BS 1
#endif
__kernel void mmul(const int N, __global float *A, __global float *B, __global float *C)
{
    int i = get_global_id(0);
    int j = get_global_id(1);
    float tmp = 0.0f;
    for (int k = 0; k < N; k++)
        tmp += A[i * N + k] * B[k * N + j];
    C[i * N + j] = tmp;
}

__kernel void rowsum(__global const float *C, __global float *S, __local float *part, const int N)
{
    int row = get_group_id(0);
    int l = get_local_id(0);
    part[l] = 0.0f;
    for (int j = l; j < N; j += BS)
        part[l] += C[row * N + j];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l == 0) {
        float s = 0.0f;
        for (int k = 0; k < BS; k++)
            s += part[k];
        S[row] = s;
    }
}
