/* helpers of the multi-file host: setup, reading kernel files, building a program */
#include <stdio.h>
#include <stdlib.h>
#include "ocl_util.h"

char *read_kernel_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        exit(EXIT_FAILURE);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = (char *)malloc(n + 1);
    size_t got = fread(buf, 1, n, f);
    buf[got] = '\0';
    fclose(f);
    *len = got;
    return buf;
}

void ocl_setup(ocl_env *env)
{
    cl_platform_id platform;
    cl_int err = clGetPlatformIDs(1, &platform, NULL);
    if (err != CL_SUCCESS) { fprintf(stderr, "no platform\n"); exit(1); }
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &env->dev, NULL);
    env->ctx = clCreateContext(NULL, 1, &env->dev, NULL, NULL, &err);
    env->queue = clCreateCommandQueue(env->ctx, env->dev, 0, &err);
}

cl_program ocl_build(ocl_env *env, const char *file_a, const char *file_b, const char *opts)
{
    const char *srcs[2];
    size_t lens[2];
    srcs[0] = read_kernel_file(file_a, &lens[0]);
    srcs[1] = read_kernel_file(file_b, &lens[1]);
    cl_int err;
    cl_program p = clCreateProgramWithSource(env->ctx, 2, srcs, lens, &err);
    if (clBuildProgram(p, 1, &env->dev, opts, NULL, NULL) != CL_SUCCESS) {
        fprintf(stderr, "build failed\n");
        exit(1);
    }
    return p;
}
