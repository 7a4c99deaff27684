/* npb_style DIR: an optional input deck of the iteration count (absent: compiled defaults),
 * work-group sizes from the device's limits clamped per dimension, kernels of a file chosen
 * by device type and built with -DN=..., per-level sizes in an array read at the level loop's
 * iterator, and a float argument the host computes from data polyfuse does not follow. */
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>

#include "util.h"

#define LT_DEFAULT 3
#define NIT_DEFAULT 2

static int sizes[8];

static size_t round_up(size_t n, size_t group)
{
    size_t rem = n % group;
    return rem == 0 ? n : n + group - rem;
}

int main(int argc, char *argv[])
{
    int lt = LT_DEFAULT, nit = NIT_DEFAULT, k, i, it;
    if (argc < 2) {
        fprintf(stderr, "usage: %s KERNEL_DIR\n", argv[0]);
        exit(1);
    }
    FILE *in = fopen("npb_style.input", "r");
    if (in != NULL) {
        if (fscanf(in, "%d", &nit) != 1) util_exit("bad input deck");
        fclose(in);
    }
    cl_device_type type = util_device_type();
    cl_device_id dev = util_device(type);
    size_t wis[3], max_wg;
    clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof(wis), &wis, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(size_t), &max_wg, NULL);
    if (max_wg > 4) {
        max_wg = 4;
        for (i = 0; i < 3; i++)
            if (wis[i] > 4) wis[i] = 4;
    }
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    char opts[32];
    sprintf(opts, "-DN=%d", 1 << lt);
    const char *file = type == CL_DEVICE_TYPE_CPU ? "k_cpu.cl" : "k_gpu.cl";
    cl_program p = util_program(ctx, dev, argv[1], file, opts);
    cl_kernel smooth = clCreateKernel(p, "smooth", &err);
    cl_kernel shift = clCreateKernel(p, "shift", &err);
    for (k = 1; k <= lt; k++) sizes[k] = 1 << k;
    float scale = (float)rand() / RAND_MAX;
    cl_mem u = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(float) * (1 << lt), NULL, &err);
    cl_mem v = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(float) * (1 << lt), NULL, &err);
    clSetKernelArg(smooth, 0, sizeof(cl_mem), &u);
    clSetKernelArg(smooth, 2, sizeof(float), &scale);
    clSetKernelArg(shift, 0, sizeof(cl_mem), &u);
    clSetKernelArg(shift, 1, sizeof(cl_mem), &v);
    for (it = 0; it < nit; it++) {
        for (k = 1; k <= lt; k++) {
            int n = sizes[k];
            size_t lws = n < wis[0] ? n : wis[0];
            size_t gws = round_up(n, lws);
            clSetKernelArg(smooth, 1, sizeof(int), &n);
            clEnqueueNDRangeKernel(q, smooth, 1, NULL, &gws, &lws, 0, NULL, NULL);
            clSetKernelArg(shift, 2, sizeof(int), &n);
            clEnqueueNDRangeKernel(q, shift, 1, NULL, &gws, &lws, 0, NULL, NULL);
        }
    }
    float out[1 << LT_DEFAULT];
    clEnqueueReadBuffer(q, v, CL_TRUE, 0, sizeof(out), out, 0, NULL, NULL);
    printf("%f\n", out[0]);
    return 0;
}
