/* scratch_loop N ITERS: an iterative solver's host. Each time step calls smooth(), which
 * creates a temporary buffer (the residual, and coefficients copied from the host), runs
 * two kernels through it and releases it; after the loop the solution is read back. */
#include <stdio.h>
#include <stdlib.h>
#include <CL/cl.h>

static cl_context context;
static cl_command_queue queue;
static cl_kernel k_resid, k_correct;
static cl_mem d_u, d_v;
static int n;

static void smooth(float coef[2])
{
    cl_int err;
    size_t gs = n;
    cl_mem d_r = clCreateBuffer(context, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem d_c = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                2 * sizeof(float), coef, &err);
    clSetKernelArg(k_resid, 0, sizeof(cl_mem), &d_u);
    clSetKernelArg(k_resid, 1, sizeof(cl_mem), &d_v);
    clSetKernelArg(k_resid, 2, sizeof(cl_mem), &d_r);
    clSetKernelArg(k_resid, 3, sizeof(int), &n);
    clEnqueueNDRangeKernel(queue, k_resid, 1, NULL, &gs, NULL, 0, NULL, NULL);
    clSetKernelArg(k_correct, 0, sizeof(cl_mem), &d_r);
    clSetKernelArg(k_correct, 1, sizeof(cl_mem), &d_c);
    clSetKernelArg(k_correct, 2, sizeof(cl_mem), &d_u);
    clSetKernelArg(k_correct, 3, sizeof(int), &n);
    clEnqueueNDRangeKernel(queue, k_correct, 1, NULL, &gs, NULL, 0, NULL, NULL);
    clReleaseMemObject(d_c);
    clReleaseMemObject(d_r);
}

int main(int argc, char** argv)
{
    if (argc < 3) { fprintf(stderr, "usage: %s N ITERS\n", argv[0]); return 1; }
    n = atoi(argv[1]);
    int iters = atoi(argv[2]);
    float coef[2] = {0.5f, 0.25f};
    float* h = (float*)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) h[i] = (float)(i % 7);

    cl_int err;
    cl_platform_id platform;
    clGetPlatformIDs(1, &platform, NULL);
    cl_device_id device;
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    queue = clCreateCommandQueue(context, device, 0, &err);
    FILE* f = fopen("kernels.cl", "rb");
    char source[4096];
    size_t length = fread(source, 1, sizeof(source) - 1, f);
    source[length] = '\0';
    fclose(f);
    const char* text = source;
    cl_program program = clCreateProgramWithSource(context, 1, &text, &length, &err);
    clBuildProgram(program, 1, &device, NULL, NULL, NULL);
    k_resid = clCreateKernel(program, "resid", &err);
    k_correct = clCreateKernel(program, "correct", &err);
    d_u = clCreateBuffer(context, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    d_v = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                         n * sizeof(float), h, &err);
    for (int i = 0; i < n; i++) h[i] = 0.0f;
    clEnqueueWriteBuffer(queue, d_u, CL_TRUE, 0, n * sizeof(float), h, 0, NULL, NULL);
    for (int it = 0; it < iters; it++) {
        smooth(coef);
        clFinish(queue);
    }
    clEnqueueReadBuffer(queue, d_u, CL_TRUE, 0, n * sizeof(float), h, 0, NULL, NULL);
    printf("%f\n", h[1]);
    return 0;
}
