// A C++ host whose work is a function template run<T> (PRK style): std::vector<T> of a
// length, buffers made from its iterators with cl::Buffer(context, begin, end, readOnly) in
// the generic body, the kernel chosen by sizeof(T); called for float.
#define __CL_ENABLE_EXCEPTIONS
#include "cl.hpp"
#include "util.hpp"

#include <cstdio>
#include <vector>

template <typename T>
void run(cl::Context context, int n) {
    auto name = (sizeof(T) == 8) ? "vadd_double" : "vadd";
    cl::Program program(context, util::loadProgram("vadd_chain.cl"), true);
    cl::CommandQueue queue(context);
    auto vadd = cl::make_kernel<cl::Buffer, cl::Buffer, cl::Buffer, int>(program, name);
    std::vector<T> h_a(n);
    std::vector<T> h_b(n, T(1));
    std::vector<T> h_c(n, T(0));
    cl::Buffer d_a = cl::Buffer(context, begin(h_a), end(h_a), true);
    cl::Buffer d_b = cl::Buffer(context, begin(h_b), end(h_b), true);
    cl::Buffer d_c = cl::Buffer(context, begin(h_c), end(h_c), false);
    vadd(cl::EnqueueArgs(queue, cl::NDRange(n)), d_a, d_b, d_c, n);
    queue.finish();
    cl::copy(queue, d_c, begin(h_c), end(h_c));
    printf("%f\n", (double)h_c[0]);
}

int main(void) {
    cl::Context context(CL_DEVICE_TYPE_DEFAULT);
    run<float>(context, 32);
    return 0;
}
