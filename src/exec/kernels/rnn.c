/* Recurrent operators: RNN, GRU, LSTM (forward, reverse, bidirectional; sequence_lens;
 * initial states; LSTM peepholes; GRU linear_before_reset; layout 0 and 1; clip;
 * activations with alpha/beta). float32: x W^T by SGEMM and the recurrent products in
 * float32, as onnxruntime computes them, the gates and cells in double; double: all in double. */
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

/* One unit j of one step, from the gate pre-activations g (x W^T + h R^T + biases, in
 * the ONNX gate order: RNN i; GRU z, r, h; LSTM i, o, f, c). For GRU, g's h gate holds
 * x Wh^T + Wbh only and hr its recurrent term (computed by the caller, who needs every
 * r first); for LSTM, cp is the previous cell and pe the peepholes (i, o, f). Returns
 * the new h; *cn the new cell (LSTM). */
static double cell_unit(const rnn_cfg *c, const act *fa, const act *ga, const act *ha, const double *g,
                        int64_t H, int64_t j, double hp, double hr, double cp, const double *pe,
                        double *cn)
{
    *cn = 0;
    if (c->kind == CELL_RNN)
        return act_apply(fa, clipv(c, g[j]));
    if (c->kind == CELL_GRU) {
        double z = act_apply(fa, clipv(c, g[j]));
        double hh = act_apply(ga, clipv(c, g[2 * H + j] + hr));
        return (1 - z) * hh + z * hp;
    }
    double it = act_apply(fa, clipv(c, g[j] + pe[0] * cp));
    double ft = act_apply(fa, clipv(c, g[2 * H + j] + pe[2] * cp));
    if (c->input_forget)
        ft = 1 - it;
    double ct = act_apply(ga, clipv(c, g[3 * H + j]));
    *cn = ft * cp + it * ct;
    double ot = act_apply(fa, clipv(c, g[H + j] + pe[1] * *cn));
    return ot * act_apply(ha, *cn);
}

/* The GRU h gate's recurrent term for unit j (ONNX: linear_before_reset 0 multiplies h by
 * the reset gate element-wise before Rh, (r . h) Rh^T; 1 applies r after, r (h Rh^T + Rbh)):
 * dot is h Rh[j]^T (lbr) or (r . h) Rh[j]^T, rb the recurrent h bias. */
static double gru_hr(const rnn_cfg *c, double r, double dot, double rb)
{
    return c->lbr ? r * (dot + rb) : dot + rb;
}

