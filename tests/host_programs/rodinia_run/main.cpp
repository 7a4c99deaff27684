// Rodinia-style driver: main() only calls run() of another translation unit.
#include <cstdio>
#include "particles.h"

int main(int argc, char **argv)
{
    printf("WG size of kernel = %d\n", BLOCK_SIZE);
    return run(argc, argv);
}
