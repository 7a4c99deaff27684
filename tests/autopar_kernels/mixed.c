/* One region polyfuse cannot model (an indirect subscript) next to one it can (a scaled copy);
   the first is left untouched and reported, the second is parallelized. */
#include "common.h"
#ifndef N
#define N 1000
#endif

static double a[N], b[N], c[N];
static int idx[N];

static void work(int n) {
  int i;
  for (i = 0; i < n; i++)
    c[idx[i]] = a[i] + 1.0;
  for (i = 0; i < n; i++)
    b[i] = 2.0 * a[i] + c[i];
}

int main(void) {
  int i;
  for (i = 0; i < N; i++) { a[i] = pf_val(i, 0, N); idx[i] = (i * 7) % N; c[i] = 0; }
  work(N);
  pf_print("b", N, b);
  pf_print("c", N, c);
  return 0;
}
