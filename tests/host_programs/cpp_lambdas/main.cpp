// cpp_lambdas N TIMES: a benchmark harness in the style of BabelStream: the kernels are
// launched from lambdas (capturing by reference) called directly and through a timing
// template; a host-only lambda (a sum) stays opaque.
#include <CL/cl.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>

template <typename F>
double timed(F&& f)
{
    auto start = std::chrono::high_resolution_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::high_resolution_clock::now() - start)
        .count();
}

int main(int argc, char** argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    int times = argc > 2 ? atoi(argv[2]) : 3;
    float* h = (float*)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) h[i] = (float)i;

    cl_int err;
    cl_platform_id platform;
    clGetPlatformIDs(1, &platform, NULL);
    cl_device_id device;
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue queue = clCreateCommandQueue(context, device, 0, &err);
    FILE* f = fopen("kernels.cl", "rb");
    char source[4096];
    size_t length = fread(source, 1, sizeof(source) - 1, f);
    source[length] = '\0';
    fclose(f);
    const char* text = source;
    cl_program program = clCreateProgramWithSource(context, 1, &text, &length, &err);
    clBuildProgram(program, 1, &device, NULL, NULL, NULL);
    cl_kernel k_copy = clCreateKernel(program, "copy", &err);
    cl_kernel k_scale = clCreateKernel(program, "scale", &err);
    cl_mem d_a = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                n * sizeof(float), h, &err);
    cl_mem d_b = clCreateBuffer(context, CL_MEM_WRITE_ONLY, n * sizeof(float), NULL, &err);
    cl_mem d_c = clCreateBuffer(context, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    clSetKernelArg(k_copy, 0, sizeof(cl_mem), &d_a);
    clSetKernelArg(k_copy, 1, sizeof(cl_mem), &d_c);
    clSetKernelArg(k_scale, 0, sizeof(cl_mem), &d_c);
    clSetKernelArg(k_scale, 1, sizeof(cl_mem), &d_b);

    size_t gs = n;
    auto launch = [&](cl_kernel k) {
        clEnqueueNDRangeKernel(queue, k, 1, NULL, &gs, NULL, 0, NULL, NULL);
    };
    auto run = [&](int which) {
        if (which == 0)
            launch(k_copy);
        else
            launch(k_scale);
    };
    auto time_one = [&](int which) { return timed([&] { run(which); }); };
    double total = 0.0;
    for (int t = 0; t < times; t++)
        for (int which = 0; which < 2; which++)
            total += time_one(which);
    clFinish(queue);
    clEnqueueReadBuffer(queue, d_b, CL_TRUE, 0, n * sizeof(float), h, 0, NULL, NULL);
    auto sum = [](const float* v, int m) {
        double s = 0.0;
        for (int i = 0; i < m; i++) s += v[i];
        return s;
    };
    printf("%f %f\n", total, sum(h, n));
    return 0;
}
