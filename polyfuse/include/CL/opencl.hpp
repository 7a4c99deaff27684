/* polyfuse: declarations of the C++ OpenCL wrapper (opencl.hpp, cl2.hpp, cl.hpp) for parsing
 * host programs, used only when no wrapper header is installed (polyfuse's headers come after
 * the system's include path).  polyfuse models the wrapper's calls by their qualified names
 * (polyfuse/frontend/clhpp.py), so declarations are all it needs. */
#ifndef POLYFUSE_OPENCL_HPP
#define POLYFUSE_OPENCL_HPP
#include <CL/cl.h>
#include <string>
#include <vector>
#include <utility>
#include <exception>

namespace cl {
namespace detail {
struct info_t {
    template <typename T> operator T() const;
};
}
class Error : public std::exception {
public:
    Error(cl_int err, const char *what = 0);
    cl_int err() const;
    const char *what() const noexcept override;
};
class Device {
public:
    Device();
    template <cl_uint N> detail::info_t getInfo(cl_int *err = 0) const;
    template <typename T> cl_int getInfo(cl_uint name, T *param) const;
    static Device getDefault(cl_int *err = 0);
};
class Platform {
public:
    Platform();
    static cl_int get(std::vector<Platform> *platforms);
    static Platform getDefault(cl_int *err = 0);
    template <cl_uint N> detail::info_t getInfo(cl_int *err = 0) const;
    template <typename T> cl_int getInfo(cl_uint name, T *param) const;
    cl_int getDevices(cl_device_type type, std::vector<Device> *devices) const;
};
class Context {
public:
    Context();
    Context(cl_device_type type, cl_context_properties *props = 0, void *notify = 0,
            void *data = 0, cl_int *err = 0);
    Context(const Device &device, cl_context_properties *props = 0, void *notify = 0,
            void *data = 0, cl_int *err = 0);
    Context(const std::vector<Device> &devices, cl_context_properties *props = 0,
            void *notify = 0, void *data = 0, cl_int *err = 0);
    static Context getDefault(cl_int *err = 0);
    template <cl_uint N> detail::info_t getInfo(cl_int *err = 0) const;
};
class Event {
public:
    Event();
    cl_int wait() const;
    static cl_int waitForEvents(const std::vector<Event> &events);
    template <cl_uint N> detail::info_t getProfilingInfo(cl_int *err = 0) const;
};
class Memory {
public:
    Memory();
};
class Buffer : public Memory {
public:
    Buffer();
    Buffer(const Context &context, cl_mem_flags flags, size_t size, void *host_ptr = 0,
           cl_int *err = 0);
    Buffer(cl_mem_flags flags, size_t size, void *host_ptr = 0, cl_int *err = 0);
    template <typename IteratorType>
    Buffer(const Context &context, IteratorType startIterator, IteratorType endIterator,
           bool readOnly, bool useHostPtr = false, cl_int *err = 0);
    template <cl_uint N> detail::info_t getInfo(cl_int *err = 0) const;
};
class NDRange {
public:
    NDRange();
    NDRange(size_t size0);
    NDRange(size_t size0, size_t size1);
    NDRange(size_t size0, size_t size1, size_t size2);
    size_t dimensions() const;
};
static const NDRange NullRange;
struct LocalSpaceArg {
    size_t size_;
};
LocalSpaceArg Local(size_t size);
class Program {
public:
    typedef std::vector<std::pair<const char *, size_t>> Sources;
    Program();
    Program(const std::string &source, bool build = false, cl_int *err = 0);
    Program(const Context &context, const std::string &source, bool build = false,
            cl_int *err = 0);
    Program(const Context &context, const Sources &sources, cl_int *err = 0);
    cl_int build(const std::vector<Device> &devices, const char *options = 0,
                 void *notify = 0, void *data = 0) const;
    cl_int build(const char *options = 0, void *notify = 0, void *data = 0) const;
    template <cl_uint N> detail::info_t getInfo(cl_int *err = 0) const;
    template <cl_uint N> detail::info_t getBuildInfo(const Device &device, cl_int *err = 0) const;
};
class Kernel {
public:
    Kernel();
    Kernel(const Program &program, const char *name, cl_int *err = 0);
    template <typename T> cl_int setArg(cl_uint index, const T &value);
    cl_int setArg(cl_uint index, size_t size, const void *value);
    template <cl_uint N> detail::info_t getInfo(cl_int *err = 0) const;
    template <cl_uint N> detail::info_t getWorkGroupInfo(const Device &device,
                                                         cl_int *err = 0) const;
};
class CommandQueue {
public:
    CommandQueue();
    CommandQueue(cl_command_queue_properties props, cl_int *err = 0);
    CommandQueue(const Context &context, cl_command_queue_properties props = 0,
                 cl_int *err = 0);
    CommandQueue(const Context &context, const Device &device,
                 cl_command_queue_properties props = 0, cl_int *err = 0);
    static CommandQueue getDefault(cl_int *err = 0);
    cl_int enqueueReadBuffer(const Buffer &buffer, cl_bool blocking, size_t offset, size_t size,
                             void *ptr, const std::vector<Event> *events = 0,
                             Event *event = 0) const;
    cl_int enqueueWriteBuffer(const Buffer &buffer, cl_bool blocking, size_t offset,
                              size_t size, const void *ptr, const std::vector<Event> *events = 0,
                              Event *event = 0) const;
    cl_int enqueueCopyBuffer(const Buffer &src, const Buffer &dst, size_t src_offset,
                             size_t dst_offset, size_t size,
                             const std::vector<Event> *events = 0, Event *event = 0) const;
    template <typename PatternType>
    cl_int enqueueFillBuffer(const Buffer &buffer, PatternType pattern, size_t offset,
                             size_t size, const std::vector<Event> *events = 0,
                             Event *event = 0) const;
    void *enqueueMapBuffer(const Buffer &buffer, cl_bool blocking, cl_map_flags flags,
                           size_t offset, size_t size, const std::vector<Event> *events = 0,
                           Event *event = 0, cl_int *err = 0) const;
    cl_int enqueueUnmapMemObject(const Memory &memory, void *mapped_ptr,
                                 const std::vector<Event> *events = 0, Event *event = 0) const;
    cl_int enqueueNDRangeKernel(const Kernel &kernel, const NDRange &offset,
                                const NDRange &global, const NDRange &local = NullRange,
                                const std::vector<Event> *events = 0, Event *event = 0) const;
    cl_int enqueueTask(const Kernel &kernel, const std::vector<Event> *events = 0,
                       Event *event = 0) const;
    cl_int enqueueBarrierWithWaitList(const std::vector<Event> *events = 0,
                                      Event *event = 0) const;
    cl_int flush() const;
    cl_int finish() const;
};
class EnqueueArgs {
public:
    EnqueueArgs(NDRange global);
    EnqueueArgs(NDRange global, NDRange local);
    EnqueueArgs(NDRange offset, NDRange global, NDRange local);
    EnqueueArgs(CommandQueue &queue, NDRange global);
    EnqueueArgs(CommandQueue &queue, NDRange global, NDRange local);
    EnqueueArgs(CommandQueue &queue, NDRange offset, NDRange global, NDRange local);
    EnqueueArgs(CommandQueue &queue, Event e, NDRange global);
    EnqueueArgs(CommandQueue &queue, Event e, NDRange global, NDRange local);
};
template <typename... Ts> class KernelFunctor {
public:
    KernelFunctor(Kernel kernel);
    KernelFunctor(const Program &program, const std::string name, cl_int *err = 0);
    Event operator()(const EnqueueArgs &args, Ts... ts);
    Kernel getKernel();
};
namespace compatibility {
template <typename... Ts> struct make_kernel {
    make_kernel(const Program &program, const std::string name, cl_int *err = 0);
    make_kernel(const Kernel kernel);
    Event operator()(const EnqueueArgs &args, Ts... ts);
};
}
template <typename IteratorType>
cl_int copy(IteratorType startIterator, IteratorType endIterator, Buffer &buffer);
template <typename IteratorType>
cl_int copy(const Buffer &buffer, IteratorType startIterator, IteratorType endIterator);
template <typename IteratorType>
cl_int copy(const CommandQueue &queue, IteratorType startIterator, IteratorType endIterator,
            Buffer &buffer);
template <typename IteratorType>
cl_int copy(const CommandQueue &queue, const Buffer &buffer, IteratorType startIterator,
            IteratorType endIterator);
cl_int enqueueReadBuffer(const Buffer &buffer, cl_bool blocking, size_t offset, size_t size,
                         void *ptr, const std::vector<Event> *events = 0, Event *event = 0);
cl_int enqueueWriteBuffer(const Buffer &buffer, cl_bool blocking, size_t offset, size_t size,
                          const void *ptr, const std::vector<Event> *events = 0,
                          Event *event = 0);
cl_int finish();
cl_int flush();
}  // namespace cl
#endif
