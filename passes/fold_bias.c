/* fold-bias: quantize the float bias of layers whose input and weight are dequantized.
 *
 * For Conv, ConvTranspose, Gemm (bias = input 2) and MatMul followed by an Add of a
 * constant (bias = the Add's constant input), when the activation input is the output
 * of a DequantizeLinear with a constant scalar scale and the weight is the output of a
 * DequantizeLinear of a constant integer tensor with a constant per-tensor or
 * per-output-channel scale, the float bias B becomes
 *
 *     B_quantized (int32) -> DequantizeLinear(B_quantized, B_scale, B_zero_point) -> B
 *
 * with B_scale[c] = s_input * s_weight[c] (float32 product) and B_zero_point = 0, the
 * layout fused integer kernels expect (accumulator + b_q, then one requantization).
 * Names follow /work/qdq-conventions.md. A bias that already is a DequantizeLinear
 * output is left alone, so the pass is idempotent.
 *
 * When round(b / (s_in * s_w)) does not fit int32 the weight scale of that channel is
 * raised to the smallest value that makes it fit (oq_bias_min_weight_scale) and the
 * channel's weights are requantized from their dequantized values; with
 * no-bias-weight-adjust the bias saturates instead and the clipped values are counted.
 * Each layer's worst-case accumulator sum|w_q - zp_w| * max|x_q - zp_x| + |b_q| is
 * checked against int32 per output channel, with a warning naming the layer. */
#include "pass-impl.h"

#include "onnxq/quant.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ctx {
    oq_pass_result *res;
    oq_diag *d;
    bool adjust;          /* raise weight scales instead of clipping */
    bool shared_per_user; /* shared bias: quantize per user (else skip) */
    bool check_acc;
    int64_t opset;
} ctx;

enum { K_CONV, K_CONVT, K_GEMM, K_MATMUL };

typedef struct layer {
    oq_node *n;           /* the Conv/ConvTranspose/Gemm/MatMul */
    int kind;
    oq_node *bias_node;   /* node reading the bias: n, or the Add after a MatMul */
    size_t bias_slot;
    oq_value *bias;       /* bias value or NULL */
    char label[160];
    /* input */
    oq_node *xdq;
    float s_in;
    int32_t x_zp;
    int32_t x_qtype;      /* -1 when unknown */
    /* weight */
    oq_node *wdq;
    oq_tensor *wq, *ws, *wzp;
    int64_t wn;           /* weight elements */
    int64_t nws;          /* number of weight scales (1 = per tensor) */
    int64_t C;            /* output channels */
    int64_t group, cpg, cin, inner; /* ConvTranspose layout */
} layer;

