/* group_neighbor host: produce -> neighbor_sum over N floats in work-groups of WG. */
#include <stdio.h>
#include <stdlib.h>
#include <CL/cl.h>

#define N 1024
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
    int n = N;
    float* h_x = (float*)malloc(N * sizeof(float));
    float* h_out = (float*)malloc(N * sizeof(float));
    for (int i = 0; i < N; i++)
        h_x[i] = (float)(i % 13);

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
    cl_kernel k_produce = clCreateKernel(program, "produce", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(produce) failed: %d\n", err);
        exit(1);
    }
    cl_kernel k_neighbor = clCreateKernel(program, "neighbor_sum", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(neighbor_sum) failed: %d\n", err);
        exit(1);
    }

    cl_mem d_x = clCreateBuffer(context, CL_MEM_READ_ONLY, N * sizeof(float), NULL, &err);
    cl_mem d_c = clCreateBuffer(context, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
    cl_mem d_out = clCreateBuffer(context, CL_MEM_WRITE_ONLY, N * sizeof(float), NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueWriteBuffer(queue, d_x, CL_FALSE, 0, N * sizeof(float), h_x, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clEnqueueWriteBuffer failed: %d\n", err);
        exit(1);
    }

    size_t global[1] = {N};
    size_t local[1] = {WG};

    clSetKernelArg(k_produce, 0, sizeof(cl_mem), &d_x);
    clSetKernelArg(k_produce, 1, sizeof(cl_mem), &d_c);
    clSetKernelArg(k_produce, 2, sizeof(int), &n);
    err = clEnqueueNDRangeKernel(queue, k_produce, 1, NULL, global, local, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue produce failed: %d\n", err);
        exit(1);
    }

    clSetKernelArg(k_neighbor, 0, sizeof(cl_mem), &d_c);
    clSetKernelArg(k_neighbor, 1, sizeof(cl_mem), &d_out);
    clSetKernelArg(k_neighbor, 2, sizeof(int), &n);
    err = clEnqueueNDRangeKernel(queue, k_neighbor, 1, NULL, global, local, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue neighbor_sum failed: %d\n", err);
        exit(1);
    }

    err = clEnqueueReadBuffer(queue, d_out, CL_TRUE, 0, N * sizeof(float), h_out, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clEnqueueReadBuffer failed: %d\n", err);
        exit(1);
    }

    int errors = 0;
    for (int i = 0; i < N; i++) {
        int j = (i / WG) * WG + (i % WG + 1) % WG;
        if (h_out[i] != h_x[i] * h_x[i] + h_x[j] * h_x[j])
            errors++;
    }
    printf("group_neighbor: errors=%d\n", errors);

    clReleaseMemObject(d_x);
    clReleaseMemObject(d_c);
    clReleaseMemObject(d_out);
    clReleaseKernel(k_produce);
    clReleaseKernel(k_neighbor);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(source);
    free(h_x);
    free(h_out);
    return errors != 0;
}
