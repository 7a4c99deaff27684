// The layout of the Khronos cl.hpp 1.2 that HandsOnOpenCL ships in Cpp_common (written for the
// tests, not the header itself): it includes <GL/gl.h>, and make_kernel's call operator is
// inherited from a detail:: class specialised per argument count, with NullType defaults.
#ifndef CL12_HPP_
#define CL12_HPP_
#include <GL/gl.h>
#include <CL/opencl.h>
#include <string>
#include <vector>

// the wrapper's other classes, as polyfuse declares them
#include "../../../../polyfuse/include/CL/opencl.hpp"

namespace cl {
namespace detail {
struct NullType {};

template <typename T0, typename T1, typename T2, typename T3>
struct functionImplementation_ {
    Event operator()(const EnqueueArgs &enqueueArgs, T0 arg0, T1 arg1, T2 arg2, T3 arg3);
};

template <typename T0, typename T1, typename T2>
struct functionImplementation_<T0, T1, T2, NullType> {
    Event operator()(const EnqueueArgs &enqueueArgs, T0 arg0, T1 arg1, T2 arg2);
};
}  // namespace detail

template <typename T0, typename T1 = detail::NullType, typename T2 = detail::NullType,
          typename T3 = detail::NullType>
struct make_kernel : public detail::functionImplementation_<T0, T1, T2, T3> {
    make_kernel(const Program &program, const std::string name, cl_int *err = NULL);
    make_kernel(const Kernel kernel);
};
}  // namespace cl
#endif