static void note(ctx *c, const layer *L, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void note(ctx *c, const layer *L, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    oq_diag_add(c->d, OQ_SEV_NOTE, OQ_OK, NULL, L->label, L->n->op_type, "fold-bias: %s", msg);
}

static oq_node *dq_producer(const oq_value *v)
{
    if (!v || v->kind != OQ_VALUE_NODE || !v->producer || v->producer_index != 0)
        return NULL;
    return oq_pass_is_op(v->producer, "DequantizeLinear") ? v->producer : NULL;
}

static oq_tensor *input_const(const oq_node *n, size_t i)
{
    return i < n->n_inputs && n->inputs[i] ? oq_value_const_tensor(n->inputs[i]) : NULL;
}

/* Integer type the DequantizeLinear reads, or -1 when it cannot be told. */
static int32_t dq_qtype(const oq_node *dq)
{
    oq_tensor *zp = input_const(dq, 2);
    if (zp)
        return zp->dtype;
    oq_tensor *x = input_const(dq, 0);
    if (x)
        return x->dtype;
    const oq_value *v = dq->inputs[0];
    if (v && v->kind == OQ_VALUE_NODE && v->producer && oq_pass_is_op(v->producer, "QuantizeLinear")) {
        oq_tensor *qzp = input_const(v->producer, 2);
        if (qzp)
            return qzp->dtype;
        oq_attr *a = oq_node_attr(v->producer, "output_dtype");
        return a && a->i ? (int32_t)a->i : OQ_DTYPE_UINT8;
    }
    int32_t t = oq_pass_value_elem_type(v);
    return t > 0 ? t : -1;
}

static bool scale_ok(const oq_tensor *s)
{
    return s && s->dtype == OQ_DTYPE_FLOAT && oq_tensor_numel(s) >= 1;
}

/* Output channel of weight element i. */
static int64_t elem_channel(const layer *L, int64_t i)
{
    switch (L->kind) {
    case K_CONV:
        return i / (L->wn / L->C);
    case K_CONVT: {
        int64_t ic = i / (L->cpg * L->inner), j = (i / L->inner) % L->cpg;
        return (ic / (L->cin / L->group)) * L->cpg + j;
    }
    case K_GEMM:
        if (oq_node_attr_int(L->n, "transB", 0))
            return i / (L->wn / L->C);
        return i % L->C;
    default:
        return i % L->C;
    }
}

/* Index of the weight scale that applies to output channel oc. */
static int64_t scale_index(const layer *L, int64_t oc)
{
    if (L->nws == 1)
        return 0;
    return L->kind == K_CONVT ? oc % L->cpg : oc;
}

static size_t value_refs(const oq_value *v)
{
    return oq_pass_value_refs(v);
}

/* Fill L from node n; returns true when n is a candidate layer (x and W dequantized).
 * Notes why a layer with a float bias is left alone. */
static bool match_layer(ctx *c, oq_node *n, layer *L)
{
    memset(L, 0, sizeof *L);
    L->n = n;
    if (oq_pass_is_op(n, "Conv"))
        L->kind = K_CONV;
    else if (oq_pass_is_op(n, "ConvTranspose"))
        L->kind = K_CONVT;
    else if (oq_pass_is_op(n, "Gemm"))
        L->kind = K_GEMM;
    else if (oq_pass_is_op(n, "MatMul"))
        L->kind = K_MATMUL;
    else
        return false;
    if (n->n_inputs < 2 || n->n_outputs < 1 || !n->outputs[0])
        return false;
    char lb[160];
    snprintf(L->label, sizeof L->label, "%s", oq_node_label(n, lb, sizeof lb));
    L->xdq = dq_producer(n->inputs[0]);
    L->wdq = dq_producer(n->inputs[1]);
    if (!L->xdq || !L->wdq)
        return false;

    /* where the bias is */
    if (L->kind == K_MATMUL) {
        oq_value *y = n->outputs[0];
        if (y->n_uses == 1 && !oq_value_is_graph_output(y) && oq_pass_is_op(y->uses[0].node, "Add") &&
            y->uses[0].node->n_inputs == 2) {
            oq_node *add = y->uses[0].node;
            size_t slot = 1 - y->uses[0].index;
            oq_value *b = add->inputs[slot];
            if (b && (oq_value_const_tensor(b) || dq_producer(b))) {
                L->bias_node = add;
                L->bias_slot = slot;
                L->bias = b;
            }
        }
    } else if (n->n_inputs >= 3 && n->inputs[2]) {
        L->bias_node = n;
        L->bias_slot = 2;
        L->bias = n->inputs[2];
    }

    /* input parameters */
    oq_tensor *xs = input_const(L->xdq, 1), *xz = input_const(L->xdq, 2);
    if (!scale_ok(xs) || (L->xdq->n_inputs >= 3 && L->xdq->inputs[2] && !xz)) {
        if (L->bias && oq_value_const_tensor(L->bias))
            note(c, L, "bias \"%s\" left in float: the input's scale or zero point is not constant",
                 L->bias->name);
        return false;
    }
    if (oq_tensor_numel(xs) != 1) {
        if (L->bias && oq_value_const_tensor(L->bias))
            note(c, L, "bias \"%s\" left in float: the input is quantized per axis", L->bias->name);
        return false;
    }
    const float *xsv = oq_tensor_data(xs, c->d);
    if (!xsv)
        return false;
    L->s_in = xsv[0];
    L->x_qtype = dq_qtype(L->xdq);
    L->x_zp = 0;
    if (xz) {
        const void *zd = oq_tensor_data(xz, c->d);
        if (!zd || oq_tensor_numel(xz) != 1 || !oq_dtype_is_integer(xz->dtype))
            return false;
        L->x_zp = oq_unpack_int(xz->dtype, zd, 0);
    }

    /* weight parameters */
    L->wq = input_const(L->wdq, 0);
    L->ws = input_const(L->wdq, 1);
    L->wzp = input_const(L->wdq, 2);
    if (!L->wq || !oq_dtype_is_integer(L->wq->dtype) || !scale_ok(L->ws) ||
        (L->wdq->n_inputs >= 3 && L->wdq->inputs[2] && !L->wzp)) {
        if (L->bias && oq_value_const_tensor(L->bias))
            note(c, L, "bias \"%s\" left in float: the weight or its scale/zero point is not constant",
                 L->bias->name);
        return false;
    }
    if (oq_node_attr_int(L->wdq, "block_size", 0) > 0) {
        if (L->bias && oq_value_const_tensor(L->bias))
            note(c, L, "bias \"%s\" left in float: blocked weight quantization has no per-channel "
                       "bias scale", L->bias->name);
        return false;
    }
    const oq_tensor *w = L->wq;
    L->wn = oq_tensor_numel(w);
    if (L->wn <= 0)
        return false;
    int64_t want_axis;
    switch (L->kind) {
    case K_CONV:
        if (w->rank < 3)
            return false;
        L->C = w->dims[0];
        want_axis = 0;
        break;
    case K_CONVT:
        L->group = oq_node_attr_int(n, "group", 1);
        if (w->rank < 3 || L->group < 1 || w->dims[0] % L->group)
            return false;
        L->cin = w->dims[0];
        L->cpg = w->dims[1];
        L->C = L->cpg * L->group;
        L->inner = L->wn / (L->cin * L->cpg);
        want_axis = 1;
        break;
    case K_GEMM:
        if (w->rank != 2)
            return false;
        want_axis = oq_node_attr_int(n, "transB", 0) ? 0 : 1;
        L->C = w->dims[want_axis];
        break;
    default:
        if (w->rank != 2)
            return false;
        want_axis = (int64_t)w->rank - 1;
        L->C = w->dims[w->rank - 1];
        break;
    }
    if (L->C <= 0 || L->wn % L->C)
        return false;
    L->nws = oq_tensor_numel(L->ws);
    if (L->nws != 1) {
        int64_t axis = oq_node_attr_int(L->wdq, "axis", 1);
        if (axis < 0)
            axis += (int64_t)w->rank;
        if (axis != want_axis || L->ws->rank != 1 || L->nws != w->dims[want_axis]) {
            if (L->bias && oq_value_const_tensor(L->bias))
                note(c, L, "bias \"%s\" left in float: the weight is quantized along axis %" PRId64
                           ", not the output channels (axis %" PRId64 ")",
                     L->bias->name, axis, want_axis);
            return false;
        }
    }
    if (L->wzp && oq_tensor_numel(L->wzp) != L->nws)
        return false;
    return true;
}

static int32_t wzp_at(const layer *L, const void *zpd, int64_t k)
{
    return L->wzp ? oq_unpack_int(L->wzp->dtype, zpd, L->nws == 1 ? 0 : k) : 0;
}

/* Weight scale index of weight element i. */
static int64_t elem_scale_index(const layer *L, int64_t i)
{
    return scale_index(L, elem_channel(L, i));
}

static bool owned(const oq_value *v)
{
    return v && value_refs(v) == 1 && !v->is_graph_input;
}

/* Raise weight scales (entries with newscale[k] > 0) and requantize those weights from
 * their dequantized values. */
static oq_status requantize_weight(ctx *c, layer *L, const float *newscale)
{
    oq_model *m = L->n->graph->model;
    int32_t qmin, qmax;
    oq_status st = oq_qrange(L->wq->dtype, false, &qmin, &qmax);
    if (st != OQ_OK)
        return oq_diag_add(c->d, OQ_SEV_ERROR, st, NULL, L->label, L->n->op_type,
                           "fold-bias: weight type %s is not supported", oq_dtype_name(L->wq->dtype));
    const void *wd = oq_tensor_data(L->wq, c->d);
    const float *sd = oq_tensor_data(L->ws, c->d);
    const void *zd = L->wzp ? oq_tensor_data(L->wzp, c->d) : NULL;
    if (!wd || !sd || (L->wzp && !zd))
        return OQ_ERR_INVALID;
    int64_t nbytes = oq_dtype_nbytes(L->wq->dtype, L->wn);
    int32_t *q = malloc((size_t)L->wn * sizeof(int32_t));
    float *s = malloc((size_t)L->nws * sizeof(float));
    void *packed = nbytes > 0 ? malloc((size_t)nbytes) : NULL;
    if (!q || !s || !packed) {
        st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t k = 0; k < L->nws; k++)
        s[k] = newscale[k] > 0.0f ? newscale[k] : sd[k];
    for (int64_t i = 0; i < L->wn; i++) {
        int32_t v = oq_unpack_int(L->wq->dtype, wd, i);
        int64_t k = elem_scale_index(L, i);
        if (newscale[k] > 0.0f) {
            int32_t zp = wzp_at(L, zd, k);
            float w = oq_dequantize_value(v, sd[k], zp);
            v = oq_quantize_value(w, s[k], zp, qmin, qmax);
        }
        q[i] = v;
    }
    st = oq_pack_ints(L->wq->dtype, q, L->wn, packed, c->d);
    if (st != OQ_OK)
        goto done;
    st = oq_tensor_set_data(m, L->wq, L->wq->dtype, L->wq->dims, L->wq->rank, packed, nbytes);
    if (st == OQ_OK)
        st = oq_tensor_set_data(m, L->ws, OQ_DTYPE_FLOAT, L->ws->dims, L->ws->rank, s,
                                (int64_t)L->nws * 4);
    if (st != OQ_OK)
        oq_diag_error(c->d, st, "out of memory");
done:
    free(q);
    free(s);
    free(packed);
    return st;
}

static bool would_overflow(float b, float s)
{
    double r = nearbyint((double)(b / s));
    return r > 2147483647.0 || r < -2147483648.0;
}

static oq_value *add_init(oq_graph *g, const char *base, const char *suffix, int32_t dtype,
                          const int64_t *dims, size_t rank, const void *data, int64_t nbytes)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%.400s%s", base, suffix);
    char *name = oq_graph_unique_name(g, buf);
    return name ? oq_graph_add_initializer(g, name, dtype, dims, rank, data, nbytes) : NULL;
}

