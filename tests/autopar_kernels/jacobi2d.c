/* jacobi-2d (PolyBench style, #pragma scop): t on the host, i and j on the NDRange. */
#include "common.h"
#ifndef N
#define N 200
#endif
#ifndef TSTEPS
#define TSTEPS 20
#endif

static void kernel_jacobi_2d(int tsteps, int n, double A[N][N], double B[N][N]) {
  int t, i, j;
#pragma scop
  for (t = 0; t < tsteps; t++) {
    for (i = 1; i < n - 1; i++)
      for (j = 1; j < n - 1; j++)
        B[i][j] = 0.2 * (A[i][j] + A[i][j - 1] + A[i][1 + j] + A[1 + i][j] + A[i - 1][j]);
    for (i = 1; i < n - 1; i++)
      for (j = 1; j < n - 1; j++)
        A[i][j] = 0.2 * (B[i][j] + B[i][j - 1] + B[i][1 + j] + B[1 + i][j] + B[i - 1][j]);
  }
#pragma endscop
}

static double A[N][N], B[N][N];

int main(void) {
  int i, j;
  for (i = 0; i < N; i++)
    for (j = 0; j < N; j++) { A[i][j] = pf_val(i, j, N); B[i][j] = pf_val(j, i, N); }
  kernel_jacobi_2d(TSTEPS, N, A, B);
  pf_print("A", N * N, &A[0][0]);
  return 0;
}
