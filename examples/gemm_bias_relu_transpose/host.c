/* gemm_bias_relu_transpose host: E = transpose(relu(A B + bias)) for 64x64 matrices. */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <CL/cl.h>

#define M 64
#define N 64
#define K 64
#define TILE 16
#define WG 64

static char* read_source(const char* path, size_t* length)
{
    FILE* f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char* text = (char*)malloc(size + 1);
    size_t got = fread(text, 1, size, f);
    text[got] = '\0';
    fclose(f);
    *length = got;
    return text;
}

int main(void)
{
    cl_int err;
    int m = M, n = N, k = K;
    float* h_A = (float*)malloc(M * K * sizeof(float));
    float* h_B = (float*)malloc(K * N * sizeof(float));
    float* h_bias = (float*)malloc(N * sizeof(float));
    float* h_E = (float*)malloc(N * M * sizeof(float));
    for (int i = 0; i < M * K; i++)
        h_A[i] = (float)((i * 7) % 11) * 0.1f - 0.5f;
    for (int i = 0; i < K * N; i++)
        h_B[i] = (float)((i * 5) % 13) * 0.1f - 0.6f;
    for (int j = 0; j < N; j++)
        h_bias[j] = 0.01f * (float)j;

    cl_platform_id platform;
    err = clGetPlatformIDs(1, &platform, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clGetPlatformIDs failed: %d\n", err);
        exit(1);
    }
    cl_device_id device;
    err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clGetDeviceIDs failed: %d\n", err);
        exit(1);
    }
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateContext failed: %d\n", err);
        exit(1);
    }
    cl_command_queue queue = clCreateCommandQueue(context, device, 0, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateCommandQueue failed: %d\n", err);
        exit(1);
    }

    size_t length;
    char* source = read_source("kernels.cl", &length);
    cl_program program = clCreateProgramWithSource(context, 1, (const char**)&source, &length, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateProgramWithSource failed: %d\n", err);
        exit(1);
    }
    err = clBuildProgram(program, 1, &device, NULL, NULL, NULL);
    if (err != CL_SUCCESS) {
        size_t log_size;
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, NULL, &log_size);
        char* log = (char*)malloc(log_size);
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, log_size, log, NULL);
        fprintf(stderr, "build log:\n%s\n", log);
        free(log);
        exit(1);
    }
    cl_kernel k_gemm = clCreateKernel(program, "gemm", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(gemm) failed: %d\n", err);
        exit(1);
    }
    cl_kernel k_bias = clCreateKernel(program, "bias_relu", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(bias_relu) failed: %d\n", err);
        exit(1);
    }
    cl_kernel k_transpose = clCreateKernel(program, "transpose", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(transpose) failed: %d\n", err);
        exit(1);
    }

    cl_mem A = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                              M * K * sizeof(float), h_A, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(A) failed: %d\n", err);
        exit(1);
    }
    cl_mem B = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                              K * N * sizeof(float), h_B, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(B) failed: %d\n", err);
        exit(1);
    }
    cl_mem bias = clCreateBuffer(context, CL_MEM_READ_ONLY, N * sizeof(float), NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(bias) failed: %d\n", err);
        exit(1);
    }
    cl_mem C = clCreateBuffer(context, CL_MEM_READ_WRITE, M * N * sizeof(float), NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(C) failed: %d\n", err);
        exit(1);
    }
    cl_mem D = clCreateBuffer(context, CL_MEM_READ_WRITE, M * N * sizeof(float), NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(D) failed: %d\n", err);
        exit(1);
    }
    cl_mem E = clCreateBuffer(context, CL_MEM_WRITE_ONLY, N * M * sizeof(float), NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(E) failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueWriteBuffer(queue, bias, CL_TRUE, 0, N * sizeof(float), h_bias, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clEnqueueWriteBuffer(bias) failed: %d\n", err);
        exit(1);
    }

    /* C = A B on a 2-D grid: dimension 0 runs over columns, dimension 1 over rows */
    size_t gemm_global[2] = {N, M};
    size_t gemm_local[2] = {TILE, TILE};
    err = clSetKernelArg(k_gemm, 0, sizeof(cl_mem), &A);
    err |= clSetKernelArg(k_gemm, 1, sizeof(cl_mem), &B);
    err |= clSetKernelArg(k_gemm, 2, sizeof(cl_mem), &C);
    err |= clSetKernelArg(k_gemm, 3, sizeof(int), &m);
    err |= clSetKernelArg(k_gemm, 4, sizeof(int), &n);
    err |= clSetKernelArg(k_gemm, 5, sizeof(int), &k);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clSetKernelArg(gemm) failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueNDRangeKernel(queue, k_gemm, 2, NULL, gemm_global, gemm_local, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue gemm failed: %d\n", err);
        exit(1);
    }

    /* D = relu(C + bias) on a 1-D grid of M*N work-items */
    size_t ew_global[1] = {M * N};
    size_t ew_local[1] = {WG};
    err = clSetKernelArg(k_bias, 0, sizeof(cl_mem), &C);
    err |= clSetKernelArg(k_bias, 1, sizeof(cl_mem), &bias);
    err |= clSetKernelArg(k_bias, 2, sizeof(cl_mem), &D);
    err |= clSetKernelArg(k_bias, 3, sizeof(int), &m);
    err |= clSetKernelArg(k_bias, 4, sizeof(int), &n);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clSetKernelArg(bias_relu) failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueNDRangeKernel(queue, k_bias, 1, NULL, ew_global, ew_local, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue bias_relu failed: %d\n", err);
        exit(1);
    }

    /* E = D^T on a 2-D grid over D (dimension 0 = column of D, dimension 1 = row of D) */
    size_t tr_global[2] = {N, M};
    size_t tr_local[2] = {TILE, TILE};
    err = clSetKernelArg(k_transpose, 0, sizeof(cl_mem), &D);
    err |= clSetKernelArg(k_transpose, 1, sizeof(cl_mem), &E);
    err |= clSetKernelArg(k_transpose, 2, sizeof(int), &m);
    err |= clSetKernelArg(k_transpose, 3, sizeof(int), &n);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clSetKernelArg(transpose) failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueNDRangeKernel(queue, k_transpose, 2, NULL, tr_global, tr_local, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue transpose failed: %d\n", err);
        exit(1);
    }

    clFinish(queue);
    err = clEnqueueReadBuffer(queue, E, CL_TRUE, 0, N * M * sizeof(float), h_E, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clEnqueueReadBuffer(E) failed: %d\n", err);
        exit(1);
    }

    int errors = 0;
    for (int r = 0; r < M; r++) {
        for (int c = 0; c < N; c++) {
            float acc = 0.0f;
            for (int i = 0; i < K; i++)
                acc += h_A[r * K + i] * h_B[i * N + c];
            float v = acc + h_bias[c];
            v = v > 0.0f ? v : 0.0f;
            if (fabsf(h_E[c * M + r] - v) > 1e-3f)
                errors++;
        }
    }
    printf("gemm_bias_relu_transpose: errors=%d\n", errors);

    clReleaseMemObject(A);
    clReleaseMemObject(B);
    clReleaseMemObject(bias);
    clReleaseMemObject(C);
    clReleaseMemObject(D);
    clReleaseMemObject(E);
    clReleaseKernel(k_gemm);
    clReleaseKernel(k_bias);
    clReleaseKernel(k_transpose);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(source);
    free(h_A);
    free(h_B);
    free(h_bias);
    free(h_E);
    return errors != 0;
}
