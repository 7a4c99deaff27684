/* Compiled as C: a tentative definition (zero) of the event that timer.h declares. */
#include "timer.h"

cl_event last_event;
