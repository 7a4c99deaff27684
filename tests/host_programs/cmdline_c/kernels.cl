__kernel void inc(__global float *a) { int i = get_global_id(0); a[i] += 1.0f; }
