#ifndef GRAMSCHMIDT_H
# define GRAMSCHMIDT_H
# if !defined(MINI_DATASET) && !defined(SMALL_DATASET) && !defined(LARGE_DATASET) && !defined(NI)
#  define STANDARD_DATASET
# endif
# ifdef MINI_DATASET
#  define NI 8
#  define NJ 8
# endif
# ifdef SMALL_DATASET
#  define NI 256
#  define NJ 256
# endif
# ifdef LARGE_DATASET
#  define NI 4096
#  define NJ 4096
# endif
# ifdef STANDARD_DATASET
#  define NI 2048
#  define NJ 2048
# endif
# define _PB_NI NI
# define _PB_NJ NJ
# ifndef DATA_TYPE
#  define DATA_TYPE float
# endif
#define DIM_LOCAL_WORK_GROUP_X 4
#define DIM_LOCAL_WORK_GROUP_Y 1
#endif
