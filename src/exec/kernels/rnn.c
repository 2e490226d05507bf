/* Recurrent operators: RNN, GRU, LSTM (forward, reverse, bidirectional; sequence_lens;
 * initial states; LSTM peepholes; GRU linear_before_reset; layout 0 and 1; clip;
 * activations with alpha/beta). float32 in and out, computed in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "exec/kernel.h"

typedef enum cell { CELL_RNN, CELL_GRU, CELL_LSTM } cell;

typedef struct act {
    int kind;
    double a, b;
} act;

enum { A_SIGMOID, A_TANH, A_RELU, A_AFFINE, A_LEAKY, A_THRELU, A_SCTANH, A_HARDSIG, A_ELU,
       A_SOFTSIGN, A_SOFTPLUS };

static double act_apply(const act *f, double x)
{
    switch (f->kind) {
    case A_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case A_TANH: return tanh(x);
    case A_RELU: return x > 0 ? x : 0;
    case A_AFFINE: return f->a * x + f->b;
    case A_LEAKY: return x < 0 ? f->a * x : x;
    case A_THRELU: return x > f->a ? x : 0;
    case A_SCTANH: return f->a * tanh(f->b * x);
    case A_HARDSIG: { double v = f->a * x + f->b; return v < 0 ? 0 : v > 1 ? 1 : v; }
    case A_ELU: return x < 0 ? f->a * (exp(x) - 1) : x;
    case A_SOFTSIGN: return x / (1 + fabs(x));
    case A_SOFTPLUS: return log1p(exp(x));
    }
    return x;
}

typedef struct rnn_cfg {
    cell kind;
    int64_t hidden, dirs, gates;
    bool layout1, lbr, input_forget;
    double clip;
    act f[6];   /* per direction: f, g, h */
} rnn_cfg;

static oq_status parse_cfg(oq_kctx *k, rnn_cfg *c)
{
    memset(c, 0, sizeof *c);
    const char *op = k->node->op_type;
    c->kind = strcmp(op, "GRU") == 0 ? CELL_GRU : strcmp(op, "LSTM") == 0 ? CELL_LSTM : CELL_RNN;
    c->gates = c->kind == CELL_RNN ? 1 : c->kind == CELL_GRU ? 3 : 4;
    c->hidden = oq_node_attr_int(k->node, "hidden_size", 0);
    const char *dir = oq_node_attr_string(k->node, "direction", "forward");
    c->dirs = strcmp(dir, "bidirectional") == 0 ? 2 : 1;
    if (strcmp(dir, "forward") && strcmp(dir, "reverse") && strcmp(dir, "bidirectional"))
        return oq_k_error(k, OQ_ERR_INVALID, "bad direction %s", dir);
    c->layout1 = oq_node_attr_int(k->node, "layout", 0) != 0;
    c->lbr = oq_node_attr_int(k->node, "linear_before_reset", 0) != 0;
    c->input_forget = oq_node_attr_int(k->node, "input_forget", 0) != 0;
    oq_attr *ca = oq_node_attr(k->node, "clip");
    c->clip = ca ? ca->f : 0;
    int nf = c->kind == CELL_RNN ? 1 : c->kind == CELL_GRU ? 2 : 3;
    static const int dflt[3][3] = {{A_TANH}, {A_SIGMOID, A_TANH}, {A_SIGMOID, A_TANH, A_TANH}};
    oq_attr *aa = oq_node_attr(k->node, "activations");
    oq_attr *al = oq_node_attr(k->node, "activation_alpha");
    oq_attr *bl = oq_node_attr(k->node, "activation_beta");
    for (int i = 0; i < nf * (int)c->dirs; i++) {
        act *f = &c->f[i];
        f->kind = dflt[c->kind][i % nf];
        if (aa && (size_t)i < aa->n_strings) {
            static const char *const names[] = {"Sigmoid", "Tanh", "Relu", "Affine", "LeakyRelu",
                                                "ThresholdedRelu", "ScaledTanh", "HardSigmoid",
                                                "Elu", "Softsign", "Softplus"};
            int found = -1;
            for (int j = 0; j < 11; j++)
                if (strlen(names[j]) == aa->strings[i].len &&
                    strncasecmp(names[j], (const char *)aa->strings[i].data, aa->strings[i].len) == 0)
                    found = j;
            if (found < 0)
                return oq_k_error(k, OQ_ERR_UNSUPPORTED, "activation %.*s",
                                  (int)aa->strings[i].len, (const char *)aa->strings[i].data);
            f->kind = found;
        }
        f->a = f->kind == A_LEAKY ? 0.01 : f->kind == A_HARDSIG ? 0.2 : 1.0;
        f->b = f->kind == A_HARDSIG ? 0.5 : 0.0;
        if (al && (size_t)i < al->n_floats)
            f->a = al->floats[i];
        if (bl && (size_t)i < bl->n_floats)
            f->b = bl->floats[i];
    }
    if (c->hidden <= 0)
        return oq_k_error(k, OQ_ERR_INVALID, "hidden_size must be positive");
    return OQ_OK;
}

