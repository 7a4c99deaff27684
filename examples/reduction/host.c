/* reduction host: sum of N floats, 256 work-groups of 64 then one work-group of 64. */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <CL/cl.h>

#define N 16384
#define WG 64
#define NGROUPS (N / WG)

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
    int nparts = NGROUPS;
    float* h_x = (float*)malloc(N * sizeof(float));
    float h_result = 0.0f;
    double reference = 0.0;
    for (int i = 0; i < N; i++) {
        h_x[i] = (float)(i % 10) * 0.5f;
        reference += h_x[i];
    }

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
    cl_kernel k_partial = clCreateKernel(program, "reduce_partial", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(reduce_partial) failed: %d\n", err);
        exit(1);
    }
    cl_kernel k_final = clCreateKernel(program, "reduce_final", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(reduce_final) failed: %d\n", err);
        exit(1);
    }

    cl_mem d_x = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                N * sizeof(float), h_x, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(x) failed: %d\n", err);
        exit(1);
    }
    cl_mem d_partial = clCreateBuffer(context, CL_MEM_READ_WRITE, NGROUPS * sizeof(float), NULL,
                                      &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(partial) failed: %d\n", err);
        exit(1);
    }
    cl_mem d_result = clCreateBuffer(context, CL_MEM_WRITE_ONLY, sizeof(float), NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(result) failed: %d\n", err);
        exit(1);
    }

    /* first stage: N work-items in NGROUPS groups, __local scratch given by size */
    size_t global1[1] = {N};
    size_t local1[1] = {WG};
    err = clSetKernelArg(k_partial, 0, sizeof(cl_mem), &d_x);
    err |= clSetKernelArg(k_partial, 1, sizeof(cl_mem), &d_partial);
    err |= clSetKernelArg(k_partial, 2, WG * sizeof(float), NULL);
    err |= clSetKernelArg(k_partial, 3, sizeof(int), &n);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clSetKernelArg(reduce_partial) failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueNDRangeKernel(queue, k_partial, 1, NULL, global1, local1, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue reduce_partial failed: %d\n", err);
        exit(1);
    }

    /* second stage: one work-group */
    size_t global2[1] = {WG};
    size_t local2[1] = {WG};
    err = clSetKernelArg(k_final, 0, sizeof(cl_mem), &d_partial);
    err |= clSetKernelArg(k_final, 1, sizeof(cl_mem), &d_result);
    err |= clSetKernelArg(k_final, 2, sizeof(int), &nparts);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clSetKernelArg(reduce_final) failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueNDRangeKernel(queue, k_final, 1, NULL, global2, local2, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue reduce_final failed: %d\n", err);
        exit(1);
    }

    clFinish(queue);
    err = clEnqueueReadBuffer(queue, d_result, CL_TRUE, 0, sizeof(float), &h_result, 0, NULL,
                              NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clEnqueueReadBuffer failed: %d\n", err);
        exit(1);
    }
    int ok = fabs(h_result - reference) <= 1e-3 * fabs(reference);
    printf("reduction: sum=%f reference=%f %s\n", h_result, reference, ok ? "ok" : "WRONG");

    clReleaseMemObject(d_x);
    clReleaseMemObject(d_partial);
    clReleaseMemObject(d_result);
    clReleaseKernel(k_partial);
    clReleaseKernel(k_final);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(source);
    free(h_x);
    return !ok;
}
