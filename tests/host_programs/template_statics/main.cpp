#include <CL/cl.h>
#include <cstdio>
#include <vector>
#include "matrix.h"

template <class T>
struct Mismatch {
    size_t at;
    T got;
};

// SHOC's validater: the mismatches in a vector of a class template's objects, counted by
// `errors.size()` in a template (a library method, on a type that depends on T)
template <class T>
std::vector<Mismatch<T> > Compare(const T *want, const T *got, size_t n) {
    std::vector<Mismatch<T> > out;
    for (size_t i = 0; i < n; i++) {
        if (want[i] != got[i]) {
            Mismatch<T> m;
            m.at = i;
            m.got = got[i];
            out.push_back(m);
        }
    }
    return out;
}

template <class T>
void Run(cl_context ctx, cl_command_queue q, cl_kernel k, size_t n) {
    Matrix<T> a(n);
    Matrix<T> b(n);
    cl_int err;
    cl_mem in = clCreateBuffer(ctx, CL_MEM_READ_WRITE, a.Bytes(), NULL, &err);
    cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, b.Bytes(), NULL, &err);
    clEnqueueWriteBuffer(q, in, CL_TRUE, 0, a.Bytes(), a.Data(), 0, NULL, NULL);
    // two matrices of this element type: 2 * 16 * scale work-items
    size_t global = b.Count() * 16 * Config::scale;
    clSetKernelArg(k, 0, sizeof(cl_mem), &in);
    clSetKernelArg(k, 1, sizeof(cl_mem), &out);
    clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL);
    clEnqueueReadBuffer(q, out, CL_TRUE, 0, b.Bytes(), b.Data(), 0, NULL, NULL);
    std::vector<Mismatch<T> > errors = Compare(a.Data(), b.Data(), n);
    printf("%d mismatches\n", (int)errors.size());
}

int main(void) {
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
    cl_kernel k = clCreateKernel(p, "twice", &err);
    Run<float>(ctx, q, k, 256);
    Config::scale = 2;
    Run<double>(ctx, q, k, 256);
    clFinish(q);
    return 0;
}
