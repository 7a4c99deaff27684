/* polyfuse fake libc header: just enough for pycparser to parse host programs. */
#ifndef _POLYFUSE_MATH_H
#define _POLYFUSE_MATH_H
#define M_PI 3.14159265358979323846
#define M_E 2.7182818284590452354
#define M_SQRT2 1.41421356237309504880
#define HUGE_VAL (1e308 * 10.0)
#define INFINITY (1e308f * 10.0f)
#define NAN (0.0f / 0.0f)
double sqrt(double x); float sqrtf(float x);
double fabs(double x); float fabsf(float x);
double exp(double x); float expf(float x);
double log(double x); float logf(float x);
double log2(double x); float log2f(float x);
double log10(double x); float log10f(float x);
double pow(double x, double y); float powf(float x, float y);
double sin(double x); float sinf(float x);
double cos(double x); float cosf(float x);
double tan(double x); float tanf(float x);
double tanh(double x); float tanhf(float x);
double atan(double x); double atan2(double y, double x);
double floor(double x); float floorf(float x);
double ceil(double x); float ceilf(float x);
double round(double x); float roundf(float x);
double fmin(double x, double y); float fminf(float x, float y);
double fmax(double x, double y); float fmaxf(float x, float y);
double fmod(double x, double y); float fmodf(float x, float y);
double erf(double x); float erff(float x);
int isnan(double x);
int isinf(double x);
#endif
