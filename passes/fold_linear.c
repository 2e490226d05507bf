/* fold-linear: element-wise Mul / Add / Sub / Div by a constant that is scalar or
 * per channel, next to a Conv / ConvTranspose / Gemm / MatMul with a constant weight,
 * folded into that node's weight and bias.
 *
 * After the node (its output feeds only the Mul/Add and is not a graph output), per
 * output channel c the element-wise op computes y = a[c] * z + b[c]:
 *   Mul(z, k): a = k          Add(z, k): a = 1, b = k
 *   Sub(z, k): a = 1, b = -k  Sub(k, z): a = -1, b = k      Div(z, k): a = 1/k
 * and becomes W'[c] = a[c] W[c], bias'[c] = a[c] bias[c] + b[c] (a bias is created
 * when there was none; MatMul has no bias, so only Mul/Div fold into it).
 *
 * Before a Conv (option before-conv, on by default): y = a[ci] * x + b[ci] per input
 * channel ci (axis 1), every use of y a Conv's data input, is folded into each such
 * Conv: W'[m, ci, ...] = a[ci] W[m, ci, ...]; bias'[m] = bias[m] + sum W[m, ci, k] b[ci].
 * A shift (b != 0) folds only into Convs without padding: a padded border holds 0,
 * not b, so the shift would be wrong there. A scale alone is exact with padding
 * (a * 0 = 0).
 *
 * All coefficients are computed in double and rounded once. Repeated until nothing
 * changes (Conv -> Mul -> Add -> Mul all fold). */
#include "pass-impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ctx {
    oq_pass_result *res;
    oq_diag *d;
    bool before_conv;
    bool scalar_only; /* fold only one-element constants: the per-channel spread of the
                       * producer's output, which per-tensor activation quantization
                       * sees, stays what it was */
    bool changed;
    size_t errors0; /* errors in d before the pass */
    /* why nodes were left, counted in the current round only (the last round's
     * counts are the ones reported) */
    int64_t skipped_broadcast, skipped_padding, skipped_dtype, skipped_matmul_shift, skipped_per_channel;
} ctx;

static bool new_errors(const ctx *c)
{
    return c->d && c->d->errors > c->errors0;
}

static bool float_type(int32_t t)
{
    return t == OQ_DTYPE_FLOAT || t == OQ_DTYPE_DOUBLE || t == OQ_DTYPE_FLOAT16 ||
           t == OQ_DTYPE_BFLOAT16;
}

/* A weight with at least one element in every dimension (the folds divide by dims). */
static bool usable_weight(const oq_tensor *w)
{
    if (!w || !float_type(w->dtype) || w->rank < 1)
        return false;
    for (size_t i = 0; i < w->rank; i++)
        if (w->dims[i] < 1)
            return false;
    return oq_tensor_numel(w) >= 1;
}

static bool is_linear_op(const oq_node *n)
{
    return oq_pass_is_op(n, "Mul") || oq_pass_is_op(n, "Add") || oq_pass_is_op(n, "Sub") ||
           oq_pass_is_op(n, "Div");
}

/* The constant k of a broadcast against a tensor of rank R (R < 0: unknown, then k
 * must have rank <= 1 and R is taken as 1) whose axis `axis` (counted from the end
 * when negative) has C entries, as a vector of C values. False when k would broadcast
 * over any other axis or grow the rank. */
static bool channel_vector(oq_tensor *k, int64_t R, int64_t axis, int64_t C, double **out,
                           oq_diag *d)
{
    *out = NULL;
    if (!k || !float_type(k->dtype) || C < 1)
        return false;
    int64_t rk = (int64_t)k->rank;
    if (R < 0) {
        if (rk > 1)
            return false;
        R = 1;
    }
    if (rk > R)
        return false;
    if (axis < 0)
        axis += R;
    if (axis < 0 || axis >= R)
        return false;
    bool per_channel = false;
    for (int64_t j = 0; j < rk; j++) {
        int64_t ax = R - rk + j, dim = k->dims[j];
        if (dim == 1)
            continue;
        if (ax != axis || dim != C)
            return false;
        per_channel = true;
    }
    double *v = NULL;
    int64_t n;
    if (oq_pass_tensor_to_double(k, &v, &n, d) != OQ_OK)
        return false;
    double *r = malloc((size_t)C * sizeof(double));
    if (!r) {
        free(v);
        return false;
    }
    for (int64_t c = 0; c < C; c++)
        r[c] = per_channel ? v[c] : v[0];
    free(v);
    *out = r;
    return true;
}

