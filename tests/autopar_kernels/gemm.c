/* gemm: C = alpha*A*B + beta*C; i and j are parallel, k sequential in each work-item. */
#include "common.h"
#ifndef NI
#define NI 96
#endif
#ifndef NJ
#define NJ 80
#endif
#ifndef NK
#define NK 72
#endif
static double A[NI][NK], B[NK][NJ], C[NI][NJ];

static void gemm(int ni, int nj, int nk, double alpha, double beta) {
  int i, j, k;
  for (i = 0; i < ni; i++)
    for (j = 0; j < nj; j++) {
      C[i][j] *= beta;
      for (k = 0; k < nk; k++)
        C[i][j] += alpha * A[i][k] * B[k][j];
    }
}

int main(void) {
  int i, j;
  for (i = 0; i < NI; i++) for (j = 0; j < NK; j++) A[i][j] = pf_val(i, j, NI);
  for (i = 0; i < NK; i++) for (j = 0; j < NJ; j++) B[i][j] = pf_val(i, j + 1, NJ);
  for (i = 0; i < NI; i++) for (j = 0; j < NJ; j++) C[i][j] = pf_val(i + 2, j, NK);
  gemm(NI, NJ, NK, 1.5, 1.2);
  pf_print("C", NI * NJ, &C[0][0]);
  return 0;
}
