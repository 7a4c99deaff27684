// SHOC Stencil2D-style: the program defines its own function template
// `operator<<(std::ostream&, const Matrix<T>&)` (printing a matrix with `s << '\t'`), and
// builds the kernel's options with the library's `<<` of text, numbers and characters into a
// std::ostringstream.  The library's `<<` must stay the library's, not the program's template.
#include <CL/cl.h>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

template <class T>
struct Matrix {
    T data[4][4];
    unsigned rows() const { return 4; }
    unsigned cols() const { return 4; }
};

template <class T>
std::ostream &operator<<(std::ostream &s, const Matrix<T> &m) {
    for (unsigned i = 0; i < m.rows(); i++) {
        for (unsigned j = 0; j < m.cols(); j++) {
            if (j != 0)
                s << '\t';
            s << m.data[i][j];
        }
        s << '\n';
    }
    return s;
}

int main(void) {
    size_t lRows = 8, lCols = 4;
    std::string precision = "SINGLE_PRECISION";
    std::ostringstream desc;
    desc << 1000 << ':' << lRows << 'x' << lCols;
    std::ostringstream opts;
    opts << "-DLROWS=" << lRows << " -DLCOLS=" << lCols << " -D" << precision;

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
    clBuildProgram(p, 1, &dev, opts.str().c_str(), NULL, NULL);
    cl_kernel k = clCreateKernel(p, "tile", &err);
    size_t n = 64 * lRows * lCols;
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clSetKernelArg(k, 1, sizeof(cl_mem), &b);
    clEnqueueNDRangeKernel(q, k, 1, NULL, &n, NULL, 0, NULL, NULL);
    clFinish(q);
    Matrix<float> m = {};
    std::cout << desc.str() << "\n" << m;
    return 0;
}
