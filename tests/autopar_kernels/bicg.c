/* bicg (PolyBench): s = A^T r and q = A p in one i/j nest; distribution of the j loop is needed
   per statement: q is parallel over i, s over j (after interchange). */
#include "common.h"
#ifndef M
#define M 390
#endif
#ifndef N
#define N 410
#endif

static void kernel_bicg(int m, int n, double A[N][M], double s[M], double q[N], double p[M],
                        double r[N]) {
  int i, j;
  for (i = 0; i < m; i++)
    s[i] = 0;
  for (i = 0; i < n; i++) {
    q[i] = 0.0;
    for (j = 0; j < m; j++) {
      s[j] = s[j] + r[i] * A[i][j];
      q[i] = q[i] + A[i][j] * p[j];
    }
  }
}

static double A[N][M], s[M], q[N], p[M], r[N];

int main(void) {
  int i, j;
  for (i = 0; i < M; i++) p[i] = (double)(i % M) / M;
  for (i = 0; i < N; i++) {
    r[i] = (double)(i % N) / N;
    for (j = 0; j < M; j++) A[i][j] = pf_val(i, j + 1, N);
  }
  kernel_bicg(M, N, A, s, q, p, r);
  pf_print("s", M, s);
  pf_print("q", N, q);
  return 0;
}
