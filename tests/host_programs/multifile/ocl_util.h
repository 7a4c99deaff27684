#ifndef OCL_UTIL_H
#define OCL_UTIL_H
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stddef.h>

typedef struct {
    cl_context ctx;
    cl_command_queue queue;
    cl_device_id dev;
} ocl_env;

char *read_kernel_file(const char *path, size_t *len);
void ocl_setup(ocl_env *env);
cl_program ocl_build(ocl_env *env, const char *file_a, const char *file_b, const char *opts);
#endif
