/* In the style of the OpenCL Programming Guide's Chapter 22 (spmv): the rows are split into
 * slabs whose start rows go into a small table allocated with posix_memalign (malloc in other
 * hosts); the tallest slab sizes a __local argument. */
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>

static void split(unsigned int rows, unsigned int nslabs, unsigned int **start,
                  unsigned int *max_height) {
    unsigned int i;
    posix_memalign((void **)start, 64, (nslabs + 1) * sizeof(unsigned int));
    for (i = 0; i <= nslabs; ++i)
        (*start)[i] = ((rows / 16) * i / nslabs) * 16;
    *max_height = 0;
    for (i = 0; i < nslabs; ++i) {
        unsigned int h = (*start)[i + 1] - (*start)[i];
        if (*max_height < h)
            *max_height = h;
    }
}

int main(void) {
    const unsigned int rows = 256, nslabs = 4;
    unsigned int *start, height;
    cl_int err;
    split(rows, nslabs, &start, &height);
    cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
    FILE *f = fopen("k.cl", "r");
    char src[4096];
    size_t len = fread(src, 1, sizeof(src) - 1, f);
    src[len] = 0;
    const char *text = src;
    cl_program p = clCreateProgramWithSource(ctx, 1, &text, &len, &err);
    clBuildProgram(p, 0, NULL, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(p, "slab_sum", &err);
    cl_mem in = clCreateBuffer(ctx, CL_MEM_READ_ONLY, rows * sizeof(float), NULL, &err);
    cl_mem out = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, nslabs * sizeof(float), NULL, &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &in);
    clSetKernelArg(k, 1, sizeof(cl_mem), &out);
    clSetKernelArg(k, 2, sizeof(unsigned int), &height);
    clSetKernelArg(k, 3, height * sizeof(float), NULL);
    size_t global = nslabs * height, local = height;
    clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, NULL);
    clFinish(q);
    return 0;
}
