__kernel void hash(__global const unsigned int *keys, __global unsigned int *hashes) {
    int i = get_global_id(0);
    unsigned int x = keys[i];
    x ^= x >> 16;
    x *= 0x45d9f3bu;
    hashes[i] = x ^ (x >> 16);
}

__kernel void find(unsigned int digest, int n, __global const unsigned int *hashes,
                   __global int *found) {
    int i = get_global_id(0);
    found[i] = (i < n && hashes[i] == digest) ? i : -1;
}
