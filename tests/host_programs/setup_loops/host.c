/* setup_loops N: host set-up loops with no OpenCL call, long enough that interpreting them
 * one iteration at a time is out of the question: a two-variable fill of 230,400 floats and an
 * array of flags over three nested loops (2.2 million iterations); then one launch over N. */
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>

#define FILL 230400
#define SIDE 130

int main(int argc, char** argv)
{
    if (argc < 2) { fprintf(stderr, "usage: %s N\n", argv[0]); return 1; }
    int n = atoi(argv[1]);
    if (n <= 0 || n > FILL) return 1;
    float* h_in = (float*)malloc(FILL * sizeof(float));
    int* h_flags = (int*)malloc(SIDE * SIDE * SIDE * sizeof(int));
    int i, i2;
    float scale = 0.0f;
    for (i = 0, i2 = FILL - 1; i < FILL; i++, i2--) {
        h_in[i] = (float)(i2 % 17) * 0.5f;
        scale += h_in[i];
    }
    int x = 0, y, z, set = 0;
    while (x < SIDE) {
        for (y = 0; y != SIDE; y += 1) {
            z = 0;
            do {
                h_flags[(x * SIDE + y) * SIDE + z] = (x + y + z) % 3 == 0;
                set += (x + y + z) % 3 == 0;
                z++;
            } while (z < SIDE);
        }
        x++;
    }
    printf("%d flags set, scale %f\n", set, scale);

    cl_int err;
    cl_platform_id platform;
    clGetPlatformIDs(1, &platform, NULL);
    cl_device_id device;
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, device, 0, &err);
    FILE* f = fopen("kernels.cl", "rb");
    char source[2048];
    size_t length = fread(source, 1, sizeof(source) - 1, f);
    source[length] = '\0';
    fclose(f);
    const char* text = source;
    cl_program p = clCreateProgramWithSource(ctx, 1, &text, &length, &err);
    clBuildProgram(p, 1, &device, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(p, "masked", &err);
    cl_mem d_in = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * sizeof(float),
                                 h_in, &err);
    cl_mem d_flags = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                    n * sizeof(int), h_flags, &err);
    cl_mem d_out = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, n * sizeof(float), NULL, &err);
    float s = 1.0f / scale;
    clSetKernelArg(k, 0, sizeof(cl_mem), &d_in);
    clSetKernelArg(k, 1, sizeof(cl_mem), &d_flags);
    clSetKernelArg(k, 2, sizeof(cl_mem), &d_out);
    clSetKernelArg(k, 3, sizeof(float), &s);
    clSetKernelArg(k, 4, sizeof(int), &n);
    size_t g = n;
    clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    clEnqueueReadBuffer(q, d_out, CL_TRUE, 0, n * sizeof(float), h_in, 0, NULL, NULL);
    printf("%f\n", h_in[0]);
    return 0;
}
