__kernel void step(__global const char *tick, __global char *tock, const unsigned int nx,
                   const unsigned int ny)
{
    unsigned int x = get_global_id(0), y = get_global_id(1);
    unsigned int left = (x + nx - 1) % nx, right = (x + 1) % nx;
    char alive = tick[y * nx + left] + tick[y * nx + right];
    tock[y * nx + x] = (alive == 1) ? 1 : tick[y * nx + x];
}
