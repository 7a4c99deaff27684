/* An OpenDwarfs-style host: the page count is read from the input file with fscanf, the
 * pages are split into blocks of a fixed size (one more block for a remainder), and each
 * block gets its own buffers, created in a loop over the block count, then one launch. */
#include <stdio.h>
#include <stdlib.h>
#include <CL/cl.h>

#define PER_BLOCK 16

static unsigned int *read_pages(unsigned int *num_pages, const char *path)
{
    FILE *fp = fopen(path, "r");
    if (fp == NULL) exit(1);
    fscanf(fp, "%u\n", num_pages);
    unsigned int *pages = (unsigned int *)malloc(sizeof(unsigned int) * *num_pages);
    for (unsigned int i = 0; i < *num_pages; i++)
        fscanf(fp, "%u ", &pages[i]);
    fclose(fp);
    return pages;
}

int main(int argc, char **argv)
{
    unsigned int num_pages, num_blocks, i;
    cl_int err;
    unsigned int *pages = read_pages(&num_pages, argv[1]);
    num_blocks = num_pages / PER_BLOCK;
    if (num_pages % PER_BLOCK != 0)
        num_blocks++;
    cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
    FILE *f = fopen("kernels.cl", "r");
    char *src = (char *)malloc(4096);
    size_t n = fread(src, 1, 4095, f);
    src[n] = 0;
    cl_program prog = clCreateProgramWithSource(ctx, 1, (const char **)&src, NULL, &err);
    clBuildProgram(prog, 0, NULL, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(prog, "twice", &err);
    cl_mem in[64], out[64];
    for (i = 0; i < num_blocks; i++) {
        in[i] = clCreateBuffer(ctx, CL_MEM_READ_ONLY, PER_BLOCK * sizeof(int), NULL, &err);
        out[i] = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, PER_BLOCK * sizeof(int), NULL, &err);
    }
    for (i = 0; i < num_blocks; i++) {
        size_t global = PER_BLOCK;
        clEnqueueWriteBuffer(q, in[i], CL_TRUE, 0, PER_BLOCK * sizeof(int),
                             &pages[i * PER_BLOCK], 0, NULL, NULL);
        clSetKernelArg(k, 0, sizeof(cl_mem), &in[i]);
        clSetKernelArg(k, 1, sizeof(cl_mem), &out[i]);
        clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL);
    }
    clFinish(q);
    return 0;
}
