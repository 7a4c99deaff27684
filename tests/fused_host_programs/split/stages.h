/* stages.h: the launch helpers of split (defined in stages.c) */
#ifndef STAGES_H
#define STAGES_H
#include <CL/cl.h>

#define WG 64

cl_int run_shift_add(cl_command_queue queue, cl_kernel k, cl_mem a, cl_mem y, cl_mem b, int n);
cl_int run_square(cl_command_queue queue, cl_kernel k, cl_mem b, cl_mem out, int n);

#endif
