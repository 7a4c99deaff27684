/* helper_clash: two kernel files, each built as its own program, define a helper of the same
 * name differently (one reads __global, the other __constant memory); the second kernel keeps a
 * private pointer into its __local tile inside a loop. */
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>

#define N 64

static cl_program build(cl_context ctx, cl_device_id dev, const char *path)
{
    FILE *f = fopen(path, "rb");
    char *src = (char *)calloc(4096, 1);
    size_t len = fread(src, 1, 4095, f);
    fclose(f);
    cl_int err;
    cl_program p = clCreateProgramWithSource(ctx, 1, (const char **)&src, &len, &err);
    clBuildProgram(p, 1, &dev, NULL, NULL, NULL);
    return p;
}

int main(void)
{
    cl_platform_id platform;
    cl_device_id dev;
    cl_int err;
    clGetPlatformIDs(1, &platform, NULL);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &dev, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    cl_kernel scale = clCreateKernel(build(ctx, dev, "a.cl"), "scale", &err);
    cl_kernel reduce = clCreateKernel(build(ctx, dev, "b.cl"), "reduce", &err);
    cl_mem w = clCreateBuffer(ctx, CL_MEM_READ_ONLY, N * sizeof(float), NULL, &err);
    cl_mem x = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
    cl_mem out = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, N / 8 * sizeof(float), NULL, &err);
    size_t global = N, local = 8;
    clSetKernelArg(scale, 0, sizeof(cl_mem), &w);
    clSetKernelArg(scale, 1, sizeof(cl_mem), &x);
    clEnqueueNDRangeKernel(q, scale, 1, NULL, &global, &local, 0, NULL, NULL);
    clSetKernelArg(reduce, 0, sizeof(cl_mem), &x);
    clSetKernelArg(reduce, 1, sizeof(cl_mem), &w);
    clSetKernelArg(reduce, 2, sizeof(cl_mem), &out);
    clSetKernelArg(reduce, 3, 8 * sizeof(float), NULL);
    clEnqueueNDRangeKernel(q, reduce, 1, NULL, &global, &local, 0, NULL, NULL);
    float h[N / 8];
    clEnqueueReadBuffer(q, out, CL_TRUE, 0, sizeof(h), h, 0, NULL, NULL);
    printf("%f\n", h[0]);
    return 0;
}
