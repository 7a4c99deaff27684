// OpenDwarfs-style solver records: one record per device in a std::vector grown by
// resize(n), each element made by the record's default constructor (its flags false); a
// flag set from the device's extension list, read into a resized std::string through
// &s[0] and split word by word until the stream's eof(), and the flags left at their
// defaults choose the build options, written through a std::stringstream.
#include <CL/cl.h>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

struct solver_info {
    solver_info() : vectorize(false), atomics(false), threads(0) {}
    bool vectorize;
    bool atomics;
    int threads;
};

int main(void) {
    cl_int err;
    cl_device_id dev;
    clGetDeviceIDs(NULL, CL_DEVICE_TYPE_DEFAULT, 1, &dev, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    std::vector<solver_info> info;
    info.resize(2);
    info[1].vectorize = true;
    info[1].threads = 64;
    size_t length;
    clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, 0, NULL, &length);
    std::string extensions;
    extensions.resize(length + 1);
    clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, length, &extensions[0], NULL);
    std::stringstream ext(extensions);
    while (!ext.eof()) {
        std::string name;
        ext >> name;
        if (name == "cl_khr_global_int32_base_atomics")
            info[0].atomics = true;
    }
    FILE *f = fopen("k.cl", "r");
    char src[2048];
    size_t len = fread(src, 1, sizeof(src) - 1, f);
    src[len] = 0;
    const char *text = src;
    cl_kernel ks[2];
    for (int i = 0; i < 2; i++) {
        std::stringstream opts;
        opts << "-D WORK_ITEMS=" << (info[i].vectorize ? 128 : 256) + info[i].threads;
        if (info[i].vectorize)
            opts << " -D USE_VEC";
        if (info[i].atomics)
            opts << " -D USE_ATOMICS";
        cl_program p = clCreateProgramWithSource(ctx, 1, &text, &len, &err);
        clBuildProgram(p, 1, &dev, opts.str().c_str(), NULL, NULL);
        ks[i] = clCreateKernel(p, "scale", &err);
    }
    size_t n = 1024;
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    clSetKernelArg(ks[0], 0, sizeof(cl_mem), &a);
    clSetKernelArg(ks[0], 1, sizeof(cl_mem), &b);
    clEnqueueNDRangeKernel(q, ks[0], 1, NULL, &n, NULL, 0, NULL, NULL);
    clSetKernelArg(ks[1], 0, sizeof(cl_mem), &b);
    clSetKernelArg(ks[1], 1, sizeof(cl_mem), &c);
    clEnqueueNDRangeKernel(q, ks[1], 1, NULL, &n, NULL, 0, NULL, NULL);
    clFinish(q);
    return 0;
}
