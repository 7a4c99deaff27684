// A C++ host in the style of the Parallel Research Kernels' OpenCL ports: it runs a function
// template once per CPU or GPU device of every platform (range-for over the wrapper's
// vectors, getInfo<CL_DEVICE_TYPE>()), in double precision only where the device's extension
// string names cl_khr_fp64; the template sizes its std::vector<T> by T and makes buffers from
// its iterators (a constructor clang resolves only per instantiation).
#define __CL_ENABLE_EXCEPTIONS
#include "cl.hpp"
#include "util.hpp"

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

template <typename T>
void run(cl::Context context, int n) {
    auto kfile = std::string(sizeof(T) == 8 ? "scale64.cl" : "scale32.cl");
    cl::Program program(context, util::loadProgram(kfile), true);
    auto scale = cl::make_kernel<int, cl::Buffer, cl::Buffer>(program, "scale");
    cl::CommandQueue queue(context);
    std::vector<T> h_a(n);
    std::vector<T> h_b(n, T(0));
    std::vector<T> h_c(n, T(0));
    cl::Buffer d_a = cl::Buffer(context, begin(h_a), end(h_a), false);
    cl::Buffer d_b = cl::Buffer(context, begin(h_b), end(h_b), false);
    cl::Buffer d_c = cl::Buffer(context, begin(h_c), end(h_c), false);
    scale(cl::EnqueueArgs(queue, cl::NDRange(n)), n, d_a, d_b);
    scale(cl::EnqueueArgs(queue, cl::NDRange(n)), n, d_b, d_c);
    queue.finish();
    cl::copy(queue, d_c, begin(h_c), end(h_c));
}

int main(int argc, char *argv[]) {
    int n = argc > 1 ? std::atoi(argv[1]) : 256;
    std::vector<cl::Platform> platforms;
    cl::Platform::get(&platforms);
    for (auto p : platforms) {
        std::vector<cl::Device> devices;
        p.getDevices(CL_DEVICE_TYPE_ALL, &devices);
        for (auto d : devices) {
            auto t = d.getInfo<CL_DEVICE_TYPE>();
            if (t == CL_DEVICE_TYPE_CPU || t == CL_DEVICE_TYPE_GPU) {
                std::cout << d.getInfo<CL_DEVICE_NAME>() << std::endl;
                auto ext = d.getInfo<CL_DEVICE_EXTENSIONS>();
                bool has64 = ext.find("cl_khr_fp64") != std::string::npos;
                std::vector<cl::Device> one(1, d);
                cl::Context ctx(one);
                run<float>(ctx, n);
                if (has64)
                    run<double>(ctx, n);
            }
        }
    }
    return 0;
}
