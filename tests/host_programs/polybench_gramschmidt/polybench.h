/* polybench.h-like utilities (allocation wrapper, timer) */
#ifndef POLYBENCH_H
#define POLYBENCH_H
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/time.h>
#include <sys/resource.h>
#include <sched.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#define POLYBENCH_2D_ARRAY_DECL(var, type, dim1, dim2, ddim1, ddim2) \
  type (*var)[ddim1][ddim2] = (type (*)[ddim1][ddim2]) polybench_alloc_data((ddim1) * (ddim2), sizeof(type));
#define POLYBENCH_ARRAY(x) *x
#define POLYBENCH_2D(var) var[NI][NJ]
#define POLYBENCH_FREE_ARRAY(x) free((void*)x);

static void* xmalloc(size_t num)
{
  void* new = NULL;
  int ret = posix_memalign(&new, 32, num);
  if (!new || ret)
    {
      fprintf(stderr, "[PolyBench] posix_memalign: cannot allocate memory");
      exit(1);
    }
  return new;
}

void* polybench_alloc_data(unsigned long long int n, int elt_size)
{
  size_t val = n;
  val *= elt_size;
  void* ret = xmalloc(val);
  return ret;
}
static double polybench_t_start;
static double rtclock(void) { struct timeval t; gettimeofday(&t, NULL); return t.tv_sec + t.tv_usec * 1.0e-6; }
#define polybench_start_instruments polybench_t_start = rtclock();
#define polybench_stop_instruments printf("%0.6lf\n", rtclock() - polybench_t_start);
#endif
