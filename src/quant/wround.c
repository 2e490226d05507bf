/* Weight rounding for static quantization (GPTQ with the quantizer's scales):
 * include/onnxq/wround.h */
#include "onnxq/wround.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnxq/exec.h"
#include "onnxq/gptq.h"
#include "quant/quant-impl.h"

enum { WR_CONV, WR_KN, WR_NK };                 /* Conv; B [K, N] (MatMul, Gemm); B [N, K] (Gemm transB) */
enum { WR_ROWS_PER_K = 4, WR_ROWS_MIN = 1024 }; /* im2col rows read per sample and layer */

typedef struct wr_layer {
    oq_node *node;
    oq_tensor *qt;          /* the int8 initializer */
    const float *fw;        /* its float data (initializer layout) */
    const float *scales;    /* [n_scales]: 1 or N */
    int64_t n_scales;
    int kind;
    int64_t K, N;
    /* Conv: input channels, spatial rank (1 or 2), kernel, strides, dilations, pads
     * (begin, end per axis) or auto_pad */
    int64_t C, nsp, kern[2], stride[2], dil[2], pad[4];
    const char *auto_pad;
    size_t stat;
    int8_t *nq;             /* the new rounding (initializer layout), NULL until done */
} wr_layer;

typedef struct wr_stat {
    const oq_value *x;      /* the layer input (a DequantizeLinear's output) */
    const wr_layer *geo;    /* a layer reading it: the im2col geometry */
    oq_gptq_stats h;
    bool bad, seen;
    oq_status st;
} wr_stat;

typedef struct wr_ctx {
    wr_stat *s;
    size_t s0, s1;          /* the group of stats of this pass */
    size_t seen;
    oq_plan *plan;
    float *buf;             /* im2col rows */
    size_t buf_n;
    oq_diag *d;
} wr_ctx;

oq_wround_options oq_wround_options_default(void)
{
    oq_wround_options o;
    memset(&o, 0, sizeof o);
    o.damp = 0.01;
    o.max_samples = 64;
    return o;
}

/* Conv geometry of n with weight dims wd (rank 3 or 4); false: not handled. */
static bool conv_geometry(const oq_node *n, const int64_t *wd, size_t wrank, wr_layer *L)
{
    if (wrank != 3 && wrank != 4)
        return false;
    L->nsp = (int64_t)wrank - 2;
    L->C = wd[1];
    const int64_t *v = NULL;
    int64_t nv;
    for (int64_t a = 0; a < L->nsp; a++) {
        L->kern[a] = wd[2 + a];
        L->stride[a] = L->dil[a] = 1;
        L->pad[a] = L->pad[L->nsp + a] = 0;
    }
    if ((nv = oq_node_attr_ints(n, "strides", &v)) > 0) {
        if (nv != L->nsp)
            return false;
        for (int64_t a = 0; a < nv; a++)
            L->stride[a] = v[a];
    }
    if ((nv = oq_node_attr_ints(n, "dilations", &v)) > 0) {
        if (nv != L->nsp)
            return false;
        for (int64_t a = 0; a < nv; a++)
            L->dil[a] = v[a];
    }
    if ((nv = oq_node_attr_ints(n, "pads", &v)) > 0) {
        if (nv != 2 * L->nsp)
            return false;
        for (int64_t a = 0; a < nv; a++)
            L->pad[a] = v[a];
    }
    for (int64_t a = 0; a < L->nsp; a++)
        if (L->stride[a] < 1 || L->dil[a] < 1 || L->kern[a] < 1 || L->pad[a] < 0 || L->pad[L->nsp + a] < 0)
            return false;
    L->auto_pad = oq_node_attr_string(n, "auto_pad", "NOTSET");
    if (strcmp(L->auto_pad, "NOTSET") && strcmp(L->auto_pad, "VALID") && strcmp(L->auto_pad, "SAME_UPPER") &&
        strcmp(L->auto_pad, "SAME_LOWER"))
        return false;
    return true;
}

