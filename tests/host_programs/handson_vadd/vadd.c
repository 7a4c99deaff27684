#include <stdio.h>
#include <stdlib.h>
#include <CL/cl.h>
#define LENGTH (1024)
extern int output_device_info(cl_device_id );
int main(int argc, char** argv)
{
    int err;
    float* h_a = (float*) calloc(LENGTH, sizeof(float));
    float* h_b = (float*) calloc(LENGTH, sizeof(float));
    float* h_c = (float*) calloc(LENGTH, sizeof(float));
    unsigned int count = LENGTH;
    size_t global;
    cl_device_id device_id = NULL;
    cl_uint numPlatforms;
    err = clGetPlatformIDs(0, NULL, &numPlatforms);
    if (numPlatforms == 0) { printf("Found 0 platforms!\n"); return EXIT_FAILURE; }
    cl_platform_id Platform[numPlatforms];
    err = clGetPlatformIDs(numPlatforms, Platform, NULL);
    for (int i = 0; i < numPlatforms; i++)
    {
        err = clGetDeviceIDs(Platform[i], CL_DEVICE_TYPE_DEFAULT, 1, &device_id, NULL);
        if (err == CL_SUCCESS) break;
    }
    if (device_id == NULL) { printf("no device\n"); return EXIT_FAILURE; }
    size_t wg;
    cl_context context = clCreateContext(0, 1, &device_id, NULL, NULL, &err);
    cl_command_queue commands = clCreateCommandQueue(context, device_id, 0, &err);
    const char *KernelSource = "__kernel void vadd(__global float *a, __global float *b, __global float *c, const unsigned int count) { int i = get_global_id(0); if (i < count) c[i] = a[i] + b[i]; }";
    cl_program program = clCreateProgramWithSource(context, 1, (const char **) & KernelSource, NULL, &err);
    err = clBuildProgram(program, 0, NULL, NULL, NULL, NULL);
    cl_kernel ko_vadd = clCreateKernel(program, "vadd", &err);
    clGetKernelWorkGroupInfo(ko_vadd, device_id, CL_KERNEL_WORK_GROUP_SIZE, sizeof(wg), &wg, NULL);
    cl_mem d_a = clCreateBuffer(context, CL_MEM_READ_ONLY, sizeof(float) * count, NULL, &err);
    cl_mem d_b = clCreateBuffer(context, CL_MEM_READ_ONLY, sizeof(float) * count, NULL, &err);
    cl_mem d_c = clCreateBuffer(context, CL_MEM_WRITE_ONLY, sizeof(float) * count, NULL, &err);
    err = clEnqueueWriteBuffer(commands, d_a, CL_TRUE, 0, sizeof(float) * count, h_a, 0, NULL, NULL);
    err = clEnqueueWriteBuffer(commands, d_b, CL_TRUE, 0, sizeof(float) * count, h_b, 0, NULL, NULL);
    err  = clSetKernelArg(ko_vadd, 0, sizeof(cl_mem), &d_a);
    err |= clSetKernelArg(ko_vadd, 1, sizeof(cl_mem), &d_b);
    err |= clSetKernelArg(ko_vadd, 2, sizeof(cl_mem), &d_c);
    err |= clSetKernelArg(ko_vadd, 3, sizeof(unsigned int), &count);
    global = count;
    err = clEnqueueNDRangeKernel(commands, ko_vadd, 1, NULL, &global, &wg, 0, NULL, NULL);
    err = clFinish(commands);
    err = clEnqueueReadBuffer( commands, d_c, CL_TRUE, 0, sizeof(float) * count, h_c, 0, NULL, NULL );
    return 0;
}
