/* polyfuse: the cl.hpp 1.2 wrapper for parsing host programs, used only when none is installed:
 * opencl.hpp (the system's, else polyfuse's declarations) with cl.hpp's make_kernel. */
#ifndef POLYFUSE_CL_HPP
#define POLYFUSE_CL_HPP
#include <CL/opencl.hpp>
namespace cl { using compatibility::make_kernel; }
#endif
