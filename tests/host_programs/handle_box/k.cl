__kernel void scale(__global float *a) { int i = get_global_id(0); a[i] = a[i] * 2.0f; }
