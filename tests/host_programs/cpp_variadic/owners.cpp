// cpp_variadic/owners.cpp: a C++ host that owns its OpenCL state through the standard library:
// the pipeline object is made by std::make_unique, moved into a std::shared_ptr and used
// through it; its kernels and buffers are std::array members walked by size().
#include <CL/cl.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>

static const char* source =
    "__kernel void add1(__global float *a, __global float *b) {\n"
    "    int i = get_global_id(0); b[i] = a[i] + 1.0f; }\n"
    "__kernel void twice(__global float *b, __global float *c) {\n"
    "    int i = get_global_id(0); c[i] = 2.0f * b[i]; }\n";

class Pipeline {
  public:
    Pipeline(cl_context ctx, cl_device_id dev, size_t n);
    ~Pipeline();
    void run(cl_command_queue queue);
    size_t size() const { return n; }

  private:
    size_t n;
    std::array<cl_kernel, 2> kernels;
    std::array<cl_mem, 3> bufs;
};

Pipeline::Pipeline(cl_context ctx, cl_device_id dev, size_t n) : n(n)
{
    cl_int err;
    cl_program prog = clCreateProgramWithSource(ctx, 1, &source, NULL, &err);
    clBuildProgram(prog, 1, &dev, NULL, NULL, NULL);
    kernels[0] = clCreateKernel(prog, "add1", &err);
    kernels.back() = clCreateKernel(prog, "twice", &err);
    for (size_t i = 0; i < bufs.size(); i++)
        bufs[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
}

Pipeline::~Pipeline()
{
    for (size_t i = 0; i < bufs.size(); i++) clReleaseMemObject(bufs[i]);
}

void Pipeline::run(cl_command_queue queue)
{
    for (size_t k = 0; k < kernels.size(); k++) {
        clSetKernelArg(kernels[k], 0, sizeof(cl_mem), &bufs[k]);
        clSetKernelArg(kernels[k], 1, sizeof(cl_mem), &bufs[k + 1]);
        clEnqueueNDRangeKernel(queue, kernels[k], 1, NULL, &n, NULL, 0, NULL, NULL);
    }
}

int main(int argc, char** argv)
{
    size_t n = argc > 1 ? (size_t)atoi(argv[1]) : 512;
    cl_platform_id platform;
    cl_device_id dev;
    clGetPlatformIDs(1, &platform, NULL);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &dev, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, NULL);
    cl_command_queue queue = clCreateCommandQueue(ctx, dev, 0, NULL);

    auto made = std::make_unique<Pipeline>(ctx, dev, n);
    std::shared_ptr<Pipeline> pipeline = std::move(made);
    if (!pipeline) return 1;
    for (int step = 0; step < 2; step++)
        pipeline->run(queue);
    printf("%zu\n", pipeline.get()->size());
    clFinish(queue);
    pipeline.reset();
    return 0;
}
