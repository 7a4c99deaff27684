/* transpose: tiled matrix transpose through __local memory (NVIDIA OpenCL SDK).
 * 16 x 16 work-groups; the tile is a __local kernel argument padded to 17 columns.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CL/cl.h>

#ifndef WIDTH
#define WIDTH 1024
#endif
#ifndef HEIGHT
#define HEIGHT 1024
#endif
#define BLOCK_DIM 16

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
    int width = WIDTH;
    int height = HEIGHT;
    float* h_idata = (float*)malloc(WIDTH * HEIGHT * sizeof(float));
    float* h_odata = (float*)malloc(WIDTH * HEIGHT * sizeof(float));
    for (int i = 0; i < WIDTH * HEIGHT; i++)
        h_idata[i] = (float)i;
    cl_kernel ckKernel = clCreateKernel(program, "transpose", &err);
    CHECK(err, "clCreateKernel");
    cl_mem d_idata = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, WIDTH * HEIGHT * sizeof(float), h_idata, &err);
    CHECK(err, "clCreateBuffer");
    cl_mem d_odata = clCreateBuffer(context, CL_MEM_WRITE_ONLY, WIDTH * HEIGHT * sizeof(float), NULL, &err);
    CHECK(err, "clCreateBuffer");
    size_t szGlobalWorkSize[2] = {WIDTH, HEIGHT};
    size_t szLocalWorkSize[2] = {BLOCK_DIM, BLOCK_DIM};
    err = clSetKernelArg(ckKernel, 0, sizeof(cl_mem), (void*)&d_odata);
    err |= clSetKernelArg(ckKernel, 1, sizeof(cl_mem), (void*)&d_idata);
    err |= clSetKernelArg(ckKernel, 2, sizeof(int), &width);
    err |= clSetKernelArg(ckKernel, 3, sizeof(int), &height);
    err |= clSetKernelArg(ckKernel, 4, (BLOCK_DIM + 1) * BLOCK_DIM * sizeof(float), 0);
    CHECK(err, "clSetKernelArg");
    err = clEnqueueNDRangeKernel(queue, ckKernel, 2, NULL, szGlobalWorkSize, szLocalWorkSize, 0, NULL, NULL);
    CHECK(err, "clEnqueueNDRangeKernel");

    clFinish(queue);
    err = clEnqueueReadBuffer(queue, d_odata, CL_TRUE, 0, WIDTH * HEIGHT * sizeof(float), h_odata, 0, NULL, NULL);
    CHECK(err, "clEnqueueReadBuffer");
    printf("odata[1] = %f\n", h_odata[1]);
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