/* a and b of the element-wise node n applied to its data input `xi` (0 or 1) with the
 * constant k given per channel. False when n is not affine in that input (k / x), or
 * when a coefficient is not finite. */
static bool coeffs(const oq_node *n, int xi, const double *k, int64_t C, double *a, double *b)
{
    for (int64_t c = 0; c < C; c++) {
        if (oq_pass_is_op(n, "Mul")) {
            a[c] = k[c];
            b[c] = 0;
        } else if (oq_pass_is_op(n, "Add")) {
            a[c] = 1;
            b[c] = k[c];
        } else if (oq_pass_is_op(n, "Sub")) {
            a[c] = xi == 0 ? 1 : -1;
            b[c] = xi == 0 ? -k[c] : k[c];
        } else { /* Div */
            if (xi != 0 || k[c] == 0)
                return false;
            a[c] = 1.0 / k[c];
            b[c] = 0;
        }
        if (!isfinite(a[c]) || !isfinite(b[c]))
            return false;
    }
    return true;
}

/* "<base>_fold" without stacking suffixes on a weight folded before. */
static void fold_name(char *buf, size_t size, const char *base)
{
    size_t n = strlen(base);
    if (n > 5 && strcmp(base + n - 5, "_fold") == 0)
        n -= 5;
    else {
        const char *u = strrchr(base, '_');
        /* "<w>_fold_2" as made unique by oq_graph_unique_name */
        if (u && u - base > 5 && strncmp(u - 5, "_fold", 5) == 0 && strspn(u + 1, "0123456789") == strlen(u + 1))
            n = (size_t)(u - 5 - base);
    }
    snprintf(buf, size, "%.*s_fold", (int)(n > 200 ? 200 : n), base);
}

/* Split a constant element-wise node into (data input index, constant tensor).
 * False when not exactly one input is a constant. */
static bool split_operands(const oq_node *n, int *xi, oq_tensor **k)
{
    if (n->n_inputs != 2 || n->n_outputs != 1 || !n->inputs[0] || !n->inputs[1] ||
        !n->outputs[0])
        return false;
    oq_tensor *k0 = oq_value_const_tensor(n->inputs[0]), *k1 = oq_value_const_tensor(n->inputs[1]);
    if ((k0 != NULL) == (k1 != NULL))
        return false;
    *xi = k0 ? 1 : 0;
    *k = k0 ? k0 : k1;
    return true;
}

/* Output channels of producer p and the axis (of its output) they are on. */
typedef struct producer {
    int kind;            /* 0 conv, 1 convtranspose, 2 gemm, 3 matmul */
    oq_tensor *w, *bias;
    int64_t C, rank, axis;
} producer;

