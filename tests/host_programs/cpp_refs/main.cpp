#include <CL/cl.h>
#include <vector>
#include <string>
#include <iostream>
#include <cstdio>
struct Env { cl_context ctx; cl_command_queue q; };
static void make_buffers(Env &env, size_t n, cl_mem &a, cl_mem &b) {
    cl_int err;
    a = clCreateBuffer(env.ctx, CL_MEM_READ_WRITE, n * sizeof(float), nullptr, &err);
    b = clCreateBuffer(env.ctx, CL_MEM_READ_WRITE, n * sizeof(float), nullptr, &err);
}
template <typename T> static T clamp_to(T v, T lo) { return v < lo ? lo : v; }
static void run(const Env &env, cl_kernel k, cl_mem a, cl_mem b, int n) {
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clSetKernelArg(k, 1, sizeof(cl_mem), &b);
    clSetKernelArg(k, 2, sizeof(int), &n);
    size_t g = n;
    clEnqueueNDRangeKernel(env.q, k, 1, nullptr, &g, nullptr, 0, nullptr, nullptr);
}
int main(int argc, char **argv) {
    int n = argc > 1 ? std::stoi(argv[1]) : 256;
    n = clamp_to(n, 16);
    Env env;
    cl_int err;
    env.ctx = clCreateContext(nullptr, 0, nullptr, nullptr, nullptr, &err);
    env.q = clCreateCommandQueue(env.ctx, nullptr, 0, &err);
    FILE *f = fopen("k.cl", "r");
    char *src = new char[1 << 16];
    size_t len = fread(src, 1, (1 << 16) - 1, f);
    src[len] = 0;
    cl_program p = clCreateProgramWithSource(env.ctx, 1, (const char **)&src, &len, &err);
    clBuildProgram(p, 0, nullptr, nullptr, nullptr, nullptr);
    cl_kernel k = clCreateKernel(p, "add", &err);
    cl_mem a, b;
    make_buffers(env, n, a, b);
    std::vector<float> host(n, 1.0f);
    clEnqueueWriteBuffer(env.q, b, CL_TRUE, 0, n * sizeof(float), host.data(), 0, nullptr, nullptr);
    for (int rep = 0; rep < 3; ++rep) run(env, k, a, b, n);
    clEnqueueReadBuffer(env.q, a, CL_TRUE, 0, n * sizeof(float), host.data(), 0, nullptr, nullptr);
    std::cout << host[0] << "\n";
    delete[] src;
}
