/* helper_index: smooth -> mirror -> square, work-items asked for inside helpers.
 *
 * Usage: ./helper_index [OUTFILE]
 */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <CL/cl.h>

#define SAMPLES 1024
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

#define CHECK(e, what) do { if ((e) != CL_SUCCESS) { fprintf(stderr, "%s failed: %d\n", what, (int)(e)); exit(1); } } while (0)

int main(int argc, char** argv)
{
    const char* outfile = argc > 1 ? argv[1] : "helper_index_out.txt";
    int n = SAMPLES;
    float x[SAMPLES], out[SAMPLES];
    int i, errors = 0;
    cl_int err;
    for (i = 0; i < SAMPLES; i++)
        x[i] = 0.01f * (float)(i % 97) - 0.3f;

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
    cl_kernel k_smooth = clCreateKernel(program, "smooth", &err);
    CHECK(err, "clCreateKernel(smooth)");
    cl_kernel k_mirror = clCreateKernel(program, "mirror", &err);
    CHECK(err, "clCreateKernel(mirror)");
    cl_kernel k_square = clCreateKernel(program, "square", &err);
    CHECK(err, "clCreateKernel(square)");
    size_t bytes = sizeof(x);
    cl_mem d_x = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, x, &err);
    cl_mem d_a = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cl_mem d_b = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cl_mem d_out = clCreateBuffer(context, CL_MEM_WRITE_ONLY, bytes, NULL, &err);
    CHECK(err, "clCreateBuffer");

    size_t global = SAMPLES, local = WG;
    CHECK(clSetKernelArg(k_smooth, 0, sizeof(cl_mem), &d_x), "clSetKernelArg");
    CHECK(clSetKernelArg(k_smooth, 1, sizeof(cl_mem), &d_a), "clSetKernelArg");
    CHECK(clSetKernelArg(k_smooth, 2, sizeof(int), &n), "clSetKernelArg");
    CHECK(clEnqueueNDRangeKernel(queue, k_smooth, 1, NULL, &global, &local, 0, NULL, NULL),
          "smooth");
    CHECK(clSetKernelArg(k_mirror, 0, sizeof(cl_mem), &d_a), "clSetKernelArg");
    CHECK(clSetKernelArg(k_mirror, 1, sizeof(cl_mem), &d_b), "clSetKernelArg");
    CHECK(clSetKernelArg(k_mirror, 2, sizeof(int), &n), "clSetKernelArg");
    CHECK(clEnqueueNDRangeKernel(queue, k_mirror, 1, NULL, &global, &local, 0, NULL, NULL),
          "mirror");
    CHECK(clSetKernelArg(k_square, 0, sizeof(cl_mem), &d_b), "clSetKernelArg");
    CHECK(clSetKernelArg(k_square, 1, sizeof(cl_mem), &d_out), "clSetKernelArg");
    CHECK(clSetKernelArg(k_square, 2, sizeof(int), &n), "clSetKernelArg");
    CHECK(clEnqueueNDRangeKernel(queue, k_square, 1, NULL, &global, &local, 0, NULL, NULL),
          "square");
    CHECK(clEnqueueReadBuffer(queue, d_out, CL_TRUE, 0, bytes, out, 0, NULL, NULL), "read");

    for (i = 0; i < SAMPLES; i++) {
        float v = 0.5f * x[SAMPLES - 1 - i] + 1.0f;
        if (fabsf(out[i] - v * v) > 1e-5f * (1.0f + v * v))
            errors++;
    }
    printf("helper_index: errors=%d\n", errors);
    FILE* f = fopen(outfile, "w");
    if (!f)
        return 1;
    for (i = 0; i < SAMPLES; i++)
        fprintf(f, "%.6e\n", out[i]);
    fclose(f);
    clReleaseMemObject(d_x); clReleaseMemObject(d_a); clReleaseMemObject(d_b);
    clReleaseMemObject(d_out);
    clReleaseKernel(k_smooth); clReleaseKernel(k_mirror); clReleaseKernel(k_square);
    clReleaseProgram(program); clReleaseCommandQueue(queue); clReleaseContext(context);
    free(source);
    return errors != 0;
}