/* The layer behind quantized node n (with its int8 weight), or false: *skip when n is a
 * quantized Conv/Gemm/MatMul that is left as it is. */
static bool find_layer(oq_node *n, const oq_wround_options *o, wr_layer *L, bool *skip)
{
    *skip = false;
    bool conv = oq_quant_op_is(n, "Conv"), gemm = oq_quant_op_is(n, "Gemm"), mm = oq_quant_op_is(n, "MatMul");
    if (!(conv || gemm || mm) || n->n_inputs < 2 || !oq_quant_producer_dq(n->inputs[0]))
        return false;
    const oq_node *dq = oq_quant_producer_dq(n->inputs[1]);
    if (!dq || dq->inputs[0]->kind != OQ_VALUE_INITIALIZER || dq->inputs[0]->is_graph_input)
        return false; /* no quantized constant weight (an activation x activation MatMul) */
    *skip = true;
    memset(L, 0, sizeof *L);
    L->node = n;
    const oq_value *wv = n->inputs[1], *qv = dq->inputs[0];
    if (wv->n_uses != 1 || oq_value_is_graph_output(wv) || qv->n_uses != 1 || !qv->initializer ||
        qv->initializer->dtype != OQ_DTYPE_INT8 ||
        oq_node_attr_int(dq, "block_size", 0) != 0)
        return false;
    oq_tensor *qt = qv->initializer, *sc = oq_value_const_tensor(dq->inputs[1]);
    if (!sc || sc->dtype != OQ_DTYPE_FLOAT || !oq_tensor_data(qt, NULL))
        return false;
    if (dq->n_inputs > 2 && dq->inputs[2]) { /* symmetric: every zero point 0 */
        oq_tensor *z = oq_value_const_tensor(dq->inputs[2]);
        const int8_t *zp = z && z->dtype == OQ_DTYPE_INT8 ? oq_tensor_data(z, NULL) : NULL;
        if (!zp)
            return false;
        for (int64_t i = 0; i < oq_tensor_numel(z); i++)
            if (zp[i] != 0)
                return false;
    }
    const int64_t *wd = qt->dims;
    size_t wr = qt->rank;
    int64_t axis = oq_node_attr_int(dq, "axis", 1), ns = oq_tensor_numel(sc);
    if (conv) {
        if (oq_node_attr_int(n, "group", 1) != 1 || !conv_geometry(n, wd, wr, L))
            return false;
        L->kind = WR_CONV;
        L->N = wd[0];
        L->K = L->C * L->kern[0] * (L->nsp > 1 ? L->kern[1] : 1);
        if (ns != 1 && !(ns == L->N && (axis == 0 || axis == -(int64_t)wr)))
            return false;
    } else {
        if (wr != 2 || (gemm && oq_node_attr_int(n, "transA", 0)))
            return false;
        bool tb = gemm && oq_node_attr_int(n, "transB", 0);
        L->kind = tb ? WR_NK : WR_KN;
        L->K = tb ? wd[1] : wd[0];
        L->N = tb ? wd[0] : wd[1];
        int64_t naxis = tb ? 0 : 1;
        if (ns != 1 && !(ns == L->N && (axis == naxis || axis == naxis - 2)))
            return false;
    }
    if (L->K < 1 || L->N < 1 || L->K > ((int64_t)1 << 15))
        return false;
    L->fw = o->float_weight ? o->float_weight(qv->name, oq_tensor_numel(qt), o->user) : NULL;
    L->scales = oq_tensor_data(sc, NULL);
    L->n_scales = ns;
    if (!L->fw || !L->scales)
        return false;
    L->qt = qt;
    *skip = false;
    return true;
}

