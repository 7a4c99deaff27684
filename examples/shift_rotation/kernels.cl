/* shift_rotation: re-indexings that keep a one-to-one work-item mapping.
 *   produce : a[i] = 2 x[i] + 1
 *   rotate_by_one: b[i] = a[(i + 1) % n]                 (rotation by one)
 *   shift   : c[i] = b[i + 1], 0 at the last element (shift by one)
 *   reverse : d[i] = c[g*64 + (63 - l)]              (permutation inside each work-group)
 */
#define WG 64

__kernel void produce(__global const float* x, __global float* a, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        a[i] = 2.0f * x[i] + 1.0f;
}

__kernel void rotate_by_one(__global const float* a, __global float* b, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        b[i] = a[(i + 1) % n];
}

__kernel void shift(__global const float* b, __global float* c, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        c[i] = i + 1 < n ? b[i + 1] : 0.0f;
}

__kernel void reverse_in_group(__global const float* c, __global float* d)
{
    int g = get_group_id(0);
    int l = get_local_id(0);
    d[g * WG + l] = c[g * WG + (WG - 1 - l)];
}
