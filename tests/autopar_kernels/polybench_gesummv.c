/* PolyBench-style program: macro-sized C99 VLA parameters (extents like `n + 0`), #pragma scop,
   init and print functions outside the SCoP, a block-local scalar temporary, triangular bounds
   and a pure math call. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#ifndef N
#define N 250
#endif
#define _PB_N n

static void init_array(int n, double A[N + 0][N], double B[N + 0][N], double x[N]) {
  int i, j;
  for (i = 0; i < n; i++) {
    x[i] = (double)(i % n) / n;
    for (j = 0; j < n; j++) {
      A[i][j] = (double)((i * j + 1) % n) / n;
      B[i][j] = (double)((i * j + 2) % n) / n;
    }
  }
}

static void print_array(int n, double y[N], double T[N + 0][N]) {
  int i, j;
  for (i = 0; i < n; i++) printf(" %a", y[i]);
  printf("\n");
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++) printf(" %a", T[i][j]);
  printf("\n");
}

static void kernel_gesummv(int n, double alpha, double beta, double A[n + 0][n],
                           double B[n + 0][n], double T[n + 0][n], double tmp[n], double x[n],
                           double y[n]) {
  int i, j;
#pragma scop
  for (i = 0; i < _PB_N; i++) {
    tmp[i] = 0.0;
    y[i] = 0.0;
    for (j = 0; j < _PB_N; j++) {
      tmp[i] = A[i][j] * x[j] + tmp[i];
      y[i] = B[i][j] * x[j] + y[i];
    }
    y[i] = alpha * tmp[i] + beta * y[i];
  }
  for (i = 0; i < _PB_N; i++)
    for (j = i; j < _PB_N; j += 1) {
      double d = sqrt(fabs(A[i][j] - B[j][i]));
      T[i][j] = d + y[j - i];
    }
#pragma endscop
}

int main(void) {
  int n = N;
  double (*A)[N + 0][N] = malloc(sizeof(double) * N * N);
  double (*B)[N + 0][N] = malloc(sizeof(double) * N * N);
  double (*T)[N + 0][N] = calloc(N * N, sizeof(double));
  double *tmp = malloc(sizeof(double) * N), *x = malloc(sizeof(double) * N);
  double *y = malloc(sizeof(double) * N);
  init_array(n, *A, *B, x);
  kernel_gesummv(n, 1.5, 1.2, *A, *B, *T, tmp, x, y);
  print_array(n, y, *T);
  free(A); free(B); free(T); free(tmp); free(x); free(y);
  return 0;
}
