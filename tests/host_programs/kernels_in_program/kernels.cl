/* Two kernels; the host creates both with clCreateKernelsInProgram and finds them by name. */
__kernel void square(__global const float *in, __global float *out, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        out[i] = in[i] * in[i];
}

__kernel void shift_add(__global const float *in, __global float *out, const int n)
{
    int i = get_global_id(0);
    if (i < n - 1)
        out[i] = in[i] + in[i + 1];
}
