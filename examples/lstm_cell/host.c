/* lstm_cell host: one LSTM layer over SEQ_LEN time steps, two launches per step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <CL/cl.h>

#define SEQ_LEN 8
#define INPUT 64
#define HIDDEN 128
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

static float sigmoidf(float v)
{
    return 1.0f / (1.0f + expf(-v));
}

int main(void)
{
    cl_int err;
    int input_size = INPUT;
    int hidden = HIDDEN;

    float* h_xs = (float*)malloc(SEQ_LEN * INPUT * sizeof(float));
    float* h_Wx = (float*)malloc(4 * HIDDEN * INPUT * sizeof(float));
    float* h_Wh = (float*)malloc(4 * HIDDEN * HIDDEN * sizeof(float));
    float* h_bias = (float*)malloc(4 * HIDDEN * sizeof(float));
    float* h_hs = (float*)calloc((SEQ_LEN + 1) * HIDDEN, sizeof(float));
    float* h_c = (float*)calloc(HIDDEN, sizeof(float));
    for (int i = 0; i < SEQ_LEN * INPUT; i++)
        h_xs[i] = (float)(i % 9) * 0.1f - 0.4f;
    for (int i = 0; i < 4 * HIDDEN * INPUT; i++)
        h_Wx[i] = (float)((i * 3) % 17) * 0.01f - 0.08f;
    for (int i = 0; i < 4 * HIDDEN * HIDDEN; i++)
        h_Wh[i] = (float)((i * 7) % 19) * 0.005f - 0.045f;
    for (int i = 0; i < 4 * HIDDEN; i++)
        h_bias[i] = 0.0f;

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
    cl_kernel k_gates = clCreateKernel(program, "lstm_gates", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(lstm_gates) failed: %d\n", err);
        exit(1);
    }
    cl_kernel k_cell = clCreateKernel(program, "lstm_cell", &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateKernel(lstm_cell) failed: %d\n", err);
        exit(1);
    }

    cl_mem xs = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                               SEQ_LEN * INPUT * sizeof(float), h_xs, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(xs) failed: %d\n", err);
        exit(1);
    }
    cl_mem Wx = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                               4 * HIDDEN * INPUT * sizeof(float), h_Wx, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(Wx) failed: %d\n", err);
        exit(1);
    }
    cl_mem Wh = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                               4 * HIDDEN * HIDDEN * sizeof(float), h_Wh, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(Wh) failed: %d\n", err);
        exit(1);
    }
    cl_mem bias = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                 4 * HIDDEN * sizeof(float), h_bias, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(bias) failed: %d\n", err);
        exit(1);
    }
    cl_mem hs = clCreateBuffer(context, CL_MEM_READ_WRITE, (SEQ_LEN + 1) * HIDDEN * sizeof(float),
                               NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(hs) failed: %d\n", err);
        exit(1);
    }
    cl_mem c = clCreateBuffer(context, CL_MEM_READ_WRITE, HIDDEN * sizeof(float), NULL, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(c) failed: %d\n", err);
        exit(1);
    }
    cl_mem gates = clCreateBuffer(context, CL_MEM_READ_WRITE, 4 * HIDDEN * sizeof(float), NULL,
                                  &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(gates) failed: %d\n", err);
        exit(1);
    }

    /* h_0 = 0 (row 0 of hs) and c_0 = 0 */
    err = clEnqueueWriteBuffer(queue, hs, CL_TRUE, 0, HIDDEN * sizeof(float), h_hs, 0, NULL, NULL);
    err |= clEnqueueWriteBuffer(queue, c, CL_TRUE, 0, HIDDEN * sizeof(float), h_c, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clEnqueueWriteBuffer failed: %d\n", err);
        exit(1);
    }

    err = clSetKernelArg(k_gates, 0, sizeof(cl_mem), &xs);
    err |= clSetKernelArg(k_gates, 1, sizeof(cl_mem), &hs);
    err |= clSetKernelArg(k_gates, 2, sizeof(cl_mem), &Wx);
    err |= clSetKernelArg(k_gates, 3, sizeof(cl_mem), &Wh);
    err |= clSetKernelArg(k_gates, 4, sizeof(cl_mem), &bias);
    err |= clSetKernelArg(k_gates, 5, sizeof(cl_mem), &gates);
    err |= clSetKernelArg(k_gates, 7, sizeof(int), &input_size);
    err |= clSetKernelArg(k_gates, 8, sizeof(int), &hidden);
    err |= clSetKernelArg(k_cell, 0, sizeof(cl_mem), &gates);
    err |= clSetKernelArg(k_cell, 1, sizeof(cl_mem), &c);
    err |= clSetKernelArg(k_cell, 2, sizeof(cl_mem), &hs);
    err |= clSetKernelArg(k_cell, 4, sizeof(int), &hidden);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clSetKernelArg failed: %d\n", err);
        exit(1);
    }

    size_t global[1] = {HIDDEN};
    size_t local[1] = {WG};
    for (int t = 0; t < SEQ_LEN; t++) {
        /* the time step is a scalar argument: row t of hs is h_t */
        err = clSetKernelArg(k_gates, 6, sizeof(int), &t);
        if (err != CL_SUCCESS) {
            fprintf(stderr, "clSetKernelArg(lstm_gates, t) failed: %d\n", err);
            exit(1);
        }
        err = clEnqueueNDRangeKernel(queue, k_gates, 1, NULL, global, local, 0, NULL, NULL);
        if (err != CL_SUCCESS) {
            fprintf(stderr, "enqueue lstm_gates (t=%d) failed: %d\n", t, err);
            exit(1);
        }
        err = clSetKernelArg(k_cell, 3, sizeof(int), &t);
        if (err != CL_SUCCESS) {
            fprintf(stderr, "clSetKernelArg(lstm_cell, t) failed: %d\n", err);
            exit(1);
        }
        err = clEnqueueNDRangeKernel(queue, k_cell, 1, NULL, global, local, 0, NULL, NULL);
        if (err != CL_SUCCESS) {
            fprintf(stderr, "enqueue lstm_cell (t=%d) failed: %d\n", t, err);
            exit(1);
        }
    }
    clFinish(queue);

    float* out = (float*)malloc((SEQ_LEN + 1) * HIDDEN * sizeof(float));
    err = clEnqueueReadBuffer(queue, hs, CL_TRUE, 0, (SEQ_LEN + 1) * HIDDEN * sizeof(float), out,
                              0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clEnqueueReadBuffer(hs) failed: %d\n", err);
        exit(1);
    }

    /* reference on the host */
    float gate_ref[4 * HIDDEN];
    int errors = 0;
    for (int t = 0; t < SEQ_LEN; t++) {
        for (int row = 0; row < 4 * HIDDEN; row++) {
            float acc = h_bias[row];
            for (int k = 0; k < INPUT; k++)
                acc += h_Wx[row * INPUT + k] * h_xs[t * INPUT + k];
            for (int k = 0; k < HIDDEN; k++)
                acc += h_Wh[row * HIDDEN + k] * h_hs[t * HIDDEN + k];
            gate_ref[row] = acc;
        }
        for (int j = 0; j < HIDDEN; j++) {
            float cn = sigmoidf(gate_ref[HIDDEN + j]) * h_c[j]
                       + sigmoidf(gate_ref[j]) * tanhf(gate_ref[2 * HIDDEN + j]);
            h_c[j] = cn;
            h_hs[(t + 1) * HIDDEN + j] = sigmoidf(gate_ref[3 * HIDDEN + j]) * tanhf(cn);
            if (fabsf(out[(t + 1) * HIDDEN + j] - h_hs[(t + 1) * HIDDEN + j]) > 1e-3f)
                errors++;
        }
    }
    printf("lstm_cell: steps=%d hidden=%d errors=%d\n", SEQ_LEN, HIDDEN, errors);

    clReleaseMemObject(xs);
    clReleaseMemObject(Wx);
    clReleaseMemObject(Wh);
    clReleaseMemObject(bias);
    clReleaseMemObject(hs);
    clReleaseMemObject(c);
    clReleaseMemObject(gates);
    clReleaseKernel(k_gates);
    clReleaseKernel(k_cell);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(source);
    free(out);
    free(h_xs);
    free(h_Wx);
    free(h_Wh);
    free(h_bias);
    free(h_hs);
    free(h_c);
    return errors != 0;
}
