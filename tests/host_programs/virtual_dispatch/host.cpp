// virtual_dispatch [N]: a benchmark runs its kernels through an abstract class template
// (BabelStream's Stream<T>, SHOC's Stencil<T>): the object is made by `new` in a factory
// template, and each call through the base class runs the override of the class `new` made.
#include <cstdio>
#include <cstdlib>
#include <CL/cl.h>

template <class T>
class Stream {
  public:
    virtual ~Stream() {}
    virtual void copy() = 0;
    virtual void scale() { fill(); }  // the base's own version: never run here
    virtual void operator()(int times) = 0;
    void fill() { clEnqueueNDRangeKernel(queue, k_fill, 1, NULL, &n, NULL, 0, NULL, NULL); }
    void repeats(int& times) const { times = 2; }
  protected:
    cl_command_queue queue;
    cl_kernel k_fill;
    size_t n;
};

template <class T>
class CLStream : public Stream<T> {
  public:
    CLStream(cl_context ctx, cl_device_id dev, cl_command_queue q, size_t size);
    void copy() override;
    void scale() override;
    void operator()(int times) override;
  private:
    cl_kernel k_copy, k_scale;
    cl_mem d_a, d_b, d_c;
};

static const char* load_source()
{
    static char text[4096];
    FILE* f = fopen("kernels.cl", "rb");
    size_t length = fread(text, 1, sizeof(text) - 1, f);
    text[length] = '\0';
    fclose(f);
    return text;
}

template <class T>
CLStream<T>::CLStream(cl_context ctx, cl_device_id dev, cl_command_queue q, size_t size)
{
    cl_int err;
    this->queue = q;
    this->n = size;
    const char* text = load_source();
    cl_program prog = clCreateProgramWithSource(ctx, 1, &text, NULL, &err);
    clBuildProgram(prog, 1, &dev, NULL, NULL, NULL);
    k_copy = clCreateKernel(prog, "copy", &err);
    k_scale = clCreateKernel(prog, "scale", &err);
    this->k_fill = clCreateKernel(prog, "fill", &err);
    T* h = (T*)malloc(size * sizeof(T));
    for (size_t i = 0; i < size; i++) h[i] = (T)(i % 9);
    d_a = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, size * sizeof(T), h,
                         &err);
    d_b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, size * sizeof(T), NULL, &err);
    d_c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, size * sizeof(T), NULL, &err);
    T s = 3;
    clSetKernelArg(k_copy, 0, sizeof(cl_mem), &d_a);
    clSetKernelArg(k_copy, 1, sizeof(cl_mem), &d_c);
    clSetKernelArg(k_scale, 0, sizeof(cl_mem), &d_b);
    clSetKernelArg(k_scale, 1, sizeof(cl_mem), &d_c);
    clSetKernelArg(k_scale, 2, sizeof(T), &s);
    clSetKernelArg(this->k_fill, 0, sizeof(cl_mem), &d_b);
    free(h);
}

template <class T>
void CLStream<T>::copy()
{
    clEnqueueNDRangeKernel(this->queue, k_copy, 1, NULL, &this->n, NULL, 0, NULL, NULL);
}

template <class T>
void CLStream<T>::scale()
{
    clEnqueueNDRangeKernel(this->queue, k_scale, 1, NULL, &this->n, NULL, 0, NULL, NULL);
}

template <class T>
void CLStream<T>::operator()(int times)
{
    for (int t = 0; t < times; t++) {
        copy();
        scale();
    }
    clFinish(this->queue);
}

template <class T>
Stream<T>* make_stream(cl_context ctx, cl_device_id dev, cl_command_queue q, size_t n)
{
    return new CLStream<T>(ctx, dev, q, n);
}

template <class T>
void run_all(Stream<T>* stream)
{
    int times = 0;
    stream->repeats(times);  // a reference parameter of a method found by name
    stream->copy();
    stream->scale();
    (*stream)(times);
}

int main(int argc, char** argv)
{
    size_t n = argc > 1 ? atoi(argv[1]) : 1024;
    cl_int err;
    cl_platform_id platform;
    clGetPlatformIDs(1, &platform, NULL);
    cl_device_id dev;
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &dev, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    Stream<float>* stream = make_stream<float>(ctx, dev, q, n);
    run_all<float>(stream);
    stream->scale();
    delete stream;
    return 0;
}
