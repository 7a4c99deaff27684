/* lstm_cell: one LSTM layer unrolled over time by the host.
 *
 * hs holds h_0 .. h_T, one row of `hidden` floats per step; step t reads row t and writes
 * row t + 1.  gates holds the four gate pre-activations (i, f, g, o), `hidden` floats each.
 *   lstm_gates : work-item j computes gates[q*hidden + j], q = 0..3: a matrix-vector product
 *                reading x_t and the whole previous hidden state h_t
 *   lstm_cell  : work-item j updates c[j] and writes h_{t+1}[j]
 */

static float sigmoid(float v)
{
    return 1.0f / (1.0f + exp(-v));
}

__kernel void lstm_gates(__global const float* xs, __global const float* hs,
                         __global const float* Wx, __global const float* Wh,
                         __global const float* bias, __global float* gates, const int t,
                         const int input_size, const int hidden)
{
    int j = get_global_id(0);
    if (j < hidden) {
        for (int q = 0; q < 4; q++) {
            int row = q * hidden + j;
            float acc = bias[row];
            for (int k = 0; k < input_size; k++)
                acc += Wx[row * input_size + k] * xs[t * input_size + k];
            for (int k = 0; k < hidden; k++)
                acc += Wh[row * hidden + k] * hs[t * hidden + k];
            gates[row] = acc;
        }
    }
}

__kernel void lstm_cell(__global const float* gates, __global float* c, __global float* hs,
                        const int t, const int hidden)
{
    int j = get_global_id(0);
    if (j < hidden) {
        float ig = sigmoid(gates[j]);
        float fg = sigmoid(gates[hidden + j]);
        float gg = tanh(gates[2 * hidden + j]);
        float og = sigmoid(gates[3 * hidden + j]);
        float cn = fg * c[j] + ig * gg;
        c[j] = cn;
        hs[(t + 1) * hidden + j] = og * tanh(cn);
    }
}
