/* polyfuse stand-in: vector types only (see xmmintrin.h) */
#include <xmmintrin.h>
