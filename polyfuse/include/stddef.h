/* polyfuse fake libc header: just enough for pycparser to parse host programs. */
#ifndef _POLYFUSE_STDDEF_H
#define _POLYFUSE_STDDEF_H
typedef unsigned long size_t;
typedef long ptrdiff_t;
typedef long ssize_t;
typedef int wchar_t;
#ifndef NULL
#define NULL ((void *)0)
#endif
#define offsetof(type, member) ((size_t)&(((type *)0)->member))
#endif
