/* polyfuse fake libc header: just enough for pycparser to parse host programs. */
#ifndef _POLYFUSE_TIME_H
#define _POLYFUSE_TIME_H
#include <stddef.h>
typedef long time_t;
typedef long clock_t;
typedef int clockid_t;
struct timespec { time_t tv_sec; long tv_nsec; };
struct tm { int tm_sec; int tm_min; int tm_hour; int tm_mday; int tm_mon; int tm_year; int tm_wday; int tm_yday; int tm_isdst; };
#define CLOCKS_PER_SEC 1000000L
#define CLOCK_REALTIME 0
#define CLOCK_MONOTONIC 1
clock_t clock(void);
time_t time(time_t *t);
double difftime(time_t a, time_t b);
int clock_gettime(clockid_t id, struct timespec *ts);
struct tm *localtime(const time_t *t);
#endif
