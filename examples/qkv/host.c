/* qkv host: Q = X Wq + bq, K = X Wk + bk, V = X Wv + bv (one kernel, three launches),
 * then out = Q * K + V element-wise.  SEQ tokens of DIM features. */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <CL/cl.h>

#define SEQ 64
#define DIM 64
#define TILE 16
#define WG 64

static char* read_source(const char* path, size_t* length)
{
    FILE* f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char* text = (char*)malloc(size + 1);
    size_t got = fread(text, 1, size, f);
    text[got] = '\0';
    fclose(f);
    *length = got;
    return text;
}

static void fill(float* p, int count, int salt)
{
    for (int i = 0; i < count; i++)
        p[i] = (float)((i * salt) % 23) * 0.02f - 0.2f;
}

int main(void)
{
    cl_int err;
    int rows = SEQ, cols = DIM, inner = DIM, n = SEQ * DIM;
    float* h_X = (float*)malloc(SEQ * DIM * sizeof(float));
    float* h_W = (float*)malloc(3 * DIM * DIM * sizeof(float));
    float* h_b = (float*)malloc(3 * DIM * sizeof(float));
    float* h_out = (float*)malloc(SEQ * DIM * sizeof(float));
    fill(h_X, SEQ * DIM, 5);
    fill(h_W, 3 * DIM * DIM, 7);
    fill(h_b, 3 * DIM, 3);

    cl_platform_id platform;
    err = clGetPlatformIDs(1, &platform, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clGetPlatformIDs failed: %d\n", err);
        exit(1);
    }
    cl_device_id device;
    err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clGetDeviceIDs failed: %d\n", err);
        exit(1);
    }
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateContext failed: %d\n", err);
        exit(1);
    }
    cl_command_queue queue = clCreateCommandQueue(context, device, 0, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateCommandQueue failed: %d\n", err);
        exit(1);
    }

    size_t length;
    char* source = read_source("kernels.cl", &length);
    cl_program program = clCreateProgramWithSource(context, 1, (const char**)&source, &length, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateProgramWithSource failed: %d\n", err);
        exit(1);
    }
    err = clBuildProgram(program, 1, &device, NULL, NULL, NULL);
    if (err != CL_SUCCESS) {
        size_t log_size;
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, NULL, &log_size);
        char* log = (char*)malloc(log_size);
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, log_size, log, NULL);
        fprintf(stderr, "build log:\n%s\n", log);
        free(log);
        exit(1);
    }
    cl_kernel k_linear = clCreateKernel(program, "linear", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(linear) failed: %d\n", err);
        exit(1);
    }
    cl_kernel k_combine = clCreateKernel(program, "combine", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(combine) failed: %d\n", err);
        exit(1);
    }

    size_t act_bytes = SEQ * DIM * sizeof(float);
    size_t w_bytes = DIM * DIM * sizeof(float);
    size_t b_bytes = DIM * sizeof(float);
    cl_mem X = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, act_bytes, h_X,
                              &err);
    cl_mem Wq = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, w_bytes, h_W,
                               &err);
    cl_mem Wk = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, w_bytes,
                               h_W + DIM * DIM, &err);
    cl_mem Wv = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, w_bytes,
                               h_W + 2 * DIM * DIM, &err);
    cl_mem bq = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, b_bytes, h_b,
                               &err);
    cl_mem bk = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, b_bytes,
                               h_b + DIM, &err);
    cl_mem bv = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, b_bytes,
                               h_b + 2 * DIM, &err);
    cl_mem Q = clCreateBuffer(context, CL_MEM_READ_WRITE, act_bytes, NULL, &err);
    cl_mem K = clCreateBuffer(context, CL_MEM_READ_WRITE, act_bytes, NULL, &err);
    cl_mem V = clCreateBuffer(context, CL_MEM_READ_WRITE, act_bytes, NULL, &err);
    cl_mem out = clCreateBuffer(context, CL_MEM_WRITE_ONLY, act_bytes, NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer failed: %d\n", err);
        exit(1);
    }

    size_t global2[2] = {DIM, SEQ};
    size_t local2[2] = {TILE, TILE};

    /* Q projection */
    err = clSetKernelArg(k_linear, 0, sizeof(cl_mem), &X);
    err |= clSetKernelArg(k_linear, 1, sizeof(cl_mem), &Wq);
    err |= clSetKernelArg(k_linear, 2, sizeof(cl_mem), &bq);
    err |= clSetKernelArg(k_linear, 3, sizeof(cl_mem), &Q);
    err |= clSetKernelArg(k_linear, 4, sizeof(int), &rows);
    err |= clSetKernelArg(k_linear, 5, sizeof(int), &cols);
    err |= clSetKernelArg(k_linear, 6, sizeof(int), &inner);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clSetKernelArg(linear Q) failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueNDRangeKernel(queue, k_linear, 2, NULL, global2, local2, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue linear Q failed: %d\n", err);
        exit(1);
    }

    /* K projection: same kernel object, new weights and output */
    err = clSetKernelArg(k_linear, 1, sizeof(cl_mem), &Wk);
    err |= clSetKernelArg(k_linear, 2, sizeof(cl_mem), &bk);
    err |= clSetKernelArg(k_linear, 3, sizeof(cl_mem), &K);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clSetKernelArg(linear K) failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueNDRangeKernel(queue, k_linear, 2, NULL, global2, local2, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue linear K failed: %d\n", err);
        exit(1);
    }

    /* V projection */
    err = clSetKernelArg(k_linear, 1, sizeof(cl_mem), &Wv);
    err |= clSetKernelArg(k_linear, 2, sizeof(cl_mem), &bv);
    err |= clSetKernelArg(k_linear, 3, sizeof(cl_mem), &V);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clSetKernelArg(linear V) failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueNDRangeKernel(queue, k_linear, 2, NULL, global2, local2, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue linear V failed: %d\n", err);
        exit(1);
    }

    /* out = Q * K + V */
    size_t global1[1] = {SEQ * DIM};
    size_t local1[1] = {WG};
    err = clSetKernelArg(k_combine, 0, sizeof(cl_mem), &Q);
    err |= clSetKernelArg(k_combine, 1, sizeof(cl_mem), &K);
    err |= clSetKernelArg(k_combine, 2, sizeof(cl_mem), &V);
    err |= clSetKernelArg(k_combine, 3, sizeof(cl_mem), &out);
    err |= clSetKernelArg(k_combine, 4, sizeof(int), &n);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clSetKernelArg(combine) failed: %d\n", err);
        exit(1);
    }
    err = clEnqueueNDRangeKernel(queue, k_combine, 1, NULL, global1, local1, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "enqueue combine failed: %d\n", err);
        exit(1);
    }

    clFinish(queue);
    err = clEnqueueReadBuffer(queue, out, CL_TRUE, 0, act_bytes, h_out, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clEnqueueReadBuffer(out) failed: %d\n", err);
        exit(1);
    }

    int errors = 0;
    for (int r = 0; r < SEQ; r++) {
        for (int c = 0; c < DIM; c++) {
            float p[3];
            for (int m = 0; m < 3; m++) {
                float acc = h_b[m * DIM + c];
                for (int k = 0; k < DIM; k++)
                    acc += h_X[r * DIM + k] * h_W[m * DIM * DIM + k * DIM + c];
                p[m] = acc;
            }
            if (fabsf(h_out[r * DIM + c] - (p[0] * p[1] + p[2])) > 1e-3f)
                errors++;
        }
    }
    printf("qkv: errors=%d\n", errors);

    clReleaseMemObject(X);
    clReleaseMemObject(Wq);
    clReleaseMemObject(Wk);
    clReleaseMemObject(Wv);
    clReleaseMemObject(bq);
    clReleaseMemObject(bk);
    clReleaseMemObject(bv);
    clReleaseMemObject(Q);
    clReleaseMemObject(K);
    clReleaseMemObject(V);
    clReleaseMemObject(out);
    clReleaseKernel(k_linear);
    clReleaseKernel(k_combine);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(source);
    free(h_X);
    free(h_W);
    free(h_b);
    free(h_out);
    return errors != 0;
}