static oq_status infer_rnn(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    for (size_t i = 0; i < n_out; i++)
        out[i].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, n_in))
        return oq_k_defer(k, out, n_out);
    rnn_cfg c;
    oq_status st = parse_cfg(k, &c);
    if (st)
        return st;
    const oq_rt_tensor *x = in[0];
    if (x->rank != 3)
        return oq_k_error(k, OQ_ERR_INVALID, "X must be 3-D");
    int64_t S = x->dims[c.layout1 ? 1 : 0], B = x->dims[c.layout1 ? 0 : 1];
    int64_t y[4], h[3];
    if (c.layout1) {
        y[0] = B; y[1] = S; y[2] = c.dirs; y[3] = c.hidden;
        h[0] = B; h[1] = c.dirs; h[2] = c.hidden;
    } else {
        y[0] = S; y[1] = c.dirs; y[2] = B; y[3] = c.hidden;
        h[0] = c.dirs; h[1] = B; h[2] = c.hidden;
    }
    if (in[1]->dims[0] != c.dirs || in[1]->dims[1] != c.gates * c.hidden)
        return oq_k_error(k, OQ_ERR_INVALID, "W has the wrong shape");
    st = oq_k_set_out(k, &out[0], x->dtype, y, 4);
    for (size_t i = 1; st == OQ_OK && i < n_out; i++)
        st = oq_k_set_out(k, &out[i], x->dtype, h, 3);
    return st;
}

static double clipv(const rnn_cfg *c, double v)
{
    if (c->clip > 0)
        v = v < -c->clip ? -c->clip : v > c->clip ? c->clip : v;
    return v;
}

static oq_status run_rnn(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    rnn_cfg c;
    oq_status st = parse_cfg(k, &c);
    if (st)
        return st;
    const oq_rt_tensor *X = in[0], *W = in[1], *R = in[2];
    const oq_rt_tensor *Bt = n_in > 3 ? in[3] : NULL, *SL = n_in > 4 ? in[4] : NULL;
    const oq_rt_tensor *H0 = n_in > 5 ? in[5] : NULL;
    const oq_rt_tensor *C0 = c.kind == CELL_LSTM && n_in > 6 ? in[6] : NULL;
    const oq_rt_tensor *P = c.kind == CELL_LSTM && n_in > 7 ? in[7] : NULL;
    int64_t S = X->dims[c.layout1 ? 1 : 0], Bn = X->dims[c.layout1 ? 0 : 1], I = X->dims[2];
    int64_t H = c.hidden, G = c.gates;
    const char *dir = oq_node_attr_string(k->node, "direction", "forward");
    int nf = c.kind == CELL_RNN ? 1 : c.kind == CELL_GRU ? 2 : 3;
    size_t need = (size_t)(4 * Bn * H + G * H + 8) * sizeof(double);
    double *hs = oq_k_scratch(k, need);
    if (!hs)
        return OQ_ERR_NOMEM;
    double *cs = hs + Bn * H, *hn = cs + Bn * H, *cn = hn + Bn * H, *g = cn + Bn * H;
    memset(out[0].data, 0, (size_t)out[0].nbytes);
#define XAT(t, b, i) oq_k_get_f64(X, c.layout1 ? ((b) * S + (t)) * I + (i) : ((t) * Bn + (b)) * I + (i))
#define YIDX(t, d, b, j) (c.layout1 ? (((b) * S + (t)) * c.dirs + (d)) * H + (j) \
                                    : (((t) * c.dirs + (d)) * Bn + (b)) * H + (j))
