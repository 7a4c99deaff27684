/* reduction: sum of N floats, each work-group reduces 2*WG elements in __local memory.
 * NVIDIA SDK reduce3: first add during load, then a tree with barriers; partial sums per group.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CL/cl.h>

#ifndef N
#define N (1 << 20)
#endif
#define WG 128
#define NGROUPS (N / (2 * WG))

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
    unsigned int n = N;
    float* h_idata = (float*)malloc(N * sizeof(float));
    float* h_odata = (float*)malloc(NGROUPS * sizeof(float));
    for (int i = 0; i < N; i++)
        h_idata[i] = (float)(i & 0xff) / 256.0f;
    cl_kernel reduceKernel = clCreateKernel(program, "reduce", &err);
    CHECK(err, "clCreateKernel");
    cl_mem d_idata = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, N * sizeof(float), h_idata, &err);
    CHECK(err, "clCreateBuffer");
    cl_mem d_odata = clCreateBuffer(context, CL_MEM_READ_WRITE, NGROUPS * sizeof(float), NULL, &err);
    CHECK(err, "clCreateBuffer");
    size_t globalWorkSize[1] = {NGROUPS * WG};
    size_t localWorkSize[1] = {WG};
    err = clSetKernelArg(reduceKernel, 0, sizeof(cl_mem), (void*)&d_idata);
    err |= clSetKernelArg(reduceKernel, 1, sizeof(cl_mem), (void*)&d_odata);
    err |= clSetKernelArg(reduceKernel, 2, WG * sizeof(float), NULL);
    err |= clSetKernelArg(reduceKernel, 3, sizeof(unsigned int), &n);
    CHECK(err, "clSetKernelArg");
    err = clEnqueueNDRangeKernel(queue, reduceKernel, 1, NULL, globalWorkSize, localWorkSize, 0, NULL, NULL);
    CHECK(err, "clEnqueueNDRangeKernel");

    clFinish(queue);
    err = clEnqueueReadBuffer(queue, d_odata, CL_TRUE, 0, NGROUPS * sizeof(float), h_odata, 0, NULL, NULL);
    CHECK(err, "clEnqueueReadBuffer");
    double sum = 0.0;
    for (int i = 0; i < NGROUPS; i++)
        sum += h_odata[i];
    printf("sum = %f\n", sum);
    clReleaseMemObject(d_idata);
    clReleaseMemObject(d_odata);
    free(h_idata);
    free(h_odata);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(source);
    return 0;
}
