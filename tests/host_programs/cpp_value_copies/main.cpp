// Standard containers hold their elements by value: a vector of strings passed by value is a
// copy the callee may change, a struct element is written in place through m[k].field.
#include <CL/cl.h>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

struct Dim {
    int n;
    std::string label;
};

static int first_then_clobber(std::vector<std::string> v) {
    int n = atoi(v[0].c_str());
    v[0] = "1";
    return n;
}

int main() {
    std::vector<std::string> sizes;
    sizes.push_back("128");
    int a = first_then_clobber(sizes);  // 128; the callee changed only its copy
    int b = atoi(sizes[0].c_str());     // still 128
    std::map<std::string, Dim> dims;
    dims["x"].n = 2;
    dims["x"].label = "rows";
    std::map<std::string, Dim> saved = dims;
    dims["x"].n = 3;                    // saved["x"].n stays 2
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
    const char *src =
        "__kernel void scale(__global float *a) { int i = get_global_id(0); a[i] *= 2.0f; }";
    cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(p, 0, NULL, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(p, "scale", &err);
    size_t global = (a + b) * saved["x"].n + dims["x"].n;  // 256 * 2 + 3
    cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, global * sizeof(float), NULL, &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &buf);
    clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL);
    clFinish(q);
    return 0;
}
