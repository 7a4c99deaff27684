/* A PolyBench-style host: sizes from argv, kernels built with "-DSCALE=3.0f" and an extra
 * "#define OFFSET" source string, data initialised on the host, result checked on the host. */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#define WG 64

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(1); }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *src = (char *)malloc(len + 1);
    if (fread(src, 1, len, f) != (size_t)len) { fclose(f); exit(1); }
    src[len] = '\0';
    fclose(f);
    return src;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    size_t bytes = n * sizeof(float);
    float *h_x = (float *)malloc(bytes);
    float *h_z = (float *)malloc(bytes);
    for (int i = 0; i < n; i++)
        h_x[i] = (float)(i % 17) * 0.25f - 1.0f;

    cl_int err;
    cl_platform_id platform;
    cl_device_id device;
    clGetPlatformIDs(1, &platform, NULL);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue queue = clCreateCommandQueue(ctx, device, 0, &err);

    const char *sources[2];
    sources[0] = "#define OFFSET 2.0f\n";
    sources[1] = read_file("scale.cl");
    cl_program program = clCreateProgramWithSource(ctx, 2, sources, NULL, &err);
    if (clBuildProgram(program, 1, &device, "-DSCALE=3.0f", NULL, NULL) != CL_SUCCESS) {
        fprintf(stderr, "build failed\n");
        return 1;
    }
    cl_kernel k1 = clCreateKernel(program, "scale_shift", &err);
    cl_kernel k2 = clCreateKernel(program, "square", &err);

    cl_mem d_x = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, h_x, &err);
    cl_mem d_y = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cl_mem d_z = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, bytes, NULL, &err);

    clSetKernelArg(k1, 0, sizeof(cl_mem), &d_x);
    clSetKernelArg(k1, 1, sizeof(cl_mem), &d_y);
    clSetKernelArg(k1, 2, sizeof(int), &n);
    clSetKernelArg(k2, 0, sizeof(cl_mem), &d_y);
    clSetKernelArg(k2, 1, sizeof(cl_mem), &d_z);
    clSetKernelArg(k2, 2, sizeof(int), &n);

    size_t local = WG;
    size_t global = ((n + WG - 1) / WG) * WG;
    clEnqueueNDRangeKernel(queue, k1, 1, NULL, &global, &local, 0, NULL, NULL);
    clEnqueueNDRangeKernel(queue, k2, 1, NULL, &global, &local, 0, NULL, NULL);
    clEnqueueReadBuffer(queue, d_z, CL_TRUE, 0, bytes, h_z, 0, NULL, NULL);

    int bad = 0;
    for (int i = 0; i < n; i++) {
        float y = 3.0f * h_x[i] + 2.0f;
        if (fabsf(h_z[i] - y * y) > 1e-4f * fabsf(y * y) + 1e-6f)
            bad++;
    }
    printf("%s\n", bad ? "FAILED" : "PASSED");
    clReleaseMemObject(d_x);
    clReleaseMemObject(d_y);
    clReleaseMemObject(d_z);
    clReleaseKernel(k1);
    clReleaseKernel(k2);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(ctx);
    free(h_x);
    free(h_z);
    return bad != 0;
}
