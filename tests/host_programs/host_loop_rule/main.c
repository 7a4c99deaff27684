/* Host loops without OpenCL calls whose symbolic pass loses what they compute: a table of
 * work sizes filled entry by entry (48 entries), a count decided per iteration (100
 * iterations), a table of levels halved per row, and a nest of ROUNDS x 100 concrete
 * iterations that fits the loop nest's budget only while ROUNDS is small. */
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef ROUNDS
#define ROUNDS 2
#endif

int main(int argc, char **argv) {
    size_t sizes[48];
    for (int b = 0; b < 48; b++)
        sizes[b] = 64 << (b % 4);
    size_t extra = 0;
    for (int b = 0; b < 100; b++)
        if (b % 3 == 0)
            extra += 2;
    size_t steps = 0;
    for (int r = 0; r < ROUNDS; r++) {
        int j = 0;
        while (j < 100) {
            j++;
            steps++;
        }
    }
    int levels[4][3];  /* each level halves the one above it (rows read whole) */
    levels[3][0] = 8;
    levels[3][1] = 16;
    levels[3][2] = 32;
    for (int k = 2; k >= 0; k--)
        for (int ax = 0; ax < 3; ax++)
            levels[k][ax] = levels[k + 1][ax] / 2;
    size_t n = sizes[47] + extra + steps + levels[0][2];

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
    cl_kernel k = clCreateKernel(p, "twice", &err);
    float *h = (float *)malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        h[i] = (float)i;
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    clEnqueueWriteBuffer(q, a, CL_TRUE, 0, n * sizeof(float), h, 0, NULL, NULL);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clEnqueueNDRangeKernel(q, k, 1, NULL, &n, NULL, 0, NULL, NULL);
    clEnqueueNDRangeKernel(q, k, 1, NULL, &n, NULL, 0, NULL, NULL);
    clEnqueueReadBuffer(q, a, CL_TRUE, 0, n * sizeof(float), h, 0, NULL, NULL);
    printf("%f\n", h[n - 1]);
    return 0;
}
