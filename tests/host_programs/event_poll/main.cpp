// A solver in the style of OpenDwarfs' nqueens: each round waits for the device by polling
// the last command's execution status, reads the previous round's results back when there
// was one (the event is non-NULL after an enqueue), writes a buffer once per device
// (std::vector<bool> flags) and launches the next round over its device's width.
#include <CL/cl.h>
#include <cstdio>
#include <vector>
#include "timer.h"

int main() {
    const int n = 64, rounds = 3;
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
    FILE *f = fopen("k.cl", "r");
    char src[4096];
    size_t len = fread(src, 1, sizeof(src) - 1, f);
    src[len] = 0;
    const char *text = src;
    cl_program p = clCreateProgramWithSource(ctx, 1, &text, &len, &err);
    clBuildProgram(p, 0, NULL, NULL, NULL, NULL);
    cl_kernel fill = clCreateKernel(p, "fill", &err);
    cl_mem out = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, n * sizeof(int), NULL, &err);
    cl_mem mask = clCreateBuffer(ctx, CL_MEM_READ_ONLY, n * sizeof(int), NULL, &err);
    std::vector<int> host(n), results(n);
    int devices = 1;
    std::vector<bool> written(devices);
    std::vector<int> widths(devices, n);
    for (int r = 0; r < rounds; r++) {
        int dev = -1;
        while (dev == -1) {
            for (int k = 0; k < devices; k++) {
                if (last_event == 0) {
                    dev = k;
                    break;
                }
                cl_int status;
                clGetEventInfo(last_event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(cl_int),
                               &status, NULL);
                if (status == CL_COMPLETE)
                    dev = k;
            }
        }
        if (last_event != 0) {
            clEnqueueReadBuffer(q, out, CL_TRUE, 0, n * sizeof(int), &results[0], 0, NULL, NULL);
            clReleaseEvent(last_event);
            last_event = 0;
        }
        if (!written[dev]) {
            clEnqueueWriteBuffer(q, mask, CL_TRUE, 0, n * sizeof(int), &host[0], 0, NULL, NULL);
            written[dev] = true;
        }
        size_t global = widths[dev];
        clSetKernelArg(fill, 0, sizeof(cl_mem), &out);
        clSetKernelArg(fill, 1, sizeof(cl_mem), &mask);
        clSetKernelArg(fill, 2, sizeof(int), &r);
        clEnqueueNDRangeKernel(q, fill, 1, NULL, &global, NULL, 0, NULL, &last_event);
        clFlush(q);
    }
    clFinish(q);
    return 0;
}
