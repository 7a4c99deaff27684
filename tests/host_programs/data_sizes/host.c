/* data_sizes FILE [TOL]: the problem size is the number of values in FILE (counted while
 * !feof); relaxation steps run until the residual read back from the device is below TOL. */
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_STEPS 8

int main(int argc, char** argv)
{
    if (argc < 2) { fprintf(stderr, "usage: %s FILE [TOL]\n", argv[0]); return 1; }
    float tol = argc > 2 ? atof(argv[2]) : 1e-3f;
    FILE* f = fopen(argv[1], "r");
    if (!f) { fprintf(stderr, "cannot open %s\n", argv[1]); return 1; }
    float v;
    int count = 0;
    while (!feof(f)) {
        if (fscanf(f, "%f", &v) == 1) count++;
    }
    fclose(f);
    int n = count;
    float* h_x = (float*)calloc(n, sizeof(float));

    cl_int err;
    cl_platform_id platform;
    clGetPlatformIDs(1, &platform, NULL);
    cl_device_id device;
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, device, 0, &err);
    FILE* k = fopen("kernels.cl", "rb");
    char source[2048];
    size_t length = fread(source, 1, sizeof(source) - 1, k);
    source[length] = '\0';
    fclose(k);
    const char* text = source;
    cl_program p = clCreateProgramWithSource(ctx, 1, &text, &length, &err);
    clBuildProgram(p, 1, &device, NULL, NULL, NULL);
    cl_kernel k_relax = clCreateKernel(p, "relax", &err);
    cl_kernel k_res = clCreateKernel(p, "residual", &err);
    cl_mem d_x = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof(float),
                                h_x, &err);
    cl_mem d_y = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem d_r = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    clSetKernelArg(k_relax, 0, sizeof(cl_mem), &d_x);
    clSetKernelArg(k_relax, 1, sizeof(cl_mem), &d_y);
    clSetKernelArg(k_relax, 2, sizeof(int), &n);
    clSetKernelArg(k_res, 0, sizeof(cl_mem), &d_x);
    clSetKernelArg(k_res, 1, sizeof(cl_mem), &d_y);
    clSetKernelArg(k_res, 2, sizeof(cl_mem), &d_r);
    clSetKernelArg(k_res, 3, sizeof(int), &n);
    size_t g = n;
    float residual = 1.0f;
    for (int step = 0; step < MAX_STEPS; step++) {
        clEnqueueNDRangeKernel(q, k_relax, 1, NULL, &g, NULL, 0, NULL, NULL);
        clEnqueueNDRangeKernel(q, k_res, 1, NULL, &g, NULL, 0, NULL, NULL);
        clEnqueueReadBuffer(q, d_r, CL_TRUE, 0, sizeof(float), &residual, 0, NULL, NULL);
        if (residual < tol) break;
        clEnqueueCopyBuffer(q, d_y, d_x, 0, 0, n * sizeof(float), 0, NULL, NULL);
    }
    printf("residual %f\n", residual);
    return 0;
}
