__kernel void relax(__global int *level, __global int *flag, int iter) {
    int i = get_global_id(0);
    if (level[i] == iter) {
        level[i + 1] = iter + 1;
        *flag = 1;
    }
}
