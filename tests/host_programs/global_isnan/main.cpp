// A host in the style of a C++11 tutorial (written for polyfuse's tests): its result check
// calls isnan() unqualified after <cmath>, as g++ before 6 accepted in any dialect.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>
#include <CL/cl.h>

#define N 256
#define TOL 0.001

static float error(const std::vector<float> &x, float want)
{
    float errsq = 0.0f;
    for (float v : x)
        errsq += (v - want) * (v - want);
    return errsq;
}

static void results(const std::vector<float> &x, float want)
{
    float errsq = error(x, want);
    if (isnan(errsq) || errsq > TOL)
        printf("Errors: %f\n", errsq);
}

int main()
{
    std::vector<float> h_x(N, 1.0f);
    cl_platform_id platform;
    cl_device_id device;
    cl_int err;
    clGetPlatformIDs(1, &platform, NULL);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue queue = clCreateCommandQueue(ctx, device, 0, &err);
    FILE *f = fopen("k.cl", "r");
    char src[1024];
    size_t len = fread(src, 1, sizeof(src) - 1, f);
    src[len] = 0;
    fclose(f);
    const char *s = src;
    cl_program program = clCreateProgramWithSource(ctx, 1, &s, NULL, &err);
    clBuildProgram(program, 1, &device, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(program, "scale", &err);
    cl_mem d_x = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                sizeof(float) * N, &h_x[0], &err);
    float a = 2.0f;
    size_t global = N;
    clSetKernelArg(k, 0, sizeof(cl_mem), &d_x);
    clSetKernelArg(k, 1, sizeof(float), &a);
    clEnqueueNDRangeKernel(queue, k, 1, NULL, &global, NULL, 0, NULL, NULL);
    clEnqueueNDRangeKernel(queue, k, 1, NULL, &global, NULL, 0, NULL, NULL);
    clEnqueueReadBuffer(queue, d_x, CL_TRUE, 0, sizeof(float) * N, &h_x[0], 0, NULL, NULL);
    auto t0 = std::chrono::steady_clock::now();
    results(h_x, 4.0f);
    printf("checked in %ld us\n", (long)std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now() - t0).count());
    return 0;
}
