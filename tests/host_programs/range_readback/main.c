/* Histogram-style host (written for polyfuse's tests): the span of the data is read back
 * from the device and becomes a launch size and two kernel arguments. */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <CL/cl.h>

int main(int argc, char *argv[])
{
  unsigned int n = 4096;
  unsigned int *img = (unsigned int *)malloc(n * sizeof(unsigned int));
  for (unsigned int i = 0; i < n; i++)
    img[i] = (i * 37u) % 200u + 5u;

  cl_platform_id platform;
  cl_device_id device;
  cl_int err;
  clGetPlatformIDs(1, &platform, NULL);
  clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
  cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
  cl_command_queue queue = clCreateCommandQueue(ctx, device, 0, &err);

  FILE *f = fopen("kernels.cl", "rb");
  char source[4096];
  size_t length = fread(source, 1, sizeof(source) - 1, f);
  source[length] = 0;
  fclose(f);
  const char *src = source;
  cl_program program = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  clBuildProgram(program, 1, &device, "", NULL, NULL);
  cl_kernel prescan = clCreateKernel(program, "prescan", &err);
  cl_kernel bins = clCreateKernel(program, "bins", &err);

  cl_mem input = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                n * sizeof(unsigned int), img, &err);
  cl_mem ranges = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 2 * sizeof(unsigned int), NULL, &err);
  cl_mem histo = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 256 * sizeof(unsigned int), NULL, &err);

  unsigned int ranges_h[2] = {UINT32_MAX / 2, 0};
  clEnqueueWriteBuffer(queue, ranges, CL_TRUE, 0, 2 * sizeof(unsigned int), ranges_h,
                       0, NULL, NULL);
  clSetKernelArg(prescan, 0, sizeof(cl_mem), &input);
  clSetKernelArg(prescan, 1, sizeof(unsigned int), &n);
  clSetKernelArg(prescan, 2, sizeof(cl_mem), &ranges);
  size_t prescan_global[1] = {64};
  clEnqueueNDRangeKernel(queue, prescan, 1, NULL, prescan_global, NULL, 0, NULL, NULL);
  clEnqueueReadBuffer(queue, ranges, CL_TRUE, 0, 2 * sizeof(unsigned int), ranges_h,
                      0, NULL, NULL);

  size_t bins_global[2] = {1, 0};
  bins_global[1] = ranges_h[1] - ranges_h[0] + 1;
  clSetKernelArg(bins, 0, sizeof(cl_mem), &histo);
  clSetKernelArg(bins, 1, sizeof(unsigned int), &ranges_h[0]);
  clSetKernelArg(bins, 2, sizeof(unsigned int), &ranges_h[1]);
  clEnqueueNDRangeKernel(queue, bins, 2, NULL, bins_global, NULL, 0, NULL, NULL);
  clFinish(queue);
  printf("range %u..%u\n", ranges_h[0], ranges_h[1]);
  return 0;
}
