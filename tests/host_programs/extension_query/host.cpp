/* Precision chosen from the device's extension string, as benchmark harnesses do: a helper
 * asks CL_DEVICE_EXTENSIONS twice (its size, then its text) and searches it with
 * std::string::find; a C helper searches CL_DEVICE_NAME with strstr. */
#include <CL/cl.h>
#include <stdio.h>
#include <string.h>
#include <string>

#define N 1024

static bool checkExtension(cl_device_id dev, const std::string &ext) {
    size_t nBytes = 0;
    clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, 0, NULL, &nBytes);
    char *extensions = new char[nBytes + 1];
    clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, nBytes + 1, extensions, NULL);
    std::string all = extensions;
    delete[] extensions;
    return all.find(ext) != std::string::npos;
}

static int nameHas(cl_device_id dev, const char *word) {
    char name[256];
    clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof(name), name, NULL);
    return strstr(name, word) != NULL;
}

static void run(cl_context ctx, cl_command_queue q, cl_device_id dev, const char *opts,
                size_t elem, size_t n) {
    FILE *f = fopen("k.cl", "r");
    char src[2048];
    size_t len = fread(src, 1, sizeof(src) - 1, f);
    src[len] = 0;
    const char *text = src;
    cl_int err;
    cl_program p = clCreateProgramWithSource(ctx, 1, &text, &len, &err);
    clBuildProgram(p, 1, &dev, opts, NULL, NULL);
    cl_kernel k = clCreateKernel(p, "scale", &err);
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * elem, NULL, &err);
    float s = 2.0f;
    double d = 2.0;
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clSetKernelArg(k, 1, elem, elem == sizeof(double) ? (void *)&d : (void *)&s);
    clEnqueueNDRangeKernel(q, k, 1, NULL, &n, NULL, 0, NULL, NULL);
    clFinish(q);
}

int main(void) {
    cl_int err;
    cl_device_id dev;
    clGetDeviceIDs(NULL, CL_DEVICE_TYPE_DEFAULT, 1, &dev, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    run(ctx, q, dev, "", sizeof(float), N);
    if (checkExtension(dev, "cl_khr_fp64"))
        run(ctx, q, dev, "-DDOUBLE", sizeof(double), N);
    else if (checkExtension(dev, "cl_amd_fp64"))
        run(ctx, q, dev, "-DDOUBLE", sizeof(double), N / 2);
    if (nameHas(dev, "GPU"))
        run(ctx, q, dev, "", sizeof(float), 2 * N);
    return 0;
}