/* Quantize L's float bias. Returns 1 folded, 0 left alone, <0 error. bq (C entries)
 * receives the int32 bias when folded. */
/* max |x_q - zp_x| of the layer's quantized input (0 when its type is unknown) */
static double input_qmax(const layer *L)
{
    int32_t qmin, qmax;
    if (L->x_qtype < 0 || oq_qrange(L->x_qtype, false, &qmin, &qmax) != OQ_OK)
        return 0.0;
    return fmax((double)qmax - L->x_zp, (double)L->x_zp - qmin);
}

/* sum|w_q - zp_w| per output channel (malloc'ed; NULL after an error, in *st) */
static int64_t *channel_abs_sums(ctx *c, const layer *L, oq_status *st)
{
    const void *wd = oq_tensor_data(L->wq, c->d);
    const void *zd = L->wzp ? oq_tensor_data(L->wzp, c->d) : NULL;
    *st = OQ_ERR_INVALID;
    if (!wd || (L->wzp && !zd))
        return NULL;
    int64_t *sum = calloc((size_t)(L->C > 0 ? L->C : 1), sizeof(int64_t));
    if (!sum) {
        *st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        return NULL;
    }
    *st = OQ_OK;
    int64_t per = L->C > 0 ? L->wn / L->C : 0;
    bool rows = L->kind == K_CONV || (L->kind == K_GEMM && oq_node_attr_int(L->n, "transB", 0));
    if (L->wq->dtype == OQ_DTYPE_INT8 && L->C > 0 && per * L->C == L->wn &&
        (rows || L->kind == K_GEMM || L->kind == K_MATMUL)) {
        /* int8 with channels in rows (Conv, Gemm transB) or columns (MatMul, Gemm): the
         * same sums without a channel lookup and an unpack per element (a 100 MB model's
         * weights are summed once per calibration candidate) */
        const int8_t *q = wd;
        if (rows) {
            for (int64_t oc = 0; oc < L->C; oc++) {
                int64_t z = wzp_at(L, zd, scale_index(L, oc)), a = 0;
                for (int64_t i = oc * per; i < (oc + 1) * per; i++)
                    a += q[i] - z < 0 ? z - q[i] : q[i] - z;
                sum[oc] = a;
            }
        } else {
            int32_t *z = malloc((size_t)L->C * sizeof *z);
            if (!z) {
                free(sum);
                *st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
                return NULL;
            }
            for (int64_t oc = 0; oc < L->C; oc++)
                z[oc] = wzp_at(L, zd, scale_index(L, oc));
            for (int64_t r = 0; r < per; r++)
                for (int64_t oc = 0; oc < L->C; oc++) {
                    int32_t v = q[r * L->C + oc] - z[oc];
                    sum[oc] += v < 0 ? -v : v;
                }
            free(z);
        }
        return sum;
    }
    for (int64_t i = 0; i < L->wn; i++) {
        int64_t oc = elem_channel(L, i);
        int64_t v = (int64_t)oq_unpack_int(L->wq->dtype, wd, i) - wzp_at(L, zd, scale_index(L, oc));
        sum[oc] += v < 0 ? -v : v;
    }
    return sum;
}

