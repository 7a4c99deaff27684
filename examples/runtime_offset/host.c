/* runtime_offset host: produce -> offset_add with the offset m taken from the command line.
 *
 * Usage: ./runtime_offset m [n]     (n defaults to 1024)
 */
#include <stdio.h>
#include <stdlib.h>
#include <CL/cl.h>

#define DEFAULT_N 1024
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
    size_t got = fread(text, 1, size, f);
    text[got] = '\0';
    fclose(f);
    *length = got;
    return text;
}

int main(int argc, char** argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s m [n]\n", argv[0]);
        return 2;
    }
    int m = atoi(argv[1]);
    int n = argc > 2 ? atoi(argv[2]) : DEFAULT_N;
    cl_int err;
    float* h_x = (float*)malloc(n * sizeof(float));
    float* h_out = (float*)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++)
        h_x[i] = (float)(i % 31);

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

    size_t length;
    char* source = read_source("kernels.cl", &length);
    cl_program program = clCreateProgramWithSource(context, 1, (const char**)&source, &length, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateProgramWithSource failed: %d\n", err);
        exit(1);
    }
    err = clBuildProgram(program, 1, &device, NULL, NULL, NULL);
    if (err != CL_SUCCESS) {
        size_t log_size;
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, NULL, &log_size);
        char* log = (char*)malloc(log_size);
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, log_size, log, NULL);
        fprintf(stderr, "build log:\n%s\n", log);
        free(log);
        exit(1);
    }
    cl_kernel k_produce = clCreateKernel(program, "produce", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(produce) failed: %d\n", err);
        exit(1);
    }
    cl_kernel k_offset = clCreateKernel(program, "offset_add", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(offset_add) failed: %d\n", err);
        exit(1);
    }

    cl_mem x = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * sizeof(float),
                              h_x, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(x) failed: %d\n", err);
        exit(1);
    }
    cl_mem a = clCreateBuffer(context, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(a) failed: %d\n", err);
        exit(1);
    }
    cl_mem out = clCreateBuffer(context, CL_MEM_WRITE_ONLY, n * sizeof(float), NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(out) failed: %d\n", err);
        exit(1);
    }

    /* n rounded up to a multiple of the work-group size */
    size_t global[1] = {((n + WG - 1) / WG) * WG};
    size_t local[1] = {WG};

    err = clSetKernelArg(k_produce, 0, sizeof(cl_mem), &x);
    err |= clSetKernelArg(k_produce, 1, sizeof(cl_mem), &a);
    err |= clSetKernelArg(k_produce, 2, sizeof(int), &n);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clSetKernelArg(produce) failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueNDRangeKernel(queue, k_produce, 1, NULL, global, local, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue produce failed: %d\n", err);
        exit(1);
    }

    err = clSetKernelArg(k_offset, 0, sizeof(cl_mem), &a);
    err |= clSetKernelArg(k_offset, 1, sizeof(cl_mem), &out);
    err |= clSetKernelArg(k_offset, 2, sizeof(int), &n);
    err |= clSetKernelArg(k_offset, 3, sizeof(int), &m);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clSetKernelArg(offset_add) failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueNDRangeKernel(queue, k_offset, 1, NULL, global, local, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue offset_add failed: %d\n", err);
        exit(1);
    }

    clFinish(queue);
    err = clEnqueueReadBuffer(queue, out, CL_TRUE, 0, n * sizeof(float), h_out, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clEnqueueReadBuffer(out) failed: %d\n", err);
        exit(1);
    }

    int errors = 0;
    for (int i = 0; i < n; i++) {
        float expect = 3.0f * h_x[i] - 1.0f;
        if (i + m >= 0 && i + m < n)
            expect += 3.0f * h_x[i + m] - 1.0f;
        if (h_out[i] != expect)
            errors++;
    }
    printf("runtime_offset: m=%d errors=%d\n", m, errors);

    clReleaseMemObject(x);
    clReleaseMemObject(a);
    clReleaseMemObject(out);
    clReleaseKernel(k_produce);
    clReleaseKernel(k_offset);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(source);
    free(h_x);
    free(h_out);
    return errors != 0;
}
