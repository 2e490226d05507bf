/* Recurrent kernels against the ONNX formulas evaluated here in double, on weights that
 * differ per unit (the ONNX backend data's GRU cases either have equal weights or inputs
 * that saturate every gate, which hid a reset gate taken from the wrong unit).
 *
 * GRU (gates z, r, h; f = sigmoid, g = tanh):
 *   z = f(x Wz^T + h Rz^T + Wbz + Rbz),  r = f(x Wr^T + h Rr^T + Wbr + Rbr)
 *   linear_before_reset 0: n = g(x Wh^T + (r . h) Rh^T + Rbh + Wbh)
 *   linear_before_reset 1: n = g(x Wh^T + r . (h Rh^T + Rbh) + Wbh)
 *   h' = (1 - z) . n + z . h
 * Tolerance: 2e-6 absolute (float32 sums of at most 8 terms of size < 3, outputs in [-1, 1]). */
#include <math.h>

#include "test_pass_prep_util.h"

enum { S = 4, I = 3, H = 5 };

static double sig(double x) { return 1.0 / (1.0 + exp(-x)); }

static void fill(float *v, int n, int seed)
{
    for (int i = 0; i < n; i++) /* deterministic, differs per element, in (-1.2, 1.2) */
        v[i] = (float)(1.2 * sin(0.7 * (i + 1) * (seed + 1) + 0.3 * seed));
}

static void gru_ref(int lbr, const float *x, const float *W, const float *R, const float *B, double *y)
{
    double h[H] = {0};
    for (int t = 0; t < S; t++) {
        double z[H], r[H], n[H];
        for (int j = 0; j < H; j++) {
            double az = B[j] + B[3 * H + j], ar = B[H + j] + B[4 * H + j];
            for (int i = 0; i < I; i++) {
                az += x[t * I + i] * W[j * I + i];
                ar += x[t * I + i] * W[(H + j) * I + i];
            }
            for (int i = 0; i < H; i++) {
                az += h[i] * R[j * H + i];
                ar += h[i] * R[(H + j) * H + i];
            }
            z[j] = sig(az);
            r[j] = sig(ar);
        }
        for (int j = 0; j < H; j++) {
            double a = B[2 * H + j], rec = 0;
            for (int i = 0; i < I; i++)
                a += x[t * I + i] * W[(2 * H + j) * I + i];
            for (int i = 0; i < H; i++)
                rec += (lbr ? h[i] : r[i] * h[i]) * R[(2 * H + j) * H + i];
            a += lbr ? r[j] * (rec + B[5 * H + j]) : rec + B[5 * H + j];
            n[j] = tanh(a);
        }
        for (int j = 0; j < H; j++) {
            h[j] = (1 - z[j]) * n[j] + z[j] * h[j];
            y[t * H + j] = h[j];
        }
    }
}

Test(rnn, gru_reset_gate_per_unit_both_orders)
{
    float x[S * I], W[3 * H * I], R[3 * H * H], B[6 * H];
    fill(x, S * I, 1);
    fill(W, 3 * H * I, 2);
    fill(R, 3 * H * H, 3);
    fill(B, 6 * H, 4);
    for (int lbr = 0; lbr < 2; lbr++) {
        oq_model *m = tp_model(14);
        tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){S, 1, I}, 3);
        tp_init_f(m, "W", (int64_t[]){1, 3 * H, I}, 3, W);
        tp_init_f(m, "R", (int64_t[]){1, 3 * H, H}, 3, R);
        tp_init_f(m, "B", (int64_t[]){1, 6 * H}, 2, B);
        oq_node *n = tp_node(m, "GRU", "gru", "x,W,R,B", "y");
        oq_node_set_attr_int(n, "hidden_size", H);
        oq_node_set_attr_int(n, "linear_before_reset", lbr);
        tp_output(m, "y");
        float *got;
        int64_t cnt = pp_run(m, x, (int64_t[]){S, 1, I}, 3, &got);
        cr_assert_eq(cnt, S * H);
        double want[S * H];
        gru_ref(lbr, x, W, R, B, want);
        for (int i = 0; i < S * H; i++)
            cr_assert(fabs(got[i] - want[i]) <= 2e-6, "linear_before_reset %d: y[%d] %.7f, want %.7f", lbr, i,
                      got[i], want[i]);
        /* the two orders differ on these weights: the test tells them apart */
        double other[S * H], most = 0;
        gru_ref(!lbr, x, W, R, B, other);
        for (int i = 0; i < S * H; i++)
            most = fmax(most, fabs(other[i] - want[i]));
        cr_assert(most > 1e-2, "the weights do not separate the two orders (%g)", most);
        free(got);
        oq_model_free(m);
    }
}