/* float32 dot product, 8 partial sums (vectorizes) */
static float dotf(const float *a, const float *b, int64_t n)
{
    float p[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            p[l] += a[i + l] * b[i + l];
    float s = ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

typedef struct rnn_io {
    const oq_rt_tensor *X, *W, *R, *Bt, *SL, *H0, *C0, *P;
    int64_t S, Bn, I, H, G;
} rnn_io;

#define YIDX(t, d, b, j) (c->layout1 ? (((b) * io->S + (t)) * c->dirs + (d)) * io->H + (j) \
                                     : (((t) * c->dirs + (d)) * io->Bn + (b)) * io->H + (j))
#define HIDX(d, b, j) (c->layout1 ? ((b) * c->dirs + (d)) * io->H + (j) : ((d) * io->Bn + (b)) * io->H + (j))

/* float32 tensors: x W^T for every step at once (one SGEMM per direction), the recurrent
 * products in float32, the gates and cells in double. */
static oq_status run_f32(oq_kctx *k, const rnn_cfg *c, const rnn_io *io, const char *dir, oq_rt_tensor *out,
                         size_t n_out)
{
    int64_t S = io->S, Bn = io->Bn, I = io->I, H = io->H, G = io->G, GH = G * H;
    int nf = c->kind == CELL_RNN ? 1 : c->kind == CELL_GRU ? 2 : 3;
    /* scratch: x W^T [S Bn, GH] floats (rounded up to 16: the doubles after it aligned), then
     * doubles g [GH], the biases per gate bsum [GH], hr [H], then floats h, c, h', c' [Bn H]
     * and v [H] */
    size_t nxw = ((size_t)(S * Bn * GH) + 15) & ~(size_t)15, nd = (size_t)(2 * GH + H);
    float *xw = oq_k_scratch(k, nxw * sizeof(float) + nd * sizeof(double) + (size_t)(4 * Bn * H + H) * sizeof(float));
    if (!xw)
        return OQ_ERR_NOMEM;
    double *g = (double *)(void *)(xw + nxw), *bsum = g + GH, *hr = bsum + GH;
    float *hs = (float *)(void *)(hr + H), *cs = hs + Bn * H, *hn = cs + Bn * H, *cn = hn + Bn * H,
          *v = cn + Bn * H;
    const float *X = io->X->data, *Bt = io->Bt ? io->Bt->data : NULL, *P = io->P ? io->P->data : NULL;
    float *Y = out[0].data;
    for (int64_t d = 0; d < c->dirs; d++) {
        bool reverse = d == 1 || strcmp(dir, "reverse") == 0;
        const act *fa = &c->f[d * nf], *ga = &c->f[d * nf + (nf > 1 ? 1 : 0)], *ha = &c->f[d * nf + (nf > 2 ? 2 : 0)];
        const float *W = (const float *)io->W->data + d * GH * I, *R = (const float *)io->R->data + d * GH * H;
        const float *wb = Bt ? Bt + d * 2 * GH : NULL, *rb = Bt ? Bt + d * 2 * GH + GH : NULL;
        /* X is a [S * Bn, I] matrix in either layout (row t * Bn + b, or b * S + t) */
        oq_status st = oq_k_sgemm(k, false, true, S * Bn, GH, I, 1.0f, X, I, W, I, 0.0f, xw, GH);
        if (st != OQ_OK)
            return st;
        int64_t nrec = c->kind == CELL_GRU ? 2 * H : GH; /* gates whose h R^T is added here (GRU's h gate: below) */
        for (int64_t q = 0; q < GH; q++) /* Wb, plus Rb where h R^T is added to the gate */
            bsum[q] = (wb ? (double)wb[q] : 0.0) + (q < nrec && rb ? (double)rb[q] : 0.0);
        for (int64_t b = 0; b < Bn; b++)
            for (int64_t j = 0; j < H; j++) {
                hs[b * H + j] = io->H0 ? ((const float *)io->H0->data)[HIDX(d, b, j)] : 0;
                cs[b * H + j] = io->C0 ? ((const float *)io->C0->data)[HIDX(d, b, j)] : 0;
            }
        for (int64_t b = 0; b < Bn; b++) {
            int64_t len = io->SL ? oq_k_get_int(io->SL, b) : S;
            float *h = hs + b * H, *cc = cs + b * H;
            for (int64_t step = 0; step < len; step++) {
                int64_t t = reverse ? len - 1 - step : step;
                const float *gx = xw + (c->layout1 ? b * S + t : t * Bn + b) * GH;
                for (int64_t q = 0; q < GH; q++)
                    g[q] = (double)gx[q] + bsum[q] + (q < nrec ? (double)dotf(h, R + q * H, H) : 0.0);
                if (c->kind == CELL_GRU) {
                    for (int64_t j = 0; j < H; j++) {
                        double r = act_apply(fa, clipv(c, g[H + j]));
                        hr[j] = r;
                        v[j] = c->lbr ? h[j] : (float)(r * h[j]);
                    }
                    for (int64_t j = 0; j < H; j++)
                        hr[j] = gru_hr(c, hr[j], dotf(v, R + (2 * H + j) * H, H), rb ? rb[2 * H + j] : 0);
                }
                for (int64_t j = 0; j < H; j++) {
                    double pe[3] = {P ? P[d * 3 * H + j] : 0, P ? P[d * 3 * H + H + j] : 0,
                                    P ? P[d * 3 * H + 2 * H + j] : 0}, cnew;
                    double hnew = cell_unit(c, fa, ga, ha, g, H, j, h[j], c->kind == CELL_GRU ? hr[j] : 0, cc[j], pe,
                                            &cnew);
                    hn[j] = (float)hnew;
                    cn[j] = (float)cnew;
                    Y[YIDX(t, d, b, j)] = (float)hnew;
                }
                memcpy(h, hn, (size_t)H * sizeof *h);
                memcpy(cc, cn, (size_t)H * sizeof *cc);
            }
        }
        for (int64_t b = 0; b < Bn; b++)
            for (int64_t j = 0; j < H; j++) {
                if (n_out > 1)
                    ((float *)out[1].data)[HIDX(d, b, j)] = hs[b * H + j];
                if (n_out > 2)
                    ((float *)out[2].data)[HIDX(d, b, j)] = cs[b * H + j];
            }
    }
    return OQ_OK;
}

/* Any other dtype (double): every element through oq_k_get_f64, in double. */
static oq_status run_generic(oq_kctx *k, const rnn_cfg *c, const rnn_io *io, const char *dir, oq_rt_tensor *out,
                             size_t n_out)
{
    int64_t S = io->S, Bn = io->Bn, I = io->I, H = io->H, G = io->G;
    int nf = c->kind == CELL_RNN ? 1 : c->kind == CELL_GRU ? 2 : 3;
    double *hs = oq_k_scratch(k, (size_t)(5 * Bn * H + G * H + 8) * sizeof(double));
    if (!hs)
        return OQ_ERR_NOMEM;
    double *cs = hs + Bn * H, *hn = cs + Bn * H, *cn = hn + Bn * H, *g = cn + Bn * H, *hr = g + G * H;
    const oq_rt_tensor *X = io->X, *W = io->W, *R = io->R, *Bt = io->Bt, *P = io->P;
#define XAT(t, b, i) oq_k_get_f64(X, c->layout1 ? ((b) * S + (t)) * I + (i) : ((t) * Bn + (b)) * I + (i))
    for (int64_t d = 0; d < c->dirs; d++) {
        bool reverse = d == 1 || strcmp(dir, "reverse") == 0;
        const act *fa = &c->f[d * nf], *ga = &c->f[d * nf + (nf > 1 ? 1 : 0)], *ha = &c->f[d * nf + (nf > 2 ? 2 : 0)];
        for (int64_t b = 0; b < Bn; b++)
            for (int64_t j = 0; j < H; j++) {
                hs[b * H + j] = io->H0 ? oq_k_get_f64(io->H0, HIDX(d, b, j)) : 0;
                cs[b * H + j] = io->C0 ? oq_k_get_f64(io->C0, HIDX(d, b, j)) : 0;
            }
        for (int64_t b = 0; b < Bn; b++) {
            int64_t len = io->SL ? oq_k_get_int(io->SL, b) : S;
            double *h = hs + b * H;
            for (int64_t step = 0; step < len; step++) {
                int64_t t = reverse ? len - 1 - step : step;
                for (int64_t q = 0; q < G * H; q++) {
                    double v = 0;
                    for (int64_t i = 0; i < I; i++)
                        v += XAT(t, b, i) * oq_k_get_f64(W, (d * G * H + q) * I + i);
                    if (Bt)
                        v += oq_k_get_f64(Bt, d * 2 * G * H + q);
                    if (!(c->kind == CELL_GRU && q >= 2 * H)) {
                        if (Bt)
                            v += oq_k_get_f64(Bt, d * 2 * G * H + G * H + q);
                        for (int64_t i = 0; i < H; i++)
                            v += h[i] * oq_k_get_f64(R, (d * G * H + q) * H + i);
                    }
                    g[q] = v;
                }
                if (c->kind == CELL_GRU) {
                    for (int64_t j = 0; j < H; j++)
                        hr[j] = act_apply(fa, clipv(c, g[H + j])); /* r */
                    for (int64_t j = 0; j < H; j++) {
                        double dot = 0;
                        for (int64_t i = 0; i < H; i++)
                            dot += (c->lbr ? h[i] : hr[i] * h[i]) * oq_k_get_f64(R, (d * G * H + 2 * H + j) * H + i);
                        hn[j] = gru_hr(c, hr[j], dot, Bt ? oq_k_get_f64(Bt, d * 2 * G * H + G * H + 2 * H + j) : 0);
                    }
                    memcpy(hr, hn, (size_t)H * sizeof *hr);
                }
                for (int64_t j = 0; j < H; j++) {
                    double pe[3] = {P ? oq_k_get_f64(P, d * 3 * H + j) : 0, P ? oq_k_get_f64(P, d * 3 * H + H + j) : 0,
                                    P ? oq_k_get_f64(P, d * 3 * H + 2 * H + j) : 0};
                    hn[j] = cell_unit(c, fa, ga, ha, g, H, j, h[j], c->kind == CELL_GRU ? hr[j] : 0, cs[b * H + j], pe,
                                      &cn[j]);
                    oq_k_set_f64(&out[0], YIDX(t, d, b, j), hn[j]);
                }
                memcpy(h, hn, (size_t)H * sizeof *h);
                memcpy(cs + b * H, cn, (size_t)H * sizeof *cs);
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
    return OQ_OK;
}
#undef YIDX
#undef HIDX

static oq_status run_rnn(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    rnn_cfg c;
    oq_status st = parse_cfg(k, &c);
    if (st)
        return st;
    rnn_io io = {.X = in[0], .W = in[1], .R = in[2], .Bt = n_in > 3 ? in[3] : NULL, .SL = n_in > 4 ? in[4] : NULL,
                 .H0 = n_in > 5 ? in[5] : NULL};
    io.C0 = c.kind == CELL_LSTM && n_in > 6 ? in[6] : NULL;
    io.P = c.kind == CELL_LSTM && n_in > 7 ? in[7] : NULL;
    io.S = io.X->dims[c.layout1 ? 1 : 0];
    io.Bn = io.X->dims[c.layout1 ? 0 : 1];
    io.I = io.X->dims[2];
    io.H = c.hidden;
    io.G = c.gates;
    if (io.W->dims[2] != io.I || io.R->rank != 3 || io.R->dims[1] != io.G * io.H || io.R->dims[2] != io.H)
        return oq_k_error(k, OQ_ERR_INVALID, "W or R has the wrong shape");
    const char *dir = oq_node_attr_string(k->node, "direction", "forward");
    memset(out[0].data, 0, (size_t)out[0].nbytes);
    bool f32 = true;
    const oq_rt_tensor *all[] = {io.X, io.W, io.R, io.Bt, io.H0, io.C0, io.P};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        f32 = f32 && (!all[i] || all[i]->dtype == OQ_DTYPE_FLOAT);
    return f32 ? run_f32(k, &c, &io, dir, out, n_out) : run_generic(k, &c, &io, dir, out, n_out);
}

#define F OQ_T(FLOAT) | OQ_T(DOUBLE)
const oq_kernel oq_kernels_rnn[] = {
    {"", "RNN", 7, 0, 0, F, NULL, NULL, infer_rnn, run_rnn, NULL, 3},
    {"", "GRU", 7, 0, 0, F, NULL, NULL, infer_rnn, run_rnn, NULL, 3},
    {"", "LSTM", 7, 0, 0, F, NULL, NULL, infer_rnn, run_rnn, NULL, 3},
};
OQ_KERNEL_TABLE_END(rnn);
