/* stride_helper: K1 then K2, each a grid-stride loop in a helper, over N values.
 *
 * Usage: ./stride_helper N [OUTFILE]
 */
#include <stdio.h>
#include <stdlib.h>
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

#define CHECK(e, what) do { if ((e) != CL_SUCCESS) { fprintf(stderr, "%s failed: %d\n", what, (int)(e)); exit(1); } } while (0)

int main(int argc, char** argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    const char* outfile = argc > 2 ? argv[2] : "stride_helper_out.txt";
    int i, errors = 0;
    cl_int err;
    float* x = (float*)malloc(n * sizeof(float));
    float* out = (float*)malloc(n * sizeof(float));
    for (i = 0; i < n; i++)
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
    cl_kernel k1 = clCreateKernel(program, "K1", &err);
    CHECK(err, "clCreateKernel(K1)");
    cl_kernel k2 = clCreateKernel(program, "K2", &err);
    CHECK(err, "clCreateKernel(K2)");
    size_t bytes = (size_t)n * sizeof(float);
    cl_mem d_x = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, x, &err);
    cl_mem d_a = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cl_mem d_out = clCreateBuffer(context, CL_MEM_WRITE_ONLY, bytes, NULL, &err);
    CHECK(err, "clCreateBuffer");

    size_t global = ((size_t)n / 4 + WG - 1) / WG * WG, local = WG;
    CHECK(clSetKernelArg(k1, 0, sizeof(cl_mem), &d_x), "clSetKernelArg");
    CHECK(clSetKernelArg(k1, 1, sizeof(cl_mem), &d_a), "clSetKernelArg");
    CHECK(clSetKernelArg(k1, 2, sizeof(int), &n), "clSetKernelArg");
    CHECK(clEnqueueNDRangeKernel(queue, k1, 1, NULL, &global, &local, 0, NULL, NULL), "K1");
    CHECK(clSetKernelArg(k2, 0, sizeof(cl_mem), &d_a), "clSetKernelArg");
    CHECK(clSetKernelArg(k2, 1, sizeof(cl_mem), &d_out), "clSetKernelArg");
    CHECK(clSetKernelArg(k2, 2, sizeof(int), &n), "clSetKernelArg");
    CHECK(clEnqueueNDRangeKernel(queue, k2, 1, NULL, &global, &local, 0, NULL, NULL), "K2");
    CHECK(clEnqueueReadBuffer(queue, d_out, CL_TRUE, 0, bytes, out, 0, NULL, NULL), "read");

    for (i = 0; i < n; i++) {
        float v = 0.5f * (2.0f * x[i] + 1.0f) + 1.0f;
        if (fabsf(out[i] - v) > 1e-5f * (1.0f + fabsf(v)))
            errors++;
    }
    printf("stride_helper: n=%d errors=%d\n", n, errors);
    FILE* f = fopen(outfile, "w");
    if (!f)
        return 1;
    for (i = 0; i < n; i++)
        fprintf(f, "%.6e\n", out[i]);
    fclose(f);
    clReleaseMemObject(d_x); clReleaseMemObject(d_a); clReleaseMemObject(d_out);
    clReleaseKernel(k1); clReleaseKernel(k2);
    clReleaseProgram(program); clReleaseCommandQueue(queue); clReleaseContext(context);
    free(source); free(x); free(out);
    return errors != 0;
}
