/* g++ before 6 (with glibc before 2.23) also declared the C99 classification functions in the
 * global namespace, so old C++ hosts call isnan(x) after <cmath> unqualified.  polyfuse parses
 * a C++ unit that needs them again with this header included first. */
#include <cmath>
using std::isnan;
using std::isinf;
using std::isfinite;
using std::isnormal;
using std::signbit;
using std::fpclassify;
