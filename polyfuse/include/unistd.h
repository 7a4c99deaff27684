/* polyfuse fake libc header: just enough for pycparser to parse host programs. */
#ifndef _POLYFUSE_UNISTD_H
#define _POLYFUSE_UNISTD_H
#include <stddef.h>
typedef int pid_t;
extern char *optarg;
extern int optind;
unsigned int sleep(unsigned int seconds);
int usleep(unsigned int usec);
int getopt(int argc, char *const argv[], const char *optstring);
int access(const char *path, int mode);
long sysconf(int name);
#endif
