/**
 * bicg.c: PolyBench-ACC style OpenCL host for the BiCG sub-kernel (q = A p, s = A^T r).
 *
 * Usage: ./bicg NX NY OUTFILE
 * Compares both results with a CPU reference (exit status 1 on mismatch) and writes q then s
 * to OUTFILE, one value per line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <CL/cl.h>

#define DIM_LOCAL_WORK_GROUP_X 16
#define PERCENT_DIFF_ERROR_THRESHOLD 0.5

static char* read_file(const char* name, size_t* size)
{
    FILE* fp = fopen(name, "r");
    char* text;
    if (!fp) {
        fprintf(stderr, "Failed to load kernel.\n");
        exit(1);
    }
    text = (char*)malloc(0x100000);
    *size = fread(text, 1, 0x100000, fp);
    fclose(fp);
    return text;
}

static float percent_diff(float a, float b)
{
    float d = a - b, m = a < 0 ? -a : a;
    if (d < 0)
        d = -d;
    if (m < 0.01f && d < 0.01f)
        return 0.0f;
    return 100.0f * d / (m + 1e-8f);
}

int main(int argc, char* argv[])
{
    cl_platform_id platform;
    cl_device_id device;
    cl_int err;
    size_t source_size;
    int i, j, fail = 0;

    if (argc < 4) {
        fprintf(stderr, "usage: %s NX NY OUTFILE\n", argv[0]);
        return 2;
    }
    int nx = atoi(argv[1]);
    int ny = atoi(argv[2]);
    float* A = (float*)malloc(sizeof(float) * nx * ny);
    float* p = (float*)malloc(sizeof(float) * ny);
    float* r = (float*)malloc(sizeof(float) * nx);
    float* q = (float*)malloc(sizeof(float) * nx);
    float* s = (float*)malloc(sizeof(float) * ny);
    for (i = 0; i < ny; i++)
        p[i] = (float)(i % 9) * 0.25f;
    for (i = 0; i < nx; i++) {
        r[i] = (float)(i % 4) * 0.5f;
        for (j = 0; j < ny; j++)
            A[i * ny + j] = (float)((i * (j + 1)) % 13) / 13.0f;
    }
    char* source = read_file("kernels.cl", &source_size);

    err = clGetPlatformIDs(1, &platform, NULL);
    err |= clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue queue = clCreateCommandQueue(context, device, 0, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "Error in creating the OpenCL context\n");
        return 1;
    }
    cl_mem a_mem = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof(float) * nx * ny, A, &err);
    cl_mem p_mem = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof(float) * ny, p, &err);
    cl_mem r_mem = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof(float) * nx, r, &err);
    cl_mem q_mem = clCreateBuffer(context, CL_MEM_READ_WRITE, sizeof(float) * nx, NULL, &err);
    cl_mem s_mem = clCreateBuffer(context, CL_MEM_READ_WRITE, sizeof(float) * ny, NULL, &err);

    cl_program program = clCreateProgramWithSource(context, 1, (const char**)&source, &source_size, &err);
    err = clBuildProgram(program, 1, &device, NULL, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "Error in building program\n");
        return 1;
    }
    cl_kernel kernel1 = clCreateKernel(program, "bicgKernel1", &err);
    cl_kernel kernel2 = clCreateKernel(program, "bicgKernel2", &err);

    size_t local[1] = {DIM_LOCAL_WORK_GROUP_X};
    size_t global1[1] = {(size_t)((nx + DIM_LOCAL_WORK_GROUP_X - 1) / DIM_LOCAL_WORK_GROUP_X) * DIM_LOCAL_WORK_GROUP_X};
    size_t global2[1] = {(size_t)((ny + DIM_LOCAL_WORK_GROUP_X - 1) / DIM_LOCAL_WORK_GROUP_X) * DIM_LOCAL_WORK_GROUP_X};

    err = clSetKernelArg(kernel1, 0, sizeof(cl_mem), (void*)&a_mem);
    err |= clSetKernelArg(kernel1, 1, sizeof(cl_mem), (void*)&p_mem);
    err |= clSetKernelArg(kernel1, 2, sizeof(cl_mem), (void*)&q_mem);
    err |= clSetKernelArg(kernel1, 3, sizeof(int), &nx);
    err |= clSetKernelArg(kernel1, 4, sizeof(int), &ny);
    err |= clEnqueueNDRangeKernel(queue, kernel1, 1, NULL, global1, local, 0, NULL, NULL);

    err |= clSetKernelArg(kernel2, 0, sizeof(cl_mem), (void*)&a_mem);
    err |= clSetKernelArg(kernel2, 1, sizeof(cl_mem), (void*)&r_mem);
    err |= clSetKernelArg(kernel2, 2, sizeof(cl_mem), (void*)&s_mem);
    err |= clSetKernelArg(kernel2, 3, sizeof(int), &nx);
    err |= clSetKernelArg(kernel2, 4, sizeof(int), &ny);
    err |= clEnqueueNDRangeKernel(queue, kernel2, 1, NULL, global2, local, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "Error in launching the kernels\n");
        return 1;
    }
    clFinish(queue);
    err = clEnqueueReadBuffer(queue, q_mem, CL_TRUE, 0, sizeof(float) * nx, q, 0, NULL, NULL);
    err |= clEnqueueReadBuffer(queue, s_mem, CL_TRUE, 0, sizeof(float) * ny, s, 0, NULL, NULL);

    /* CPU reference */
    for (i = 0; i < nx; i++) {
        float acc = 0.0f;
        for (j = 0; j < ny; j++)
            acc += A[i * ny + j] * p[j];
        fail += percent_diff(acc, q[i]) > PERCENT_DIFF_ERROR_THRESHOLD;
    }
    for (j = 0; j < ny; j++) {
        float acc = 0.0f;
        for (i = 0; i < nx; i++)
            acc += r[i] * A[i * ny + j];
        fail += percent_diff(acc, s[j]) > PERCENT_DIFF_ERROR_THRESHOLD;
    }
    printf("bicg: nx=%d ny=%d non-matching outputs: %d\n", nx, ny, fail);
    FILE* out = fopen(argv[3], "w");
    if (!out)
        return 1;
    for (i = 0; i < nx; i++)
        fprintf(out, "%.6e\n", q[i]);
    for (j = 0; j < ny; j++)
        fprintf(out, "%.6e\n", s[j]);
    fclose(out);

    clReleaseKernel(kernel1);
    clReleaseKernel(kernel2);
    clReleaseProgram(program);
    clReleaseMemObject(a_mem);
    clReleaseMemObject(p_mem);
    clReleaseMemObject(r_mem);
    clReleaseMemObject(q_mem);
    clReleaseMemObject(s_mem);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(A); free(p); free(r); free(q); free(s); free(source);
    return fail != 0;
}
