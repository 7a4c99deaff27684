/* Parboil-style host: pb_* harness, input file named by -i, output by -o, sizes read from the
 * input file, the kernel file found next to the executable's sources. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CL/cl.h>
#include "parboil.h"

#define BLOCK 64

static char *readFile(const char *name)
{
    FILE *f = fopen(name, "rb");
    if (f == NULL) {
        fprintf(stderr, "cannot open %s\n", name);
        exit(-1);
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = (char *)malloc(len + 1);
    fread(text, 1, len, f);
    text[len] = 0;
    fclose(f);
    return text;
}

int main(int argc, char **argv)
{
    struct pb_TimerSet timers;
    struct pb_Parameters *parameters;
    parameters = pb_ReadParameters(&argc, argv);
    if (!parameters)
        return -1;
    if (!parameters->inpFiles[0]) {
        fputs("Input file expected\n", stderr);
        return -1;
    }
    pb_InitializeTimerSet(&timers);
    pb_SwitchToTimer(&timers, pb_TimerID_IO);

    int n;
    FILE *in = fopen(parameters->inpFiles[0], "rb");
    fread(&n, sizeof(int), 1, in);
    float *h_x = (float *)malloc(n * sizeof(float));
    float *h_y = (float *)malloc(n * sizeof(float));
    fread(h_x, sizeof(float), n, in);
    fread(h_y, sizeof(float), n, in);
    fclose(in);

    pb_SwitchToTimer(&timers, pb_TimerID_DRIVER);
    cl_int err;
    cl_platform_id platform;
    cl_device_id device;
    err = clGetPlatformIDs(1, &platform, NULL);
    err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
    cl_context_properties props[3] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0};
    cl_context ctx = clCreateContextFromType(props, CL_DEVICE_TYPE_ALL, NULL, NULL, &err);
    cl_command_queue queue = clCreateCommandQueue(ctx, device, CL_QUEUE_PROFILING_ENABLE, &err);

    const char *src = readFile("kernel.cl");
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    char opts[64];
    sprintf(opts, "-DBLOCK=%d", BLOCK);
    err = clBuildProgram(prog, 1, &device, opts, NULL, NULL);
    cl_kernel saxpy = clCreateKernel(prog, "saxpy", &err);
    cl_kernel square = clCreateKernel(prog, "square", &err);

    pb_SwitchToTimer(&timers, pb_TimerID_COPY);
    cl_mem d_x = clCreateBuffer(ctx, CL_MEM_READ_ONLY, n * sizeof(float), NULL, &err);
    cl_mem d_y = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem d_z = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, n * sizeof(float), NULL, &err);
    clEnqueueWriteBuffer(queue, d_x, CL_TRUE, 0, n * sizeof(float), h_x, 0, NULL, NULL);
    clEnqueueWriteBuffer(queue, d_y, CL_TRUE, 0, n * sizeof(float), h_y, 0, NULL, NULL);

    pb_SwitchToTimer(&timers, pb_TimerID_KERNEL);
    float a = 2.5f;
    size_t local = BLOCK;
    size_t global = ((n + BLOCK - 1) / BLOCK) * BLOCK;
    clSetKernelArg(saxpy, 0, sizeof(cl_mem), &d_x);
    clSetKernelArg(saxpy, 1, sizeof(cl_mem), &d_y);
    clSetKernelArg(saxpy, 2, sizeof(float), &a);
    clSetKernelArg(saxpy, 3, sizeof(int), &n);
    clEnqueueNDRangeKernel(queue, saxpy, 1, NULL, &global, &local, 0, NULL, NULL);
    clSetKernelArg(square, 0, sizeof(cl_mem), &d_y);
    clSetKernelArg(square, 1, sizeof(cl_mem), &d_z);
    clSetKernelArg(square, 2, sizeof(int), &n);
    clEnqueueNDRangeKernel(queue, square, 1, NULL, &global, &local, 0, NULL, NULL);
    if (parameters->synchronizeGpu)
        clFinish(queue);

    pb_SwitchToTimer(&timers, pb_TimerID_COPY);
    float *h_z = (float *)malloc(n * sizeof(float));
    clEnqueueReadBuffer(queue, d_z, CL_TRUE, 0, n * sizeof(float), h_z, 0, NULL, NULL);

    if (parameters->outFile) {
        FILE *out = fopen(parameters->outFile, "wb");
        fwrite(h_z, sizeof(float), n, out);
        fclose(out);
    }
    pb_SwitchToTimer(&timers, pb_TimerID_NONE);
    pb_PrintTimerSet(&timers);
    pb_FreeParameters(parameters);
    free(h_x);
    free(h_y);
    free(h_z);
    return 0;
}
