/**
 * mvt.c: PolyBench-ACC style OpenCL host for the matrix-vector product and transpose.
 *
 * Usage: ./mvt N OUTFILE
 * Runs the three kernels, compares against a CPU reference (exit status 1 on mismatch) and
 * writes the result vector to OUTFILE, one value per line.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <CL/cl.h>

#define DIM_LOCAL_WORK_GROUP_X 32
#define PERCENT_DIFF_ERROR_THRESHOLD 0.05

#define MAX_SOURCE_SIZE (0x100000)

typedef float DATA_TYPE;

cl_platform_id platform_id;
cl_device_id device_id;
cl_uint num_devices;
cl_uint num_platforms;
cl_int errcode;
cl_context clGPUContext;
cl_kernel clKernel1;
cl_kernel clKernel2;
cl_kernel clKernel3;
cl_command_queue clCommandQue;
cl_program clProgram;
cl_mem a_mem_obj;
cl_mem x1_mem_obj;
cl_mem x2_mem_obj;
cl_mem y1_mem_obj;
cl_mem y2_mem_obj;
cl_mem out_mem_obj;
FILE* fp;
char* source_str;
size_t source_size;

static float absVal(float a)
{
    return a < 0 ? -a : a;
}

static float percentDiff(double val1, double val2)
{
    if ((absVal(val1) < 0.01) && (absVal(val2) < 0.01))
        return 0.0f;
    return 100.0f * (absVal(absVal(val1 - val2) / absVal(val1 + 0.00000001f)));
}

static void read_cl_file(void)
{
    fp = fopen("kernels.cl", "r");
    if (!fp) {
        fprintf(stderr, "Failed to load kernel.\n");
        exit(1);
    }
    source_str = (char*)malloc(MAX_SOURCE_SIZE);
    source_size = fread(source_str, 1, MAX_SOURCE_SIZE, fp);
    fclose(fp);
}

static void init_arrays(int n, DATA_TYPE* a, DATA_TYPE* x1, DATA_TYPE* x2, DATA_TYPE* y1,
                        DATA_TYPE* y2)
{
    int i, j;
    for (i = 0; i < n; i++) {
        x1[i] = 0.0f;
        x2[i] = 0.0f;
        y1[i] = (DATA_TYPE)(i % 7) / 7.0f;
        y2[i] = (DATA_TYPE)((i + 3) % 5) / 5.0f;
        for (j = 0; j < n; j++)
            a[i * n + j] = ((DATA_TYPE)((i * j) % 11)) / 11.0f;
    }
}

int main(int argc, char* argv[])
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s N OUTFILE\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[1]);
    DATA_TYPE alpha = 0.5f;
    DATA_TYPE* a = (DATA_TYPE*)malloc(n * n * sizeof(DATA_TYPE));
    DATA_TYPE* x1 = (DATA_TYPE*)malloc(n * sizeof(DATA_TYPE));
    DATA_TYPE* x2 = (DATA_TYPE*)malloc(n * sizeof(DATA_TYPE));
    DATA_TYPE* y1 = (DATA_TYPE*)malloc(n * sizeof(DATA_TYPE));
    DATA_TYPE* y2 = (DATA_TYPE*)malloc(n * sizeof(DATA_TYPE));
    DATA_TYPE* out = (DATA_TYPE*)malloc(n * sizeof(DATA_TYPE));
    init_arrays(n, a, x1, x2, y1, y2);
    read_cl_file();

    errcode = clGetPlatformIDs(1, &platform_id, &num_platforms);
    errcode |= clGetDeviceIDs(platform_id, CL_DEVICE_TYPE_ALL, 1, &device_id, &num_devices);
    clGPUContext = clCreateContext(NULL, 1, &device_id, NULL, NULL, &errcode);
    clCommandQue = clCreateCommandQueue(clGPUContext, device_id, 0, &errcode);
    if (errcode != CL_SUCCESS) {
        fprintf(stderr, "Error in creating the OpenCL context\n");
        return 1;
    }

    a_mem_obj = clCreateBuffer(clGPUContext, CL_MEM_READ_ONLY, sizeof(DATA_TYPE) * n * n, NULL, &errcode);
    x1_mem_obj = clCreateBuffer(clGPUContext, CL_MEM_READ_WRITE, sizeof(DATA_TYPE) * n, NULL, &errcode);
    x2_mem_obj = clCreateBuffer(clGPUContext, CL_MEM_READ_WRITE, sizeof(DATA_TYPE) * n, NULL, &errcode);
    y1_mem_obj = clCreateBuffer(clGPUContext, CL_MEM_READ_ONLY, sizeof(DATA_TYPE) * n, NULL, &errcode);
    y2_mem_obj = clCreateBuffer(clGPUContext, CL_MEM_READ_ONLY, sizeof(DATA_TYPE) * n, NULL, &errcode);
    out_mem_obj = clCreateBuffer(clGPUContext, CL_MEM_WRITE_ONLY, sizeof(DATA_TYPE) * n, NULL, &errcode);
    errcode = clEnqueueWriteBuffer(clCommandQue, a_mem_obj, CL_TRUE, 0, sizeof(DATA_TYPE) * n * n, a, 0, NULL, NULL);
    errcode |= clEnqueueWriteBuffer(clCommandQue, x1_mem_obj, CL_TRUE, 0, sizeof(DATA_TYPE) * n, x1, 0, NULL, NULL);
    errcode |= clEnqueueWriteBuffer(clCommandQue, x2_mem_obj, CL_TRUE, 0, sizeof(DATA_TYPE) * n, x2, 0, NULL, NULL);
    errcode |= clEnqueueWriteBuffer(clCommandQue, y1_mem_obj, CL_TRUE, 0, sizeof(DATA_TYPE) * n, y1, 0, NULL, NULL);
    errcode |= clEnqueueWriteBuffer(clCommandQue, y2_mem_obj, CL_TRUE, 0, sizeof(DATA_TYPE) * n, y2, 0, NULL, NULL);
    if (errcode != CL_SUCCESS) {
        fprintf(stderr, "Error in writing buffers\n");
        return 1;
    }

    clProgram = clCreateProgramWithSource(clGPUContext, 1, (const char**)&source_str,
                                          (const size_t*)&source_size, &errcode);
    errcode = clBuildProgram(clProgram, 1, &device_id, NULL, NULL, NULL);
    if (errcode != CL_SUCCESS) {
        fprintf(stderr, "Error in building program\n");
        return 1;
    }
    clKernel1 = clCreateKernel(clProgram, "mvt_kernel1", &errcode);
    clKernel2 = clCreateKernel(clProgram, "mvt_kernel2", &errcode);
    clKernel3 = clCreateKernel(clProgram, "mvt_combine", &errcode);
    if (errcode != CL_SUCCESS) {
        fprintf(stderr, "Error in creating kernels\n");
        return 1;
    }

    size_t localWorkSize[1], globalWorkSize[1];
    localWorkSize[0] = DIM_LOCAL_WORK_GROUP_X;
    globalWorkSize[0] = (size_t)((n + DIM_LOCAL_WORK_GROUP_X - 1) / DIM_LOCAL_WORK_GROUP_X) * DIM_LOCAL_WORK_GROUP_X;

    /* kernel 1: x1 += A y1 */
    errcode = clSetKernelArg(clKernel1, 0, sizeof(cl_mem), (void*)&a_mem_obj);
    errcode |= clSetKernelArg(clKernel1, 1, sizeof(cl_mem), (void*)&x1_mem_obj);
    errcode |= clSetKernelArg(clKernel1, 2, sizeof(cl_mem), (void*)&y1_mem_obj);
    errcode |= clSetKernelArg(clKernel1, 3, sizeof(int), (void*)&n);
    errcode |= clEnqueueNDRangeKernel(clCommandQue, clKernel1, 1, NULL, globalWorkSize, localWorkSize, 0, NULL, NULL);
    if (errcode != CL_SUCCESS) {
        fprintf(stderr, "Error in launching kernel1\n");
        return 1;
    }

    /* kernel 2: x2 += A^T y2 */
    errcode = clSetKernelArg(clKernel2, 0, sizeof(cl_mem), (void*)&a_mem_obj);
    errcode |= clSetKernelArg(clKernel2, 1, sizeof(cl_mem), (void*)&x2_mem_obj);
    errcode |= clSetKernelArg(clKernel2, 2, sizeof(cl_mem), (void*)&y2_mem_obj);
    errcode |= clSetKernelArg(clKernel2, 3, sizeof(int), (void*)&n);
    errcode |= clEnqueueNDRangeKernel(clCommandQue, clKernel2, 1, NULL, globalWorkSize, localWorkSize, 0, NULL, NULL);
    if (errcode != CL_SUCCESS) {
        fprintf(stderr, "Error in launching kernel2\n");
        return 1;
    }

    errcode = clSetKernelArg(clKernel3, 0, sizeof(cl_mem), (void*)&x1_mem_obj);
    errcode |= clSetKernelArg(clKernel3, 1, sizeof(cl_mem), (void*)&x2_mem_obj);
    errcode |= clSetKernelArg(clKernel3, 2, sizeof(cl_mem), (void*)&out_mem_obj);
    errcode |= clSetKernelArg(clKernel3, 3, sizeof(DATA_TYPE), (void*)&alpha);
    errcode |= clSetKernelArg(clKernel3, 4, sizeof(int), (void*)&n);
    errcode |= clEnqueueNDRangeKernel(clCommandQue, clKernel3, 1, NULL, globalWorkSize, localWorkSize, 0, NULL, NULL);
    if (errcode != CL_SUCCESS) {
        fprintf(stderr, "Error in launching kernel3\n");
        return 1;
    }
    clFinish(clCommandQue);
    errcode = clEnqueueReadBuffer(clCommandQue, out_mem_obj, CL_TRUE, 0, n * sizeof(DATA_TYPE), out, 0, NULL, NULL);
    if (errcode != CL_SUCCESS) {
        fprintf(stderr, "Error in reading the result\n");
        return 1;
    }

    /* CPU reference */
    int i, j, fail = 0;
    for (i = 0; i < n; i++) {
        for (j = 0; j < n; j++) {
            x1[i] = x1[i] + a[i * n + j] * y1[j];
            x2[i] = x2[i] + a[j * n + i] * y2[j];
        }
    }
    for (i = 0; i < n; i++)
        if (percentDiff(alpha * x1[i] + x2[i], out[i]) > PERCENT_DIFF_ERROR_THRESHOLD)
            fail++;
    printf("mvt: n=%d non-matching outputs beyond %.2f%%: %d\n", n, PERCENT_DIFF_ERROR_THRESHOLD, fail);

    FILE* f = fopen(argv[2], "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", argv[2]);
        return 1;
    }
    for (i = 0; i < n; i++)
        fprintf(f, "%.6e\n", out[i]);
    fclose(f);

    clReleaseKernel(clKernel1);
    clReleaseKernel(clKernel2);
    clReleaseKernel(clKernel3);
    clReleaseProgram(clProgram);
    clReleaseMemObject(a_mem_obj);
    clReleaseMemObject(x1_mem_obj);
    clReleaseMemObject(x2_mem_obj);
    clReleaseMemObject(y1_mem_obj);
    clReleaseMemObject(y2_mem_obj);
    clReleaseMemObject(out_mem_obj);
    clReleaseCommandQueue(clCommandQue);
    clReleaseContext(clGPUContext);
    free(a); free(x1); free(x2); free(y1); free(y2); free(out); free(source_str);
    return fail != 0;
}