static bool producer_info(oq_node *p, producer *pi)
{
    memset(pi, 0, sizeof *pi);
    if (oq_pass_is_op(p, "Conv"))
        pi->kind = 0;
    else if (oq_pass_is_op(p, "ConvTranspose"))
        pi->kind = 1;
    else if (oq_pass_is_op(p, "Gemm"))
        pi->kind = 2;
    else if (oq_pass_is_op(p, "MatMul"))
        pi->kind = 3;
    else
        return false;
    if (p->n_inputs < 2 || p->n_outputs != 1 || !p->inputs[1])
        return false;
    oq_tensor *w = oq_value_const_tensor(p->inputs[1]);
    if (!usable_weight(w))
        return false;
    bool has_bias = p->n_inputs >= 3 && p->inputs[2];
    oq_tensor *bias = has_bias ? oq_value_const_tensor(p->inputs[2]) : NULL;
    if (has_bias && (!bias || !float_type(bias->dtype)))
        return false;
    pi->w = w;
    pi->bias = bias;
    switch (pi->kind) {
    case 0:
        if (w->rank < 3)
            return false;
        pi->C = w->dims[0];
        pi->rank = (int64_t)w->rank;
        pi->axis = 1;
        if (bias && (bias->rank != 1 || bias->dims[0] != pi->C))
            return false;
        break;
    case 1: {
        int64_t group = oq_node_attr_int(p, "group", 1);
        if (w->rank < 3 || group < 1 || w->dims[0] % group)
            return false;
        pi->C = w->dims[1] * group;
        pi->rank = (int64_t)w->rank;
        pi->axis = 1;
        if (bias && (bias->rank != 1 || bias->dims[0] != pi->C))
            return false;
        break;
    }
    case 2: {
        if (w->rank != 2)
            return false;
        bool tb = oq_node_attr_int(p, "transB", 0) != 0;
        pi->C = tb ? w->dims[0] : w->dims[1];
        pi->rank = 2;
        pi->axis = 1;
        /* C may be [N], [1, N] or a scalar; [M, N] is left alone */
        if (bias) {
            int64_t bn = oq_tensor_numel(bias);
            if (!(bn == 1 || (bn == pi->C && bias->dims[bias->rank - 1] == pi->C)))
                return false;
        }
        break;
    }
    default:
        if (w->rank != 2)
            return false;
        pi->C = w->dims[1];
        pi->rank = oq_pass_value_rank(p->outputs[0]);
        pi->axis = -1;
        break;
    }
    return pi->C >= 1;
}

/* Rewrite p's weight and bias so that its output is a[c] * z + b[c] (b may be NULL). */
/* Point node n at its new weight (and bias, when one was made) and drop the old
 * initializers nothing else reads. */
static void set_weight_bias(oq_node *n, oq_value *nw, oq_value *nbv, oq_value *old_w, oq_value *old_b)
{
    oq_node_set_input(n, 1, nw);
    oq_pass_drop_if_unused(old_w);
    if (nbv) {
        oq_node_set_input(n, 2, nbv);
        oq_pass_drop_if_unused(old_b);
    }
}

static oq_status scale_producer(ctx *c, oq_node *p, const producer *pi, const double *a,
                                const double *b)
{
    oq_graph *g = p->graph;
    oq_tensor *w = pi->w;
    int64_t C = pi->C, wn = oq_tensor_numel(w), n;
    double *wv = NULL, *bv = NULL, *nb = NULL;
    oq_status st = OQ_ERR_NOMEM;
    if (oq_pass_tensor_to_double(w, &wv, &n, c->d) != OQ_OK)
        return OQ_ERR_INVALID;
    if (pi->bias && oq_pass_tensor_to_double(pi->bias, &bv, &n, c->d) != OQ_OK) {
        free(wv);
        return OQ_ERR_INVALID;
    }
    int64_t bias_n = pi->bias ? n : 0;
    if (pi->kind == 0) {
        int64_t inner = wn / C;
        for (int64_t m = 0; m < C; m++)
            for (int64_t k = 0; k < inner; k++)
                wv[m * inner + k] *= a[m];
    } else if (pi->kind == 1) {
        int64_t group = oq_node_attr_int(p, "group", 1);
        int64_t cin = w->dims[0], cpg = w->dims[1], inner = wn / (cin * cpg);
        for (int64_t ic = 0; ic < cin; ic++)
            for (int64_t j = 0; j < cpg; j++) {
                int64_t oc = (ic / (cin / group)) * cpg + j;
                for (int64_t k = 0; k < inner; k++)
                    wv[(ic * cpg + j) * inner + k] *= a[oc];
            }
    } else {
        bool tb = pi->kind == 2 && oq_node_attr_int(p, "transB", 0) != 0;
        int64_t rows = w->dims[0], cols = w->dims[1];
        for (int64_t r = 0; r < rows; r++)
            for (int64_t q = 0; q < cols; q++)
                wv[r * cols + q] *= a[tb ? r : q];
    }
    bool need_bias = pi->bias || b;
    if (need_bias && pi->kind == 3) {
        st = OQ_ERR_INTERNAL; /* callers never ask for this */
        goto done;
    }
    if (need_bias) {
        nb = malloc((size_t)C * sizeof(double));
        if (!nb)
            goto done;
        /* Gemm: y = alpha A B + beta C; the new C' satisfies beta C' = a (beta C) + b */
        double beta = pi->kind == 2 ? oq_node_attr_float(p, "beta", 1.0f) : 1.0;
        bool use_old = bv && !(pi->kind == 2 && beta == 0.0);
        double scale = pi->kind == 2 && beta != 0.0 ? beta : 1.0;
        for (int64_t m = 0; m < C; m++) {
            double old = use_old ? bv[bias_n == 1 ? 0 : m] * scale : 0.0;
            nb[m] = (a[m] * old + (b ? b[m] : 0.0)) / scale;
        }
    }
    char base[256];
    fold_name(base, sizeof base, p->inputs[1]->name);
    oq_value *old_w = p->inputs[1], *old_b = p->n_inputs >= 3 ? p->inputs[2] : NULL;
    oq_value *nw = oq_pass_new_initializer(g, base, w->dtype, w->dims, w->rank, wv);
    if (!nw)
        goto done;
    oq_value *nbv = NULL;
    if (need_bias) {
        int64_t bdims[1] = {C};
        snprintf(base, sizeof base, "%.200s_bias", p->outputs[0] ? p->outputs[0]->name : "fold");
        nbv = oq_pass_new_initializer(g, base, pi->bias ? pi->bias->dtype : w->dtype, bdims, 1, nb);
        if (!nbv)
            goto done;
    }
    set_weight_bias(p, nw, nbv, old_w, old_b);
    if (nbv && pi->kind == 2 && oq_node_attr_float(p, "beta", 1.0f) == 0.0f)
        oq_node_set_attr_float(p, "beta", 1.0f);
    st = OQ_OK;
done:
    if (st == OQ_ERR_NOMEM)
        oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
    free(wv);
    free(bv);
    free(nb);
    return st;
}

