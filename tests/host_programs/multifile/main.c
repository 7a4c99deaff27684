/* main translation unit: sizes from the command line, kernels from two .cl files */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ocl_util.h"

#define WG 8

static void usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [-n N] [--scale S]\n", argv0);
}

int main(int argc, char **argv)
{
    int n = 64;
    const char *scale = "2.0f";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            n = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--scale") == 0 && i + 1 < argc) {
            scale = argv[++i];
        } else {
            usage(argv[0]);
            return 1;
        }
    }
    char opts[128];
    snprintf(opts, sizeof(opts), "-DSCALE=%s -cl-mad-enable", scale);

    ocl_env env;
    ocl_setup(&env);
    cl_program prog = ocl_build(&env, "produce.cl", "consume.cl", opts);
    cl_int err;
    cl_kernel kp = clCreateKernel(prog, "produce", &err);
    cl_kernel kc = clCreateKernel(prog, "consume", &err);

    size_t bytes = n * sizeof(float);
    float *h = (float *)malloc(bytes);
    for (int i = 0; i < n; i++) h[i] = (float)i;
    cl_mem d_in = clCreateBuffer(env.ctx, CL_MEM_READ_ONLY, bytes, NULL, &err);
    cl_mem d_mid = clCreateBuffer(env.ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cl_mem d_out = clCreateBuffer(env.ctx, CL_MEM_WRITE_ONLY, bytes, NULL, &err);
    clEnqueueWriteBuffer(env.queue, d_in, CL_TRUE, 0, bytes, h, 0, NULL, NULL);

    size_t global = ((n + WG - 1) / WG) * WG, local = WG;
    clSetKernelArg(kp, 0, sizeof(cl_mem), &d_in);
    clSetKernelArg(kp, 1, sizeof(cl_mem), &d_mid);
    clSetKernelArg(kp, 2, sizeof(int), &n);
    clEnqueueNDRangeKernel(env.queue, kp, 1, NULL, &global, &local, 0, NULL, NULL);
    clSetKernelArg(kc, 0, sizeof(cl_mem), &d_mid);
    clSetKernelArg(kc, 1, sizeof(cl_mem), &d_out);
    clSetKernelArg(kc, 2, sizeof(int), &n);
    clEnqueueNDRangeKernel(env.queue, kc, 1, NULL, &global, &local, 0, NULL, NULL);
    clEnqueueReadBuffer(env.queue, d_out, CL_TRUE, 0, bytes, h, 0, NULL, NULL);
    printf("%f\n", h[0]);
    free(h);
    return 0;
}
