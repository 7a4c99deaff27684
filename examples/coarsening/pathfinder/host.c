/* pathfinder: Rodinia dynamic programming over a grid, PYRAMID_HEIGHT rows per launch.
 * Work-groups of 256 with two __local rows (prev, result) given as kernel arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CL/cl.h>

#ifndef COLS
#define COLS 32768
#endif
#define ROWS 41
#define PYRAMID_HEIGHT 10
#define BLOCK_SIZE 256
#define HALO 1
#define BORDER (PYRAMID_HEIGHT * HALO)
#define SMALL_BLOCK_COL (BLOCK_SIZE - PYRAMID_HEIGHT * HALO * 2)
#define BLOCK_COLS (COLS / SMALL_BLOCK_COL + ((COLS % SMALL_BLOCK_COL == 0) ? 0 : 1))

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
    int cols = COLS;
    int rows = ROWS;
    int borderCols = BORDER;
    int halo = HALO;
    int* wall = (int*)malloc(ROWS * COLS * sizeof(int));
    int* result = (int*)malloc(COLS * sizeof(int));
    for (int i = 0; i < ROWS * COLS; i++)
        wall[i] = rand() % 10;
    cl_kernel kernel = clCreateKernel(program, "dynproc_kernel", &err);
    CHECK(err, "clCreateKernel");
    cl_mem d_gpuWall = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, ROWS * COLS * sizeof(int), wall, &err);
    cl_mem d_gpuSrc = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, COLS * sizeof(int), wall, &err);
    cl_mem d_gpuResult = clCreateBuffer(context, CL_MEM_READ_WRITE, COLS * sizeof(int), NULL, &err);
    CHECK(err, "clCreateBuffer");
    size_t globalWorkSize[1] = {BLOCK_COLS * BLOCK_SIZE};
    size_t localWorkSize[1] = {BLOCK_SIZE};
    int iteration = PYRAMID_HEIGHT;
    for (int startStep = 0; startStep < ROWS - 1; startStep += PYRAMID_HEIGHT) {
        err = clSetKernelArg(kernel, 0, sizeof(int), (void*)&iteration);
        err |= clSetKernelArg(kernel, 1, sizeof(cl_mem), (void*)&d_gpuWall);
        err |= clSetKernelArg(kernel, 2, sizeof(cl_mem), (void*)&d_gpuSrc);
        err |= clSetKernelArg(kernel, 3, sizeof(cl_mem), (void*)&d_gpuResult);
        err |= clSetKernelArg(kernel, 4, sizeof(int), (void*)&cols);
        err |= clSetKernelArg(kernel, 5, sizeof(int), (void*)&rows);
        err |= clSetKernelArg(kernel, 6, sizeof(int), (void*)&startStep);
        err |= clSetKernelArg(kernel, 7, sizeof(int), (void*)&borderCols);
        err |= clSetKernelArg(kernel, 8, sizeof(int), (void*)&halo);
        err |= clSetKernelArg(kernel, 9, sizeof(cl_int) * BLOCK_SIZE, NULL);
        err |= clSetKernelArg(kernel, 10, sizeof(cl_int) * BLOCK_SIZE, NULL);
        CHECK(err, "clSetKernelArg");
        err = clEnqueueNDRangeKernel(queue, kernel, 1, NULL, globalWorkSize, localWorkSize, 0, NULL, NULL);
        CHECK(err, "clEnqueueNDRangeKernel");
        err = clEnqueueCopyBuffer(queue, d_gpuResult, d_gpuSrc, 0, 0, COLS * sizeof(int), 0, NULL, NULL);
        CHECK(err, "clEnqueueCopyBuffer");
    }

    clFinish(queue);
    err = clEnqueueReadBuffer(queue, d_gpuSrc, CL_TRUE, 0, COLS * sizeof(int), result, 0, NULL, NULL);
    CHECK(err, "clEnqueueReadBuffer");
    printf("result[0] = %d\n", result[0]);
    clReleaseMemObject(d_gpuWall);
    clReleaseMemObject(d_gpuSrc);
    clReleaseMemObject(d_gpuResult);
    free(wall);
    free(result);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(source);
    return 0;
}
