/* A backward sweep (an HMM's beta pass): for (t = length - 2; t >= 0; t--) launches a
 * kernel on row t that reads row t + 1; the printed t is -1 after the loop. */
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int length = argc > 1 ? atoi(argv[1]) : 6;
    cl_platform_id platform;
    cl_device_id device;
    cl_int err;
    clGetPlatformIDs(1, &platform, NULL);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, device, 0, &err);
    FILE *f = fopen("kernels.cl", "r");
    static char src[4096];
    size_t len = fread(src, 1, sizeof(src) - 1, f);
    src[len] = 0;
    const char *text = src;
    cl_program p = clCreateProgramWithSource(ctx, 1, &text, &len, &err);
    clBuildProgram(p, 1, &device, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(p, "sweep", &err);
    size_t bytes = 16 * length * sizeof(float);
    float *h = (float *)malloc(bytes);
    for (int i = 0; i < 16 * length; i++)
        h[i] = (float)i;
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    clEnqueueWriteBuffer(q, a, CL_TRUE, 0, bytes, h, 0, NULL, NULL);
    size_t g = 16;
    int t, off;
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    for (t = length - 2; t >= 0; t--) {
        off = t * 16;
        clSetKernelArg(k, 1, sizeof(int), &off);
        clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    }
    clEnqueueReadBuffer(q, a, CL_TRUE, 0, bytes, h, 0, NULL, NULL);
    printf("%d %f\n", t, h[0]);
    return 0;
}