/* Remove the element-wise node n whose data input z is p's output: p now writes y. */
static void splice_out_after(oq_node *n, oq_node *p, int xi)
{
    oq_value *z = n->inputs[xi], *k = n->inputs[1 - xi], *y = n->outputs[0];
    oq_pass_remove_node(n);
    oq_pass_drop_if_unused(k);
    oq_node_set_output(p, 0, y);
    z->kind = OQ_VALUE_UNDEFINED;
    z->producer = NULL;
}

/* A Squeeze between a Conv / ConvTranspose and the element-wise op that drops only
 * spatial axes (>= 2) keeps the channels on axis 1: what TensorFlow's Conv1D exports
 * (Conv on [N, C, 1, W], Squeeze axis 2, Add of a [1, C, 1] bias). For z a Squeeze's
 * output whose input is a Conv's output read by nothing else: the Squeeze, with *conv and
 * *pi set (pi->rank the squeezed rank); else NULL. */
static oq_node *channel_squeeze(const oq_value *z, oq_node **conv, producer *pi)
{
    oq_node *sq = z->producer;
    if (!sq || !oq_pass_is_op(sq, "Squeeze") || sq->n_inputs < 1 || sq->n_outputs != 1 || !sq->inputs[0])
        return NULL;
    const oq_value *x = sq->inputs[0];
    if (x->kind != OQ_VALUE_NODE || !x->producer || x->producer->graph != sq->graph || x->producer_index != 0 ||
        x->n_uses != 1 || oq_value_is_graph_output(x))
        return NULL;
    oq_node *p = x->producer;
    if ((!oq_pass_is_op(p, "Conv") && !oq_pass_is_op(p, "ConvTranspose")) || !producer_info(p, pi))
        return NULL;
    int64_t axes[OQ_RT_MAX_RANK], na;
    if (sq->n_inputs >= 2 && sq->inputs[1]) {
        na = oq_pass_const_ints(sq->inputs[1], axes, OQ_RT_MAX_RANK, NULL);
    } else { /* opset < 13 */
        const int64_t *av;
        na = oq_node_attr_ints(sq, "axes", &av);
        if (na > OQ_RT_MAX_RANK)
            return NULL;
        if (na > 0)
            memcpy(axes, av, (size_t)na * sizeof *axes);
    }
    if (na < 1) /* no axes: every 1-sized axis, and the batch axis could be one of them */
        return NULL;
    for (int64_t i = 0; i < na; i++) {
        int64_t ax = axes[i] < 0 ? axes[i] + pi->rank : axes[i];
        if (ax < 2 || ax >= pi->rank)
            return NULL;
    }
    pi->rank -= na;
    *conv = p;
    return sq;
}

