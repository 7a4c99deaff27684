float weight(__constant float *w, int i) { return w[i] + 1.0f; }

__kernel void reduce(__global const float *x, __constant float *w, __global float *out,
                     __local float *tmp)
{
    int lid = get_local_id(0);
    int i = get_global_id(0);
    tmp[lid] = x[i] * weight(w, lid);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        float s = 0.0f;
        for (int j = 0; j < 8; j++) {
            __local float *o = &tmp[j];
            s += *o;
        }
        out[get_group_id(0)] = s;
    }
}
