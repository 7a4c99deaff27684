/* A timing helper's event, shared by the units of the program (OpenDwarfs' rdtsc.h). */
#include <CL/cl.h>

extern cl_event last_event;