/* 1 folded, 0 not applicable, <0 error */
static int fold_after(ctx *c, oq_node *n)
{
    int xi;
    oq_tensor *k;
    if (!split_operands(n, &xi, &k))
        return 0;
    if (c->scalar_only && oq_tensor_numel(k) != 1) {
        c->skipped_per_channel++;
        return 0;
    }
    oq_value *z = n->inputs[xi];
    if (z->kind != OQ_VALUE_NODE || !z->producer || z->producer->graph != n->graph ||
        z->producer_index != 0 || z->n_uses != 1 || oq_value_is_graph_output(z))
        return 0;
    oq_node *p = z->producer, *sq = NULL;
    producer pi;
    if (!producer_info(p, &pi) && !(sq = channel_squeeze(z, &p, &pi)))
        return 0; /* with a Squeeze, the element-wise op sees the squeezed tensor: pi.rank */
    if (!float_type(k->dtype) || k->dtype != pi.w->dtype) {
        c->skipped_dtype++;
        return 0;
    }
    double *kv = NULL;
    if (!channel_vector(k, pi.rank, pi.axis, pi.C, &kv, c->d)) {
        if (new_errors(c))
            return -1;
        c->skipped_broadcast++;
        return 0;
    }
    double *a = malloc((size_t)pi.C * sizeof(double)), *b = malloc((size_t)pi.C * sizeof(double));
    int rc = 0;
    if (!a || !b) {
        oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        rc = -1;
        goto done;
    }
    if (!coeffs(n, xi, kv, pi.C, a, b))
        goto done;
    bool shift = false;
    for (int64_t m = 0; m < pi.C; m++)
        shift = shift || b[m] != 0.0;
    if (shift && pi.kind == 3) {
        c->skipped_matmul_shift++;
        goto done;
    }
    if (scale_producer(c, p, &pi, a, shift ? b : NULL) != OQ_OK) {
        rc = -1;
        goto done;
    }
    splice_out_after(n, sq ? sq : p, xi);
    oq_pass_stat_add(c->res, sq ? "folded_after_squeeze" : "folded_after", 1);
    rc = 1;
done:
    free(kv);
    free(a);
    free(b);
    return rc;
}

static bool conv_has_padding(const oq_node *conv)
{
    const char *ap = oq_node_attr_string(conv, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0)
        return true;
    const int64_t *pads;
    int64_t np = oq_node_attr_ints(conv, "pads", &pads);
    for (int64_t i = 0; i < np; i++)
        if (pads[i] != 0)
            return true;
    return false;
}

