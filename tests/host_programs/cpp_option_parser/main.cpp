// A benchmark harness's option parser, in the style of SHOC's: options are records kept in a
// std::map<std::string, Option> (a class member the constructor leaves to its default),
// short letters in a std::map<char, std::string>, the command line copied into a
// std::vector<std::string>, two overloads of parse(), and values read back through find(),
// an iterator's ->second and a std::stringstream.
#include <CL/cl.h>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

enum OptionType { OPT_INT, OPT_BOOL };

struct Option {
    std::string name;
    OptionType type;
    std::string value;
};

class Options {
  public:
    void add(const std::string &name, OptionType type, const std::string &dflt, char letter) {
        Option o;
        o.name = name;
        o.type = type;
        o.value = dflt;
        byName[name] = o;
        byLetter[letter] = name;
    }
    bool parse(int argc, char **argv) {
        std::vector<std::string> args;
        for (int i = 1; i < argc; i++)
            args.push_back(argv[i]);
        return parse(args);
    }
    bool parse(const std::vector<std::string> &args) {
        for (int i = 0; i < args.size(); i++) {
            std::string arg = args[i];
            if (arg[0] != '-') return false;
            std::string name = arg[1] == '-' ? arg.substr(2) : byLetter[arg[1]];
            if (byName.find(name) == byName.end()) return false;
            if (byName[name].type == OPT_BOOL) {
                byName[name].value = "true";
            } else {
                if (i + 1 >= args.size()) return false;
                byName[name].value = args[i + 1];
                i++;
            }
        }
        return true;
    }
    long getInt(const std::string &name) const {
        std::map<std::string, Option>::const_iterator it = byName.find(name);
        if (it == byName.end()) return -1;
        std::stringstream ss(it->second.value);
        long v;
        ss >> v;
        return v;
    }
    bool getBool(const std::string &name) const {
        std::map<std::string, Option>::const_iterator it = byName.find(name);
        return it != byName.end() && it->second.value == "true";
    }

  private:
    std::map<std::string, Option> byName;
    std::map<char, std::string> byLetter;
};

int main(int argc, char **argv) {
    Options op;
    op.add("size", OPT_INT, "64", 's');
    op.add("passes", OPT_INT, "2", 'n');
    op.add("verbose", OPT_BOOL, "", 'v');
    if (!op.parse(argc, argv)) {
        std::cerr << "bad options" << std::endl;
        return 1;
    }
    const long n = op.getInt("size");
    const int passes = op.getInt("passes");
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
    const char *src =
        "__kernel void scale(__global float *a) { int i = get_global_id(0); a[i] *= 2.0f; }";
    cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(p, 0, NULL, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(p, "scale", &err);
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    size_t global = n;
    for (int pass = 0; pass < passes; pass++)
        clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL);
    clFinish(q);
    if (op.getBool("verbose")) std::cout << "done" << std::endl;
    return 0;
}
