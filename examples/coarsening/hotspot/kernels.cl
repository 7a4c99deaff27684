/* One step of Rodinia's HotSpot (opencl/hotspot/hotspot_kernel.cl, pyramid height 1): the
 * work-group stages its tile of temperatures in __local memory, neighbours outside the tile
 * come from global memory, borders are clamped. */
#define BLOCK_SIZE 16

__kernel void hotspot(__global float *power, __global float *temp_src, __global float *temp_dst,
                      int grid_cols, int grid_rows, float Cap, float Rx, float Ry, float Rz,
                      float step)
{
    __local float temp_on_cuda[BLOCK_SIZE][BLOCK_SIZE];

    float amb_temp = 80.0f;
    float step_div_Cap = step / Cap;
    float Rx_1 = 1.0f / Rx;
    float Ry_1 = 1.0f / Ry;
    float Rz_1 = 1.0f / Rz;

    int bx = get_group_id(0);
    int by = get_group_id(1);
    int tx = get_local_id(0);
    int ty = get_local_id(1);

    int xidx = bx * BLOCK_SIZE + tx;
    int yidx = by * BLOCK_SIZE + ty;
    int index = grid_cols * yidx + xidx;

    temp_on_cuda[ty][tx] = temp_src[index];
    barrier(CLK_LOCAL_MEM_FENCE);

    float c = temp_on_cuda[ty][tx];
    float n = (ty > 0) ? temp_on_cuda[ty - 1][tx]
                       : temp_src[grid_cols * max(yidx - 1, 0) + xidx];
    float s = (ty < BLOCK_SIZE - 1) ? temp_on_cuda[ty + 1][tx]
                                    : temp_src[grid_cols * min(yidx + 1, grid_rows - 1) + xidx];
    float w = (tx > 0) ? temp_on_cuda[ty][tx - 1]
                       : temp_src[grid_cols * yidx + max(xidx - 1, 0)];
    float e = (tx < BLOCK_SIZE - 1) ? temp_on_cuda[ty][tx + 1]
                                    : temp_src[grid_cols * yidx + min(xidx + 1, grid_cols - 1)];

    temp_dst[index] = c + step_div_Cap * (power[index] + (s + n - 2.0f * c) * Ry_1 +
                                          (e + w - 2.0f * c) * Rx_1 + (amb_temp - c) * Rz_1);
}
