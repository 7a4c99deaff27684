/* jacobi-1d: the time loop t stays on the host around two parallel launches. */
#include "common.h"
#ifndef N
#define N 4000
#endif
#ifndef TSTEPS
#define TSTEPS 50
#endif

static void kernel_jacobi_1d(int tsteps, int n, double A[n], double B[n]) {
  int t, i;
  for (t = 0; t < tsteps; t++) {
    for (i = 1; i < n - 1; i++)
      B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1]);
    for (i = 1; i < n - 1; i++)
      A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1]);
  }
}

static double A[N], B[N];

int main(void) {
  int i;
  for (i = 0; i < N; i++) { A[i] = pf_val(i, 0, N); B[i] = pf_val(i, 1, N); }
  kernel_jacobi_1d(TSTEPS, N, A, B);
  pf_print("A", N, A);
  pf_print("B", N, B);
  return 0;
}