/* output size and the begin pad of spatial axis a for an input of size in */
static void conv_axis(const wr_layer *L, int64_t a, int64_t in, int64_t *out, int64_t *begin)
{
    int64_t ext = L->dil[a] * (L->kern[a] - 1) + 1;
    if (!strcmp(L->auto_pad, "SAME_UPPER") || !strcmp(L->auto_pad, "SAME_LOWER")) {
        int64_t o = (in + L->stride[a] - 1) / L->stride[a];
        int64_t total = (o - 1) * L->stride[a] + ext - in;
        if (total < 0)
            total = 0;
        *out = o;
        *begin = !strcmp(L->auto_pad, "SAME_UPPER") ? total / 2 : total - total / 2;
        return;
    }
    int64_t pb = 0, pe = 0;
    if (strcmp(L->auto_pad, "VALID")) {
        pb = L->pad[a];
        pe = L->pad[L->nsp + a];
    }
    int64_t span = in + pb + pe - ext;
    *out = span < 0 ? 0 : span / L->stride[a] + 1;
    *begin = pb;
}

/* Add the rows of input t of stat S (a Conv's im2col rows, or a matrix's rows). */
static oq_status add_input(wr_ctx *c, wr_stat *S, const oq_rt_tensor *t)
{
    const wr_layer *L = S->geo;
    int64_t K = L->K, numel = oq_rt_tensor_numel(t);
    if (t->dtype != OQ_DTYPE_FLOAT || numel < 0 || (!t->data && numel > 0))
        return OQ_ERR_UNSUPPORTED;
    if (L->kind != WR_CONV) {
        if (t->rank < 1 || t->dims[t->rank - 1] != K)
            return OQ_ERR_UNSUPPORTED;
        return numel ? oq_gptq_stats_add(&S->h, t->data, numel / K, c->d) : OQ_OK;
    }
    if ((int64_t)t->rank != L->nsp + 2 || t->dims[1] != L->C)
        return OQ_ERR_UNSUPPORTED;
    int64_t B = t->dims[0], C = L->C, H = L->nsp > 1 ? t->dims[2] : 1, W = t->dims[t->rank - 1];
    int64_t oh = 1, ow, bh = 0, bw;
    wr_layer G = *L; /* a 1-D convolution as a 2-D one of height 1 */
    if (L->nsp == 1) {
        G.kern[1] = L->kern[0], G.stride[1] = L->stride[0], G.dil[1] = L->dil[0];
        G.pad[1] = L->pad[0], G.pad[3] = L->pad[1];
        G.kern[0] = G.stride[0] = G.dil[0] = 1;
        G.pad[0] = G.pad[2] = 0;
        G.nsp = 2;
    } else {
        conv_axis(&G, 0, H, &oh, &bh);
    }
    conv_axis(&G, 1, W, &ow, &bw);
    int64_t all = B * oh * ow, S2 = G.kern[0] * G.kern[1];
    if (all == 0)
        return OQ_OK;
    /* evenly spaced output positions, at most WR_ROWS_PER_K * K of them (at least
     * WR_ROWS_MIN) per sample: a large feature map's neighbouring patches add little */
    int64_t rows = all, cap = WR_ROWS_PER_K * K > WR_ROWS_MIN ? WR_ROWS_PER_K * K : WR_ROWS_MIN;
    if (rows > cap)
        rows = cap;
    int64_t chunk = ((int64_t)4 << 20) / K; /* rows per call: 16 MB of im2col */
    if (chunk < 1)
        chunk = 1;
    if (chunk > rows)
        chunk = rows;
    if (c->buf_n < (size_t)(chunk * K)) {
        float *nb = realloc(c->buf, (size_t)(chunk * K) * sizeof *nb);
        if (!nb)
            return oq_diag_error(c->d, OQ_ERR_NOMEM, "weight rounding: out of memory");
        c->buf = nb;
        c->buf_n = (size_t)(chunk * K);
    }
    const float *x = t->data;
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        int64_t nr = rows - r0 < chunk ? rows - r0 : chunk;
        for (int64_t r = 0; r < nr; r++) {
            int64_t row = rows == all ? r0 + r : (r0 + r) * all / rows;
            int64_t b = row / (oh * ow), oy = row / ow % oh, ox = row % ow;
            float *dst = c->buf + r * K;
            for (int64_t s = 0; s < S2; s++) {
                int64_t ky = s / G.kern[1], kx = s % G.kern[1];
                int64_t iy = oy * G.stride[0] - bh + ky * G.dil[0], ix = ox * G.stride[1] - bw + kx * G.dil[1];
                float *o = dst + s * C;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) {
                    memset(o, 0, (size_t)C * sizeof *o);
                    continue;
                }
                const float *src = x + ((b * C) * H + iy) * W + ix;
                for (int64_t ch = 0; ch < C; ch++)
                    o[ch] = src[ch * H * W];
            }
        }
        oq_status st = oq_gptq_stats_add(&S->h, c->buf, nr, c->d);
        if (st != OQ_OK)
            return st;
    }
    return OQ_OK;
}

