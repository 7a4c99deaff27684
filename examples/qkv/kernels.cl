/* qkv: the Q, K and V projections of one attention layer, then an element-wise combine.
 *   linear  : Y = X W + b on a 2-D NDRange (dimension 0 = column, dimension 1 = row); the host
 *             launches it three times with different W, b and Y
 *   combine : out[i] = q[i] * k[i] + v[i] on a 1-D NDRange
 */

__kernel void linear(__global const float* X, __global const float* W, __global const float* b,
                     __global float* Y, const int rows, const int cols, const int inner)
{
    int c = get_global_id(0);
    int r = get_global_id(1);
    if (r < rows && c < cols) {
        float acc = b[c];
        for (int k = 0; k < inner; k++)
            acc += X[r * inner + k] * W[k * cols + c];
        Y[r * cols + c] = acc;
    }
}

__kernel void combine(__global const float* q, __global const float* k, __global const float* v,
                      __global float* out, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        out[i] = q[i] * k[i] + v[i];
}
