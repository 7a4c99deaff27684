/* gaussian: Rodinia Gaussian elimination, Fan1 (multipliers) and Fan2 (row updates) per pivot.
 * Fan1 in 1-D groups of 64, Fan2 in 2-D groups of 4 x 4 (Rodinia's BLOCK_SIZE_XY).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CL/cl.h>

#ifndef SIZE
#define SIZE 128
#endif
#define STEPS 16
#define BLOCK_SIZE_0 64
#define BLOCK_SIZE_XY 4

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
    int size = SIZE;
    float* a = (float*)malloc(SIZE * SIZE * sizeof(float));
    float* b = (float*)malloc(SIZE * sizeof(float));
    float* m = (float*)malloc(SIZE * SIZE * sizeof(float));
    for (int i = 0; i < SIZE * SIZE; i++) {
        a[i] = (i % (SIZE + 1) == 0) ? 10.0f : (float)(i % 7) / 10.0f;
        m[i] = 0.0f;
    }
    for (int i = 0; i < SIZE; i++)
        b[i] = 1.0f;
    cl_kernel fan1_kernel = clCreateKernel(program, "Fan1", &err);
    CHECK(err, "clCreateKernel");
    cl_kernel fan2_kernel = clCreateKernel(program, "Fan2", &err);
    CHECK(err, "clCreateKernel");
    cl_mem a_dev = clCreateBuffer(context, CL_MEM_READ_WRITE, SIZE * SIZE * sizeof(float), NULL, &err);
    cl_mem b_dev = clCreateBuffer(context, CL_MEM_READ_WRITE, SIZE * sizeof(float), NULL, &err);
    cl_mem m_dev = clCreateBuffer(context, CL_MEM_READ_WRITE, SIZE * SIZE * sizeof(float), NULL, &err);
    CHECK(err, "clCreateBuffer");
    err = clEnqueueWriteBuffer(queue, a_dev, CL_TRUE, 0, SIZE * SIZE * sizeof(float), a, 0, NULL, NULL);
    err |= clEnqueueWriteBuffer(queue, b_dev, CL_TRUE, 0, SIZE * sizeof(float), b, 0, NULL, NULL);
    err |= clEnqueueWriteBuffer(queue, m_dev, CL_TRUE, 0, SIZE * SIZE * sizeof(float), m, 0, NULL, NULL);
    CHECK(err, "clEnqueueWriteBuffer");
    size_t globalWorksizeFan1[1] = {SIZE};
    size_t localWorksizeFan1[1] = {BLOCK_SIZE_0};
    size_t globalWorksizeFan2[2] = {SIZE, SIZE};
    size_t localWorksizeFan2[2] = {BLOCK_SIZE_XY, BLOCK_SIZE_XY};
    for (int t = 0; t < STEPS; t++) {
        err = clSetKernelArg(fan1_kernel, 0, sizeof(cl_mem), (void*)&m_dev);
        err |= clSetKernelArg(fan1_kernel, 1, sizeof(cl_mem), (void*)&a_dev);
        err |= clSetKernelArg(fan1_kernel, 2, sizeof(cl_mem), (void*)&b_dev);
        err |= clSetKernelArg(fan1_kernel, 3, sizeof(int), (void*)&size);
        err |= clSetKernelArg(fan1_kernel, 4, sizeof(int), (void*)&t);
        CHECK(err, "clSetKernelArg");
        err = clEnqueueNDRangeKernel(queue, fan1_kernel, 1, NULL, globalWorksizeFan1, localWorksizeFan1, 0, NULL, NULL);
        CHECK(err, "clEnqueueNDRangeKernel");
        err = clSetKernelArg(fan2_kernel, 0, sizeof(cl_mem), (void*)&m_dev);
        err |= clSetKernelArg(fan2_kernel, 1, sizeof(cl_mem), (void*)&a_dev);
        err |= clSetKernelArg(fan2_kernel, 2, sizeof(cl_mem), (void*)&b_dev);
        err |= clSetKernelArg(fan2_kernel, 3, sizeof(int), (void*)&size);
        err |= clSetKernelArg(fan2_kernel, 4, sizeof(int), (void*)&t);
        CHECK(err, "clSetKernelArg");
        err = clEnqueueNDRangeKernel(queue, fan2_kernel, 2, NULL, globalWorksizeFan2, localWorksizeFan2, 0, NULL, NULL);
        CHECK(err, "clEnqueueNDRangeKernel");
    }

    clFinish(queue);
    err = clEnqueueReadBuffer(queue, a_dev, CL_TRUE, 0, SIZE * SIZE * sizeof(float), a, 0, NULL, NULL);
    err |= clEnqueueReadBuffer(queue, b_dev, CL_TRUE, 0, SIZE * sizeof(float), b, 0, NULL, NULL);
    CHECK(err, "clEnqueueReadBuffer");
    printf("a[last] = %f b[last] = %f\n", a[SIZE * SIZE - 1], b[SIZE - 1]);
    clReleaseMemObject(a_dev);
    clReleaseMemObject(b_dev);
    clReleaseMemObject(m_dev);
    free(a);
    free(b);
    free(m);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(source);
    return 0;
}
