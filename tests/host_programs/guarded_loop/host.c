/* guarded_loop N STEPS: STEPS sweeps of scale; update after every sweep but the last (an
 * affine guard on the loop iterator), finish after the last one (the guard's else). */
#include <stdio.h>
#include <stdlib.h>
#include <CL/cl.h>

int main(int argc, char** argv)
{
    if (argc < 3) { fprintf(stderr, "usage: %s N STEPS\n", argv[0]); return 1; }
    int n = atoi(argv[1]);
    int steps = atoi(argv[2]);
    float* h_a = (float*)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) h_a[i] = (float)(i % 5);

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
    cl_kernel k_scale = clCreateKernel(program, "scale", &err);
    cl_kernel k_update = clCreateKernel(program, "update", &err);
    cl_kernel k_finish = clCreateKernel(program, "finish", &err);
    cl_mem d_a = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                n * sizeof(float), h_a, &err);
    cl_mem d_p = clCreateBuffer(context, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem d_c = clCreateBuffer(context, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    clSetKernelArg(k_scale, 0, sizeof(cl_mem), &d_a);
    clSetKernelArg(k_scale, 1, sizeof(cl_mem), &d_p);
    clSetKernelArg(k_scale, 2, sizeof(int), &n);
    clSetKernelArg(k_update, 0, sizeof(cl_mem), &d_p);
    clSetKernelArg(k_update, 1, sizeof(cl_mem), &d_a);
    clSetKernelArg(k_update, 2, sizeof(int), &n);
    clSetKernelArg(k_finish, 0, sizeof(cl_mem), &d_p);
    clSetKernelArg(k_finish, 1, sizeof(cl_mem), &d_c);
    clSetKernelArg(k_finish, 2, sizeof(int), &n);
    size_t gs = n;
    for (int k = 0; k < steps; k++) {
        clSetKernelArg(k_scale, 3, sizeof(int), &k);
        clEnqueueNDRangeKernel(queue, k_scale, 1, NULL, &gs, NULL, 0, NULL, NULL);
        if (k < steps - 1)
            clEnqueueNDRangeKernel(queue, k_update, 1, NULL, &gs, NULL, 0, NULL, NULL);
        else
            clEnqueueNDRangeKernel(queue, k_finish, 1, NULL, &gs, NULL, 0, NULL, NULL);
    }
    clEnqueueReadBuffer(queue, d_c, CL_TRUE, 0, n * sizeof(float), h_a, 0, NULL, NULL);
    printf("%f\n", h_a[1]);
    return 0;
}
