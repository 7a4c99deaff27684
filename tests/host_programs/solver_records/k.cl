__kernel void scale(__global const float *in, __global float *out) {
    int i = get_global_id(0);
#if defined(USE_ATOMICS)
    out[i] = in[i] - (float)WORK_ITEMS;
#elif defined(USE_VEC)
    out[i] = in[i] * (float)WORK_ITEMS;
#else
    out[i] = in[i] + (float)WORK_ITEMS;
#endif
}
