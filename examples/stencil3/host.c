/* stencil3 host: produce -> 3-point stencil over N floats. */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <CL/cl.h>

#define N 1024
#define LOCAL_SIZE 64

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
    const int n = N;
    float* h_x = (float*)malloc(N * sizeof(float));
    float* h_y = (float*)malloc(N * sizeof(float));
    for (int i = 0; i < N; i++)
        h_x[i] = (float)(i % 7) * 0.25f;

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
    err = clBuildProgram(program, 1, &device, "-cl-std=CL1.2", NULL, NULL);
    if (err != CL_SUCCESS) {
        size_t log_size;
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, NULL, &log_size);
        char* log = (char*)malloc(log_size);
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, log_size, log, NULL);
        fprintf(stderr, "build log:\n%s\n", log);
        free(log);
        exit(1);
    }
    cl_kernel produce = clCreateKernel(program, "produce", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(produce) failed: %d\n", err);
        exit(1);
    }
    cl_kernel stencil = clCreateKernel(program, "stencil3", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(stencil3) failed: %d\n", err);
        exit(1);
    }

    cl_mem x = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, N * sizeof(float),
                              h_x, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(x) failed: %d\n", err);
        exit(1);
    }
    cl_mem b = clCreateBuffer(context, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(b) failed: %d\n", err);
        exit(1);
    }
    cl_mem y = clCreateBuffer(context, CL_MEM_WRITE_ONLY, N * sizeof(float), NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(y) failed: %d\n", err);
        exit(1);
    }

    size_t global_size[1] = {N};
    size_t local_size[1] = {LOCAL_SIZE};

    err = clSetKernelArg(produce, 0, sizeof(cl_mem), &x);
    err |= clSetKernelArg(produce, 1, sizeof(cl_mem), &b);
    err |= clSetKernelArg(produce, 2, sizeof(int), &n);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clSetKernelArg(produce) failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueNDRangeKernel(queue, produce, 1, NULL, global_size, local_size, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue produce failed: %d\n", err);
        exit(1);
    }

    err = clSetKernelArg(stencil, 0, sizeof(cl_mem), &b);
    err |= clSetKernelArg(stencil, 1, sizeof(cl_mem), &y);
    err |= clSetKernelArg(stencil, 2, sizeof(int), &n);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clSetKernelArg(stencil3) failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueNDRangeKernel(queue, stencil, 1, NULL, global_size, local_size, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue stencil3 failed: %d\n", err);
        exit(1);
    }

    clFinish(queue);
    err = clEnqueueReadBuffer(queue, y, CL_TRUE, 0, N * sizeof(float), h_y, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clEnqueueReadBuffer failed: %d\n", err);
        exit(1);
    }

    int errors = 0;
    for (int i = 1; i < N - 1; i++) {
        float s = 0.0f;
        for (int d = -1; d <= 1; d++)
            s += h_x[i + d] * h_x[i + d] + 1.0f;
        if (fabsf(h_y[i] - s / 3.0f) > 1e-4f)
            errors++;
    }
    printf("stencil3: errors=%d\n", errors);

    clReleaseMemObject(x);
    clReleaseMemObject(b);
    clReleaseMemObject(y);
    clReleaseKernel(produce);
    clReleaseKernel(stencil);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(source);
    free(h_x);
    free(h_y);
    return errors != 0;
}
