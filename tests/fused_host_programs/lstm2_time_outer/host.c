/* lstm2 (time outer): a 2-layer LSTM over T steps; the host loops over time, then layers.
 *
 * Usage: ./lstm2 [T] [OUTFILE]   (T defaults to 6)
 * Checks the last layer's hidden states against a CPU reference and writes them to OUTFILE.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CL/cl.h>

#define LAYERS 2
#define HIDDEN 32
#define WG 16

static char* load(const char* path, size_t* n)
{
    FILE* f = fopen(path, "rb");
    char* s;
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    s = (char*)malloc(*n + 1);
    if (fread(s, 1, *n, f) != *n)
        exit(1);
    s[*n] = '\0';
    fclose(f);
    return s;
}

static float sigm(float v)
{
    return 1.0f / (1.0f + expf(-v));
}

int main(int argc, char** argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 6;
    const char* outfile = argc > 2 ? argv[2] : "lstm2_out.txt";
    int hidden = HIDDEN;
    int rows = (LAYERS + 1) * (steps + 1);
    size_t wsize = (size_t)LAYERS * 4 * HIDDEN * HIDDEN;
    float* h = (float*)calloc((size_t)rows * HIDDEN, sizeof(float));
    float* W = (float*)malloc(wsize * sizeof(float));
    float* U = (float*)malloc(wsize * sizeof(float));
    float* b = (float*)malloc(4 * HIDDEN * sizeof(float));
    float* ref = (float*)calloc((size_t)rows * HIDDEN, sizeof(float));
    float* cref = (float*)calloc((size_t)LAYERS * HIDDEN, sizeof(float));
    float* g = (float*)malloc(4 * HIDDEN * sizeof(float));
    cl_int err;
    int l, t, j, k, q;

    for (size_t i = 0; i < wsize; i++) {
        W[i] = 0.02f * (float)((int)(i * 7 % 13) - 6);
        U[i] = 0.015f * (float)((int)(i * 5 % 11) - 5);
    }
    for (j = 0; j < 4 * HIDDEN; j++)
        b[j] = 0.01f * (float)(j % 5);
    for (t = 0; t < steps; t++)
        for (j = 0; j < HIDDEN; j++)
            h[(t + 1) * HIDDEN + j] = 0.1f * (float)((t + j) % 7) - 0.3f;
    memcpy(ref, h, (size_t)rows * HIDDEN * sizeof(float));

    cl_platform_id platform;
    cl_device_id device;
    clGetPlatformIDs(1, &platform, NULL);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue queue = clCreateCommandQueue(ctx, device, 0, &err);
    size_t len;
    char* src = load("kernels.cl", &len);
    cl_program prog = clCreateProgramWithSource(ctx, 1, (const char**)&src, &len, &err);
    if (clBuildProgram(prog, 1, &device, "", NULL, NULL) != CL_SUCCESS) {
        fprintf(stderr, "build failed\n");
        return 1;
    }
    cl_kernel k_gates = clCreateKernel(prog, "lstm_gates", &err);
    cl_kernel k_cell = clCreateKernel(prog, "lstm_cell", &err);

    cl_mem d_h = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                (size_t)rows * HIDDEN * sizeof(float), h, &err);
    cl_mem d_W = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, wsize * sizeof(float), W, &err);
    cl_mem d_U = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, wsize * sizeof(float), U, &err);
    cl_mem d_b = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, 4 * HIDDEN * sizeof(float), b, &err);
    cl_mem d_gates = clCreateBuffer(ctx, CL_MEM_READ_WRITE, (size_t)LAYERS * 4 * HIDDEN * sizeof(float), NULL, &err);
    float zero = 0.0f;
    cl_mem d_c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, (size_t)LAYERS * HIDDEN * sizeof(float), NULL, &err);
    clEnqueueFillBuffer(queue, d_c, &zero, sizeof(float), 0, (size_t)LAYERS * HIDDEN * sizeof(float), 0, NULL, NULL);

    size_t global[1] = {HIDDEN};
    size_t local[1] = {WG};
    clSetKernelArg(k_gates, 0, sizeof(cl_mem), &d_h);
    clSetKernelArg(k_gates, 1, sizeof(cl_mem), &d_W);
    clSetKernelArg(k_gates, 2, sizeof(cl_mem), &d_U);
    clSetKernelArg(k_gates, 3, sizeof(cl_mem), &d_b);
    clSetKernelArg(k_gates, 4, sizeof(cl_mem), &d_gates);
    clSetKernelArg(k_gates, 9, sizeof(int), &hidden);
    clSetKernelArg(k_cell, 0, sizeof(cl_mem), &d_gates);
    clSetKernelArg(k_cell, 1, sizeof(cl_mem), &d_c);
    clSetKernelArg(k_cell, 2, sizeof(cl_mem), &d_h);
    clSetKernelArg(k_cell, 6, sizeof(int), &hidden);

    /* step by step, layer by layer: 2 launches per (step, layer) */
    for (t = 0; t < steps; t++) {
        for (l = 1; l <= LAYERS; l++) {
            int below = ((l - 1) * (steps + 1) + t + 1) * HIDDEN;
            int prev = (l * (steps + 1) + t) * HIDDEN;
            int out = (l * (steps + 1) + t + 1) * HIDDEN;
            int woff = (l - 1) * 4 * HIDDEN * HIDDEN;
            int goff = (l - 1) * 4 * HIDDEN;
            int coff = (l - 1) * HIDDEN;
            err = clSetKernelArg(k_gates, 5, sizeof(int), &below);
            err |= clSetKernelArg(k_gates, 6, sizeof(int), &prev);
            err |= clSetKernelArg(k_gates, 7, sizeof(int), &woff);
            err |= clSetKernelArg(k_gates, 8, sizeof(int), &goff);
            err |= clEnqueueNDRangeKernel(queue, k_gates, 1, NULL, global, local, 0, NULL, NULL);
            err |= clSetKernelArg(k_cell, 3, sizeof(int), &goff);
            err |= clSetKernelArg(k_cell, 4, sizeof(int), &coff);
            err |= clSetKernelArg(k_cell, 5, sizeof(int), &out);
            err |= clEnqueueNDRangeKernel(queue, k_cell, 1, NULL, global, local, 0, NULL, NULL);
            if (err != CL_SUCCESS) {
                fprintf(stderr, "launch failed: %d\n", err);
                return 1;
            }
        }
    }
    clEnqueueReadBuffer(queue, d_h, CL_TRUE, 0, (size_t)rows * HIDDEN * sizeof(float), h, 0, NULL, NULL);

    /* CPU reference */
    for (l = 1; l <= LAYERS; l++)
        for (t = 0; t < steps; t++) {
            const float* below = ref + ((l - 1) * (steps + 1) + t + 1) * HIDDEN;
            const float* prev = ref + (l * (steps + 1) + t) * HIDDEN;
            const float* Wl = W + (size_t)(l - 1) * 4 * HIDDEN * HIDDEN;
            const float* Ul = U + (size_t)(l - 1) * 4 * HIDDEN * HIDDEN;
            float* c = cref + (l - 1) * HIDDEN;
            for (q = 0; q < 4; q++)
                for (j = 0; j < HIDDEN; j++) {
                    int row = q * HIDDEN + j;
                    float acc = b[row];
                    for (k = 0; k < HIDDEN; k++) {
                        acc += Wl[row * HIDDEN + k] * below[k];
                        acc += Ul[row * HIDDEN + k] * prev[k];
                    }
                    g[row] = acc;
                }
            for (j = 0; j < HIDDEN; j++) {
                float cn = sigm(g[HIDDEN + j]) * c[j] + sigm(g[j]) * tanhf(g[2 * HIDDEN + j]);
                c[j] = cn;
                ref[(l * (steps + 1) + t + 1) * HIDDEN + j] = sigm(g[3 * HIDDEN + j]) * tanhf(cn);
            }
        }
    int errors = 0;
    for (j = 0; j < rows * HIDDEN; j++)
        if (fabsf(ref[j] - h[j]) > 1e-4f * (1.0f + fabsf(ref[j])))
            errors++;
    printf("lstm2: layers=%d steps=%d errors=%d\n", LAYERS, steps, errors);
    FILE* f = fopen(outfile, "w");
    if (!f)
        return 1;
    for (t = 1; t <= steps; t++)
        for (j = 0; j < HIDDEN; j++)
            fprintf(f, "%.6e\n", h[(LAYERS * (steps + 1) + t) * HIDDEN + j]);
    fclose(f);
    clReleaseMemObject(d_h);
    clReleaseMemObject(d_W);
    clReleaseMemObject(d_U);
    clReleaseMemObject(d_b);
    clReleaseMemObject(d_gates);
    clReleaseMemObject(d_c);
    clReleaseKernel(k_gates);
    clReleaseKernel(k_cell);
    clReleaseProgram(prog);
    clReleaseCommandQueue(queue);
    clReleaseContext(ctx);
    free(h); free(W); free(U); free(b); free(ref); free(cref); free(g); free(src);
    return errors != 0;
}
