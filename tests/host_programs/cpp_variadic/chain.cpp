// cpp_variadic/chain.cpp: a HandsOnOpenCL-style C++ host whose launch helpers are variadic
// templates: a cl::make_kernel functor called through a helper that forwards its parameter
// pack, arguments set by a recursion over a pack (setArg, then the rest), and by a fold over
// the comma operator; the global size of one launch comes from sizeof...(Args).
#define __CL_ENABLE_EXCEPTIONS
#include "cl.hpp"
#include "util.hpp"

#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#define LENGTH (64)

template <typename F, typename... Args>
void enqueue(cl::CommandQueue& queue, F& kernel, int count, Args&&... args)
{
    kernel(cl::EnqueueArgs(queue, cl::NDRange(count)), std::forward<Args>(args)...);
}

template <typename T>
void set_args(cl::Kernel& k, cl_uint index, T value)
{
    k.setArg(index, value);
}

template <typename T, typename... Rest>
void set_args(cl::Kernel& k, cl_uint index, T value, Rest... rest)
{
    k.setArg(index, value);
    set_args(k, index + 1, rest...);
}

template <typename... Args>
void run(cl::CommandQueue& queue, cl::Kernel& k, int count, Args... args)
{
    set_args(k, 0, args...);
    // four arguments per work-item batch: the range is count items
    queue.enqueueNDRangeKernel(k, cl::NullRange, cl::NDRange(count * sizeof...(Args) / 4));
}

template <typename... Args>
void run_folded(cl::CommandQueue& queue, cl::Kernel& k, int count, Args... args)
{
    cl_uint index = 0;
    (k.setArg(index++, args), ...);
    queue.enqueueNDRangeKernel(k, cl::NullRange, cl::NDRange(count));
}

int main(void)
{
    std::vector<float> h_a(LENGTH), h_b(LENGTH), h_e(LENGTH, 0.0f);
    for (int i = 0; i < LENGTH; i++) {
        h_a[i] = rand() / (float)RAND_MAX;
        h_b[i] = rand() / (float)RAND_MAX;
    }
    int count = LENGTH;
    cl::Context context(CL_DEVICE_TYPE_DEFAULT);
    cl::Program program(context, util::loadProgram("chain.cl"), true);
    cl::CommandQueue queue(context);
    auto vadd = cl::make_kernel<cl::Buffer, cl::Buffer, cl::Buffer, int>(program, "vadd");
    cl::Kernel scale(program, "scale");
    cl::Kernel shift(program, "shift");

    cl::Buffer d_a(context, begin(h_a), end(h_a), true);
    cl::Buffer d_b(context, begin(h_b), end(h_b), true);
    cl::Buffer d_c(context, CL_MEM_READ_WRITE, sizeof(float) * LENGTH);
    cl::Buffer d_d(context, CL_MEM_READ_WRITE, sizeof(float) * LENGTH);
    cl::Buffer d_e(context, CL_MEM_WRITE_ONLY, sizeof(float) * LENGTH);

    enqueue(queue, vadd, count, d_a, d_b, d_c, count);
    run(queue, scale, count, d_c, d_d, 2.5f, count);
    run_folded(queue, shift, count, d_d, d_e, 0.5f);
    queue.finish();

    cl::copy(queue, d_e, begin(h_e), end(h_e));
    int correct = 0;
    for (int i = 0; i < count; i++) {
        float want = 2.5f * (h_a[i] + h_b[i]) + 0.5f;
        if ((want - h_e[i]) * (want - h_e[i]) < 1e-6f) correct++;
    }
    printf("%d out of %d results were correct.\n", correct, count);
    return 0;
}
