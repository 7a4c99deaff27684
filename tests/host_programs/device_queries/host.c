/* The work-group size chosen from the device's answers, as SDK samples do: the kernel's
 * work-group limit and the device's work-item limits, a doubling loop up to a cap. */
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>

#define N 256
#define CAP 64

int main(void) {
    cl_int err;
    cl_device_id dev;
    clGetDeviceIDs(NULL, CL_DEVICE_TYPE_DEFAULT, 1, &dev, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    FILE *f = fopen("k.cl", "r");
    char src[2048];
    size_t len = fread(src, 1, sizeof(src) - 1, f);
    src[len] = 0;
    const char *text = src;
    cl_program p = clCreateProgramWithSource(ctx, 1, &text, &len, &err);
    clBuildProgram(p, 1, &dev, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(p, "blur", &err);
    size_t wg;
    clGetKernelWorkGroupInfo(k, dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof(wg), &wg, NULL);
    size_t *items = (size_t *)malloc(3 * sizeof(size_t));
    clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_ITEM_SIZES, 3 * sizeof(size_t), items, NULL);
    size_t local = 1;
    while (2 * local <= wg && 2 * local <= CAP)
        local *= 2;
    if (local > items[0])
        local = items[0];
    cl_mem in = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
    cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
    size_t global = N;
    clSetKernelArg(k, 0, sizeof(cl_mem), &in);
    clSetKernelArg(k, 1, sizeof(cl_mem), &out);
    clSetKernelArg(k, 2, local * sizeof(float), NULL);
    clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, NULL);
    clFinish(q);
    return 0;
}
