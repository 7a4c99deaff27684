/* A benchmark's launches inside an operation object: a class template whose operator() is
 * virtual, called through the base class from a function template (resolved only per
 * instantiation) or from a plain function (a pure virtual call: the override is chosen at
 * run time). */
#include <CL/cl.h>
#include <stdio.h>

template <class T> class Op {
public:
    virtual ~Op() {}
    virtual void operator()(cl_command_queue q, size_t n) = 0;
};

template <class T> class CLOp : public Op<T> {
    cl_kernel k;
public:
    CLOp(cl_kernel kernel) : k(kernel) {}
    virtual void operator()(cl_command_queue q, size_t n) {
        clEnqueueNDRangeKernel(q, k, 1, NULL, &n, NULL, 0, NULL, NULL);
    }
};

template <class T> void doTest(cl_kernel k, cl_command_queue q) {
    Op<T> *op = new CLOp<T>(k);
    (*op)(q, 1024);
    delete op;
}

static void doPlain(Op<float> *op, cl_command_queue q) { (*op)(q, 1024); }

int main(int argc, char **argv) {
    cl_int err;
    cl_device_id dev;
    clGetDeviceIDs(NULL, CL_DEVICE_TYPE_DEFAULT, 1, &dev, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    FILE *f = fopen("k.cl", "r");
    char src[2048];
    size_t len = fread(src, 1, sizeof(src) - 1, f);
    src[len] = 0;
    const char *text = src;
    cl_program p = clCreateProgramWithSource(ctx, 1, &text, &len, &err);
    clBuildProgram(p, 1, &dev, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(p, "scale", &err);
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1024 * sizeof(float), NULL, &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    if (argc > 1)
        doPlain(new CLOp<float>(k), q);
    else
        doTest<float>(k, q);
    clFinish(q);
    return 0;
}
