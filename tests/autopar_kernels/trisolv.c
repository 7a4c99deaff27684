/* trisolv: forward substitution; i carries a flow dependence, j is a reduction -> host. */
#include "common.h"
#ifndef N
#define N 300
#endif

static void kernel_trisolv(int n, double L[N][N], double x[N], double b[N]) {
  int i, j;
  for (i = 0; i < n; i++) {
    x[i] = b[i];
    for (j = 0; j < i; j++)
      x[i] -= L[i][j] * x[j];
    x[i] = x[i] / L[i][i];
  }
}

static double L[N][N], x[N], b[N];

int main(void) {
  int i, j;
  for (i = 0; i < N; i++) {
    b[i] = pf_val(i, 0, N);
    for (j = 0; j <= i; j++) L[i][j] = (double)(i + N - j + 1) * 2 / N;
  }
  kernel_trisolv(N, L, x, b);
  pf_print("x", N, x);
  return 0;
}
