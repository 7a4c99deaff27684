/* cmdline_c -p P -d D [-v] -- [--size N] [--iters=I] [-q]: a harness parses its own options up
 * to "--" character by character and moves argv past them (as OpenDwarfs' ocd_parse does);
 * the application parses the rest with getopt_long. */
#include <CL/cl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int platform_id = -1, device_id = -1, verbose = 0;

static int harness_parse(int *argc, char ***argv)
{
    char **av = *argv;
    int i, used = *argc;
    for (i = 1; i < *argc; i++) {
        if (strlen(av[i]) == 2 && strncmp(av[i], "--", 2) == 0) { used = i; break; }
        if (av[i][0] != '-') continue;
        switch (av[i][1]) {
            case 'p': platform_id = atoi(av[++i]); break;
            case 'd': device_id = atoi(av[++i]); break;
            case 'v': verbose = 1; break;
            default: fprintf(stderr, "unknown harness option %s\n", av[i]); return -1;
        }
    }
    if (used == *argc) return 0;
    *argv += used;
    *argc -= used;
    return used;
}

int main(int argc, char **argv)
{
    int n = 32, iters = 1, quiet = 0, c;
    static struct option longopts[] = {
        { "size", required_argument, NULL, 's' },
        { "iters", required_argument, NULL, 'i' },
        { "quiet", no_argument, NULL, 'q' },
        { NULL, 0, NULL, 0 },
    };
    if (harness_parse(&argc, &argv) < 0) return 1;
    while ((c = getopt_long(argc, argv, "s:i:q", longopts, NULL)) != -1) {
        switch (c) {
            case 's': n = atoi(optarg); break;
            case 'i': iters = atoi(optarg); break;
            case 'q': quiet = 1; break;
            default: return 1;
        }
    }
    if (n <= 0 || iters <= 0) return 1;
    if (!quiet) printf("platform %d device %d: n=%d iters=%d\n", platform_id, device_id, n, iters);
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
    cl_program p = clCreateProgramWithBinary(ctx, 0, NULL, NULL, NULL, NULL, &err);
    cl_kernel k = clCreateKernel(p, "inc", &err);
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    size_t g = n;
    for (int it = 0; it < iters; it++)
        clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    return 0;
}
