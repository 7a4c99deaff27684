/* polyfuse: see opencl.hpp (used only when no wrapper header is installed) */
#include <CL/opencl.hpp>
