/* mirror_loop N: clear c, then 4 steps of accumulate (a += c) and mirror (c = reversed a / 2) */
#include <stdio.h>
#include <stdlib.h>
#include <CL/cl.h>

#define WG 64

static char* read_source(const char* path, size_t* length)
{
    FILE* f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(1); }
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
    if (argc < 2) { fprintf(stderr, "usage: %s N\n", argv[0]); return 1; }
    int n = atoi(argv[1]);
    if (n <= 0 || n % WG != 0) { fprintf(stderr, "N must be a positive multiple of %d\n", WG); return 1; }
    float* h_x = (float*)malloc(n * sizeof(float));
    float* h_z = (float*)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) { h_x[i] = (float)(i % 7) * 0.25f; h_z[i] = 0.0f; }

    cl_int err;
    cl_platform_id platform;
    clGetPlatformIDs(1, &platform, NULL);
    cl_device_id device;
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue queue = clCreateCommandQueue(context, device, 0, &err);
    size_t length;
    char* source = read_source("kernels.cl", &length);
    cl_program program = clCreateProgramWithSource(context, 1, (const char**)&source, &length, &err);
    clBuildProgram(program, 1, &device, NULL, NULL, NULL);
    cl_kernel k_init = clCreateKernel(program, "init", &err);
    cl_kernel k_mirror = clCreateKernel(program, "mirror", &err);
    cl_kernel k_acc = clCreateKernel(program, "accumulate", &err);
    cl_mem d_a = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof(float), h_x, &err);
    cl_mem d_c = clCreateBuffer(context, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    size_t gs = n, ls = WG;
    clSetKernelArg(k_init, 0, sizeof(cl_mem), &d_c);
    clSetKernelArg(k_init, 1, sizeof(int), &n);
    clEnqueueNDRangeKernel(queue, k_init, 1, NULL, &gs, &ls, 0, NULL, NULL);
    clSetKernelArg(k_mirror, 0, sizeof(cl_mem), &d_a);
    clSetKernelArg(k_mirror, 1, sizeof(cl_mem), &d_c);
    clSetKernelArg(k_mirror, 2, sizeof(int), &n);
    clSetKernelArg(k_acc, 0, sizeof(cl_mem), &d_c);
    clSetKernelArg(k_acc, 1, sizeof(cl_mem), &d_a);
    clSetKernelArg(k_acc, 2, sizeof(int), &n);
    for (int step = 0; step < 4; step++) {
        clEnqueueNDRangeKernel(queue, k_acc, 1, NULL, &gs, &ls, 0, NULL, NULL);
        clEnqueueNDRangeKernel(queue, k_mirror, 1, NULL, &gs, &ls, 0, NULL, NULL);
    }
    clEnqueueReadBuffer(queue, d_a, CL_TRUE, 0, n * sizeof(float), h_z, 0, NULL, NULL);
    printf("%f\n", h_z[1]);
    return 0;
}
