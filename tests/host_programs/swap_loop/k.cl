__kernel void smooth(__global const float *in, __global float *out, int pitch) {
    int r = get_global_id(0) + 1;
    int c = get_global_id(1) + 1;
    out[r * pitch + c] = 0.5f * in[r * pitch + c] +
        0.125f * (in[(r - 1) * pitch + c] + in[(r + 1) * pitch + c] +
                  in[r * pitch + c - 1] + in[r * pitch + c + 1]);
}
