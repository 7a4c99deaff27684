/* Two-channel 1-D denoise: the left channel is gamma-corrected before both are blurred. */

__kernel void gamma_correct(__global const float* in, __global float* out, int n)
{
    int i = get_global_id(0);
    if (i < n)
        out[i] = sqrt(in[i]);
}

/* 3-point box blur, clamped at the ends: reads its neighbours' inputs (a global dependence on
   the launch that wrote them, across work-group boundaries) */
__kernel void blur3(__global const float* in, __global float* out, int n)
{
    int i = get_global_id(0);
    if (i < n) {
        float l = in[i > 0 ? i - 1 : 0];
        float r = in[i < n - 1 ? i + 1 : n - 1];
        out[i] = (l + in[i] + r) / 3.0f;
    }
}
