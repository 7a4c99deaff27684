/* atax: PolyBench-ACC ATAX, y = A^T (A x), two matrix-vector kernels.
 * 1-D work-groups of 256 as in PolyBench-ACC; each work-item loops over a row or a column.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CL/cl.h>

#ifndef NX
#define NX 2048
#endif
#ifndef NY
#define NY 2048
#endif
#define DIM_LOCAL_WORK_GROUP_X 256

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
    int nx = NX;
    int ny = NY;
    float* A = (float*)malloc(NX * NY * sizeof(float));
    float* x = (float*)malloc(NY * sizeof(float));
    float* y = (float*)malloc(NY * sizeof(float));
    float* tmp = (float*)malloc(NX * sizeof(float));
    for (int i = 0; i < NX * NY; i++)
        A[i] = (float)(i % NY) * ((i / NY) + 1) / NX;
    for (int i = 0; i < NY; i++) {
        x[i] = i * 3.14159f;
        y[i] = 0.0f;
    }
    for (int i = 0; i < NX; i++)
        tmp[i] = 0.0f;
    cl_kernel clKernel1 = clCreateKernel(program, "atax_kernel1", &err);
    CHECK(err, "clCreateKernel");
    cl_kernel clKernel2 = clCreateKernel(program, "atax_kernel2", &err);
    CHECK(err, "clCreateKernel");
    cl_mem a_mem_obj = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, NX * NY * sizeof(float), A, &err);
    cl_mem x_mem_obj = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, NY * sizeof(float), x, &err);
    cl_mem y_mem_obj = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, NY * sizeof(float), y, &err);
    cl_mem tmp_mem_obj = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, NX * sizeof(float), tmp, &err);
    CHECK(err, "clCreateBuffer");
    size_t localWorkSize[1] = {DIM_LOCAL_WORK_GROUP_X};
    size_t globalWorkSize1[1] = {NX};
    size_t globalWorkSize2[1] = {NY};
    err = clSetKernelArg(clKernel1, 0, sizeof(cl_mem), (void*)&a_mem_obj);
    err |= clSetKernelArg(clKernel1, 1, sizeof(cl_mem), (void*)&x_mem_obj);
    err |= clSetKernelArg(clKernel1, 2, sizeof(cl_mem), (void*)&tmp_mem_obj);
    err |= clSetKernelArg(clKernel1, 3, sizeof(int), (void*)&nx);
    err |= clSetKernelArg(clKernel1, 4, sizeof(int), (void*)&ny);
    CHECK(err, "clSetKernelArg");
    err = clEnqueueNDRangeKernel(queue, clKernel1, 1, NULL, globalWorkSize1, localWorkSize, 0, NULL, NULL);
    CHECK(err, "clEnqueueNDRangeKernel");
    clFinish(queue);
    err = clSetKernelArg(clKernel2, 0, sizeof(cl_mem), (void*)&a_mem_obj);
    err |= clSetKernelArg(clKernel2, 1, sizeof(cl_mem), (void*)&y_mem_obj);
    err |= clSetKernelArg(clKernel2, 2, sizeof(cl_mem), (void*)&tmp_mem_obj);
    err |= clSetKernelArg(clKernel2, 3, sizeof(int), (void*)&nx);
    err |= clSetKernelArg(clKernel2, 4, sizeof(int), (void*)&ny);
    CHECK(err, "clSetKernelArg");
    err = clEnqueueNDRangeKernel(queue, clKernel2, 1, NULL, globalWorkSize2, localWorkSize, 0, NULL, NULL);
    CHECK(err, "clEnqueueNDRangeKernel");

    clFinish(queue);
    err = clEnqueueReadBuffer(queue, y_mem_obj, CL_TRUE, 0, NY * sizeof(float), y, 0, NULL, NULL);
    CHECK(err, "clEnqueueReadBuffer");
    printf("y[0] = %f\n", y[0]);
    clReleaseMemObject(a_mem_obj);
    clReleaseMemObject(x_mem_obj);
    clReleaseMemObject(y_mem_obj);
    clReleaseMemObject(tmp_mem_obj);
    free(A);
    free(x);
    free(y);
    free(tmp);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(source);
    return 0;
}
