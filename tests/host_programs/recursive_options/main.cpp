// An option parser that re-enters itself for a configuration file, as benchmark harnesses'
// do (SHOC's OptionParser::parse -> parseFile -> parse).  Without the command line the
// option text is not known, so both sides of each comparison are explored: the recursion is
// summarised (it makes no OpenCL call) instead of inlined level after level.
#include <CL/cl.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

struct Options {
    int passes;
    int verbose;
};

static int parse(Options *o, int argc, char **argv);

static int parse_file(Options *o, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    char *words[64];
    int n = 1;
    while (n < 63 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        words[n++] = strdup(line);
    }
    fclose(f);
    return parse(o, n, words);
}

static int parse(Options *o, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            if (!parse_file(o, argv[i + 1])) return 0;
            i++;
        } else if (strcmp(argv[i], "-v") == 0) {
            o->verbose = 1;
        } else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            o->passes = atoi(argv[++i]);
        }
    }
    return 1;
}

int main(int argc, char **argv) {
    Options o = {4, 0};
    if (!parse(&o, argc, argv)) return 1;
    const int n = 256;
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
    const char *src = "__kernel void twice(__global float *a) { int i = get_global_id(0); a[i] *= 2.0f; }";
    cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(p, 0, NULL, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(p, "twice", &err);
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    size_t global = n;
    for (int pass = 0; pass < o.passes; pass++)
        clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL);
    clFinish(q);
    if (o.verbose) printf("done\n");
    return 0;
}
