#ifndef PARTICLES_H
#define PARTICLES_H
#define KERNEL_PATH "particles.cl"
#define BLOCK_SIZE 16

typedef struct {
    float x, y, z, w;
} particle_t;

int run(int argc, char **argv);
#endif
