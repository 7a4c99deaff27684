/* a pipeline of stages kept in a linked list; each stage owns a buffer */
#include <stdio.h>
#include <stdlib.h>
#include <CL/cl.h>

#define N 32
#define STAGES 3

struct stage {
    cl_mem buf;
    int id;
    struct stage *next;
};

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) exit(1);
    char *s = malloc(1 << 16);
    size_t k = fread(s, 1, (1 << 16) - 1, f);
    s[k] = 0;
    fclose(f);
    return s;
}

int main(void)
{
    cl_int err;
    cl_platform_id plat;
    cl_device_id dev;
    clGetPlatformIDs(1, &plat, NULL);
    clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    const char *src = slurp("kernels.cl");
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 1, &dev, "", NULL, NULL);
    cl_kernel k = clCreateKernel(prog, "step", &err);

    struct stage *head = NULL, *tail = NULL;
    for (int s = 0; s < STAGES; s++) {
        struct stage *st = (struct stage *)malloc(sizeof(struct stage));
        st->buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
        st->id = s;
        st->next = NULL;
        if (tail) tail->next = st; else head = st;
        tail = st;
    }
    int n = N;
    size_t global = N, local = 8;
    for (struct stage *p = head; p->next != NULL; p = p->next) {
        clSetKernelArg(k, 0, sizeof(cl_mem), &p->next->buf);
        clSetKernelArg(k, 1, sizeof(cl_mem), &p->buf);
        clSetKernelArg(k, 2, sizeof(int), &n);
        clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, NULL);
    }
    clFinish(q);
    float out[N];
    clEnqueueReadBuffer(q, tail->buf, CL_TRUE, 0, sizeof(out), out, 0, NULL, NULL);
    for (struct stage *p = head; p; ) { struct stage *nx = p->next; clReleaseMemObject(p->buf); free(p); p = nx; }
    return 0;
}
