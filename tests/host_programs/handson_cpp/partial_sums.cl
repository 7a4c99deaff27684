__kernel void partial_sums(const int niters, const float step, __local float *scratch,
                           __global float *sums)
{
    int lid = get_local_id(0);
    int start = get_global_id(0) * niters;
    float acc = 0.0f;
    for (int i = start; i < start + niters; i++) {
        float x = (i + 0.5f) * step;
        acc += 4.0f / (1.0f + x * x);
    }
    scratch[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        float s = 0.0f;
        for (int i = 0; i < get_local_size(0); i++) s += scratch[i];
        sums[get_group_id(0)] = s;
    }
}
