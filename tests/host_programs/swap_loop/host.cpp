// SHOC Stencil2D-style: a stencil iterated --num-iters times between two buffers that swap
// roles every step through pointers to their handles (`cl_mem *cur = &buf1`), with the work
// sizes in std::vectors passed as `&dims.front()`, and the step's event waited on except in
// the last iteration, which the read waits on instead.
#include <CL/cl.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static void SetArgs(cl_kernel k, cl_mem in, cl_mem out, int pitch) {
    clSetKernelArg(k, 0, sizeof(cl_mem), &in);
    clSetKernelArg(k, 1, sizeof(cl_mem), &out);
    clSetKernelArg(k, 2, sizeof(int), &pitch);
}

static void Iterate(cl_context ctx, cl_command_queue q, cl_kernel k, float *data, int rows,
                    int cols, int nIters) {
    size_t bytes = rows * cols * sizeof(float);
    cl_mem buf1 = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, NULL);
    cl_mem buf2 = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, NULL);
    cl_mem *cur = &buf1;
    cl_mem *next = &buf2;
    clEnqueueWriteBuffer(q, *cur, CL_TRUE, 0, bytes, data, 0, NULL, NULL);
    clEnqueueCopyBuffer(q, *cur, *next, 0, 0, bytes, 0, NULL, NULL);
    std::vector<cl_event> waitEvents;
    for (int iter = 0; iter < nIters; iter++) {
        SetArgs(k, *cur, *next, cols);
        std::vector<size_t> global(2, 0);
        global[0] = rows - 2;
        global[1] = cols - 2;
        std::vector<size_t> local(2, 0);
        local[0] = 1;
        local[1] = cols - 2;
        cl_event done;
        clEnqueueNDRangeKernel(q, k, global.size(), NULL, &global.front(), &local.front(), 0,
                               NULL, &done);
        if (iter == nIters - 1) {
            waitEvents.push_back(done);
        } else {
            clWaitForEvents(1, &done);
        }
        if (cur == &buf1) {
            cur = &buf2;
            next = &buf1;
        } else {
            cur = &buf1;
            next = &buf2;
        }
    }
    clEnqueueReadBuffer(q, *cur, CL_TRUE, 0, bytes, data, waitEvents.size(),
                        waitEvents.empty() ? NULL : &waitEvents.front(), NULL);
    clReleaseMemObject(buf1);
    clReleaseMemObject(buf2);
}

int main(int argc, char **argv) {
    int nIters = 1000;
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--num-iters") == 0) nIters = atoi(argv[i + 1]);
    }
    cl_int err;
    cl_device_id dev;
    clGetDeviceIDs(NULL, CL_DEVICE_TYPE_DEFAULT, 1, &dev, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    FILE *f = fopen("k.cl", "r");
    char src[4096];
    size_t len = fread(src, 1, sizeof(src) - 1, f);
    src[len] = 0;
    const char *text = src;
    cl_program p = clCreateProgramWithSource(ctx, 1, &text, &len, &err);
    clBuildProgram(p, 1, &dev, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(p, "smooth", &err);
    const int rows = 10, cols = 18;
    float *data = (float *)malloc(rows * cols * sizeof(float));
    for (int i = 0; i < rows * cols; i++) data[i] = (float)(i % 7);
    Iterate(ctx, q, k, data, rows, cols, nIters);
    printf("%f\n", data[cols + 1]);
    clFinish(q);
    return 0;
}
