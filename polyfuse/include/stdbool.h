/* polyfuse fake libc header: just enough for pycparser to parse host programs. */
#ifndef _POLYFUSE_STDBOOL_H
#define _POLYFUSE_STDBOOL_H
#define bool _Bool
#define true 1
#define false 0
#endif
