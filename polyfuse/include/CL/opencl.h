/* polyfuse stand-in for the Khronos umbrella header: the host API is all in cl.h. */
#ifndef _POLYFUSE_OPENCL_H
#define _POLYFUSE_OPENCL_H
#include <CL/cl.h>
#endif
