/* A stacked LSTM (layers x time) in the style of cuDNN-less OpenCL ports.
 *
 * hs holds one row of `hidden` floats per (layer, step): row l * (steps + 1) + t is h_t of layer
 * l, with layer 0 the input sequence.  Layer l >= 1 at step t reads h_{t+1} of layer l - 1
 * (below) and its own h_t (prev), and writes its h_{t+1}.  gates and c are per layer.
 */

static float sigmoid(float v)
{
    return 1.0f / (1.0f + exp(-v));
}

__kernel void lstm_gates(__global const float* hs, __global const float* W,
                         __global const float* U, __global const float* bias,
                         __global float* gates, const int below, const int prev,
                         const int woff, const int goff, const int hidden)
{
    int j = get_global_id(0);
    if (j < hidden) {
        for (int q = 0; q < 4; q++) {
            int row = q * hidden + j;
            float acc = bias[row];
            for (int k = 0; k < hidden; k++) {
                acc += W[woff + row * hidden + k] * hs[below + k];
                acc += U[woff + row * hidden + k] * hs[prev + k];
            }
            gates[goff + row] = acc;
        }
    }
}

__kernel void lstm_cell(__global const float* gates, __global float* c, __global float* hs,
                        const int goff, const int coff, const int out, const int hidden)
{
    int j = get_global_id(0);
    if (j < hidden) {
        float ig = sigmoid(gates[goff + j]);
        float fg = sigmoid(gates[goff + hidden + j]);
        float gg = tanh(gates[goff + 2 * hidden + j]);
        float og = sigmoid(gates[goff + 3 * hidden + j]);
        float cn = fg * c[coff + j] + ig * gg;
        c[coff + j] = cn;
        hs[out + j] = og * tanh(cn);
    }
}
