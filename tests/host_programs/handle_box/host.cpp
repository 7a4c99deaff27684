/* Device buffers behind void pointers, as a library-style FFT harness keeps them: a helper
 * allocates a cl_mem box with new and stores the buffer into it through a void **, others
 * copy through *(cl_mem *)p and pass the box itself to clSetKernelArg. */
#include <CL/cl.h>
#include <stdio.h>
static cl_context ctx;
void alloc(void **bufferp, unsigned long bytes) {
    cl_int err;
    *(cl_mem **)bufferp = new cl_mem;
    **(cl_mem **)bufferp = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
}
void upload(void *to_device, const float *from, unsigned long bytes, cl_command_queue q) {
    clEnqueueWriteBuffer(q, *(cl_mem *)to_device, CL_TRUE, 0, bytes, from, 0, NULL, NULL);
}
void run(void *workp, cl_kernel k, cl_command_queue q, size_t n) {
    clSetKernelArg(k, 0, sizeof(cl_mem), workp);
    clEnqueueNDRangeKernel(q, k, 1, NULL, &n, NULL, 0, NULL, NULL);
}
int main(void) {
    cl_int err;
    cl_device_id dev;
    clGetDeviceIDs(NULL, CL_DEVICE_TYPE_DEFAULT, 1, &dev, NULL);
    ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    FILE *f = fopen("k.cl", "r");
    char src[2048];
    size_t len = fread(src, 1, sizeof(src) - 1, f);
    src[len] = 0;
    const char *text = src;
    cl_program p = clCreateProgramWithSource(ctx, 1, &text, &len, &err);
    clBuildProgram(p, 1, &dev, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(p, "scale", &err);
    void *work;
    alloc(&work, 1024 * sizeof(float));
    float host[1024] = {0};
    upload(work, host, sizeof(host), q);
    run(work, k, q, 1024);
    clFinish(q);
    return 0;
}