/* Fold y = a[ci] x + b[ci] (per input channel) into conv: new W (and bias). */
static oq_status fold_into_next(ctx *c, oq_node *conv, const double *a, const double *b,
                                bool shift)
{
    oq_graph *g = conv->graph;
    oq_tensor *w = oq_value_const_tensor(conv->inputs[1]);
    bool has_bias = conv->n_inputs >= 3 && conv->inputs[2];
    oq_tensor *bias = has_bias ? oq_value_const_tensor(conv->inputs[2]) : NULL;
    int64_t M = w->dims[0], cpg = w->dims[1], group = oq_node_attr_int(conv, "group", 1);
    int64_t wn = oq_tensor_numel(w), inner = wn / (M * cpg), n;
    double *wv = NULL, *bv = NULL, *nb = NULL;
    oq_status st = OQ_ERR_NOMEM;
    if (oq_pass_tensor_to_double(w, &wv, &n, c->d) != OQ_OK)
        return OQ_ERR_INVALID;
    if (bias && oq_pass_tensor_to_double(bias, &bv, &n, c->d) != OQ_OK) {
        free(wv);
        return OQ_ERR_INVALID;
    }
    if (shift) {
        nb = malloc((size_t)M * sizeof(double));
        if (!nb)
            goto done;
    }
    for (int64_t m = 0; m < M; m++) {
        int64_t g0 = (m / (M / group)) * cpg;
        double acc = bv ? bv[m] : 0.0;
        for (int64_t ci = 0; ci < cpg; ci++)
            for (int64_t k = 0; k < inner; k++) {
                double *wp = &wv[(m * cpg + ci) * inner + k];
                if (shift)
                    acc += *wp * b[g0 + ci];
                *wp *= a[g0 + ci];
            }
        if (nb)
            nb[m] = acc;
    }
    char base[256];
    fold_name(base, sizeof base, conv->inputs[1]->name);
    oq_value *old_w = conv->inputs[1], *old_b = has_bias ? conv->inputs[2] : NULL;
    oq_value *nw = oq_pass_new_initializer(g, base, w->dtype, w->dims, w->rank, wv);
    if (!nw)
        goto done;
    oq_value *nbv = NULL;
    if (nb) {
        int64_t bdims[1] = {M};
        snprintf(base, sizeof base, "%.200s_bias", conv->outputs[0] ? conv->outputs[0]->name : "fold");
        nbv = oq_pass_new_initializer(g, base, bias ? bias->dtype : w->dtype, bdims, 1, nb);
        if (!nbv)
            goto done;
    }
    set_weight_bias(conv, nw, nbv, old_w, old_b);
    st = OQ_OK;
done:
    if (st == OQ_ERR_NOMEM)
        oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
    free(wv);
    free(bv);
    free(nb);
    return st;
}

/* A constant of per-channel values v[cin] that broadcasts over axis 1 of a rank-R
 * tensor: [1] when all values are equal, else [cin, 1, ..., 1]. */
static oq_value *channel_const(oq_graph *g, const char *base, int32_t dtype, const double *v,
                               int64_t cin, int64_t R)
{
    bool uniform = true;
    for (int64_t i = 1; i < cin; i++)
        uniform = uniform && v[i] == v[0];
    int64_t dims[16] = {uniform ? 1 : cin};
    size_t rank = 1;
    if (!uniform) {
        if (R < 2 || R > 16)
            return NULL;
        for (int64_t i = 1; i < R - 1; i++)
            dims[i] = 1;
        rank = (size_t)(R - 1);
    }
    return oq_pass_new_initializer(g, base, dtype, dims, rank, v);
}

/* n computes y = a x + b (b != 0) before padded Convs, and x = s h comes from a Mul or
 * Div by a constant that feeds only n: rewrite as y = (a s) (h + b / (a s)), so the
 * scale can fold into the Convs on the next sweep and one node remains (an Add).
 * 1 rewritten, 0 not applicable, <0 error. */
