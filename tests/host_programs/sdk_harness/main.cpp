// A sample harness as SDK samples ship it: option objects made with new and kept in a table
// that grows, a command-line parser matching std::string names and storing through void*,
// a sample class whose constructor news its argument parser, build options in a struct of
// std::strings, a --dump path that builds from a flags file, and throw on error paths.
#include <CL/cl.h>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>

enum ArgType { ARG_INT, ARG_STRING, NO_ARGUMENT };

struct Option {
    std::string _sVersion;
    std::string _lVersion;
    ArgType _type;
    void *_value;
};

class ArgsParser {
  protected:
    int _numArgs;
    Option *_options;
    ArgsParser() { _numArgs = 0; _options = NULL; }

    int match(char **argv, int argc) {
        char *arg = *argv;
        if (*arg != '-') return 1;
        bool shortVer = true;
        if (*(arg + 1) == '-') { shortVer = false; arg++; }
        arg++;
        for (int count = 0; count < _numArgs; count++) {
            std::string &name = shortVer ? _options[count]._sVersion : _options[count]._lVersion;
            if (name.compare(arg) != 0) continue;
            if (_options[count]._type == NO_ARGUMENT) {
                *((bool *)_options[count]._value) = true;
                return 1;
            }
            if (argc < 2) throw std::string("missing argument");
            if (_options[count]._type == ARG_INT) {
                if (sscanf(*(argv + 1), "%d", (int *)_options[count]._value) != 1)
                    throw std::string("not an integer");
            } else {
                std::string *str = (std::string *)_options[count]._value;
                str->clear();
                str->append(*(argv + 1));
            }
            return 2;
        }
        return 1;
    }

  public:
    bool verify;
    int AddOption(Option *op) {
        Option *save = _options;
        _options = new Option[_numArgs + 1];
        for (int i = 0; i < _numArgs; ++i) _options[i] = save[i];
        _options[_numArgs] = *op;
        _numArgs++;
        delete[] save;
        return 0;
    }
    int parse(char **argv, int argc) {
        argc--;
        argv++;
        while (argc > 0) {
            int used = match(argv, argc);
            argc -= used;
            argv += used;
        }
        return 0;
    }
};

class CLArgs : public ArgsParser {
  public:
    std::string deviceType;
    std::string dumpBinary;
    std::string flags;
    CLArgs() : ArgsParser() { deviceType = "gpu"; verify = false; }
    int initialize() {
        Option *list = new Option[3];
        list[0]._lVersion = "device"; list[0]._type = ARG_STRING; list[0]._value = &deviceType;
        list[1]._sVersion = "e"; list[1]._lVersion = "verify"; list[1]._type = NO_ARGUMENT;
        list[1]._value = &verify;
        list[2]._lVersion = "dump"; list[2]._type = ARG_STRING; list[2]._value = &dumpBinary;
        for (int i = 0; i < 3; i++) AddOption(&list[i]);
        delete[] list;
        return 0;
    }
    bool isDumpBinaryEnabled() { return dumpBinary.size() != 0; }
};

template <typename T> T roundToPowerOf2(T val) {
    int bytes = sizeof(T);
    val--;
    for (int i = 0; i < bytes; i++) val |= val >> (1 << i);
    val++;
    return val;
}

struct BuildData {
    std::string kernelName;
    std::string flagsStr;
    BuildData() { kernelName = std::string(""); flagsStr = std::string(""); }
};

static cl_program build(cl_context ctx, const BuildData &data) {
    FILE *f = fopen(data.kernelName.c_str(), "r");
    if (!f) throw std::string("cannot open ") + data.kernelName;
    static char src[4096];
    size_t len = fread(src, 1, sizeof(src) - 1, f);
    src[len] = 0;
    const char *text = src;
    cl_int err;
    cl_program p = clCreateProgramWithSource(ctx, 1, &text, &len, &err);
    clBuildProgram(p, 0, NULL, data.flagsStr.c_str(), NULL, NULL);
    return p;
}

class Sample {
  public:
    int length;
    int iterations;
    CLArgs *sampleArgs;
    Sample() : length(64), iterations(1) { sampleArgs = new CLArgs(); }
    int initialize() {
        sampleArgs->initialize();
        Option *opt = new Option;
        opt->_sVersion = "x"; opt->_lVersion = "length"; opt->_type = ARG_INT;
        opt->_value = &length;
        sampleArgs->AddOption(opt);
        opt->_sVersion = "i"; opt->_lVersion = "iterations"; opt->_value = &iterations;
        sampleArgs->AddOption(opt);
        delete opt;
        return 0;
    }
    int dump(cl_context ctx) {
        BuildData data;
        data.kernelName = "k.cl";
        FILE *f = fopen(sampleArgs->flags.c_str(), "r");
        char opts[256];
        if (f) fgets(opts, sizeof(opts), f);
        data.flagsStr.append(opts);
        build(ctx, data);
        return 0;
    }
    template <typename T> int fill(cl_command_queue q, cl_mem buf, T *&ptr);
    int run(cl_context ctx, cl_command_queue q) {
        BuildData data;
        data.kernelName = "k.cl";
        std::ostringstream opts;
        opts << "-DSCALE=" << 2 << ".0f";
        data.flagsStr.append(opts.str().c_str());
        cl_program p = build(ctx, data);
        cl_int err;
        cl_kernel scale = clCreateKernel(p, "scale", &err);
        cl_kernel bump = clCreateKernel(p, "bump", &err);
        size_t bytes = length * sizeof(float);
        cl_mem in = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
        cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
        size_t global = length;
        float *host;
        fill(q, in, host);
        for (int it = 0; it < iterations; it++) {
            clSetKernelArg(scale, 0, sizeof(cl_mem), &in);
            clSetKernelArg(scale, 1, sizeof(cl_mem), &out);
            clEnqueueNDRangeKernel(q, scale, 1, NULL, &global, NULL, 0, NULL, NULL);
            clSetKernelArg(bump, 0, sizeof(cl_mem), &out);
            clEnqueueNDRangeKernel(q, bump, 1, NULL, &global, NULL, 0, NULL, NULL);
        }
        clFinish(q);
        return 0;
    }
};

template <typename T> int Sample::fill(cl_command_queue q, cl_mem buf, T *&ptr) {
    cl_int err;
    ptr = (T *)clEnqueueMapBuffer(q, buf, CL_TRUE, CL_MAP_WRITE, 0, length * sizeof(T), 0, NULL,
                                  NULL, &err);
    clEnqueueUnmapMemObject(q, buf, ptr, 0, NULL, NULL);
    return 0;
}

int main(int argc, char *argv[]) {
    Sample sample;
    sample.initialize();
    sample.sampleArgs->parse(argv, argc);
    sample.length = roundToPowerOf2<cl_uint>(sample.length);
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
    if (sample.sampleArgs->isDumpBinaryEnabled())
        return sample.dump(ctx);
    if (sample.sampleArgs->deviceType.compare("cpu") != 0) throw std::string("cpu only");
    return sample.run(ctx, q);
}
