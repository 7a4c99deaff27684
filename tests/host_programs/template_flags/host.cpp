// template_flags [N]: SHOC-style tests templated on the element type and a bool that decides
// the build options (`template <class T, bool shift> ... shift ? " -DUSE_SHIFT" : ""`),
// called from another template with the bool written out.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <CL/cl.h>

static const char* source_text = nullptr;

template <class T, bool shift>
void scaleTest(cl_context ctx, cl_device_id dev, cl_command_queue queue, std::string flags,
               int n, cl_mem a, cl_mem b)
{
    if (shift)
        flags += " -DUSE_SHIFT";
    cl_int err;
    cl_program prog = clCreateProgramWithSource(ctx, 1, &source_text, NULL, &err);
    clBuildProgram(prog, 1, &dev, flags.c_str(), NULL, NULL);
    cl_kernel k = clCreateKernel(prog, "scale", &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clSetKernelArg(k, 1, sizeof(cl_mem), &b);
    clSetKernelArg(k, 2, sizeof(int), &n);
    size_t gs = n;
    clEnqueueNDRangeKernel(queue, k, 1, NULL, &gs, NULL, 0, NULL, NULL);
    T* out = (T*)malloc(n * sizeof(T));
    clEnqueueReadBuffer(queue, b, CL_TRUE, 0, n * sizeof(T), out, 0, NULL, NULL);
    printf("%s %f\n", shift ? "shifted" : "plain", (double)out[n - 1]);
    free(out);
}

template <class T>
void runTest(cl_context ctx, cl_device_id dev, cl_command_queue queue, std::string flags,
             int n)
{
    T* h = (T*)malloc(n * sizeof(T));
    for (int i = 0; i < n; i++) h[i] = (T)(i % 5);
    cl_int err;
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof(T), h,
                              &err);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(T), NULL, &err);
    cl_mem c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(T), NULL, &err);
    scaleTest<T, true>(ctx, dev, queue, flags, n, a, b);
    scaleTest<T, false>(ctx, dev, queue, flags, n, b, c);
    free(h);
}

int main(int argc, char** argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 64;
    FILE* f = fopen("kernels.cl", "rb");
    static char text[4096];
    size_t length = fread(text, 1, sizeof(text) - 1, f);
    text[length] = '\0';
    fclose(f);
    source_text = text;
    cl_int err;
    cl_platform_id platform;
    clGetPlatformIDs(1, &platform, NULL);
    cl_device_id dev;
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &dev, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue queue = clCreateCommandQueue(ctx, dev, 0, &err);
    runTest<float>(ctx, dev, queue, "-DREAL=float", n);
    return 0;
}
