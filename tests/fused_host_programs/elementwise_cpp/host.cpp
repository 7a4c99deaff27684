/* elementwise_chain host in C++ (the same program, compiled with g++): scale -> add -> relu -> copy.
 *
 * Usage: ./elementwise_chain [n]     (n defaults to 1024; read at run time)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CL/cl.h>

#define WG 64

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
    if (fread(text, 1, size, f) != (size_t)size) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    text[size] = '\0';
    fclose(f);
    *length = (size_t)size;
    return text;
}

int main(int argc, char** argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    float alpha = 2.0f;
    cl_int err;

    float* h_x = (float*)malloc(n * sizeof(float));
    float* h_y = (float*)malloc(n * sizeof(float));
    float* h_out = (float*)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) {
        h_x[i] = (float)(i % 17) - 8.0f;
        h_y[i] = 0.5f * (float)(i % 5);
    }

    cl_platform_id platform;
    err = clGetPlatformIDs(1, &platform, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clGetPlatformIDs failed: %d\n", err);
        exit(1);
    }
    cl_device_id device;
    err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clGetDeviceIDs failed: %d\n", err);
        exit(1);
    }
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateContext failed: %d\n", err);
        exit(1);
    }
    cl_command_queue queue = clCreateCommandQueue(context, device, 0, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateCommandQueue failed: %d\n", err);
        exit(1);
    }

    size_t source_length;
    char* source = read_source("kernels.cl", &source_length);
    cl_program program = clCreateProgramWithSource(context, 1, (const char**)&source,
                                                   &source_length, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateProgramWithSource failed: %d\n", err);
        exit(1);
    }
    err = clBuildProgram(program, 1, &device, "", NULL, NULL);
    if (err != CL_SUCCESS) {
        size_t log_size;
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, NULL, &log_size);
        char* log = (char*)malloc(log_size);
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, log_size, log, NULL);
        fprintf(stderr, "build failed:\n%s\n", log);
        free(log);
        exit(1);
    }

    cl_kernel k_scale = clCreateKernel(program, "scale", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(scale) failed: %d\n", err);
        exit(1);
    }
    cl_kernel k_add = clCreateKernel(program, "add", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(add) failed: %d\n", err);
        exit(1);
    }
    cl_kernel k_relu = clCreateKernel(program, "relu", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(relu) failed: %d\n", err);
        exit(1);
    }
    cl_kernel k_copy = clCreateKernel(program, "copy", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(copy) failed: %d\n", err);
        exit(1);
    }

    size_t bytes = n * sizeof(float);
    cl_mem x = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, h_x, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(x) failed: %d\n", err);
        exit(1);
    }
    cl_mem y = clCreateBuffer(context, CL_MEM_READ_ONLY, bytes, NULL, &err);
    cl_mem a = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cl_mem b = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cl_mem c = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cl_mem out = clCreateBuffer(context, CL_MEM_WRITE_ONLY, bytes, NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueWriteBuffer(queue, y, CL_TRUE, 0, bytes, h_y, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clEnqueueWriteBuffer(y) failed: %d\n", err);
        exit(1);
    }

    /* the global size is n rounded up to a multiple of the work-group size */
    size_t global[1] = {(size_t)(((n + WG - 1) / WG) * WG)};
    size_t local[1] = {WG};

    err = clSetKernelArg(k_scale, 0, sizeof(cl_mem), &x);
    err |= clSetKernelArg(k_scale, 1, sizeof(cl_mem), &a);
    err |= clSetKernelArg(k_scale, 2, sizeof(float), &alpha);
    err |= clSetKernelArg(k_scale, 3, sizeof(int), &n);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clSetKernelArg(scale) failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueNDRangeKernel(queue, k_scale, 1, NULL, global, local, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue scale failed: %d\n", err);
        exit(1);
    }

    err = clSetKernelArg(k_add, 0, sizeof(cl_mem), &a);
    err |= clSetKernelArg(k_add, 1, sizeof(cl_mem), &y);
    err |= clSetKernelArg(k_add, 2, sizeof(cl_mem), &b);
    err |= clSetKernelArg(k_add, 3, sizeof(int), &n);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clSetKernelArg(add) failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueNDRangeKernel(queue, k_add, 1, NULL, global, local, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue add failed: %d\n", err);
        exit(1);
    }

    err = clSetKernelArg(k_relu, 0, sizeof(cl_mem), &b);
    err |= clSetKernelArg(k_relu, 1, sizeof(cl_mem), &c);
    err |= clSetKernelArg(k_relu, 2, sizeof(int), &n);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clSetKernelArg(relu) failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueNDRangeKernel(queue, k_relu, 1, NULL, global, local, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue relu failed: %d\n", err);
        exit(1);
    }

    err = clSetKernelArg(k_copy, 0, sizeof(cl_mem), &c);
    err |= clSetKernelArg(k_copy, 1, sizeof(cl_mem), &out);
    err |= clSetKernelArg(k_copy, 2, sizeof(int), &n);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clSetKernelArg(copy) failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueNDRangeKernel(queue, k_copy, 1, NULL, global, local, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue copy failed: %d\n", err);
        exit(1);
    }

    clFinish(queue);
    err = clEnqueueReadBuffer(queue, out, CL_TRUE, 0, bytes, h_out, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clEnqueueReadBuffer(out) failed: %d\n", err);
        exit(1);
    }

    int errors = 0;
    for (int i = 0; i < n; i++) {
        float v = alpha * h_x[i] + h_y[i];
        float expect = v > 0.0f ? v : 0.01f * v;
        if (h_out[i] != expect)
            errors++;
    }
    printf("elementwise_chain: n=%d errors=%d\n", n, errors);

    clReleaseMemObject(x);
    clReleaseMemObject(y);
    clReleaseMemObject(a);
    clReleaseMemObject(b);
    clReleaseMemObject(c);
    clReleaseMemObject(out);
    clReleaseKernel(k_scale);
    clReleaseKernel(k_add);
    clReleaseKernel(k_relu);
    clReleaseKernel(k_copy);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(source);
    free(h_x);
    free(h_y);
    free(h_out);
    return errors != 0;
}
