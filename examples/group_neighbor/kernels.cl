/* group_neighbor: the consumer reads its own element and its right neighbour inside its
 * work-group (wrapping around at the group's end): data stays inside one work-group. */
#define WG 64

__kernel void produce(__global const float* x, __global float* c, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        c[i] = x[i] * x[i];
}

__kernel void neighbor_sum(__global const float* c, __global float* out, const int n)
{
    int i = get_global_id(0);
    int g = get_group_id(0);
    int l = get_local_id(0);
    if (i < n)
        out[i] = c[i] + c[g * WG + (l + 1) % WG];
}
