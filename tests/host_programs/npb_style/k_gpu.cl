#error "the host runs on a CPU device here: it must not build the GPU kernels"
