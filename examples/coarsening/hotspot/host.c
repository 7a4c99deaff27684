/* hotspot: Rodinia-style thermal simulation step with the tile staged in __local memory.
 * 16 x 16 work-groups; each step reads temp_src and writes temp_dst, two steps per iteration.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CL/cl.h>

#ifndef GRID
#define GRID 512
#endif
#define BLOCK_SIZE 16
#define ITERATIONS 2

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
    int grid_cols = GRID;
    int grid_rows = GRID;
    float Cap = 0.5f;
    float Rx = 1.5f;
    float Ry = 1.5f;
    float Rz = 3.0f;
    float step = 0.01f;
    float* temp = (float*)malloc(GRID * GRID * sizeof(float));
    float* power = (float*)malloc(GRID * GRID * sizeof(float));
    for (int i = 0; i < GRID * GRID; i++) {
        temp[i] = 320.0f + (float)(i % 13);
        power[i] = (float)(i % 7) * 0.001f;
    }
    cl_kernel kernel = clCreateKernel(program, "hotspot", &err);
    CHECK(err, "clCreateKernel");
    cl_mem MatrixPower = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, GRID * GRID * sizeof(float), power, &err);
    cl_mem MatrixTemp0 = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, GRID * GRID * sizeof(float), temp, &err);
    cl_mem MatrixTemp1 = clCreateBuffer(context, CL_MEM_READ_WRITE, GRID * GRID * sizeof(float), NULL, &err);
    CHECK(err, "clCreateBuffer");
    size_t global_work_size[2] = {GRID, GRID};
    size_t local_work_size[2] = {BLOCK_SIZE, BLOCK_SIZE};
    for (int t = 0; t < ITERATIONS; t++) {
        err = clSetKernelArg(kernel, 0, sizeof(cl_mem), (void*)&MatrixPower);
        err |= clSetKernelArg(kernel, 1, sizeof(cl_mem), (void*)&MatrixTemp0);
        err |= clSetKernelArg(kernel, 2, sizeof(cl_mem), (void*)&MatrixTemp1);
        err |= clSetKernelArg(kernel, 3, sizeof(int), (void*)&grid_cols);
        err |= clSetKernelArg(kernel, 4, sizeof(int), (void*)&grid_rows);
        err |= clSetKernelArg(kernel, 5, sizeof(float), (void*)&Cap);
        err |= clSetKernelArg(kernel, 6, sizeof(float), (void*)&Rx);
        err |= clSetKernelArg(kernel, 7, sizeof(float), (void*)&Ry);
        err |= clSetKernelArg(kernel, 8, sizeof(float), (void*)&Rz);
        err |= clSetKernelArg(kernel, 9, sizeof(float), (void*)&step);
        CHECK(err, "clSetKernelArg");
        err = clEnqueueNDRangeKernel(queue, kernel, 2, NULL, global_work_size, local_work_size, 0, NULL, NULL);
        CHECK(err, "clEnqueueNDRangeKernel");
        err = clSetKernelArg(kernel, 1, sizeof(cl_mem), (void*)&MatrixTemp1);
        err |= clSetKernelArg(kernel, 2, sizeof(cl_mem), (void*)&MatrixTemp0);
        CHECK(err, "clSetKernelArg");
        err = clEnqueueNDRangeKernel(queue, kernel, 2, NULL, global_work_size, local_work_size, 0, NULL, NULL);
        CHECK(err, "clEnqueueNDRangeKernel");
    }

    clFinish(queue);
    err = clEnqueueReadBuffer(queue, MatrixTemp0, CL_TRUE, 0, GRID * GRID * sizeof(float), temp, 0, NULL, NULL);
    CHECK(err, "clEnqueueReadBuffer");
    printf("temp[0] = %f\n", temp[0]);
    clReleaseMemObject(MatrixPower);
    clReleaseMemObject(MatrixTemp0);
    clReleaseMemObject(MatrixTemp1);
    free(temp);
    free(power);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(source);
    return 0;
}
