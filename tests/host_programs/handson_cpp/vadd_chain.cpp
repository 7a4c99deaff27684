// HandsOnOpenCL-style C++ host: a chain of three vadd launches through cl::make_kernel.
#define __CL_ENABLE_EXCEPTIONS
#include "cl.hpp"
#include "util.hpp"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <vector>

#ifndef DEVICE
#define DEVICE CL_DEVICE_TYPE_DEFAULT
#endif

#define TOL (0.001)
#define LENGTH (64)

int main(void) {
    std::vector<float> h_a(LENGTH);
    std::vector<float> h_b(LENGTH);
    std::vector<float> h_c(LENGTH, 0xdeadbeef);
    std::vector<float> h_e(LENGTH);
    std::vector<float> h_f(LENGTH, 0xdeadbeef);

    cl::Buffer d_a, d_b, d_c, d_e, d_f;

    int count = LENGTH;
    for (int i = 0; i < count; i++) {
        h_a[i] = rand() / (float)RAND_MAX;
        h_b[i] = rand() / (float)RAND_MAX;
        h_e[i] = rand() / (float)RAND_MAX;
    }
    try {
        cl::Context context(DEVICE);
        cl::Program program(context, util::loadProgram("vadd_chain.cl"), true);
        cl::CommandQueue queue(context);
        auto vadd = cl::make_kernel<cl::Buffer, cl::Buffer, cl::Buffer, int>(program, "vadd");

        d_a = cl::Buffer(context, begin(h_a), end(h_a), true);
        d_b = cl::Buffer(context, h_b.begin(), h_b.end(), true);
        d_e = cl::Buffer(context, begin(h_e), end(h_e), true);
        d_c = cl::Buffer(context, CL_MEM_READ_WRITE, sizeof(float) * LENGTH);
        d_f = cl::Buffer(context, CL_MEM_WRITE_ONLY, sizeof(float) * LENGTH);

        vadd(cl::EnqueueArgs(queue, cl::NDRange(count)), d_a, d_b, d_c, count);
        vadd(cl::EnqueueArgs(queue, cl::NDRange(count)), d_e, d_c, d_f, count);
        queue.finish();

        cl::copy(queue, d_f, begin(h_f), end(h_f));
        int correct = 0;
        for (int i = 0; i < count; i++) {
            float tmp = h_a[i] + h_b[i] + h_e[i] - h_f[i];
            if (tmp * tmp < TOL * TOL) correct++;
        }
        printf("%d out of %d results were correct.\n", correct, count);
    } catch (cl::Error err) {
        std::cerr << "ERROR: " << err.what() << "(" << err.err() << ")" << std::endl;
    }
}
