/* The precision a templated benchmark runs at, told by an explicit specialization per element
 * type (dp<float>() false, dp<double>() true) inside the template run<T>. */
#include <CL/cl.h>
#include <stdio.h>

template <class T> inline bool dp(void);
template <> inline bool dp<float>(void) { return false; }
template <> inline bool dp<double>(void) { return true; }

template <class T> void run(cl_context ctx, cl_command_queue q, cl_device_id dev, size_t n) {
    FILE *f = fopen("k.cl", "r");
    char src[2048];
    size_t len = fread(src, 1, sizeof(src) - 1, f);
    src[len] = 0;
    const char *text = src;
    cl_int err;
    cl_program p = clCreateProgramWithSource(ctx, 1, &text, &len, &err);
    clBuildProgram(p, 1, &dev, dp<T>() ? "-DDOUBLE" : "", NULL, NULL);
    cl_kernel k = clCreateKernel(p, "scale", &err);
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(T), NULL, &err);
    T s = 2;
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clSetKernelArg(k, 1, sizeof(T), &s);
    clEnqueueNDRangeKernel(q, k, 1, NULL, &n, NULL, 0, NULL, NULL);
    clFinish(q);
}

int main(void) {
    cl_int err;
    cl_device_id dev;
    clGetDeviceIDs(NULL, CL_DEVICE_TYPE_DEFAULT, 1, &dev, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    run<float>(ctx, q, dev, 1024);
    run<double>(ctx, q, dev, 1024);
    return 0;
}
