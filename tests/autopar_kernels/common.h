/* Shared helpers of the autopar test programs: deterministic init and exact (%a) printing. */
#ifndef AUTOPAR_COMMON_H
#define AUTOPAR_COMMON_H
#include <stdio.h>
static double pf_val(int i, int j, int n) { return (double)((i * 7 + j * 3 + 1) % n) / n - 0.5; }
static void pf_print(const char *name, int n, const double *a) {
  int i;
  printf("%s", name);
  for (i = 0; i < n; i++) printf(" %a", a[i]);
  printf("\n");
}
#endif
