#include <CL/cl.h>
#include <stdlib.h>
#include <unistd.h>
struct opts { int iters; int n; };
int main(int argc, char **argv) {
  struct opts o; o.iters = 1; o.n = 64;
  int c;
  while ((c = getopt(argc, argv, "i:n:")) != -1) {
    switch (c) {
      case 'i': o.iters = atoi(optarg); break;
      case 'n': o.n = atoi(optarg); break;
      default: return 1;
    }
  }
  cl_int err; cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
  cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
  cl_program p = clCreateProgramWithBinary(ctx, 0, NULL, NULL, NULL, NULL, &err);
  cl_kernel k = clCreateKernel(p, "inc", &err);
  cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, o.n * sizeof(float), NULL, &err);
  clSetKernelArg(k, 0, sizeof(cl_mem), &a);
  size_t g = o.n;
  for (int it = 0; it < o.iters; it++)
    clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
  return 0;
}
