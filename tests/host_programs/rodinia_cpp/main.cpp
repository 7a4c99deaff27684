// Rodinia-style C++ host: option loop, sizes read from a file, std::vector, new/delete
#include <iostream>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <unistd.h>
#ifdef __APPLE__
#include <OpenCL/opencl.h>
#else
#include <CL/cl.h>
#endif

#define BLOCK_SIZE 4

struct Options {
    int iterations;
    int platform;
    std::string input;
    bool verbose;
};

static void usage(const char *prog) {
    std::cerr << "Usage: " << prog << " -i <iterations> -f <grid file> [-p platform] [-v]"
              << std::endl;
    exit(1);
}

static std::string load_file(const std::string &path) {
    std::ifstream in(path.c_str());
    if (!in) {
        std::cerr << "cannot open " << path << std::endl;
        exit(1);
    }
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

class Grid {
public:
    int rows, cols;
    float *data;
    Grid(int r, int c) : rows(r), cols(c) { data = new float[r * c]; }
    ~Grid() { delete[] data; }
    int size() const { return rows * cols; }
};

int main(int argc, char **argv) {
    Options opt;
    opt.iterations = 1;
    opt.platform = 0;
    opt.verbose = false;
    int c;
    while ((c = getopt(argc, argv, "i:f:p:v")) != -1) {
        switch (c) {
        case 'i': opt.iterations = atoi(optarg); break;
        case 'f': opt.input = optarg; break;
        case 'p': opt.platform = atoi(optarg); break;
        case 'v': opt.verbose = true; break;
        default: usage(argv[0]);
        }
    }
    if (opt.iterations <= 0) usage(argv[0]);

    int rows = 0, cols = 0;
    std::ifstream grid(opt.input.c_str());
    grid >> rows >> cols;
    if (rows <= 2 || cols <= 2) { std::cerr << "bad grid" << std::endl; return 1; }
    Grid g(rows, cols);
    for (int i = 0; i < g.size(); i++) g.data[i] = (float)(i % 7);
    std::vector<float> result(rows * cols);

    cl_int err;
    cl_uint nplat = 0;
    clGetPlatformIDs(0, NULL, &nplat);
    std::vector<cl_platform_id> platforms(nplat);
    clGetPlatformIDs(nplat, platforms.data(), NULL);
    cl_device_id device;
    clGetDeviceIDs(platforms[opt.platform], CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue queue = clCreateCommandQueue(context, device, 0, &err);

    std::string source = load_file("kernel.cl");
    const char *src = source.c_str();
    size_t len = source.size();
    cl_program program = clCreateProgramWithSource(context, 1, &src, &len, &err);
    if (clBuildProgram(program, 1, &device, "-cl-fast-relaxed-math", NULL, NULL) != CL_SUCCESS) {
        std::cerr << "build failed" << std::endl;
        return 1;
    }
    cl_kernel stencil = clCreateKernel(program, "stencil", &err);
    cl_kernel scale = clCreateKernel(program, "scale", &err);

    size_t bytes = sizeof(float) * rows * cols;
    cl_mem d_a = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, g.data, &err);
    cl_mem d_b = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, NULL, &err);

    size_t local[2] = {BLOCK_SIZE, BLOCK_SIZE};
    size_t global[2] = {(size_t)(std::ceil(cols / (float)BLOCK_SIZE) * BLOCK_SIZE),
                        (size_t)(std::ceil(rows / (float)BLOCK_SIZE) * BLOCK_SIZE)};
    for (int it = 0; it < opt.iterations; it++) {
        clSetKernelArg(stencil, 0, sizeof(cl_mem), &d_a);
        clSetKernelArg(stencil, 1, sizeof(cl_mem), &d_b);
        clSetKernelArg(stencil, 2, sizeof(int), &cols);
        clSetKernelArg(stencil, 3, sizeof(int), &rows);
        clEnqueueNDRangeKernel(queue, stencil, 2, NULL, global, local, 0, NULL, NULL);
        float factor = 0.5f;
        int n = rows * cols;
        size_t g1 = n, l1 = BLOCK_SIZE;
        clSetKernelArg(scale, 0, sizeof(cl_mem), &d_b);
        clSetKernelArg(scale, 1, sizeof(float), &factor);
        clSetKernelArg(scale, 2, sizeof(int), &n);
        clEnqueueNDRangeKernel(queue, scale, 1, NULL, &g1, &l1, 0, NULL, NULL);
    }
    clEnqueueReadBuffer(queue, d_b, CL_TRUE, 0, bytes, result.data(), 0, NULL, NULL);
    if (opt.verbose) std::cout << "result[0] = " << result[0] << std::endl;
    clReleaseMemObject(d_a);
    clReleaseMemObject(d_b);
    return 0;
}