static int swap_with_scale(ctx *c, oq_node *n, int xi, const double *a, const double *b,
                           int64_t cin, int64_t R)
{
    oq_value *x = n->inputs[xi];
    if (x->kind != OQ_VALUE_NODE || !x->producer || x->producer->graph != n->graph ||
        x->producer_index != 0 || x->n_uses != 1 || oq_value_is_graph_output(x))
        return 0;
    oq_node *p = x->producer;
    int pxi;
    oq_tensor *pk;
    if (!(oq_pass_is_op(p, "Mul") || oq_pass_is_op(p, "Div")) || !split_operands(p, &pxi, &pk) ||
        pk->dtype != oq_value_const_tensor(n->inputs[1 - xi])->dtype)
        return 0;
    double *sv = NULL;
    if (!channel_vector(pk, R, 1, cin, &sv, c->d))
        return new_errors(c) ? -1 : 0;
    double *pa = malloc((size_t)cin * sizeof(double)), *pb = malloc((size_t)cin * sizeof(double));
    double *scale = malloc((size_t)cin * sizeof(double)), *shift = malloc((size_t)cin * sizeof(double));
    int rc = 0;
    if (!pa || !pb || !scale || !shift) {
        oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        rc = -1;
        goto done;
    }
    if (!coeffs(p, pxi, sv, cin, pa, pb))
        goto done;
    for (int64_t i = 0; i < cin; i++) {
        scale[i] = a[i] * pa[i];
        shift[i] = b[i] / scale[i];
        if (scale[i] == 0.0 || !isfinite(shift[i]))
            goto done;
    }
    oq_graph *g = n->graph;
    oq_value *h = p->inputs[pxi], *pkv = p->inputs[1 - pxi], *nkv = n->inputs[1 - xi];
    char base[256];
    snprintf(base, sizeof base, "%.200s_shift", p->name && *p->name ? p->name : "fold");
    oq_value *sh = channel_const(g, base, pk->dtype, shift, cin, R);
    snprintf(base, sizeof base, "%.200s_scale", n->name && *n->name ? n->name : "fold");
    oq_value *sc = channel_const(g, base, pk->dtype, scale, cin, R);
    char *add = oq_model_strdup(g->model, "Add"), *mul = oq_model_strdup(g->model, "Mul");
    if (!sh || !sc || !add || !mul) {
        oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        rc = -1;
        goto done;
    }
    /* x now holds h + b / (a s), no longer what its name meant: a fresh name, so that tools
     * that match tensors by name with the original model (verify, the fallback search)
     * do not compare it with the old x */
    char *xn = oq_pass_unique_name2(g, x->name, "_shifted");
    if (!xn || oq_value_rename(x, xn) != OQ_OK) {
        oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        rc = -1;
        goto done;
    }
    p->op_type = add;
    oq_node_set_input(p, 0, h);
    oq_node_set_input(p, 1, sh);
    n->op_type = mul;
    oq_node_set_input(n, 0, x);
    oq_node_set_input(n, 1, sc);
    oq_pass_drop_if_unused(pkv);
    oq_pass_drop_if_unused(nkv);
    oq_pass_stat_add(c->res, "swapped_scale_shift", 1);
    rc = 1;
done:
    free(sv);
    free(pa);
    free(pb);
    free(scale);
    free(shift);
    return rc;
}

/* 1 folded, 0 not applicable, <0 error */
static int fold_before(ctx *c, oq_node *n)
{
    int64_t cin = -1, rank = -1;
    int xi;
    oq_tensor *k;
    if (!split_operands(n, &xi, &k))
        return 0;
    if (c->scalar_only && oq_tensor_numel(k) != 1)
        return 0; /* counted by fold_after, which the same round ran over every node */
    oq_value *x = n->inputs[xi], *y = n->outputs[0];
    if (y->n_uses == 0 || oq_value_is_graph_output(y))
        return 0;
    for (size_t u = 0; u < y->n_uses; u++) {
        oq_node *conv = y->uses[u].node;
        if (!oq_pass_is_op(conv, "Conv") || y->uses[u].index != 0 || conv->graph != n->graph ||
            conv->n_inputs < 2 || !conv->inputs[1] || conv->inputs[1] == y)
            return 0;
        oq_tensor *w = oq_value_const_tensor(conv->inputs[1]);
        if (!usable_weight(w) || w->dtype != k->dtype || w->rank < 3)
            return 0;
        bool has_bias = conv->n_inputs >= 3 && conv->inputs[2];
        oq_tensor *bias = has_bias ? oq_value_const_tensor(conv->inputs[2]) : NULL;
        if (has_bias && (!bias || !float_type(bias->dtype) || bias->rank != 1 ||
                         bias->dims[0] != w->dims[0]))
            return 0;
        int64_t group = oq_node_attr_int(conv, "group", 1);
        if (group < 1 || w->dims[0] % group)
            return 0;
        int64_t ci = w->dims[1] * group;
        if ((cin >= 0 && ci != cin) || (rank >= 0 && (int64_t)w->rank != rank))
            return 0;
        cin = ci;
        rank = (int64_t)w->rank;
    }
    double *kv = NULL;
    if (!channel_vector(k, rank, 1, cin, &kv, c->d)) {
        if (new_errors(c))
            return -1;
        c->skipped_broadcast++;
        return 0;
    }
    double *a = malloc((size_t)cin * sizeof(double)), *b = malloc((size_t)cin * sizeof(double));
    int rc = 0;
    oq_node **uses = malloc(y->n_uses * sizeof(*uses));
    size_t n_uses = y->n_uses;
    if (!a || !b || !uses) {
        oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        rc = -1;
        goto done;
    }
    if (!coeffs(n, xi, kv, cin, a, b))
        goto done;
    bool shift = false;
    for (int64_t m = 0; m < cin; m++)
        shift = shift || b[m] != 0.0;
    for (size_t u = 0; u < n_uses; u++) {
        uses[u] = y->uses[u].node;
        if (shift && conv_has_padding(uses[u])) {
            rc = swap_with_scale(c, n, xi, a, b, cin, rank);
            if (rc == 0)
                c->skipped_padding++;
            goto done;
        }
    }
    for (size_t u = 0; u < n_uses; u++) {
        if (fold_into_next(c, uses[u], a, b, shift) != OQ_OK) {
            rc = -1;
            goto done;
        }
        oq_node_set_input(uses[u], 0, x);
    }
    oq_value *kval = n->inputs[1 - xi];
    oq_pass_remove_node(n);
    oq_pass_drop_if_unused(kval);
    oq_pass_stat_add(c->res, "folded_before", 1);
    rc = 1;
done:
    free(kv);
    free(a);
    free(b);
    free(uses);
    return rc;
}

