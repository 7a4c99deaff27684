/* Histogram-style ranges (written for polyfuse's tests): one kernel finds the span of the
 * input values, the host reads it back and sizes and parameterises the next launch by it. */
__kernel void prescan(__global const unsigned int *input, unsigned int n,
                      __global unsigned int *ranges)
{
  if (get_global_id(0) == 0) {
    unsigned int lo = input[0], hi = input[0];
    for (unsigned int i = 1; i < n; i++) {
      lo = min(lo, input[i]);
      hi = max(hi, input[i]);
    }
    ranges[0] = lo;
    ranges[1] = hi;
  }
}

__kernel void bins(__global unsigned int *histo, unsigned int lo, unsigned int hi)
{
  unsigned int b = get_global_id(1);
  if (get_global_id(0) == 0 && lo + b <= hi)
    histo[b] = lo + b;
}
