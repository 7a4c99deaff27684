/* atax (PolyBench): y = A^T (A x).  The i loop is distributed; tmp[i] is computed in parallel
   over i, then y[j] += A[i][j]*tmp[i] is parallel over j after interchange. */
#include "common.h"
#ifndef M
#define M 390
#endif
#ifndef N
#define N 410
#endif

static void kernel_atax(int m, int n, double A[M][N], double x[N], double y[N], double tmp[M]) {
  int i, j;
  for (i = 0; i < n; i++)
    y[i] = 0;
  for (i = 0; i < m; i++) {
    tmp[i] = 0.0;
    for (j = 0; j < n; j++)
      tmp[i] = tmp[i] + A[i][j] * x[j];
    for (j = 0; j < n; j++)
      y[j] = y[j] + A[i][j] * tmp[i];
  }
}

static double A[M][N], x[N], y[N], tmp[M];

int main(void) {
  int i, j;
  for (i = 0; i < N; i++) x[i] = 1 + (i / (double)N);
  for (i = 0; i < M; i++) for (j = 0; j < N; j++) A[i][j] = pf_val(i, j, N);
  kernel_atax(M, N, A, x, y, tmp);
  pf_print("y", N, y);
  return 0;
}
