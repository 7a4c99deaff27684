/* global_offset [N]: an LU-style host that launches its kernels on the trailing sub-matrix of
 * each step with a global work offset, and a row-sum kernel with an offset read by a kernel
 * launched without one. */
#include <stdio.h>
#include <stdlib.h>
#include <CL/cl.h>

int main(int argc, char** argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 9;
    float* h_a = (float*)malloc(n * n * sizeof(float));
    for (int i = 0; i < n * n; i++)
        h_a[i] = (float)(i % 7) + (i % (n + 1) == 0 ? (float)n : 0.0f);

    cl_int err;
    cl_platform_id platform;
    clGetPlatformIDs(1, &platform, NULL);
    cl_device_id device;
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue queue = clCreateCommandQueue(context, device, 0, &err);
    FILE* f = fopen("kernels.cl", "rb");
    char source[4096];
    size_t length = fread(source, 1, sizeof(source) - 1, f);
    source[length] = '\0';
    fclose(f);
    const char* text = source;
    cl_program program = clCreateProgramWithSource(context, 1, &text, &length, &err);
    clBuildProgram(program, 1, &device, NULL, NULL, NULL);
    cl_kernel k_ratio = clCreateKernel(program, "col_ratio", &err);
    cl_kernel k_update = clCreateKernel(program, "trail_update", &err);
    cl_kernel k_sum = clCreateKernel(program, "row_sum", &err);
    cl_kernel k_scale = clCreateKernel(program, "row_scale", &err);
    cl_mem d_a = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                n * n * sizeof(float), h_a, &err);
    cl_mem d_l = clCreateBuffer(context, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem d_s = clCreateBuffer(context, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem d_out = clCreateBuffer(context, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    clSetKernelArg(k_ratio, 0, sizeof(cl_mem), &d_a);
    clSetKernelArg(k_ratio, 1, sizeof(cl_mem), &d_l);
    clSetKernelArg(k_ratio, 2, sizeof(int), &n);
    clSetKernelArg(k_update, 0, sizeof(cl_mem), &d_a);
    clSetKernelArg(k_update, 1, sizeof(cl_mem), &d_l);
    clSetKernelArg(k_update, 2, sizeof(int), &n);
    for (int k = 0; k < n - 1; k++) {
        size_t offset[2] = {k + 1, k + 1};
        size_t rest[2] = {n - k - 1, n - k - 1};
        clSetKernelArg(k_ratio, 3, sizeof(int), &k);
        clEnqueueNDRangeKernel(queue, k_ratio, 1, offset, rest, NULL, 0, NULL, NULL);
        clEnqueueNDRangeKernel(queue, k_update, 2, offset, rest, NULL, 0, NULL, NULL);
    }
    clSetKernelArg(k_sum, 0, sizeof(cl_mem), &d_a);
    clSetKernelArg(k_sum, 1, sizeof(cl_mem), &d_s);
    clSetKernelArg(k_sum, 2, sizeof(int), &n);
    clSetKernelArg(k_scale, 0, sizeof(cl_mem), &d_s);
    clSetKernelArg(k_scale, 1, sizeof(cl_mem), &d_out);
    clSetKernelArg(k_scale, 2, sizeof(int), &n);
    size_t one = 1, rows = n - 1, all = n, half = (n - 1) / 2;
    clEnqueueNDRangeKernel(queue, k_sum, 1, &one, &rows, &half, 0, NULL, NULL);
    clEnqueueNDRangeKernel(queue, k_scale, 1, NULL, &all, NULL, 0, NULL, NULL);
    clEnqueueReadBuffer(queue, d_a, CL_TRUE, 0, n * n * sizeof(float), h_a, 0, NULL, NULL);
    clEnqueueReadBuffer(queue, d_out, CL_TRUE, 0, n * sizeof(float), h_a, 0, NULL, NULL);
    printf("%f %f\n", h_a[0], h_a[n - 1]);
    return 0;
}
