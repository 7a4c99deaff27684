// A host in the style of suites written for g++ of the C++98 era: dynamic exception
// specifications, a narrowing brace initializer, a global named like std::data, an implicit
// int main, and a class template whose methods construct T(...) and call Base<T>::method().
#include <CL/cl.h>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <vector>
#include <iterator>
using namespace std;

float data[64];

template <typename T> class Base {
public:
    T scale(T v) const { return T(v * 1); }
};

template <typename T> class Sample : public Base<T> {
public:
    int n;
    T checksum;
    void setup(int size) throw(std::runtime_error) { n = size; checksum = Base<T>::scale(n); }
    int items() const throw() { return n; }
};

main(int argc, char **argv) {
    Sample<int> s;
    s.setup(64);
    int n = s.items();
    size_t global[1] = {n};
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
    FILE *f = fopen("k.cl", "r");
    char *src = (char *)malloc(4096);
    size_t len = fread(src, 1, 4095, f);
    src[len] = 0;
    cl_program p = clCreateProgramWithSource(ctx, 1, (const char **)&src, &len, &err);
    clBuildProgram(p, 0, NULL, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(p, "twice", &err);
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    clEnqueueWriteBuffer(q, a, CL_TRUE, 0, n * sizeof(float), data, 0, NULL, NULL);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clSetKernelArg(k, 1, sizeof(cl_mem), &b);
    clEnqueueNDRangeKernel(q, k, 1, NULL, global, NULL, 0, NULL, NULL);
    clSetKernelArg(k, 0, sizeof(cl_mem), &b);
    clSetKernelArg(k, 1, sizeof(cl_mem), &a);
    clEnqueueNDRangeKernel(q, k, 1, NULL, global, NULL, 0, NULL, NULL);
    clEnqueueReadBuffer(q, a, CL_TRUE, 0, n * sizeof(float), data, 0, NULL, NULL);
    printf("%f\n", data[0]);
    return 0;
}
