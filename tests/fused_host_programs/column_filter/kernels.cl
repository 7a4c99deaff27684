/* column_filter: one work-item per image column, a forward then a backward pass down the
 * column with a barrier between them, after an early return past the image's width (as the
 * AMD APP SDK's RecursiveGaussian writes it). */

__kernel void smooth_columns(__global const float* in, __global float* out, const int width,
                             const int height)
{
    int x = get_global_id(0);
    if (x >= width)
        return;
    float prev = 0.0f;
    for (int y = 0; y < height; y++) {
        prev = 0.5f * (prev + in[x + y * width]);
        out[x + y * width] = prev;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    float next = 0.0f;
    for (int y = height - 1; y >= 0; y--) {
        next = 0.5f * (next + in[x + y * width]);
        out[x + y * width] += next;
    }
}
