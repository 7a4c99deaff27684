/* calibrate: gain then offset on a sensor trace, each with its own coefficient and length.
 *
 * Usage: ./calibrate GAIN OFFSET N_GAIN N_OFFSET [OUTFILE]
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
    if (argc < 5) {
        fprintf(stderr, "usage: %s GAIN OFFSET N_GAIN N_OFFSET [OUTFILE]\n", argv[0]);
        return 1;
    }
    float gain = (float)atof(argv[1]);
    float offset = (float)atof(argv[2]);
    int n_gain = atoi(argv[3]);
    int n_offset = atoi(argv[4]);
    const char* outfile = argc > 5 ? argv[5] : "calibrate_out.txt";
    float trace[SAMPLES], ref[SAMPLES];
    int i, errors = 0;
    cl_int err;
    for (i = 0; i < SAMPLES; i++)
        trace[i] = 0.01f * (float)(i % 97) - 0.3f;

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
    cl_kernel k_gain = clCreateKernel(program, "gain", &err);
    CHECK(err, "clCreateKernel(gain)");
    cl_kernel k_offset = clCreateKernel(program, "offset", &err);
    CHECK(err, "clCreateKernel(offset)");
    cl_mem d_x = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof(trace),
                                trace, &err);
    CHECK(err, "clCreateBuffer");

    size_t global = SAMPLES, local = WG;
    CHECK(clSetKernelArg(k_gain, 0, sizeof(cl_mem), &d_x), "clSetKernelArg");
    CHECK(clSetKernelArg(k_gain, 1, sizeof(float), &gain), "clSetKernelArg");
    CHECK(clSetKernelArg(k_gain, 2, sizeof(int), &n_gain), "clSetKernelArg");
    CHECK(clEnqueueNDRangeKernel(queue, k_gain, 1, NULL, &global, &local, 0, NULL, NULL), "gain");
    CHECK(clSetKernelArg(k_offset, 0, sizeof(cl_mem), &d_x), "clSetKernelArg");
    CHECK(clSetKernelArg(k_offset, 1, sizeof(float), &offset), "clSetKernelArg");
    CHECK(clSetKernelArg(k_offset, 2, sizeof(int), &n_offset), "clSetKernelArg");
    CHECK(clEnqueueNDRangeKernel(queue, k_offset, 1, NULL, &global, &local, 0, NULL, NULL),
          "offset");
    for (i = 0; i < SAMPLES; i++)
        ref[i] = trace[i];
    CHECK(clEnqueueReadBuffer(queue, d_x, CL_TRUE, 0, sizeof(trace), trace, 0, NULL, NULL),
          "read");

    for (i = 0; i < SAMPLES; i++) {
        float v = i < n_gain ? gain * ref[i] : ref[i];
        if (i < n_offset)
            v += offset;
        if (fabsf(trace[i] - v) > 1e-5f * (1.0f + fabsf(v)))
            errors++;
    }
    printf("calibrate: gain=%g offset=%g errors=%d\n", gain, offset, errors);
    FILE* f = fopen(outfile, "w");
    if (!f)
        return 1;
    for (i = 0; i < SAMPLES; i++)
        fprintf(f, "%.6e\n", trace[i]);
    fclose(f);
    clReleaseMemObject(d_x);
    clReleaseKernel(k_gain); clReleaseKernel(k_offset);
    clReleaseProgram(program); clReleaseCommandQueue(queue); clReleaseContext(context);
    free(source);
    return errors != 0;
}
