/* A brute-force search in the style of SHOC's MD5Hash: the host draws a key at random and
 * hashes it itself; the kernel compares every candidate's hash with that digest, passed as
 * integer scalars.  The digest is data: it indexes nothing and bounds no loop. */
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 1024

static unsigned int mix(unsigned int x) {
    x ^= x >> 16;
    x *= 0x45d9f3bu;
    return x ^ (x >> 16);
}

int main(void) {
    cl_int err;
    cl_device_id dev;
    clGetDeviceIDs(NULL, CL_DEVICE_TYPE_DEFAULT, 1, &dev, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    FILE *f = fopen("k.cl", "r");
    char text[4096];
    size_t len = fread(text, 1, sizeof(text) - 1, f);
    text[len] = 0;
    const char *src = text;
    cl_program p = clCreateProgramWithSource(ctx, 1, &src, &len, &err);
    clBuildProgram(p, 1, &dev, NULL, NULL, NULL);
    cl_kernel hash = clCreateKernel(p, "hash", &err);
    cl_kernel find = clCreateKernel(p, "find", &err);
    srand(time(NULL));
    unsigned int digest = mix((unsigned int)(rand() % N));
    int n = N;
    cl_mem keys = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(unsigned int), NULL, &err);
    cl_mem hashes = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(unsigned int), NULL, &err);
    cl_mem found = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(int), NULL, &err);
    size_t global = N;
    clSetKernelArg(hash, 0, sizeof(cl_mem), &keys);
    clSetKernelArg(hash, 1, sizeof(cl_mem), &hashes);
    clEnqueueNDRangeKernel(q, hash, 1, NULL, &global, NULL, 0, NULL, NULL);
    clSetKernelArg(find, 0, sizeof(unsigned int), &digest);
    clSetKernelArg(find, 1, sizeof(int), &n);
    clSetKernelArg(find, 2, sizeof(cl_mem), &hashes);
    clSetKernelArg(find, 3, sizeof(cl_mem), &found);
    clEnqueueNDRangeKernel(q, find, 1, NULL, &global, NULL, 0, NULL, NULL);
    clFinish(q);
    return 0;
}
