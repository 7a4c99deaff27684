// A benchmark written once for float and double: the local memory a launch takes is
// n * sizeof(T), sized by the type the call instantiates the template with.
#include <CL/cl.h>

template <class T>
void run(cl_context ctx, cl_command_queue q, cl_kernel k, int n) {
    cl_int err;
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1024 * sizeof(float), NULL, &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clSetKernelArg(k, 1, n * sizeof(T), NULL);
    size_t global = 1024, local = n;
    clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, NULL);
}

int main() {
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
    const char *src = "__kernel void sum(__global float *a, __local float *t) {"
                      " t[get_local_id(0)] = a[get_global_id(0)]; }";
    cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(p, 0, NULL, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(p, "sum", &err);
    run<float>(ctx, q, k, 64);
    return 0;
}
