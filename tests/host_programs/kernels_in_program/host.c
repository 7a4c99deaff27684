/* SDK-sample-style host: all kernels of a program created at once, then picked by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CL/cl.h>

#define N 128
#define MAX_KERNELS 8

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    rewind(f);
    char *text = (char *)malloc(*len + 1);
    fread(text, 1, *len, f);
    text[*len] = '\0';
    fclose(f);
    return text;
}

int main(void)
{
    cl_int err;
    cl_platform_id platform;
    cl_device_id device;
    clGetPlatformIDs(1, &platform, NULL);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue queue = clCreateCommandQueue(ctx, device, 0, &err);

    size_t len;
    const char *src = read_file("kernels.cl", &len);
    cl_program program = clCreateProgramWithSource(ctx, 1, &src, &len, &err);
    err = clBuildProgram(program, 1, &device, "-cl-fast-relaxed-math", NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "build failed\n");
        return 1;
    }

    cl_uint num_kernels;
    clCreateKernelsInProgram(program, 0, NULL, &num_kernels);
    cl_kernel *kernels = (cl_kernel *)malloc(num_kernels * sizeof(cl_kernel));
    clCreateKernelsInProgram(program, num_kernels, kernels, NULL);
    cl_kernel k_square = NULL, k_shift = NULL;
    for (cl_uint i = 0; i < num_kernels; i++) {
        char name[64];
        clGetKernelInfo(kernels[i], CL_KERNEL_FUNCTION_NAME, sizeof(name), name, NULL);
        if (strcmp(name, "square") == 0)
            k_square = kernels[i];
        else if (strcmp(name, "shift_add") == 0)
            k_shift = kernels[i];
    }
    if (!k_square || !k_shift) {
        fprintf(stderr, "kernel missing\n");
        return 1;
    }

    float host_in[N];
    for (int i = 0; i < N; i++)
        host_in[i] = (float)i / N;
    cl_mem d_in = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, N * sizeof(float),
                                 host_in, &err);
    cl_mem d_sq = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
    cl_mem d_out = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, N * sizeof(float), NULL, &err);
    int n = N;
    size_t global = N;

    clSetKernelArg(k_square, 0, sizeof(cl_mem), &d_in);
    clSetKernelArg(k_square, 1, sizeof(cl_mem), &d_sq);
    clSetKernelArg(k_square, 2, sizeof(int), &n);
    clEnqueueNDRangeKernel(queue, k_square, 1, NULL, &global, NULL, 0, NULL, NULL);

    clSetKernelArg(k_shift, 0, sizeof(cl_mem), &d_sq);
    clSetKernelArg(k_shift, 1, sizeof(cl_mem), &d_out);
    clSetKernelArg(k_shift, 2, sizeof(int), &n);
    clEnqueueNDRangeKernel(queue, k_shift, 1, NULL, &global, NULL, 0, NULL, NULL);

    float result[N];
    clEnqueueReadBuffer(queue, d_out, CL_TRUE, 0, N * sizeof(float), result, 0, NULL, NULL);
    printf("%f\n", result[0]);

    for (cl_uint i = 0; i < num_kernels; i++)
        clReleaseKernel(kernels[i]);
    free(kernels);
    return 0;
}
