/* Matrix transpose with coalesced reads and writes through a __local tile
 * (after the NVIDIA OpenCL SDK's transpose.cl). */
#define BLOCK_DIM 16

__kernel void transpose(__global float *odata, __global float *idata, int width, int height,
                        __local float* block)
{
    unsigned int xIndex = get_global_id(0);
    unsigned int yIndex = get_global_id(1);

    if ((xIndex < width) && (yIndex < height))
    {
        unsigned int index_in = yIndex * width + xIndex;
        block[get_local_id(1) * (BLOCK_DIM + 1) + get_local_id(0)] = idata[index_in];
    }

    barrier(CLK_LOCAL_MEM_FENCE);

    xIndex = get_group_id(1) * BLOCK_DIM + get_local_id(0);
    yIndex = get_group_id(0) * BLOCK_DIM + get_local_id(1);
    if ((xIndex < height) && (yIndex < width))
    {
        unsigned int index_out = yIndex * height + xIndex;
        odata[index_out] = block[get_local_id(0) * (BLOCK_DIM + 1) + get_local_id(1)];
    }
}
