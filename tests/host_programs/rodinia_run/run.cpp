// Rodinia-style OpenCL part: platform chosen by vendor name, kernels read with fopen/fread of
// a #define'd path, host data in a malloc'd array of structs, sizes from the command line.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <CL/cl.h>
#include "particles.h"

static cl_context context;
static cl_command_queue cmd_queue;
static cl_device_id device;

static int initialize(int use_gpu)
{
    cl_uint num_platforms;
    if (clGetPlatformIDs(0, NULL, &num_platforms) != CL_SUCCESS) {
        printf("ERROR: clGetPlatformIDs(0,0,*) failed\n");
        return -1;
    }
    cl_platform_id *all = (cl_platform_id *)malloc(sizeof(cl_platform_id) * num_platforms);
    clGetPlatformIDs(num_platforms, all, NULL);
    cl_platform_id chosen = all[0];
    for (cl_uint i = 0; i < num_platforms; i++) {
        char vendor[256];
        clGetPlatformInfo(all[i], CL_PLATFORM_VENDOR, sizeof(vendor), vendor, NULL);
        if (strstr(vendor, "NVIDIA") != NULL || strstr(vendor, "Portable") != NULL) {
            chosen = all[i];
            break;
        }
    }
    cl_context_properties props[3] = {CL_CONTEXT_PLATFORM, (cl_context_properties)chosen, 0};
    cl_device_type type = use_gpu ? CL_DEVICE_TYPE_GPU : CL_DEVICE_TYPE_CPU;
    context = clCreateContextFromType(props, type, NULL, NULL, NULL);
    if (!context) {
        printf("ERROR: clCreateContextFromType(%s) failed\n", use_gpu ? "GPU" : "CPU");
        return -1;
    }
    size_t size;
    clGetContextInfo(context, CL_CONTEXT_DEVICES, 0, NULL, &size);
    cl_device_id *devices = (cl_device_id *)malloc(size);
    clGetContextInfo(context, CL_CONTEXT_DEVICES, size, devices, NULL);
    device = devices[0];
    cmd_queue = clCreateCommandQueue(context, device, 0, NULL);
    free(all);
    return 0;
}

int run(int argc, char **argv)
{
    int n = 256, steps = 4, use_gpu = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (strcmp(argv[i], "-c") == 0)
            use_gpu = 0;
    }
    if (initialize(use_gpu))
        return -1;

    FILE *fp = fopen(KERNEL_PATH, "rb");
    if (!fp) {
        printf("ERROR: unable to open '%s'\n", KERNEL_PATH);
        return -1;
    }
    fseek(fp, 0, SEEK_END);
    size_t src_len = ftell(fp);
    rewind(fp);
    char *source = (char *)malloc(src_len + 1);
    fread(source, 1, src_len, fp);
    source[src_len] = '\0';
    fclose(fp);

    const char *slist[2] = {source, 0};
    cl_int err = 0;
    cl_program prog = clCreateProgramWithSource(context, 1, slist, NULL, &err);
    err = clBuildProgram(prog, 0, NULL, NULL, NULL, NULL);
    if (err != CL_SUCCESS) {
        printf("ERROR: clBuildProgram() => %d\n", err);
        return -1;
    }
    cl_kernel advance = clCreateKernel(prog, "advance", &err);
    cl_kernel energy = clCreateKernel(prog, "energy", &err);

    particle_t *h_p = (particle_t *)malloc(n * sizeof(particle_t));
    for (int i = 0; i < n; i++) {
        h_p[i].x = (float)i;
        h_p[i].y = 1.0f;
        h_p[i].z = 0.0f;
        h_p[i].w = 0.5f;
    }
    float *h_e = (float *)malloc(n * sizeof(float));
    cl_mem d_p = clCreateBuffer(context, CL_MEM_READ_WRITE, n * sizeof(particle_t), NULL, &err);
    cl_mem d_e = clCreateBuffer(context, CL_MEM_WRITE_ONLY, n * sizeof(float), NULL, &err);
    clEnqueueWriteBuffer(cmd_queue, d_p, 1, 0, n * sizeof(particle_t), h_p, 0, 0, 0);

    float dt = 0.01f;
    size_t local_work[1] = {BLOCK_SIZE};
    size_t global_work[1] = {(size_t)((n + BLOCK_SIZE - 1) / BLOCK_SIZE) * BLOCK_SIZE};
    clSetKernelArg(advance, 0, sizeof(cl_mem), (void *)&d_p);
    clSetKernelArg(advance, 1, sizeof(float), (void *)&dt);
    clSetKernelArg(advance, 2, sizeof(int), (void *)&n);
    for (int s = 0; s < steps; s++) {
        err = clEnqueueNDRangeKernel(cmd_queue, advance, 1, NULL, global_work, local_work, 0, 0,
                                     0);
        if (err != CL_SUCCESS) {
            printf("ERROR: advance clEnqueueNDRangeKernel()=>%d failed\n", err);
            return -1;
        }
    }
    clSetKernelArg(energy, 0, sizeof(cl_mem), (void *)&d_p);
    clSetKernelArg(energy, 1, sizeof(cl_mem), (void *)&d_e);
    clSetKernelArg(energy, 2, sizeof(int), (void *)&n);
    clEnqueueNDRangeKernel(cmd_queue, energy, 1, NULL, global_work, local_work, 0, 0, 0);
    clEnqueueReadBuffer(cmd_queue, d_e, 1, 0, n * sizeof(float), h_e, 0, 0, 0);
    clFinish(cmd_queue);
    std::cout << "e[0] = " << h_e[0] << std::endl;
    free(h_p);
    free(h_e);
    return 0;
}
