/* A graph benchmark's shape: the input is chosen by an option string kept in a table of
 * records (copied out of a map element's member), and the frontier kernel runs until the
 * flag it sets reads back as zero, a trip count only the data decides. */
#include <CL/cl.h>
#include <stdio.h>
#include <map>
#include <string>

#define N 1024

struct Option {
    std::string value;
};

static std::string optionString(const std::map<std::string, Option> &table,
                                const std::string &name) {
    std::map<std::string, Option>::const_iterator it = table.find(name);
    if (it == table.end())
        return "none";
    return it->second.value;
}

int main(int argc, char **argv) {
    std::map<std::string, Option> table;
    table["graph"].value = argc > 1 ? argv[1] : "random";
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
    clBuildProgram(p, 1, &dev, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(p, "relax", &err);
    cl_mem level = clCreateBuffer(ctx, CL_MEM_READ_WRITE, (N + 1) * sizeof(int), NULL, &err);
    cl_mem dflag = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(int), NULL, &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &level);
    clSetKernelArg(k, 1, sizeof(cl_mem), &dflag);
    size_t global = N;
    int iter = 0;
    std::string graph = optionString(table, "graph");
    if (graph == "random") {
        clSetKernelArg(k, 2, sizeof(int), &iter);
        clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL);
    } else {
        int flag = 1;
        while (flag) {
            flag = 0;
            clEnqueueWriteBuffer(q, dflag, CL_TRUE, 0, sizeof(int), &flag, 0, NULL, NULL);
            clSetKernelArg(k, 2, sizeof(int), &iter);
            clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL);
            clEnqueueReadBuffer(q, dflag, CL_TRUE, 0, sizeof(int), &flag, 0, NULL, NULL);
            iter++;
        }
    }
    clFinish(q);
    return 0;
}
