/* column_filter: a two-pass filter down each column of a WIDTH x 8 image.
 *
 * Usage: ./column_filter WIDTH [OUTFILE]   (WIDTH a multiple of 64)
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
    int width = argc > 1 ? atoi(argv[1]) : 256;
    int height = 8;
    const char* outfile = argc > 2 ? argv[2] : "column_filter_out.txt";
    int i, x, y, errors = 0;
    cl_int err;
    int n = width * height;
    float* img = (float*)malloc(n * sizeof(float));
    float* out = (float*)malloc(n * sizeof(float));
    for (i = 0; i < n; i++)
        img[i] = 0.01f * (float)(i % 97) - 0.3f;

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
    cl_kernel k = clCreateKernel(program, "smooth_columns", &err);
    CHECK(err, "clCreateKernel(smooth_columns)");
    size_t bytes = (size_t)n * sizeof(float);
    cl_mem d_in = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, img, &err);
    cl_mem d_out = clCreateBuffer(context, CL_MEM_WRITE_ONLY, bytes, NULL, &err);
    CHECK(err, "clCreateBuffer");

    size_t global = (size_t)width, local = WG;
    CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &d_in), "clSetKernelArg");
    CHECK(clSetKernelArg(k, 1, sizeof(cl_mem), &d_out), "clSetKernelArg");
    CHECK(clSetKernelArg(k, 2, sizeof(int), &width), "clSetKernelArg");
    CHECK(clSetKernelArg(k, 3, sizeof(int), &height), "clSetKernelArg");
    CHECK(clEnqueueNDRangeKernel(queue, k, 1, NULL, &global, &local, 0, NULL, NULL), "smooth");
    CHECK(clEnqueueReadBuffer(queue, d_out, CL_TRUE, 0, bytes, out, 0, NULL, NULL), "read");

    for (x = 0; x < width; x++) {
        float prev = 0.0f, next = 0.0f;
        float fwd[8];
        for (y = 0; y < height; y++) {
            prev = 0.5f * (prev + img[x + y * width]);
            fwd[y] = prev;
        }
        for (y = height - 1; y >= 0; y--) {
            next = 0.5f * (next + img[x + y * width]);
            float v = fwd[y] + next;
            if (fabsf(out[x + y * width] - v) > 1e-5f * (1.0f + fabsf(v)))
                errors++;
        }
    }
    printf("column_filter: width=%d errors=%d\n", width, errors);
    FILE* f = fopen(outfile, "w");
    if (!f)
        return 1;
    for (i = 0; i < n; i++)
        fprintf(f, "%.6e\n", out[i]);
    fclose(f);
    clReleaseMemObject(d_in); clReleaseMemObject(d_out);
    clReleaseKernel(k);
    clReleaseProgram(program); clReleaseCommandQueue(queue); clReleaseContext(context);
    free(source); free(img); free(out);
    return errors != 0;
}
