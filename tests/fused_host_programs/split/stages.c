/* stages.c: launch helpers, in their own translation unit as real programs do. */
#include <stdio.h>
#include "stages.h"

cl_int run_shift_add(cl_command_queue queue, cl_kernel k, cl_mem a, cl_mem y, cl_mem b, int n)
{
    size_t global = ((size_t)n + WG - 1) / WG * WG;
    size_t local = WG;
    cl_int err = clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    err |= clSetKernelArg(k, 1, sizeof(cl_mem), &y);
    err |= clSetKernelArg(k, 2, sizeof(cl_mem), &b);
    err |= clSetKernelArg(k, 3, sizeof(int), &n);
    if (err != CL_SUCCESS)
        return err;
    return clEnqueueNDRangeKernel(queue, k, 1, NULL, &global, &local, 0, NULL, NULL);
}

cl_int run_square(cl_command_queue queue, cl_kernel k, cl_mem b, cl_mem out, int n)
{
    size_t global = ((size_t)n + WG - 1) / WG * WG;
    size_t local = WG;
    cl_int err = clSetKernelArg(k, 0, sizeof(cl_mem), &b);
    err |= clSetKernelArg(k, 1, sizeof(cl_mem), &out);
    err |= clSetKernelArg(k, 2, sizeof(int), &n);
    if (err != CL_SUCCESS)
        return err;
    /* the last stage */
    return clEnqueueNDRangeKernel(queue, k, 1, NULL, &global, &local, 0, NULL, NULL);
}
