// HandsOnOpenCL-style C++ host (Exercise 7/8 style): cl::Kernel + setArg + enqueueNDRangeKernel
// with a local size, a KernelFunctor with a cl::Local argument, build options, enqueueReadBuffer.
#define CL_HPP_ENABLE_EXCEPTIONS
#include <CL/opencl.hpp>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "util.hpp"

#define ORDER 8
#define BLOCK 4

static void initmat(int n, std::vector<float> &a, std::vector<float> &b) {
    for (int i = 0; i < n * n; i++) {
        a[i] = 1.0f;
        b[i] = 2.0f;
    }
}

int main(int argc, char *argv[]) {
    int N = ORDER;
    int size = N * N;
    std::vector<float> h_A(size), h_B(size), h_C(size), h_S(N);
    initmat(N, h_A, h_B);

    std::vector<cl::Platform> platforms;
    cl::Platform::get(&platforms);
    std::vector<cl::Device> devices;
    platforms[0].getDevices(CL_DEVICE_TYPE_ALL, &devices);
    cl::Device device = devices[0];
    std::cout << "Using " << device.getInfo<CL_DEVICE_NAME>() << std::endl;
    cl::Context context(device);
    cl::CommandQueue queue(context, device);

    cl::Buffer d_a(context, h_A.begin(), h_A.end(), true);
    cl::Buffer d_b(context, h_B.begin(), h_B.end(), true);
    cl::Buffer d_c(context, CL_MEM_READ_WRITE, sizeof(float) * size);
    cl::Buffer d_s(context, CL_MEM_WRITE_ONLY, sizeof(float) * N);

    std::string source = util::loadProgram("matmul.cl");
    cl::Program program(context, source);
    try {
        program.build(std::vector<cl::Device>(1, device), "-DBS=4 -cl-mad-enable");
    } catch (cl::Error &err) {
        std::cerr << program.getBuildInfo<CL_PROGRAM_BUILD_LOG>(device) << std::endl;
        return 1;
    }

    cl::Kernel kernel(program, "mmul");
    kernel.setArg(0, N);
    kernel.setArg(1, d_a);
    kernel.setArg(2, d_b);
    kernel.setArg(3, d_c);
    queue.enqueueNDRangeKernel(kernel, cl::NullRange, cl::NDRange(N, N),
                               cl::NDRange(BLOCK, BLOCK));

    cl::KernelFunctor<cl::Buffer, cl::Buffer, cl::LocalSpaceArg, int> rowsum(program, "rowsum");
    cl::LocalSpaceArg part = cl::Local(sizeof(float) * BLOCK);
    rowsum(cl::EnqueueArgs(queue, cl::NDRange(N * BLOCK), cl::NDRange(BLOCK)), d_c, d_s,
           part, N);
    queue.finish();

    queue.enqueueReadBuffer(d_c, CL_TRUE, 0, sizeof(float) * size, h_C.data());
    queue.enqueueReadBuffer(d_s, CL_TRUE, 0, sizeof(float) * N, h_S.data());
    printf("C[0] = %f, S[0] = %f\n", h_C[0], h_S[0]);
    return 0;
}
