/* polyfuse fake libc header: assert stays a call so polyfuse can read the asserted facts. */
#ifndef _POLYFUSE_ASSERT_H
#define _POLYFUSE_ASSERT_H
void assert(int condition);
#endif
