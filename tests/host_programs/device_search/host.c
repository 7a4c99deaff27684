/* device_search N: the first platform with a device is searched for (a loop left by a
 * break that stores the device list), the program ends when none is found; the kernels run
 * without a local size, one with __local scratch as large as the device's local memory. */
#include <stdio.h>
#include <stdlib.h>
#include <CL/cl.h>

int main(int argc, char** argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 64;
    if (n <= 0) return 1;
    float* h = (float*)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) h[i] = (float)i;

    cl_uint nplat = 0;
    clGetPlatformIDs(0, NULL, &nplat);
    cl_platform_id* plats = (cl_platform_id*)malloc(nplat * sizeof(cl_platform_id));
    clGetPlatformIDs(nplat, plats, NULL);
    cl_device_id* devices = NULL;
    cl_uint ndev = 0;
    cl_uint p;
    for (p = 0; p < nplat; p++) {
        clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &ndev);
        if (ndev > 0) {
            devices = (cl_device_id*)malloc(ndev * sizeof(cl_device_id));
            clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, ndev, devices, NULL);
            break;
        }
    }
    if (devices == NULL) {
        fprintf(stderr, "no OpenCL device\n");
        exit(1);
    }
    cl_ulong local_mem = 0;
    clGetDeviceInfo(devices[0], CL_DEVICE_LOCAL_MEM_SIZE, sizeof(local_mem), &local_mem, NULL);

    cl_int err;
    cl_context context = clCreateContext(NULL, 1, devices, NULL, NULL, &err);
    cl_command_queue queue = clCreateCommandQueue(context, devices[0], 0, &err);
    FILE* f = fopen("kernels.cl", "rb");
    char source[4096];
    size_t length = fread(source, 1, sizeof(source) - 1, f);
    source[length] = '\0';
    fclose(f);
    const char* text = source;
    cl_program program = clCreateProgramWithSource(context, 1, &text, &length, &err);
    clBuildProgram(program, 1, devices, NULL, NULL, NULL);
    cl_kernel k_stage = clCreateKernel(program, "stage", &err);
    cl_kernel k_shift = clCreateKernel(program, "shift", &err);
    cl_mem d_in = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                 n * sizeof(float), h, &err);
    cl_mem d_mid = clCreateBuffer(context, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem d_out = clCreateBuffer(context, CL_MEM_WRITE_ONLY, n * sizeof(float), NULL, &err);
    clSetKernelArg(k_stage, 0, sizeof(cl_mem), &d_in);
    clSetKernelArg(k_stage, 1, sizeof(cl_mem), &d_mid);
    clSetKernelArg(k_stage, 2, (size_t)local_mem, NULL);
    clSetKernelArg(k_shift, 0, sizeof(cl_mem), &d_mid);
    clSetKernelArg(k_shift, 1, sizeof(cl_mem), &d_out);
    size_t gs = n;
    clEnqueueNDRangeKernel(queue, k_stage, 1, NULL, &gs, NULL, 0, NULL, NULL);
    clEnqueueNDRangeKernel(queue, k_shift, 1, NULL, &gs, NULL, 0, NULL, NULL);
    clEnqueueReadBuffer(queue, d_out, CL_TRUE, 0, n * sizeof(float), h, 0, NULL, NULL);
    printf("%f\n", h[1]);
    return 0;
}
