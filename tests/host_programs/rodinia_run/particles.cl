typedef struct {
    float x, y, z, w;
} particle_t;

__kernel void advance(__global particle_t *p, const float dt, const int n)
{
    int i = get_global_id(0);
    if (i < n) {
        p[i].x += dt * p[i].w;
        p[i].y += dt * p[i].w;
    }
}

__kernel void energy(__global const particle_t *p, __global float *e, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        e[i] = 0.5f * p[i].w * (p[i].x * p[i].x + p[i].y * p[i].y);
}
