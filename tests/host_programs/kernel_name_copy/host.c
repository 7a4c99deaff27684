/* A kernel name the host copies at run time: two names in char arrays initialised with
 * string literals, one copied (strcpy) into a buffer by a switch on a command-line option,
 * and the buffer passed to clCreateKernel. */
#include <CL/cl.h>
#include <stdio.h>
#include <string.h>

enum { KERNEL_ROWS, KERNEL_TILED };

int main(int argc, char **argv) {
    char kernel_name_rows[12] = "scale_rows";
    char kernel_name_tiled[13] = "scale_tiled";
    char kernel_name[32];
    int kernel_type = KERNEL_ROWS;
    if (argc > 1 && strcmp(argv[1], "-t") == 0)
        kernel_type = KERNEL_TILED;
    switch (kernel_type) {
    case KERNEL_ROWS:
        strcpy(kernel_name, kernel_name_rows);
        break;
    case KERNEL_TILED:
        strcpy(kernel_name, kernel_name_tiled);
        break;
    }
    cl_int err;
    cl_platform_id platform;
    cl_device_id device;
    clGetPlatformIDs(1, &platform, NULL);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, device, 0, &err);
    FILE *f = fopen("kernels.cl", "r");
    static char src[4096];
    size_t len = fread(src, 1, sizeof(src) - 1, f);
    src[len] = 0;
    const char *text = src;
    cl_program p = clCreateProgramWithSource(ctx, 1, &text, &len, &err);
    clBuildProgram(p, 1, &device, "", NULL, NULL);
    cl_kernel k = clCreateKernel(p, kernel_name, &err);
    float h[256];
    for (int i = 0; i < 256; i++)
        h[i] = (float)i;
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(h), NULL, &err);
    clEnqueueWriteBuffer(q, a, CL_TRUE, 0, sizeof(h), h, 0, NULL, NULL);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    size_t global = 256;
    clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL);
    clEnqueueReadBuffer(q, a, CL_TRUE, 0, sizeof(h), h, 0, NULL, NULL);
    printf("%f\n", h[255]);
    return 0;
}
