// Cpp_common/cl.hpp stand-in: HandsOnOpenCL ships the Khronos wrapper here.
#include <CL/cl.hpp>
