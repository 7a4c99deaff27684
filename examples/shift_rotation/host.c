/* shift_rotation host: produce -> rotate_by_one -> shift -> reverse_in_group over N floats. */
#include <stdio.h>
#include <stdlib.h>
#include <CL/cl.h>

#define N 1024
#define WG 64

#define CHECK(err, what)                                                  \
    if ((err) != CL_SUCCESS) {                                            \
        fprintf(stderr, "%s failed with error %d\n", (what), (int)(err)); \
        exit(1);                                                          \
    }

static char* load_file(const char* path, size_t* length)
{
    FILE* f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    *length = (size_t)ftell(f);
    rewind(f);
    char* text = (char*)malloc(*length + 1);
    size_t got = fread(text, 1, *length, f);
    text[got] = '\0';
    fclose(f);
    return text;
}

int main(void)
{
    cl_int err;
    int n = N;
    float h_x[N];
    float h_d[N];
    for (int i = 0; i < N; i++)
        h_x[i] = (float)i;

    cl_platform_id platform;
    err = clGetPlatformIDs(1, &platform, NULL);
    CHECK(err, "clGetPlatformIDs");
    cl_device_id device;
    err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    CHECK(err, "clGetDeviceIDs");
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    CHECK(err, "clCreateContext");
    cl_command_queue queue = clCreateCommandQueue(ctx, device, 0, &err);
    CHECK(err, "clCreateCommandQueue");

    size_t len;
    char* src = load_file("kernels.cl", &len);
    cl_program program = clCreateProgramWithSource(ctx, 1, (const char**)&src, &len, &err);
    CHECK(err, "clCreateProgramWithSource");
    err = clBuildProgram(program, 1, &device, NULL, NULL, NULL);
    if (err != CL_SUCCESS) {
        char log[16384];
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, sizeof(log), log, NULL);
        fprintf(stderr, "clBuildProgram failed:\n%s\n", log);
        exit(1);
    }
    cl_kernel produce = clCreateKernel(program, "produce", &err);
    CHECK(err, "clCreateKernel produce");
    cl_kernel rotate_k = clCreateKernel(program, "rotate_by_one", &err);
    CHECK(err, "clCreateKernel rotate");
    cl_kernel shift = clCreateKernel(program, "shift", &err);
    CHECK(err, "clCreateKernel shift");
    cl_kernel reverse = clCreateKernel(program, "reverse_in_group", &err);
    CHECK(err, "clCreateKernel reverse_in_group");

    cl_mem x = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, N * sizeof(float),
                              h_x, &err);
    CHECK(err, "clCreateBuffer x");
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
    CHECK(err, "clCreateBuffer a");
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
    CHECK(err, "clCreateBuffer b");
    cl_mem c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
    CHECK(err, "clCreateBuffer c");
    cl_mem d = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, N * sizeof(float), NULL, &err);
    CHECK(err, "clCreateBuffer d");

    size_t global[1] = {N};
    size_t local[1] = {WG};

    err = clSetKernelArg(produce, 0, sizeof(cl_mem), &x);
    err |= clSetKernelArg(produce, 1, sizeof(cl_mem), &a);
    err |= clSetKernelArg(produce, 2, sizeof(int), &n);
    CHECK(err, "clSetKernelArg produce");
    err = clEnqueueNDRangeKernel(queue, produce, 1, NULL, global, local, 0, NULL, NULL);
    CHECK(err, "clEnqueueNDRangeKernel produce");

    err = clSetKernelArg(rotate_k, 0, sizeof(cl_mem), &a);
    err |= clSetKernelArg(rotate_k, 1, sizeof(cl_mem), &b);
    err |= clSetKernelArg(rotate_k, 2, sizeof(int), &n);
    CHECK(err, "clSetKernelArg rotate");
    err = clEnqueueNDRangeKernel(queue, rotate_k, 1, NULL, global, local, 0, NULL, NULL);
    CHECK(err, "clEnqueueNDRangeKernel rotate");

    err = clSetKernelArg(shift, 0, sizeof(cl_mem), &b);
    err |= clSetKernelArg(shift, 1, sizeof(cl_mem), &c);
    err |= clSetKernelArg(shift, 2, sizeof(int), &n);
    CHECK(err, "clSetKernelArg shift");
    err = clEnqueueNDRangeKernel(queue, shift, 1, NULL, global, local, 0, NULL, NULL);
    CHECK(err, "clEnqueueNDRangeKernel shift");

    err = clSetKernelArg(reverse, 0, sizeof(cl_mem), &c);
    err |= clSetKernelArg(reverse, 1, sizeof(cl_mem), &d);
    CHECK(err, "clSetKernelArg reverse_in_group");
    err = clEnqueueNDRangeKernel(queue, reverse, 1, NULL, global, local, 0, NULL, NULL);
    CHECK(err, "clEnqueueNDRangeKernel reverse_in_group");

    err = clFinish(queue);
    CHECK(err, "clFinish");
    err = clEnqueueReadBuffer(queue, d, CL_TRUE, 0, N * sizeof(float), h_d, 0, NULL, NULL);
    CHECK(err, "clEnqueueReadBuffer d");

    int errors = 0;
    for (int i = 0; i < N; i++) {
        int j = (i / WG) * WG + (WG - 1 - i % WG); /* reverse_in_group */
        float expect = j + 1 < N ? 2.0f * (float)((j + 2) % N) + 1.0f : 0.0f;
        if (h_d[i] != expect)
            errors++;
    }
    printf("shift_rotation: errors=%d\n", errors);

    clReleaseMemObject(x);
    clReleaseMemObject(a);
    clReleaseMemObject(b);
    clReleaseMemObject(c);
    clReleaseMemObject(d);
    clReleaseKernel(produce);
    clReleaseKernel(rotate_k);
    clReleaseKernel(shift);
    clReleaseKernel(reverse);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(ctx);
    free(src);
    return errors != 0;
}
