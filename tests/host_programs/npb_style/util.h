#include <CL/cl.h>

void util_exit(const char *msg);
cl_device_type util_device_type(void);
cl_device_id util_device(cl_device_type type);
cl_program util_program(cl_context ctx, cl_device_id dev, const char *dir, const char *file,
                        const char *opts);
