// A host in the style of Rodinia's pathfinder: a small wrapper class keeps its kernels in a
// std::map<string, cl_kernel> and takes kernel names by value; the kernel name is
// copy-initialised from a literal (`string kn = "step";`); a global named `data` (against
// C++17's std::data) makes the file parse as gnu++14, where that copy is an elidable copy
// constructor call of a temporary.
#include <CL/cl.h>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
using namespace std;

int rows, cols;
int *data;

class Runner {
public:
    void init();
    void createKernel(string name);
    cl_kernel kernel(string name) { return kernels[name]; }
    void launch(string name) {
        clEnqueueNDRangeKernel(queue, kernels[name], 1, NULL, &gwsize, NULL, 0, NULL, NULL);
    }
    cl_context ctxt() { return context; }
    size_t gwsize;
private:
    map<string, cl_kernel> kernels;
    cl_context context;
    cl_command_queue queue;
    cl_program program;
};

void Runner::init() {
    cl_int err;
    context = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    queue = clCreateCommandQueue(context, NULL, 0, &err);
    FILE *f = fopen("step.cl", "r");
    char *src = (char *)malloc(4096);
    size_t len = fread(src, 1, 4095, f);
    src[len] = 0;
    program = clCreateProgramWithSource(context, 1, (const char **)&src, NULL, &err);
    clBuildProgram(program, 0, NULL, NULL, NULL, NULL);
}

void Runner::createKernel(string name) {
    kernels[name] = clCreateKernel(program, name.c_str(), NULL);
}

int main(int argc, char **argv) {
    cols = 256;
    rows = 4;
    data = new int[rows * cols];
    Runner cl;
    cl.init();
    cl.gwsize = cols;
    string kn = "step";
    cl.createKernel(kn);
    cl_mem d[2];
    d[0] = clCreateBuffer(cl.ctxt(), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                          sizeof(int) * cols, data, NULL);
    d[1] = clCreateBuffer(cl.ctxt(), CL_MEM_READ_WRITE, sizeof(int) * cols, NULL, NULL);
    int src = 1, dst = 0;
    for (int t = 0; t < rows - 1; t++) {
        int tmp = src;
        src = dst;
        dst = tmp;
        clSetKernelArg(cl.kernel(kn), 0, sizeof(cl_mem), (void *)&d[src]);
        clSetKernelArg(cl.kernel(kn), 1, sizeof(cl_mem), (void *)&d[dst]);
        clSetKernelArg(cl.kernel(kn), 2, sizeof(int), (void *)&cols);
        cl.launch(kn);
    }
    delete[] data;
    return 0;
}