static void observe(const oq_node *node, size_t out_index, const oq_rt_tensor *t, void *user)
{
    wr_ctx *c = user;
    const oq_value *v = node->outputs[out_index];
    for (size_t j = c->s0; j < c->s1; j++) {
        wr_stat *S = &c->s[j];
        if (S->x != v || S->seen)
            continue;
        S->seen = true;
        if (!S->bad && S->st == OQ_OK) {
            oq_status st = add_input(c, S, t);
            if (st == OQ_ERR_UNSUPPORTED)
                S->bad = true;
            else
                S->st = st;
        }
        if (++c->seen == c->s1 - c->s0) /* the group's inputs are all seen: the rest is not needed */
            oq_plan_stop(c->plan);
    }
}

/* Where feature k (row of the GPTQ layout [K, N]; for a Conv k = (kh, kw) * C + cin, the
 * reduction order of onnxruntime's kernels) of output n sits in the initializer. */
static int64_t index_of(const wr_layer *L, int64_t k, int64_t n)
{
    if (L->kind == WR_KN)
        return k * L->N + n;
    if (L->kind == WR_NK)
        return n * L->K + k;
    int64_t C = L->C, S = L->K / C;
    return (n * C + k % C) * S + k / C;
}

static void to_kn(const wr_layer *L, const float *src, float *w)
{
    for (int64_t k = 0; k < L->K; k++)
        for (int64_t n = 0; n < L->N; n++)
            w[k * L->N + n] = src[index_of(L, k, n)];
}

/* GPTQ for layer L with the statistics h: L->nq, and the gain into r */
static oq_status round_layer(wr_layer *L, const oq_gptq_stats *h, const oq_wround_options *o, oq_wround_result *r,
                             double *gain_sum, oq_diag *d)
{
    int64_t K = L->K, N = L->N, numel = K * N;
    float *w = malloc((size_t)numel * sizeof *w), *sc = malloc((size_t)N * sizeof *sc);
    int32_t *q0 = malloc((size_t)numel * sizeof *q0), *q1 = malloc((size_t)numel * sizeof *q1);
    L->nq = malloc((size_t)numel);
    oq_status st = OQ_OK;
    if (!w || !sc || !q0 || !q1 || !L->nq) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "weight rounding: out of memory");
        goto out;
    }
    to_kn(L, L->fw, w);
    for (int64_t n = 0; n < N; n++)
        sc[n] = L->scales[L->n_scales == 1 ? 0 : n];
    const int8_t *old = oq_tensor_data(L->qt, d);
    if (!old) {
        st = OQ_ERR_INVALID;
        goto out;
    }
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++)
            q0[k * N + n] = old[index_of(L, k, n)];
    char lb[128];
    oq_diag gd;
    oq_diag_init(&gd);
    st = oq_gptq_round_fixed(w, K, N, sc, o->pair_limit, h, o->damp, q1, NULL, &gd);
    oq_diag_free(&gd);
    const int32_t *cand[2] = {q0, q1};
    double err[2] = {-1, -1}, before, after;
    if (st == OQ_OK && !oq_gptq_proxy_errors(w, K, N, sc, cand, 2, h, err))
        st = OQ_ERR_NOMEM;
    before = err[0], after = err[1];
    if (st != OQ_OK || !(after >= 0) || !(before >= 0) || after >= before) {
        /* nothing better than what it has (or GPTQ failed on this layer): kept */
        free(L->nq);
        L->nq = NULL;
        st = st == OQ_ERR_NOMEM ? oq_diag_error(d, st, "weight rounding: out of memory") : OQ_OK;
        r->skipped++;
        goto out;
    }
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++) {
            int64_t i = index_of(L, k, n);
            L->nq[i] = (int8_t)q1[k * N + n];
            r->changed += L->nq[i] != old[i];
        }
    r->values += numel;
    r->layers++;
    double g = after > 0 ? 10.0 * log10(before / after) : 99.0;
    *gain_sum += g;
    if (r->layers == 1 || g < r->worst_gain_db) {
        r->worst_gain_db = g;
        snprintf(r->worst_node, sizeof r->worst_node, "%s", oq_node_label(L->node, lb, sizeof lb));
    }