#define HIDX(d, b, j) (c.layout1 ? ((b) * c.dirs + (d)) * H + (j) : ((d) * Bn + (b)) * H + (j))
    for (int64_t d = 0; d < c.dirs; d++) {
        bool reverse = d == 1 || strcmp(dir, "reverse") == 0;
        const act *fa = &c.f[d * nf], *ga = &c.f[d * nf + (nf > 1 ? 1 : 0)],
                  *ha = &c.f[d * nf + (nf > 2 ? 2 : 0)];
        for (int64_t b = 0; b < Bn; b++)
            for (int64_t j = 0; j < H; j++) {
                hs[b * H + j] = H0 ? oq_k_get_f64(H0, HIDX(d, b, j)) : 0;
                cs[b * H + j] = C0 ? oq_k_get_f64(C0, HIDX(d, b, j)) : 0;
            }
        for (int64_t b = 0; b < Bn; b++) {
            int64_t len = SL ? oq_k_get_int(SL, b) : S;
            for (int64_t step = 0; step < len; step++) {
                int64_t t = reverse ? len - 1 - step : step;
                /* gate pre-activations: x W^T + Wb + Rb (+ h R^T, except GRU's h gate) */
                for (int64_t q = 0; q < G * H; q++) {
                    double v = 0;
                    for (int64_t i = 0; i < I; i++)
                        v += XAT(t, b, i) * oq_k_get_f64(W, (d * G * H + q) * I + i);
                    if (Bt)
                        v += oq_k_get_f64(Bt, d * 2 * G * H + q);
                    bool gru_h = c.kind == CELL_GRU && q >= 2 * H;
                    if (!gru_h) {
                        if (Bt)
                            v += oq_k_get_f64(Bt, d * 2 * G * H + G * H + q);
                        for (int64_t i = 0; i < H; i++)
                            v += hs[b * H + i] * oq_k_get_f64(R, (d * G * H + q) * H + i);
                    }
                    g[q] = v;
                }
                for (int64_t j = 0; j < H; j++) {
                    double hnew, cnew = 0;
                    if (c.kind == CELL_RNN) {
                        hnew = act_apply(fa, clipv(&c, g[j]));
                    } else if (c.kind == CELL_GRU) {
                        double z = act_apply(fa, clipv(&c, g[j]));
                        double r = act_apply(fa, clipv(&c, g[H + j]));
                        double rb = Bt ? oq_k_get_f64(Bt, d * 2 * G * H + G * H + 2 * H + j) : 0;
                        double hr = 0;
                        if (c.lbr) {
                            for (int64_t i = 0; i < H; i++)
                                hr += hs[b * H + i] * oq_k_get_f64(R, (d * G * H + 2 * H + j) * H + i);
                            hr = r * (hr + rb);
                        } else {
                            for (int64_t i = 0; i < H; i++)
                                hr += r * hs[b * H + i] * oq_k_get_f64(R, (d * G * H + 2 * H + j) * H + i);
                            hr += rb;
                        }
                        double hh = act_apply(ga, clipv(&c, g[2 * H + j] + hr));
                        hnew = (1 - z) * hh + z * hs[b * H + j];
                    } else {
                        double cp = cs[b * H + j];
                        double pi = P ? oq_k_get_f64(P, d * 3 * H + j) : 0;
                        double po = P ? oq_k_get_f64(P, d * 3 * H + H + j) : 0;
                        double pf = P ? oq_k_get_f64(P, d * 3 * H + 2 * H + j) : 0;
                        double it = act_apply(fa, clipv(&c, g[j] + pi * cp));
                        double ft = act_apply(fa, clipv(&c, g[2 * H + j] + pf * cp));
                        if (c.input_forget)
                            ft = 1 - it;
                        double ct = act_apply(ga, clipv(&c, g[3 * H + j]));
                        cnew = ft * cp + it * ct;
                        double ot = act_apply(fa, clipv(&c, g[H + j] + po * cnew));
                        hnew = ot * act_apply(ha, cnew);
                    }
                    hn[j] = hnew;
                    cn[j] = cnew;
                    oq_k_set_f64(&out[0], YIDX(t, d, b, j), hnew);
                }
                for (int64_t j = 0; j < H; j++) {
                    hs[b * H + j] = hn[j];
                    cs[b * H + j] = cn[j];
                }
            }
        }
        for (int64_t b = 0; b < Bn; b++)
            for (int64_t j = 0; j < H; j++) {
                if (n_out > 1)
                    oq_k_set_f64(&out[1], HIDX(d, b, j), hs[b * H + j]);
                if (n_out > 2)
                    oq_k_set_f64(&out[2], HIDX(d, b, j), cs[b * H + j]);
            }
    }
#undef XAT
#undef YIDX
#undef HIDX
    return OQ_OK;
}

#define F OQ_T(FLOAT) | OQ_T(DOUBLE)
const oq_kernel oq_kernels_rnn[] = {
    {"", "RNN", 7, 0, 0, F, NULL, NULL, infer_rnn, run_rnn, NULL, 3},
    {"", "GRU", 7, 0, 0, F, NULL, NULL, infer_rnn, run_rnn, NULL, 3},
    {"", "LSTM", 7, 0, 0, F, NULL, NULL, infer_rnn, run_rnn, NULL, 3},
};
OQ_KERNEL_TABLE_END(rnn);