static int fold(ctx *c, layer *L, int32_t *bq)
{
    oq_graph *g = L->n->graph;
    oq_value *B = L->bias;
    oq_tensor *bt = oq_value_const_tensor(B);
    if (!bt)
        return 0;
    if (bt->dtype != OQ_DTYPE_FLOAT) {
        note(c, L, "bias \"%s\" left in float: type %s (only float32 biases are quantized)",
             B->name, oq_dtype_name(bt->dtype));
        return 0;
    }
    if (B->is_graph_input) {
        note(c, L, "bias \"%s\" left in float: it is a graph input that callers may override",
             B->name);
        return 0;
    }
    int64_t nb = oq_tensor_numel(bt);
    bool shape_ok = nb == L->C && bt->rank >= 1 && bt->dims[bt->rank - 1] == L->C;
    if ((L->kind == K_CONV || L->kind == K_CONVT) && bt->rank != 1)
        shape_ok = false;
    if (!shape_ok) {
        note(c, L, "bias \"%s\" left in float: %" PRId64 " values for %" PRId64
                   " output channels (broadcast biases are not folded)", B->name, nb, L->C);
        return 0;
    }
    if (L->kind == K_GEMM && (oq_node_attr_float(L->n, "alpha", 1.0f) != 1.0f ||
                              oq_node_attr_float(L->n, "beta", 1.0f) != 1.0f)) {
        note(c, L, "bias \"%s\" left in float: Gemm alpha/beta are not 1", B->name);
        return 0;
    }
    if (L->nws > 1 && c->opset < 13) {
        note(c, L, "bias \"%s\" left in float: a per-channel DequantizeLinear needs opset 13 "
                   "(the model imports %" PRId64 ")", B->name, c->opset);
        return 0;
    }
    /* a bias of an enclosing graph read by this body gets its own int32 copy here (B
       itself cannot be redefined in the body) */
    bool shared = value_refs(B) > 1 || B->graph != g;
    if (value_refs(B) > 1 && !c->shared_per_user) {
        note(c, L, "bias \"%s\" left in float: it is shared by %zu users (shared-bias=skip)",
             B->name, value_refs(B));
        oq_pass_stat_add(c->res, "skipped_shared", 1);
        return 0;
    }
    if (!(L->s_in > 0.0f) || !isfinite(L->s_in)) {
        note(c, L, "bias \"%s\" left in float: input scale %g is not positive", B->name,
             (double)L->s_in);
        return 0;
    }
    const float *b = oq_tensor_data(bt, c->d);
    const float *wsd = oq_tensor_data(L->ws, c->d);
    if (!b || !wsd)
        return -1;

    int rc = -1;
    int64_t *wsum = NULL; /* sum|w_q - zp| per output channel, for the accumulator's room */
    float *wsc = malloc((size_t)L->C * sizeof(float));   /* weight scale per channel */
    float *newscale = calloc((size_t)L->nws, sizeof(float));
    float *bscale = malloc((size_t)L->C * sizeof(float));
    int64_t *adj_chan = malloc((size_t)L->nws * sizeof(int64_t));
    if (!wsc || !newscale || !bscale || !adj_chan) {
        oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t oc = 0; oc < L->C; oc++)
        wsc[oc] = wsd[scale_index(L, oc)];
    int64_t n_ovf = 0;
    double xmax = input_qmax(L);
    for (int64_t oc = 0; oc < L->C; oc++) {
        if (!would_overflow(b[oc], L->s_in * wsc[oc]))
            continue;
        n_ovf++;
        int64_t k = scale_index(L, oc);
        float need = oq_bias_min_weight_scale(b[oc], L->s_in);
        if (xmax > 0.0 && need > 0.0f) {
            /* leave room for sum|w_q| * max|x_q|: after requantizing at scale s >= need,
             * sum|w_q| <= sum|w| / s + K (K weights per channel, each rounded by <= 1/2,
             * plus a margin), with sum|w| = sum|w_q - zp| * old scale */
            oq_status sst;
            if (!wsum && !(wsum = channel_abs_sums(c, L, &sst)))
                goto done;
            double K = (double)(L->wn / (L->C > 0 ? L->C : 1));
            double room = xmax * ((double)wsum[oc] * (double)wsc[oc] / (double)need + K);
            if (room < 1073741824.0)
                need = oq_bias_min_weight_scale_limit(b[oc], L->s_in, 2147483520.0 - room);
        }
        if (need > newscale[k]) {
            newscale[k] = need;
            adj_chan[k] = oc;
        }
    }
    bool adjust = n_ovf > 0 && c->adjust;
    if (adjust && !(owned(L->n->inputs[1]) && owned(L->wdq->inputs[0]) && owned(L->wdq->inputs[1]) &&
                    (!L->wzp || owned(L->wdq->inputs[2])))) {
        note(c, L, "bias \"%s\": weight \"%s\" or its parameters are shared with other nodes, so "
                   "its scale is not raised; the bias is clipped instead", B->name,
             L->n->inputs[1]->name);
        adjust = false;
    }
    if (adjust) {
        for (int64_t k = 0; k < L->nws; k++)
            if (newscale[k] > 0.0f && newscale[k] <= wsd[k])
                newscale[k] = 0.0f;
        for (int64_t k = 0; k < L->nws; k++) {
            if (newscale[k] <= 0.0f)
                continue;
            oq_diag_add(c->d, OQ_SEV_NOTE, OQ_OK, NULL, L->label, L->n->op_type,
                        "fold-bias: bias \"%s\" channel %" PRId64 " (%.9g) does not fit int32 with "
                        "scale %.9g x %.9g; weight \"%s\" %s%" PRId64 " scale raised from %.9g to "
                        "%.9g and requantized",
                        B->name, adj_chan[k], (double)b[adj_chan[k]], (double)L->s_in,
                        (double)wsd[k], L->n->inputs[1]->name,
                        L->nws == 1 ? "(per tensor) channel " : "channel ", adj_chan[k],
                        (double)wsd[k], (double)newscale[k]);
            oq_diag_set_weight(c->d, (double)newscale[k]); /* the coarsest raised scale is the worst */
            oq_pass_stat_add(c->res, "weights_adjusted", 1);
        }
        if (requantize_weight(c, L, newscale) != OQ_OK)
            goto done;
        wsd = oq_tensor_data(L->ws, c->d);
        if (!wsd)
            goto done;
        for (int64_t oc = 0; oc < L->C; oc++)
            wsc[oc] = wsd[scale_index(L, oc)];
    }
    free(wsum);
    wsum = NULL;
    int64_t n_clip = 0, first = -1;
    char what[512];
    snprintf(what, sizeof what, "node \"%s\": bias \"%s\"", L->label, B->name);
    if (oq_quantize_bias(b, L->C, L->s_in, wsc, L->nws == 1 ? 1 : L->C, bq, bscale, &n_clip, &first,
                         what, c->d) != OQ_OK)
        goto done;
    if (n_clip > 0) {
        oq_diag_add(c->d, OQ_SEV_WARNING, OQ_OK, NULL, L->label, L->n->op_type,
                    "fold-bias: bias \"%s\": %" PRId64 " value%s clipped to int32 (first: channel %"
                    PRId64 ", %.9g with scale %.9g)%s",
                    B->name, n_clip, n_clip == 1 ? "" : "s", first, (double)b[first],
                    (double)bscale[L->nws == 1 ? 0 : first],
                    c->adjust ? "" : " (no-bias-weight-adjust)");
        oq_pass_stat_add(c->res, "values_clipped", n_clip);
    }

    /* the new tensors */
    int32_t *zeros = calloc((size_t)L->C, sizeof(int32_t));
    if (!zeros) {
        oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    char base[400];
    oq_value *out;
    if (shared) {
        char nl[160];
        snprintf(nl, sizeof nl, "%s", L->n->name && *L->n->name ? L->n->name : L->n->op_type);
        snprintf(base, sizeof base, "%.180s_%.180s", B->name, nl);
        char *nm = oq_graph_unique_name(g, base);
        out = nm ? oq_graph_new_value(g, nm) : NULL;
        if (out)
            snprintf(base, sizeof base, "%.390s", out->name);
    } else {
        snprintf(base, sizeof base, "%.390s", B->name);
        out = B;
    }
    int64_t pdims[1] = {L->C};
    size_t prank = L->nws == 1 ? 0 : 1;
    oq_value *vq = add_init(g, base, "_quantized", OQ_DTYPE_INT32, bt->dims, bt->rank, bq,
                            (int64_t)L->C * 4);
    oq_value *vs = add_init(g, base, "_scale", OQ_DTYPE_FLOAT, pdims, prank, bscale,
                            (prank ? L->C : 1) * 4);
    oq_value *vz = add_init(g, base, "_zero_point", OQ_DTYPE_INT32, pdims, prank, zeros,
                            (prank ? L->C : 1) * 4);
    free(zeros);
    if (!out || !vq || !vs || !vz) {
        oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (!shared) {
        /* the float definition of B goes; B becomes the DequantizeLinear output */
        if (B->kind == OQ_VALUE_INITIALIZER)
            oq_graph_remove_initializer(g, B);
        else if (B->kind == OQ_VALUE_NODE && B->producer)
            oq_pass_remove_node(B->producer);
    }
    oq_value *ins[3] = {vq, vs, vz};
    snprintf(what, sizeof what, "%.390s_DequantizeLinear", base);
    char *nn = oq_graph_unique_name(g, what);
    oq_node *dq = nn ? oq_node_new(g, "DequantizeLinear", NULL, nn, ins, 3, &out, 1) : NULL;
    if (!dq) {
        oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (prank)
        oq_node_set_attr_int(dq, "axis", (int64_t)bt->rank - 1);
    oq_graph_insert_before(g, L->bias_node, dq);
    if (shared) {
        if (value_refs(B) > 1)
            note(c, L, "bias \"%s\" is shared by %zu users: quantized for this one as \"%s\"", B->name,
                 value_refs(B), out->name);
        else
            note(c, L, "bias \"%s\" of an enclosing graph: quantized in this subgraph as \"%s\"", B->name,
                 out->name);
        oq_node_set_input(L->bias_node, L->bias_slot, out);
        oq_pass_drop_if_unused(B);
    }
    oq_pass_stat_add(c->res, "biases_folded", 1);
    c->res->changed = true;
    rc = 1;
done:
    free(wsum);
    free(wsc);
    free(newscale);
    free(bscale);
    free(adj_chan);
    return rc;
}

/* int32 values of a bias that already is DequantizeLinear(int32 constant). */
static bool existing_bq(const layer *L, int32_t *bq)
{
    oq_node *dq = L->bias ? dq_producer(L->bias) : NULL;
    oq_tensor *t = dq ? input_const(dq, 0) : NULL;
    if (!t || t->dtype != OQ_DTYPE_INT32 || oq_tensor_numel(t) != L->C)
        return false;
    const int32_t *v = oq_tensor_data(t, NULL);
    if (!v)
        return false;
    memcpy(bq, v, (size_t)L->C * sizeof(int32_t));
    return true;
}

/* Worst case sum|w_q - zp_w| * max|x_q - zp_x| + |b_q| per output channel. */
static oq_status check_accumulator(ctx *c, const layer *L, const int32_t *bq)
{
    double xmax = input_qmax(L);
    if (!(xmax > 0.0)) {
        note(c, L, "accumulator not checked: the input's quantized type is unknown");
        return OQ_OK;
    }
    oq_status st;
    int64_t *sum = channel_abs_sums(c, L, &st);
    if (!sum)
        return st;
    int64_t n_bad = 0, worst = -1;
    double worst_acc = 0.0;
    for (int64_t oc = 0; oc < L->C; oc++) {
        double acc = (double)sum[oc] * xmax + (bq ? fabs((double)bq[oc]) : 0.0);
        if (acc > 2147483647.0) {
            n_bad++;
            if (acc > worst_acc) {
                worst_acc = acc;
                worst = oc;
            }
        }
    }
    if (n_bad > 0) {
        oq_diag_add(c->d, OQ_SEV_WARNING, OQ_OK, NULL, L->label, L->n->op_type,
                    "fold-bias: layer \"%s\": int32 accumulator can overflow in %" PRId64 " of %"
                    PRId64 " output channels; worst channel %" PRId64 ": sum|w_q| %" PRId64
                    " x max|x_q| %.0f + |b_q| %.0f = %.0f > 2147483647",
                    L->label, n_bad, L->C, worst, sum[worst], xmax,
                    bq ? fabs((double)bq[worst]) : 0.0, worst_acc);
        oq_pass_stat_add(c->res, "accumulator_warnings", 1);
    }
    free(sum);
    return OQ_OK;
}

static oq_status run_graph(oq_graph *g, void *vc)
{
    ctx *c = vc;
    for (oq_node *n = g->first; n; n = n->next) {
        layer L;
        if (!match_layer(c, n, &L))
            continue;
        int32_t *bq = malloc((size_t)L.C * sizeof(int32_t));
        if (!bq)
            return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        bool have_bq = false;
        if (L.bias && oq_value_const_tensor(L.bias)) {
            int rc = fold(c, &L, bq);
            if (rc < 0) {
                free(bq);
                return c->d && c->d->errors ? OQ_ERR_INVALID : OQ_ERR_NOMEM;
            }
            have_bq = rc == 1;
        } else if (L.bias) {
            have_bq = existing_bq(&L, bq);
        }
        oq_status st = c->check_acc ? check_accumulator(c, &L, have_bq ? bq : NULL) : OQ_OK;
        free(bq);
        if (st != OQ_OK)
            return st;
    }
    if (c->res->changed)
        oq_pass_prune_value_info(g);
    return OQ_OK;
}

static oq_status run(oq_model *m, const oq_pass_options *o, oq_pass_result *res, oq_diag *d)
{
    ctx c;
    c.res = res;
    c.d = d;
    c.adjust = !oq_pass_opt_bool(o, "no-bias-weight-adjust", false);
    const char *sh = oq_pass_opt_string(o, "shared-bias", "per-user");
    if (strcmp(sh, "per-user") != 0 && strcmp(sh, "skip") != 0)
        return oq_diag_error(d, OQ_ERR_USAGE,
                             "fold-bias: shared-bias must be per-user or skip, not \"%s\"", sh);
    c.shared_per_user = strcmp(sh, "per-user") == 0;
    c.check_acc = oq_pass_opt_bool(o, "check-accumulator", true);
    c.opset = oq_model_opset(m, "");
    return oq_pass_for_each_graph(m, run_graph, &c);
}

static const oq_pass_option_def options[] = {
    {"no-bias-weight-adjust", OQ_OPT_BOOL, "false",
     "clip a bias that does not fit int32 instead of raising the weight scale"},
    {"shared-bias", OQ_OPT_STRING, "per-user",
     "a bias read by several layers: per-user (one int32 copy each) or skip"},
    {"check-accumulator", OQ_OPT_BOOL, "true",
     "warn when sum|w_q| x max|x_q| + |b_q| can overflow int32"},
};

const oq_pass oq_pass_fold_bias = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "fold-bias",
    .summary = "quantize float biases of QDQ Conv/ConvTranspose/Gemm/MatMul+Add to int32 + DQ",
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .run = run,
};
