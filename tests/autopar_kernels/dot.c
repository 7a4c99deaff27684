/* Reductions: a dot product and a row-sum; the reduction loops are reported, not parallelized,
   while the row loop of the row-sum is parallel (k stays sequential inside the work-item). */
#include "common.h"
#ifndef N
#define N 5000
#endif
#ifndef M
#define M 64
#endif

static double x[N], y[N], R[M][N], rs[M];

static double dot(int n) {
  int i;
  double s;
  s = 0.0;
  for (i = 0; i < n; i++)
    s += x[i] * y[i];
  return s;
}

static void rowsum(int m, int n) {
  int i, k;
  for (i = 0; i < m; i++) {
    rs[i] = 0.0;
    for (k = 0; k < n; k++)
      rs[i] = rs[i] + R[i][k];
  }
}

int main(void) {
  int i, k;
  double s;
  for (i = 0; i < N; i++) { x[i] = pf_val(i, 0, N); y[i] = pf_val(i, 5, N); }
  for (i = 0; i < M; i++) for (k = 0; k < N; k++) R[i][k] = pf_val(i, k, M);
  s = dot(N);
  rowsum(M, N);
  printf("s %a\n", s);
  pf_print("rs", M, rs);
  return 0;
}
