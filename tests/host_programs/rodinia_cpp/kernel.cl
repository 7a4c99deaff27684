// hotspot-like kernels: a stencil step then a scale (Rodinia style)
#define IN_RANGE(x, min, max) ((x) >= (min) && (x) <= (max))

__kernel void stencil(__global const float *src, __global float *dst, int cols, int rows)
{
    int c = get_global_id(0);
    int r = get_global_id(1);
    if (IN_RANGE(c, 1, cols - 2) && IN_RANGE(r, 1, rows - 2)) {
        dst[r * cols + c] = 0.25f * (src[r * cols + c - 1] + src[r * cols + c + 1]
                                     + src[(r - 1) * cols + c] + src[(r + 1) * cols + c]);
    }
}

__kernel void scale(__global float *data, float factor, int n)
{
    int i = get_global_id(0);
    if (i < n) data[i] = data[i] * factor;
}
