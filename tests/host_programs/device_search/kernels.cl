/* stage stages its input through __local scratch at its local id (the host gives no local
 * size and sizes the scratch with a device query); shift reads what stage wrote. */
__kernel void stage(__global const float* in, __global float* mid, __local float* tmp)
{
    int g = get_global_id(0);
    int l = get_local_id(0);
    tmp[l] = 2.0f * in[g];
    mid[g] = tmp[l] + 1.0f;
}

__kernel void shift(__global const float* mid, __global float* out)
{
    int g = get_global_id(0);
    out[g] = mid[g] * 0.5f;
}