out:
    free(w);
    free(sc);
    free(q0);
    free(q1);
    return st;
}

oq_status oq_weight_round(oq_model *qm, oq_calib_source *src, const oq_wround_options *o, oq_wround_result *r,
                          oq_diag *d)
{
    memset(r, 0, sizeof *r);
    wr_layer *ls = NULL;
    wr_stat *ss = NULL;
    size_t nl = 0, cap = 0, nst = 0;
    oq_status st = OQ_OK;
    oq_plan *plan = NULL;
    oq_rt_tensor *in = NULL;
    wr_ctx c = {0};
    c.d = d;
    for (oq_node *n = qm->graph->first; n; n = n->next) {
        if (nl == cap) {
            cap = cap ? 2 * cap : 32;
            wr_layer *g = realloc(ls, cap * sizeof *g);
            if (!g) {
                st = oq_diag_error(d, OQ_ERR_NOMEM, "weight rounding: out of memory");
                goto out;
            }
            ls = g;
        }
        bool skip;
        if (find_layer(n, o, &ls[nl], &skip))
            nl++;
        else if (skip)
            r->skipped++;
    }
    if (nl == 0)
        goto out;
    /* one statistics per distinct input and geometry */
    ss = calloc(nl, sizeof *ss);
    if (!ss) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "weight rounding: out of memory");
        goto out;
    }
    for (size_t j = 0; j < nl; j++) {
        wr_layer *L = &ls[j];
        size_t k = 0;
        for (; k < nst; k++) {
            const wr_layer *G = ss[k].geo;
            if (ss[k].x != L->node->inputs[0] || (G->kind == WR_CONV) != (L->kind == WR_CONV) || G->K != L->K)
                continue;
            if (L->kind != WR_CONV)
                break;
            if (G->nsp == L->nsp && G->C == L->C && !strcmp(G->auto_pad, L->auto_pad) &&
                !memcmp(G->kern, L->kern, sizeof G->kern) && !memcmp(G->stride, L->stride, sizeof G->stride) &&
                !memcmp(G->dil, L->dil, sizeof G->dil) && !memcmp(G->pad, L->pad, sizeof G->pad))
                break;
        }
        if (k == nst) {
            ss[nst].x = L->node->inputs[0];
            ss[nst].geo = L;
            nst++;
        }
        L->stat = k;
    }
    uint64_t ns = oq_calib_source_count(src);
    if (o->sample_index) {
        for (size_t i = 0; i < o->n_sample_index; i++)
            if (o->sample_index[i] >= ns) {
                st = oq_diag_error(d, OQ_ERR_INVALID, "weight rounding: sample %llu of %llu",
                                   (unsigned long long)o->sample_index[i], (unsigned long long)ns);
                goto out;
            }
        ns = o->n_sample_index;
    }
    if (o->max_samples > 0 && ns > o->max_samples)
        ns = o->max_samples;
    if (ns == 0)
        goto out;
    oq_plan_options po = oq_plan_options_default();
    po.threads = o->threads;
    po.on_tensor = observe;
    po.user = &c;
    if ((st = oq_plan_compile(qm, &po, &plan, d)) != OQ_OK)
        goto out;
    size_t nin = oq_plan_n_inputs(plan);
    in = calloc(nin + 1, sizeof *in);
    if (!in) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "weight rounding: out of memory");
        goto out;
    }
    r->samples = ns;
    c.s = ss;
    c.plan = plan;
    uint64_t budget = o->max_bytes ? o->max_bytes : OQ_WROUND_MAX_BYTES;
    double gain_sum = 0;
    for (size_t g0 = 0; g0 < nst && st == OQ_OK;) {
        /* a group: the inputs whose statistics fit in the budget together (at least one) */
        size_t g1 = g0;
        double bytes = 0;
        while (g1 < nst) {
            double b = 12.0 * (double)ss[g1].geo->K * (double)ss[g1].geo->K; /* double sums, float product */
            if (g1 > g0 && bytes + b > (double)budget)
                break;
            bytes += b;
            g1++;
        }
        for (size_t k = g0; k < g1 && st == OQ_OK; k++)
            st = oq_gptq_stats_init(&ss[k].h, ss[k].geo->K, d);
        c.s0 = g0;
        c.s1 = g1;
        for (uint64_t k = 0; k < ns && st == OQ_OK; k++) {
            char label[512] = "";
            st = oq_calib_source_sample(src, plan, o->sample_index ? o->sample_index[k] : k, in, nin, label,
                                        sizeof label, d);
            c.seen = 0;
            for (size_t j = g0; j < g1; j++)
                ss[j].seen = false;
            if (st == OQ_OK)
                st = oq_plan_run(plan, in, nin, NULL, 0, d);
            for (size_t i = 0; i < nin; i++)
                oq_rt_tensor_release(&in[i]);
            for (size_t j = g0; j < g1 && st == OQ_OK; j++)
                if (ss[j].st != OQ_OK)
                    st = ss[j].st;
            if (st != OQ_OK)
                oq_diag_add(d, OQ_SEV_NOTE, st, NULL, NULL, NULL, "weight rounding: sample %s", label);
        }
        r->passes++;
        for (size_t j = 0; j < nl && st == OQ_OK; j++) {
            wr_layer *L = &ls[j];
            if (L->stat < g0 || L->stat >= g1)
                continue;
            wr_stat *S = &ss[L->stat];
            if (S->bad || S->h.rows == 0) {
                r->skipped++;
                continue;
            }
            st = round_layer(L, &S->h, o, r, &gain_sum, d);
        }
        for (size_t k = g0; k < g1; k++)
            oq_gptq_stats_free(&ss[k].h);
        g0 = g1;
    }
    oq_plan_free(plan);
    plan = NULL;
    r->mean_gain_db = r->layers ? gain_sum / (double)r->layers : 0;
    for (size_t j = 0; j < nl && st == OQ_OK; j++) /* the new roundings into the model */
        if (ls[j].nq)
            st = oq_tensor_set_data(qm, ls[j].qt, OQ_DTYPE_INT8, ls[j].qt->dims, ls[j].qt->rank, ls[j].nq,
                                    oq_tensor_numel(ls[j].qt));
out:
    oq_plan_free(plan);
    free(in);
    free(c.buf);
    for (size_t k = 0; ss && k < nst; k++)
        oq_gptq_stats_free(&ss[k].h);
    for (size_t j = 0; j < nl; j++)
        free(ls[j].nq);
    free(ss);
    free(ls);
    return st;
}
