/* jacobi2d: PolyBench-ACC Jacobi 2-D stencil, TSTEPS time steps of two kernels.
 * Work-groups of 32 x 8 as in PolyBench-ACC (DIM_LOCAL_WORK_GROUP_X/Y).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CL/cl.h>

#ifndef N
#define N 512
#endif
#define TSTEPS 4
#define DIM_LOCAL_WORK_GROUP_X 32
#define DIM_LOCAL_WORK_GROUP_Y 8

#define CHECK(err, what)                                              \
    if ((err) != CL_SUCCESS) {                                        \
        fprintf(stderr, "%s failed: %d\n", what, (int)(err));         \
        exit(1);                                                      \
    }

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

int main(int argc, char** argv)
{
    cl_int err;
    cl_platform_id platform;
    cl_device_id device;
    err = clGetPlatformIDs(1, &platform, NULL);
    CHECK(err, "clGetPlatformIDs");
    err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    CHECK(err, "clGetDeviceIDs");
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    CHECK(err, "clCreateContext");
    cl_command_queue queue = clCreateCommandQueue(context, device, 0, &err);
    CHECK(err, "clCreateCommandQueue");

    size_t length;
    char* source = read_source("kernels.cl", &length);
    cl_program program = clCreateProgramWithSource(context, 1, (const char**)&source, &length, &err);
    CHECK(err, "clCreateProgramWithSource");
    err = clBuildProgram(program, 1, &device, NULL, NULL, NULL);
    if (err != CL_SUCCESS) {
        size_t log_size;
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, NULL, &log_size);
        char* log = (char*)malloc(log_size);
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, log_size, log, NULL);
        fprintf(stderr, "build log:\n%s\n", log);
        exit(1);
    }
    int n = N;
    float* A = (float*)malloc(N * N * sizeof(float));
    float* B = (float*)malloc(N * N * sizeof(float));
    for (int i = 0; i < N * N; i++) {
        A[i] = ((float)(i % N) * ((i / N) + 2) + 2) / N;
        B[i] = ((float)(i % N) * ((i / N) + 3) + 3) / N;
    }
    cl_kernel clKernel1 = clCreateKernel(program, "runJacobi2D_kernel1", &err);
    CHECK(err, "clCreateKernel");
    cl_kernel clKernel2 = clCreateKernel(program, "runJacobi2D_kernel2", &err);
    CHECK(err, "clCreateKernel");
    cl_mem a_mem_obj = clCreateBuffer(context, CL_MEM_READ_WRITE, N * N * sizeof(float), NULL, &err);
    cl_mem b_mem_obj = clCreateBuffer(context, CL_MEM_READ_WRITE, N * N * sizeof(float), NULL, &err);
    err = clEnqueueWriteBuffer(queue, a_mem_obj, CL_TRUE, 0, N * N * sizeof(float), A, 0, NULL, NULL);
    err |= clEnqueueWriteBuffer(queue, b_mem_obj, CL_TRUE, 0, N * N * sizeof(float), B, 0, NULL, NULL);
    CHECK(err, "clEnqueueWriteBuffer");
    size_t localWorkSize[2] = {DIM_LOCAL_WORK_GROUP_X, DIM_LOCAL_WORK_GROUP_Y};
    size_t globalWorkSize[2] = {N, N};
    for (int t = 0; t < TSTEPS; t++) {
        err = clSetKernelArg(clKernel1, 0, sizeof(cl_mem), (void*)&a_mem_obj);
        err |= clSetKernelArg(clKernel1, 1, sizeof(cl_mem), (void*)&b_mem_obj);
        err |= clSetKernelArg(clKernel1, 2, sizeof(int), &n);
        CHECK(err, "clSetKernelArg");
        err = clEnqueueNDRangeKernel(queue, clKernel1, 2, NULL, globalWorkSize, localWorkSize, 0, NULL, NULL);
        CHECK(err, "clEnqueueNDRangeKernel");
        err = clSetKernelArg(clKernel2, 0, sizeof(cl_mem), (void*)&a_mem_obj);
        err |= clSetKernelArg(clKernel2, 1, sizeof(cl_mem), (void*)&b_mem_obj);
        err |= clSetKernelArg(clKernel2, 2, sizeof(int), &n);
        CHECK(err, "clSetKernelArg");
        err = clEnqueueNDRangeKernel(queue, clKernel2, 2, NULL, globalWorkSize, localWorkSize, 0, NULL, NULL);
        CHECK(err, "clEnqueueNDRangeKernel");
        clFinish(queue);
    }

    clFinish(queue);
    err = clEnqueueReadBuffer(queue, a_mem_obj, CL_TRUE, 0, N * N * sizeof(float), A, 0, NULL, NULL);
    CHECK(err, "clEnqueueReadBuffer");
    printf("A[N+1] = %f\n", A[N + 1]);
    clReleaseMemObject(a_mem_obj);
    clReleaseMemObject(b_mem_obj);
    free(A);
    free(B);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(source);
    return 0;
}