/* One sweep over g: folds into the producer, or (before) into the next Convs. */
static int sweep(ctx *c, oq_graph *g, bool before)
{
    int folded = 0;
    for (oq_node *n = g->first; n;) {
        oq_node *next = n->next;
        if (is_linear_op(n)) {
            int rc = before ? fold_before(c, n) : fold_after(c, n);
            if (rc < 0)
                return -1;
            folded += rc;
        }
        n = next;
    }
    return folded;
}

static oq_status run_graph(oq_graph *g, void *vc)
{
    ctx *c = vc;
    /* Folds into the producer first, to a fixed point; then one sweep of folds into
     * the next Convs; again until nothing changes. */
    for (int round = 0; round < 64; round++) {
        c->skipped_broadcast = c->skipped_padding = c->skipped_dtype = c->skipped_matmul_shift = c->skipped_per_channel = 0;
        int k = sweep(c, g, false);
        if (k < 0)
            return new_errors(c) ? OQ_ERR_INVALID : OQ_ERR_NOMEM;
        if (k == 0 && c->before_conv)
            k = sweep(c, g, true);
        if (k < 0)
            return new_errors(c) ? OQ_ERR_INVALID : OQ_ERR_NOMEM;
        if (k == 0)
            break;
        c->changed = true;
    }
    oq_pass_stat_add(c->res, "skipped_broadcast", c->skipped_broadcast);
    oq_pass_stat_add(c->res, "skipped_padding", c->skipped_padding);
    oq_pass_stat_add(c->res, "skipped_dtype", c->skipped_dtype);
    oq_pass_stat_add(c->res, "skipped_matmul_shift", c->skipped_matmul_shift);
    if (c->scalar_only)
        oq_pass_stat_add(c->res, "skipped_per_channel", c->skipped_per_channel);
    oq_pass_prune_value_info(g);
    return OQ_OK;
}

static oq_status run(oq_model *m, const oq_pass_options *o, oq_pass_result *res, oq_diag *d)
{
    ctx c = {res, d, oq_pass_opt_bool(o, "before-conv", true), oq_pass_opt_bool(o, "scalar-only", false), false,
             d ? d->errors : 0, 0, 0, 0, 0, 0};
    oq_status s = oq_pass_for_each_graph(m, run_graph, &c);
    if (c.changed)
        res->changed = true;
    return s;
}

static const oq_pass_option_def options[] = {
    {"before-conv", OQ_OPT_BOOL, "true",
     "also fold a Mul/Add that feeds only Convs into their weights (a shift only when they have no padding)"},
    {"scalar-only", OQ_OPT_BOOL, "false",
     "fold only one-element constants (a per-channel scale folded into a layer widens the spread of its "
     "output channels under one activation scale)"},
};

const oq_pass oq_pass_fold_linear = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "fold-linear",
    .summary = "fold scalar/per-channel Mul, Add, Sub, Div by constants into Conv/ConvTranspose/Gemm/MatMul weights and bias",
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .run = run,
};
