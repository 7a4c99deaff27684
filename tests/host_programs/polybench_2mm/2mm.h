#ifndef TWOMM_H
# define TWOMM_H
# if !defined(MINI_DATASET) && !defined(SMALL_DATASET) && !defined(LARGE_DATASET)
#  define STANDARD_DATASET
# endif
# ifdef MINI_DATASET
#  define NI 8
#  define NJ 8
#  define NK 8
#  define NL 8
# endif
# ifdef STANDARD_DATASET
#  define NI 2048
#  define NJ 2048
#  define NK 2048
#  define NL 2048
# endif
# ifndef DATA_TYPE
#  define DATA_TYPE float
#  define DATA_PRINTF_MODIFIER "%0.2f "
# endif
#define DIM_LOCAL_WORK_GROUP_X 4
#define DIM_LOCAL_WORK_GROUP_Y 2
#endif
