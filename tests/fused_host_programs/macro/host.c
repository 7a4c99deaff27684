/* macro: scale -> shift_add -> square, every launch through one macro, ENQUEUE_1D.
 *
 * Usage: ./macro [n] [OUTFILE]   (n defaults to 1000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <CL/cl.h>
#define WG 64

static char* read_file(const char* path, size_t* length)
{
    FILE* f = fopen(path, "rb");
    long size;
    char* text;
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    text = (char*)malloc(size + 1);
    if (fread(text, 1, size, f) != (size_t)size) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    text[size] = '\0';
    fclose(f);
    *length = (size_t)size;
    return text;
}

/* every 1-D launch through one macro, as many real hosts have */
#define ENQUEUE_1D(kernel, n) do { \
        size_t global_ = ((size_t)(n) + WG - 1) / WG * WG; \
        size_t local_ = WG; \
        cl_int e_ = clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &global_, &local_, 0, NULL, NULL); \
        if (e_ != CL_SUCCESS) { fprintf(stderr, "enqueue failed: %d\n", (int)e_); exit(1); } \
    } while (0)

#define CHECK(e, what) do { if ((e) != CL_SUCCESS) { fprintf(stderr, "%s failed: %d\n", what, (int)(e)); exit(1); } } while (0)

int main(int argc, char** argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    const char* outfile = argc > 2 ? argv[2] : "helper_out.txt";
    float alpha = 1.5f;
    cl_int err;
    int i, errors = 0;
    float* h_x = (float*)malloc(n * sizeof(float));
    float* h_y = (float*)malloc(n * sizeof(float));
    float* h_out = (float*)malloc(n * sizeof(float));
    for (i = 0; i < n; i++) {
        h_x[i] = 0.25f * (float)(i % 13) - 1.0f;
        h_y[i] = 0.5f * (float)(i % 7);
    }

    cl_platform_id platform;
    cl_device_id device;
    CHECK(clGetPlatformIDs(1, &platform, NULL), "clGetPlatformIDs");
    CHECK(clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL), "clGetDeviceIDs");
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    CHECK(err, "clCreateContext");
    cl_command_queue queue = clCreateCommandQueue(context, device, 0, &err);
    CHECK(err, "clCreateCommandQueue");
    size_t length;
    char* source = read_file("kernels.cl", &length);
    cl_program program = clCreateProgramWithSource(context, 1, (const char**)&source, &length, &err);
    CHECK(err, "clCreateProgramWithSource");
    CHECK(clBuildProgram(program, 1, &device, NULL, NULL, NULL), "clBuildProgram");
    cl_kernel k_scale = clCreateKernel(program, "scale", &err);
    CHECK(err, "clCreateKernel(scale)");
    cl_kernel k_shift = clCreateKernel(program, "shift_add", &err);
    CHECK(err, "clCreateKernel(shift_add)");
    cl_kernel k_square = clCreateKernel(program, "square", &err);
    CHECK(err, "clCreateKernel(square)");

    size_t bytes = (size_t)n * sizeof(float);
    cl_mem d_x = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, h_x, &err);
    cl_mem d_y = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, h_y, &err);
    cl_mem d_a = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cl_mem d_b = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cl_mem d_out = clCreateBuffer(context, CL_MEM_WRITE_ONLY, bytes, NULL, &err);
    CHECK(err, "clCreateBuffer");

    CHECK(clSetKernelArg(k_scale, 0, sizeof(cl_mem), &d_x), "clSetKernelArg");
    CHECK(clSetKernelArg(k_scale, 1, sizeof(cl_mem), &d_a), "clSetKernelArg");
    CHECK(clSetKernelArg(k_scale, 2, sizeof(float), &alpha), "clSetKernelArg");
    CHECK(clSetKernelArg(k_scale, 3, sizeof(int), &n), "clSetKernelArg");
    ENQUEUE_1D(k_scale, n);
    CHECK(clSetKernelArg(k_shift, 0, sizeof(cl_mem), &d_a), "clSetKernelArg");
    CHECK(clSetKernelArg(k_shift, 1, sizeof(cl_mem), &d_y), "clSetKernelArg");
    CHECK(clSetKernelArg(k_shift, 2, sizeof(cl_mem), &d_b), "clSetKernelArg");
    CHECK(clSetKernelArg(k_shift, 3, sizeof(int), &n), "clSetKernelArg");
    ENQUEUE_1D(k_shift, n);
    CHECK(clSetKernelArg(k_square, 0, sizeof(cl_mem), &d_b), "clSetKernelArg");
    CHECK(clSetKernelArg(k_square, 1, sizeof(cl_mem), &d_out), "clSetKernelArg");
    CHECK(clSetKernelArg(k_square, 2, sizeof(int), &n), "clSetKernelArg");
    ENQUEUE_1D(k_square, n);
    CHECK(clEnqueueReadBuffer(queue, d_out, CL_TRUE, 0, bytes, h_out, 0, NULL, NULL), "read");

    for (i = 0; i < n; i++) {
        float v = alpha * h_x[i] + h_y[i] + 1.0f;
        if (fabsf(h_out[i] - v * v) > 1e-4f * (1.0f + v * v))
            errors++;
    }
    printf("helper: n=%d errors=%d\n", n, errors);
    FILE* f = fopen(outfile, "w");
    if (!f)
        return 1;
    for (i = 0; i < n; i++)
        fprintf(f, "%.6e\n", h_out[i]);
    fclose(f);
    clReleaseMemObject(d_x); clReleaseMemObject(d_y); clReleaseMemObject(d_a);
    clReleaseMemObject(d_b); clReleaseMemObject(d_out);
    clReleaseKernel(k_scale); clReleaseKernel(k_shift); clReleaseKernel(k_square);
    clReleaseProgram(program); clReleaseCommandQueue(queue); clReleaseContext(context);
    free(source); free(h_x); free(h_y); free(h_out);
    return errors != 0;
}
