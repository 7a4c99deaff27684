/* conv2d: PolyBench-ACC 2DCONV, a 3 x 3 convolution with constant coefficients.
 * Work-groups of 32 x 8 as in PolyBench-ACC.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CL/cl.h>

#ifndef NI
#define NI 1024
#endif
#ifndef NJ
#define NJ 1024
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
    float* A = (float*)malloc(NI * NJ * sizeof(float));
    float* B = (float*)malloc(NI * NJ * sizeof(float));
    for (int i = 0; i < NI * NJ; i++)
        A[i] = (float)rand() / RAND_MAX;
    cl_kernel clKernel = clCreateKernel(program, "Convolution2D_kernel", &err);
    CHECK(err, "clCreateKernel");
    cl_mem a_mem_obj = clCreateBuffer(context, CL_MEM_READ_ONLY, NI * NJ * sizeof(float), NULL, &err);
    cl_mem b_mem_obj = clCreateBuffer(context, CL_MEM_READ_WRITE, NI * NJ * sizeof(float), NULL, &err);
    CHECK(err, "clCreateBuffer");
    err = clEnqueueWriteBuffer(queue, a_mem_obj, CL_TRUE, 0, NI * NJ * sizeof(float), A, 0, NULL, NULL);
    CHECK(err, "clEnqueueWriteBuffer");
    size_t localWorkSize[2] = {DIM_LOCAL_WORK_GROUP_X, DIM_LOCAL_WORK_GROUP_Y};
    size_t globalWorkSize[2] = {NJ, NI};
    err = clSetKernelArg(clKernel, 0, sizeof(cl_mem), (void*)&a_mem_obj);
    err |= clSetKernelArg(clKernel, 1, sizeof(cl_mem), (void*)&b_mem_obj);
    err |= clSetKernelArg(clKernel, 2, sizeof(int), &ni);
    err |= clSetKernelArg(clKernel, 3, sizeof(int), &nj);
    CHECK(err, "clSetKernelArg");
    err = clEnqueueNDRangeKernel(queue, clKernel, 2, NULL, globalWorkSize, localWorkSize, 0, NULL, NULL);
    CHECK(err, "clEnqueueNDRangeKernel");

    clFinish(queue);
    err = clEnqueueReadBuffer(queue, b_mem_obj, CL_TRUE, 0, NI * NJ * sizeof(float), B, 0, NULL, NULL);
    CHECK(err, "clEnqueueReadBuffer");
    printf("B[NJ+1] = %f\n", B[NJ + 1]);
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
