// HandsOnOpenCL-style C++ host: the work-group size is the kernel's own limit, asked of a
// cl::Kernel with getWorkGroupInfo<CL_KERNEL_WORK_GROUP_SIZE>(device) before the functor
// that launches it is made; it sizes the launch, a local argument and the result buffer.
#define __CL_ENABLE_EXCEPTIONS
#include "cl.hpp"
#include "util.hpp"

#include <cstdio>
#include <vector>

#define STEPS (1 << 20)
#define ITERS (256)

int main(void)
{
    std::vector<cl::Device> devices;
    std::vector<cl::Platform> platforms;
    cl::Platform::get(&platforms);
    platforms[0].getDevices(CL_DEVICE_TYPE_ALL, &devices);
    cl::Device device = devices[0];
    cl::Context context(device);
    cl::CommandQueue queue(context, device);
    cl::Program program(context, util::loadProgram("partial_sums.cl"), true);

    cl::Kernel probe(program, "partial_sums");
    ::size_t wg = probe.getWorkGroupInfo<CL_KERNEL_WORK_GROUP_SIZE>(device);
    if (wg > 64) wg = 64;
    cl::make_kernel<int, float, cl::LocalSpaceArg, cl::Buffer> sums(program, "partial_sums");

    ::size_t groups = STEPS / (wg * ITERS);
    float step = 1.0f / (float)STEPS;
    std::vector<float> h_sums(groups);
    cl::Buffer d_sums(context, CL_MEM_WRITE_ONLY, sizeof(float) * groups);
    sums(cl::EnqueueArgs(queue, cl::NDRange(STEPS / ITERS), cl::NDRange(wg)), ITERS, step,
         cl::Local(sizeof(float) * wg), d_sums);
    cl::copy(queue, d_sums, h_sums.begin(), h_sums.end());
    float pi = 0.0f;
    for (::size_t i = 0; i < groups; i++) pi += h_sums[i];
    printf("pi = %f\n", pi * step);
    return 0;
}
