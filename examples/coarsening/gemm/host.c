/* gemm: PolyBench-ACC GEMM, C = alpha*A*B + beta*C, one work-item per element of C.
 * Work-groups of 32 x 8 as in PolyBench-ACC.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CL/cl.h>

#ifndef NI
#define NI 256
#endif
#ifndef NJ
#define NJ 256
#endif
#ifndef NK
#define NK 256
#endif
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
    int ni = NI;
    int nj = NJ;
    int nk = NK;
    float alpha = 32412.0f;
    float beta = 2123.0f;
    float* A = (float*)malloc(NI * NK * sizeof(float));
    float* B = (float*)malloc(NK * NJ * sizeof(float));
    float* C = (float*)malloc(NI * NJ * sizeof(float));
    for (int i = 0; i < NI * NK; i++)
        A[i] = (float)(i % 97) / NI;
    for (int i = 0; i < NK * NJ; i++)
        B[i] = (float)(i % 89) / NJ;
    for (int i = 0; i < NI * NJ; i++)
        C[i] = (float)(i % 83) / NJ;
    cl_kernel clKernel = clCreateKernel(program, "gemm", &err);
    CHECK(err, "clCreateKernel");
    cl_mem a_mem_obj = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, NI * NK * sizeof(float), A, &err);
    cl_mem b_mem_obj = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, NK * NJ * sizeof(float), B, &err);
    cl_mem c_mem_obj = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, NI * NJ * sizeof(float), C, &err);
    CHECK(err, "clCreateBuffer");
    size_t localWorkSize[2] = {DIM_LOCAL_WORK_GROUP_X, DIM_LOCAL_WORK_GROUP_Y};
    size_t globalWorkSize[2] = {NJ, NI};
    err = clSetKernelArg(clKernel, 0, sizeof(cl_mem), (void*)&a_mem_obj);
    err |= clSetKernelArg(clKernel, 1, sizeof(cl_mem), (void*)&b_mem_obj);
    err |= clSetKernelArg(clKernel, 2, sizeof(cl_mem), (void*)&c_mem_obj);
    err |= clSetKernelArg(clKernel, 3, sizeof(float), (void*)&alpha);
    err |= clSetKernelArg(clKernel, 4, sizeof(float), (void*)&beta);
    err |= clSetKernelArg(clKernel, 5, sizeof(int), (void*)&ni);
    err |= clSetKernelArg(clKernel, 6, sizeof(int), (void*)&nj);
    err |= clSetKernelArg(clKernel, 7, sizeof(int), (void*)&nk);
    CHECK(err, "clSetKernelArg");
    err = clEnqueueNDRangeKernel(queue, clKernel, 2, NULL, globalWorkSize, localWorkSize, 0, NULL, NULL);
    CHECK(err, "clEnqueueNDRangeKernel");

    clFinish(queue);
    err = clEnqueueReadBuffer(queue, c_mem_obj, CL_TRUE, 0, NI * NJ * sizeof(float), C, 0, NULL, NULL);
    CHECK(err, "clEnqueueReadBuffer");
    printf("C[0] = %f\n", C[0]);
    clReleaseMemObject(a_mem_obj);
    clReleaseMemObject(b_mem_obj);
    clReleaseMemObject(c_mem_obj);
    free(A);
    free(B);
    free(C);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(source);
    return 0;
}
