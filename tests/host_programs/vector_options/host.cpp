// SHOC-style option values: "-l 8,4" is split into a std::vector<std::string> returned by
// value, each token parsed with a std::stringstream into a std::vector<long long> (also
// returned by value); the work-group tile those give becomes kernel build options through a
// std::ostringstream.
#include <CL/cl.h>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

static std::vector<std::string> splitValues(const std::string &buff, char delim) {
    std::vector<std::string> output;
    std::string tmp = "";
    for (size_t i = 0; i < buff.length(); i++) {
        if (buff[i] == delim) {
            if (!tmp.empty())
                output.push_back(tmp);
            tmp = "";
        } else {
            tmp += buff[i];
        }
    }
    if (!tmp.empty())
        output.push_back(tmp);
    return output;
}

static std::vector<long long> vecInt(const std::string &value) {
    std::vector<long long> retval = std::vector<long long>(0);
    std::vector<std::string> tokens = splitValues(value, ',');
    for (int i = 0; i < tokens.size(); i++) {
        std::stringstream ss(tokens[i]);
        long long j;
        ss >> j;
        retval.push_back(j);
    }
    return retval;
}

int main(int argc, char **argv) {
    std::string lsize = "8,4";
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "-l") == 0)
            lsize = argv[i + 1];
    std::vector<long long> ldims = vecInt(lsize);
    size_t lRows = (size_t)ldims[0];
    size_t lCols = (size_t)ldims[1];
    std::ostringstream opts;
    opts << "-DLROWS=" << lRows << " -DLCOLS=" << lCols;

    cl_int err;
    cl_device_id dev;
    clGetDeviceIDs(NULL, CL_DEVICE_TYPE_DEFAULT, 1, &dev, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    FILE *f = fopen("k.cl", "r");
    char src[2048];
    size_t len = fread(src, 1, sizeof(src) - 1, f);
    src[len] = 0;
    const char *text = src;
    cl_program p = clCreateProgramWithSource(ctx, 1, &text, &len, &err);
    clBuildProgram(p, 1, &dev, opts.str().c_str(), NULL, NULL);
    cl_kernel k = clCreateKernel(p, "tile", &err);
    size_t n = 64 * lRows * lCols;
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clSetKernelArg(k, 1, sizeof(cl_mem), &b);
    clEnqueueNDRangeKernel(q, k, 1, NULL, &n, NULL, 0, NULL, NULL);
    clSetKernelArg(k, 0, sizeof(cl_mem), &b);
    clSetKernelArg(k, 1, sizeof(cl_mem), &c);
    clEnqueueNDRangeKernel(q, k, 1, NULL, &n, NULL, 0, NULL, NULL);
    clFinish(q);
    return 0;
}
