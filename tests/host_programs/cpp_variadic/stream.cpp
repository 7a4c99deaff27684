// cpp_variadic/stream.cpp: a BabelStream-style C++ host.  A factory function template with a
// parameter pack forwards the sizes to std::make_unique of a class template, the benchmark
// holds it in a std::unique_ptr to its abstract base, and each virtual call launches a kernel
// through a cl::KernelFunctor (whose call is itself a variadic template over the arguments).
#define CL_HPP_ENABLE_EXCEPTIONS
#define CL_HPP_TARGET_OPENCL_VERSION 120
#define CL_HPP_MINIMUM_OPENCL_VERSION 120
#include <CL/cl2.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

std::string kernels{R"CLC(
  kernel void copy(global const TYPE *a, global TYPE *c) {
    const size_t i = get_global_id(0);
    c[i] = a[i];
  }
  kernel void mul(global TYPE *b, global const TYPE *c) {
    const size_t i = get_global_id(0);
    b[i] = SCALAR * c[i];
  }
  kernel void init(global TYPE *a, global TYPE *b, global TYPE *c, TYPE x, TYPE y, TYPE z) {
    const size_t i = get_global_id(0);
    a[i] = x;
    b[i] = y;
    c[i] = z;
  }
)CLC"};

template <class T>
class Stream {
  public:
    virtual ~Stream() {}
    virtual void copy() = 0;
    virtual void mul() = 0;
    virtual void init_arrays(T a, T b, T c) = 0;
    virtual void get_arrays(std::vector<T>& a, std::vector<T>& b) = 0;
};

template <class T>
class CLStream : public Stream<T> {
  protected:
    size_t array_size;
    cl::Context context;
    cl::CommandQueue queue;
    cl::Buffer d_a, d_b, d_c;
    cl::KernelFunctor<cl::Buffer, cl::Buffer, cl::Buffer, T, T, T>* init_kernel;
    cl::KernelFunctor<cl::Buffer, cl::Buffer>* copy_kernel;
    cl::KernelFunctor<cl::Buffer, cl::Buffer>* mul_kernel;

  public:
    CLStream(const size_t size, T scalar);
    ~CLStream();
    void copy() override;
    void mul() override;
    void init_arrays(T a, T b, T c) override;
    void get_arrays(std::vector<T>& a, std::vector<T>& b) override;
};

template <class T>
CLStream<T>::CLStream(const size_t size, T scalar) : array_size{size}
{
    context = cl::Context(CL_DEVICE_TYPE_DEFAULT);
    queue = cl::CommandQueue(context);
    cl::Program program(context, kernels);
    std::ostringstream args;
    args << "-DSCALAR=" << scalar << " -DTYPE=float";
    program.build(args.str().c_str());
    init_kernel = new cl::KernelFunctor<cl::Buffer, cl::Buffer, cl::Buffer, T, T, T>(
        program, "init");
    copy_kernel = new cl::KernelFunctor<cl::Buffer, cl::Buffer>(program, "copy");
    mul_kernel = new cl::KernelFunctor<cl::Buffer, cl::Buffer>(program, "mul");
    d_a = cl::Buffer(context, CL_MEM_READ_WRITE, sizeof(T) * array_size);
    d_b = cl::Buffer(context, CL_MEM_READ_WRITE, sizeof(T) * array_size);
    d_c = cl::Buffer(context, CL_MEM_READ_WRITE, sizeof(T) * array_size);
}

template <class T>
CLStream<T>::~CLStream()
{
    delete init_kernel;
    delete copy_kernel;
    delete mul_kernel;
}

template <class T>
void CLStream<T>::copy()
{
    (*copy_kernel)(cl::EnqueueArgs(queue, cl::NDRange(array_size)), d_a, d_c);
    queue.finish();
}

template <class T>
void CLStream<T>::mul()
{
    (*mul_kernel)(cl::EnqueueArgs(queue, cl::NDRange(array_size)), d_b, d_c);
    queue.finish();
}

template <class T>
void CLStream<T>::init_arrays(T a, T b, T c)
{
    (*init_kernel)(cl::EnqueueArgs(queue, cl::NDRange(array_size)), d_a, d_b, d_c, a, b, c);
    queue.finish();
}

template <class T>
void CLStream<T>::get_arrays(std::vector<T>& a, std::vector<T>& b)
{
    a.resize(array_size);
    b.resize(array_size);
    cl::copy(queue, d_a, a.begin(), a.end());
    cl::copy(queue, d_b, b.begin(), b.end());
}

template <typename T, typename... Args>
std::unique_ptr<Stream<T>> make_stream(Args... args)
{
    static_assert(sizeof...(Args) == 2, "a size and a scalar");
    return std::make_unique<CLStream<T>>(args...);
}

template <typename T>
void run(size_t n, int times)
{
    std::unique_ptr<Stream<T>> stream = make_stream<T>(n, T(0.4));
    stream->init_arrays(T(0.1), T(0.2), T(0.0));
    for (int k = 0; k < times; k++) {
        stream->copy();
        stream->mul();
    }
    std::vector<T> a, b;
    stream->get_arrays(a, b);
    printf("%f %f\n", (double)a[0], (double)b[n - 1]);
}

int main(int argc, char* argv[])
{
    // BabelStream's option parsing: a lambda stores what it parses through its parameter
    auto parseUInt = [](const char* str, size_t* output) {
        char* next;
        *output = strtoull(str, &next, 10);
        return !strlen(next);
    };
    size_t n = 1024;
    if (argc > 1 && !parseUInt(argv[1], &n)) {
        fprintf(stderr, "Invalid array size.\n");
        exit(EXIT_FAILURE);
    }
    run<float>(n, 3);
    return 0;
}
