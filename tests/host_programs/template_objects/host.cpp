// SHOC Stencil2D-style: a function template over the element type makes the matrix
// (`Matrix2D<T> data(rows, cols)`, a class template whose constructor has a default
// argument; its size from a static method of a class template, `StencilFactory<T>::
// GetStandardProblemSize`) and hands it by reference to a stencil object through its base
// class's `operator()`; the launch size comes from the matrix's methods.
#include <CL/cl.h>
#include <cstdio>

template <class T>
class Matrix2D {
    size_t nRows, nColumns, pad;
    T *flatData;

  public:
    Matrix2D(size_t _nRows, size_t _nColumns, size_t _pad = 16)
        : nRows(_nRows), nColumns(_nColumns), pad(_pad) {
        flatData = new T[nRows * (nColumns + pad)];
    }
    size_t GetNumRows() const { return nRows; }
    size_t GetNumPaddedColumns() const { return nColumns + pad; }
    size_t GetDataSize() const { return nRows * GetNumPaddedColumns() * sizeof(T); }
    T *GetFlatData() { return flatData; }
};

template <class T>
class Stencil {
  public:
    virtual ~Stencil() {}
    virtual void operator()(Matrix2D<T> &mtx, unsigned int nIters) = 0;
};

template <class T>
class OpenCLStencil : public Stencil<T> {
    cl_context ctx;
    cl_command_queue queue;
    cl_kernel kernel;

  public:
    OpenCLStencil(cl_context c, cl_command_queue q, cl_kernel k) : ctx(c), queue(q), kernel(k) {}
    virtual void operator()(Matrix2D<T> &mtx, unsigned int nIters) {
        cl_int err;
        cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, mtx.GetDataSize(), NULL, &err);
        cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, mtx.GetDataSize(), NULL, &err);
        clEnqueueWriteBuffer(queue, a, CL_TRUE, 0, mtx.GetDataSize(), mtx.GetFlatData(), 0,
                             NULL, NULL);
        size_t global = mtx.GetNumRows() * mtx.GetNumPaddedColumns();
        clSetKernelArg(kernel, 0, sizeof(cl_mem), &a);
        clSetKernelArg(kernel, 1, sizeof(cl_mem), &b);
        clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &global, NULL, 0, NULL, NULL);
        clEnqueueReadBuffer(queue, b, CL_TRUE, 0, mtx.GetDataSize(), mtx.GetFlatData(), 0,
                            NULL, NULL);
    }
};

template <class T>
class StencilFactory {
  public:
    static size_t GetStandardProblemSize(int sizeClass) {
        const int probSizes[4] = {14, 30, 62, 126};
        return probSizes[sizeClass - 1];
    }
};

template <class T>
void DoTest(cl_context ctx, cl_command_queue queue, cl_kernel kernel, int n) {
    size_t rows = StencilFactory<T>::GetStandardProblemSize(n);
    Matrix2D<T> data(rows + 2, rows + 2);
    Stencil<T> *testStencil = new OpenCLStencil<T>(ctx, queue, kernel);
    (*testStencil)(data, 1);
    delete testStencil;
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
    DoTest<float>(ctx, q, k, 1);
    clFinish(q);
    return 0;
}
