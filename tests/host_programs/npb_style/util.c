/* npb_style: SNU-NPB-style OpenCL helpers in their own translation unit: the device type from
 * an environment variable, a device search that returns from inside its loops and ends the
 * program when it finds nothing, and a program built from DIR/FILE with the caller's options
 * plus "-IDIR" written by a second sprintf. */
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

void util_exit(const char *msg)
{
    fprintf(stderr, "%s\n", msg);
    exit(EXIT_FAILURE);
}

cl_device_type util_device_type(void)
{
    char *t = getenv("NPB_STYLE_DEVICE_TYPE");
    if (t != NULL && strcasecmp(t, "gpu") == 0) return CL_DEVICE_TYPE_GPU;
    return CL_DEVICE_TYPE_CPU;
}

cl_device_id util_device(cl_device_type type)
{
    cl_uint np = 0, i;
    clGetPlatformIDs(0, NULL, &np);
    if (np == 0) util_exit("no OpenCL platform");
    cl_platform_id *ps = (cl_platform_id *)malloc(np * sizeof(cl_platform_id));
    clGetPlatformIDs(np, ps, NULL);
    for (i = 0; i < np; i++) {
        cl_uint nd = 0;
        clGetDeviceIDs(ps[i], type, 0, NULL, &nd);
        if (nd > 0) {
            cl_device_id *ds = (cl_device_id *)malloc(nd * sizeof(cl_device_id));
            clGetDeviceIDs(ps[i], type, nd, ds, NULL);
            cl_device_id d = ds[0];
            free(ds);
            free(ps);
            return d;
        }
    }
    free(ps);
    util_exit("no device of that type");
    return 0;
}

cl_program util_program(cl_context ctx, cl_device_id dev, const char *dir, const char *file,
                        const char *opts)
{
    char *path = (char *)malloc(strlen(dir) + strlen(file) + 2);
    sprintf(path, "%s/%s", dir, file);
    char *all = (char *)malloc(strlen(opts) + strlen(dir) + 4);
    sprintf(all, "%s -I%s", opts, dir);
    FILE *f = fopen(path, "rb");
    if (f == NULL) util_exit("cannot open the kernel file");
    fseek(f, 0, SEEK_END);
    size_t len = (size_t)ftell(f);
    rewind(f);
    char *src = (char *)malloc(len + 1);
    if (fread(src, len, 1, f) != 1) util_exit("cannot read the kernel file");
    src[len] = '\0';
    fclose(f);
    cl_int err;
    cl_program p = clCreateProgramWithSource(ctx, 1, (const char **)&src, &len, &err);
    if (clBuildProgram(p, 1, &dev, all, NULL, NULL) != CL_SUCCESS) util_exit("build failed");
    free(src);
    free(path);
    free(all);
    return p;
}
