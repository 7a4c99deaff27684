// Kernel objects kept in standard containers, a kernel name passed as a by-value
// std::string, build options assembled in a std::string, and throw on an error path.
#include <CL/cl.h>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

static cl_kernel make(cl_program p, std::string name) {
    cl_int err;
    cl_kernel k = clCreateKernel(p, name.c_str(), &err);
    if (err != CL_SUCCESS) throw std::runtime_error("cannot create " + name);
    return k;
}

int main() {
    const int n = 128;
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
    FILE *f = fopen("k.cl", "r");
    if (!f) throw std::runtime_error("k.cl not found");
    char *src = (char *)malloc(4096);
    size_t len = fread(src, 1, 4095, f);
    src[len] = 0;
    std::string opts = "-DOFFSET=";
    opts += std::to_string(3);
    opts.append(".0f");
    cl_program p = clCreateProgramWithSource(ctx, 1, (const char **)&src, &len, &err);
    clBuildProgram(p, 0, NULL, opts.c_str(), NULL, NULL);
    std::vector<cl_kernel> stages;
    stages.push_back(make(p, "shift"));
    stages.push_back(make(p, std::string("square")));
    std::map<std::string, cl_kernel> byName;
    byName["shift"] = stages[0];
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    size_t global = n;
    clSetKernelArg(stages[0], 0, sizeof(cl_mem), &a);
    clSetKernelArg(stages[0], 1, sizeof(cl_mem), &b);
    clEnqueueNDRangeKernel(q, stages[0], 1, NULL, &global, NULL, 0, NULL, NULL);
    clSetKernelArg(stages[1], 0, sizeof(cl_mem), &b);
    clSetKernelArg(stages[1], 1, sizeof(cl_mem), &c);
    clEnqueueNDRangeKernel(q, stages[1], 1, NULL, &global, NULL, 0, NULL, NULL);
    cl_kernel again = byName["shift"];
    clSetKernelArg(again, 0, sizeof(cl_mem), &c);
    clSetKernelArg(again, 1, sizeof(cl_mem), &a);
    clEnqueueNDRangeKernel(q, again, 1, NULL, &global, NULL, 0, NULL, NULL);
    clFinish(q);
    return 0;
}
