/* standardize N: the size is read from argv, so it is symbolic unless --args/--param fix it */
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
    int groups = n / WG;
    float mean = 0.5f, s = 2.0f;
    float* h_x = (float*)malloc(n * sizeof(float));
    float* h_partial = (float*)malloc(groups * sizeof(float));
    float* h_z = (float*)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) h_x[i] = (float)(i % 7) * 0.25f;

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
    cl_kernel k_centre = clCreateKernel(program, "centre", &err);
    cl_kernel k_sumsq = clCreateKernel(program, "sumsq", &err);
    cl_kernel k_scale = clCreateKernel(program, "scale", &err);

    cl_mem d_x = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * sizeof(float), h_x, &err);
    cl_mem d_y = clCreateBuffer(context, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem d_partial = clCreateBuffer(context, CL_MEM_WRITE_ONLY, groups * sizeof(float), NULL, &err);
    cl_mem d_z = clCreateBuffer(context, CL_MEM_WRITE_ONLY, n * sizeof(float), NULL, &err);

    size_t gs = n, ls = WG;
    clSetKernelArg(k_centre, 0, sizeof(cl_mem), &d_x);
    clSetKernelArg(k_centre, 1, sizeof(cl_mem), &d_y);
    clSetKernelArg(k_centre, 2, sizeof(float), &mean);
    clSetKernelArg(k_centre, 3, sizeof(int), &n);
    clEnqueueNDRangeKernel(queue, k_centre, 1, NULL, &gs, &ls, 0, NULL, NULL);

    clSetKernelArg(k_sumsq, 0, sizeof(cl_mem), &d_y);
    clSetKernelArg(k_sumsq, 1, sizeof(cl_mem), &d_partial);
    clSetKernelArg(k_sumsq, 2, WG * sizeof(float), NULL);
    clSetKernelArg(k_sumsq, 3, sizeof(int), &n);
    clEnqueueNDRangeKernel(queue, k_sumsq, 1, NULL, &gs, &ls, 0, NULL, NULL);

    clSetKernelArg(k_scale, 0, sizeof(cl_mem), &d_y);
    clSetKernelArg(k_scale, 1, sizeof(cl_mem), &d_z);
    clSetKernelArg(k_scale, 2, sizeof(float), &s);
    clSetKernelArg(k_scale, 3, sizeof(int), &n);
    clEnqueueNDRangeKernel(queue, k_scale, 1, NULL, &gs, &ls, 0, NULL, NULL);

    clEnqueueReadBuffer(queue, d_partial, CL_TRUE, 0, groups * sizeof(float), h_partial, 0, NULL, NULL);
    clEnqueueReadBuffer(queue, d_z, CL_TRUE, 0, n * sizeof(float), h_z, 0, NULL, NULL);
    printf("%f %f\n", h_partial[0], h_z[1]);
    return 0;
}
