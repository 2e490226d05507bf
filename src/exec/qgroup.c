/* Which QDQ groups a plan runs as integer kernels: onnxruntime's CPU fusion rules for
 * Conv, Gemm and MatMul (see qgroup.h and docs/run.md "Arithmetic targets"). Only the
 * recognition lives here; the arithmetic is in kernels/qlinear.c. */
#include "exec/qgroup.h"
#include "ir/grow.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

struct oq_qgroups {
    size_t n;
    oq_qgroup **groups;
    size_t n_ids;
    unsigned char *role;      /* by node id: 0 run, 1 skip, 2 group output (Q), 3 group
                               * output that reads the group's DQ outputs (float) */
    oq_qgroup **by_out;       /* by node id: the group whose output node it is */
};

static bool is_op(const oq_node *n, const char *op)
{
    return n && n->op_type && strcmp(n->op_type, op) == 0 && oq_domain_is_default(n->domain);
}

static oq_node *producer(const oq_value *v, const oq_graph *g)
{
    if (!v || v->kind != OQ_VALUE_NODE || !v->producer || v->producer->graph != g)
        return NULL;
    return v->producer;
}

static oq_node *only_consumer(const oq_value *v)
{
    if (!v || v->n_uses != 1 || oq_value_is_graph_output(v))
        return NULL;
    return v->uses[0].node;
}

static oq_node *producer_dq(const oq_value *v, const oq_graph *g)
{
    oq_node *p = producer(v, g);
    if (!is_op(p, "DequantizeLinear") || p->n_inputs < 2 || !p->inputs[0] || !p->inputs[1])
        return NULL;
    if (oq_node_attr_int(p, "block_size", 0) != 0)
        return NULL;
    return p;
}

/* constant tensor data of an input (NULL when absent, not constant or unreadable) */
static const void *const_data(const oq_node *n, size_t i, oq_tensor **t)
{
    *t = i < n->n_inputs ? oq_value_const_tensor(n->inputs[i]) : NULL;
    if (!*t || !(*t)->has_dtype)
        return NULL;
    return oq_tensor_data(*t, NULL);
}

static bool is_scalar(const oq_tensor *t)
{
    return t && t->rank <= 1 && oq_tensor_numel(t) == 1;
}

/* scalar float scale and uint8/int8 zero point of a Q or DQ node (zero point required) */
static bool scalar_qparams(const oq_node *n, float *scale, int32_t *zp, int32_t *dtype)
{
    oq_tensor *ts, *tz;
    const void *s = const_data(n, 1, &ts), *z = const_data(n, 2, &tz);
    if (!s || !z || !is_scalar(ts) || !is_scalar(tz) || ts->dtype != OQ_DTYPE_FLOAT)
        return false;
    if (tz->dtype == OQ_DTYPE_UINT8)
        *zp = *(const uint8_t *)z;
    else if (tz->dtype == OQ_DTYPE_INT8)
        *zp = *(const int8_t *)z;
    else
        return false;
    *scale = *(const float *)s;
    *dtype = tz->dtype;
    return true;
}

/* onnxruntime's QDQS8ToU8Transformer (qdq_s8_to_u8.cc): a QuantizeLinear whose only
 * consumer is a DequantizeLinear, both with constant int8 scalar zero points of equal
 * value, becomes a uint8 pair (zero point + 128). Shared DQs were duplicated before
 * (ensure_unique_dq_for_node_unit.cc), so the DQ must have a single consumer too. */
static bool s8_pair_converted(const oq_node *q, const oq_node *dq)
{
    float s;
    int32_t zq, zd, tq, td;
    if (!q || !dq || q->n_inputs != 3 || dq->n_inputs != 3 || !q->inputs[2] || !dq->inputs[2])
        return false;
    if (only_consumer(q->outputs[0]) != dq)
        return false;
    /* EnsureUniqueDQForNodeUnit runs first and gives each consumer of a DQ its own copy
     * (a graph output counts as one): the Q then has several consumers */
    const oq_value *dv = dq->outputs[0];
    if (!dv || dv->n_uses + (oq_value_is_graph_output(dv) ? 1u : 0u) > 1)
        return false;
    if (!scalar_qparams(q, &s, &zq, &tq) || !scalar_qparams(dq, &s, &zd, &td))
        return false;
    return tq == OQ_DTYPE_INT8 && td == OQ_DTYPE_INT8 && zq == zd;
}

/* Clip/Relu between the op and Q that onnxruntime removes (relu_quantizelinear.cc,
 * clip_quantizelinear.cc): Q's range already clamps to it. */
static bool post_redundant(const oq_node *post, const oq_node *q)
{
    float scale;
    int32_t zp, dt;
    if (!scalar_qparams(q, &scale, &zp, &dt))
        return false;
    int32_t qmin = dt == OQ_DTYPE_INT8 ? -128 : 0, qmax = dt == OQ_DTYPE_INT8 ? 127 : 255;
    if (is_op(post, "Relu"))
        return zp == qmin;
    /* Clip: the Q scale must be a rank-0 tensor (GetQConstantLowerUpper) */
    oq_tensor *ts = oq_value_const_tensor(q->inputs[1]);
    if (!ts || ts->rank != 0)
        return false;
    float lo = -FLT_MAX, hi = FLT_MAX;
    if (oq_node_opset(post) < 11) {
        lo = oq_node_attr_float(post, "min", -FLT_MAX);
        hi = oq_node_attr_float(post, "max", FLT_MAX);
    } else {
        for (size_t i = 1; i < 3; i++) {
            if (i >= post->n_inputs || !post->inputs[i])
                continue;
            oq_tensor *t;
            const void *d = const_data(post, i, &t);
            if (!d || !is_scalar(t) || t->dtype != OQ_DTYPE_FLOAT)
                return false;
            if (i == 1)
                lo = *(const float *)d;
            else
                hi = *(const float *)d;
        }
    }
    float lower = scale * (float)(qmin - zp), upper = scale * (float)(qmax - zp);
    return !(FLT_EPSILON < lo - lower) && !(FLT_EPSILON < upper - hi);
}

/* The weight DQ: constant uint8/int8 weights, scale per tensor or per output channel
 * (along `axis` of the weight), zero points equal across channels where `same_zp`. */
static bool weight_ok(const oq_node *dq, size_t want_rank_min, int64_t axis, bool same_zp)
{
    oq_tensor *tw, *ts, *tz = NULL;
    const void *w = const_data(dq, 0, &tw), *s = const_data(dq, 1, &ts);
    if (!w || !s || ts->dtype != OQ_DTYPE_FLOAT)
        return false;
    if (tw->dtype != OQ_DTYPE_UINT8 && tw->dtype != OQ_DTYPE_INT8)
        return false;
    if (tw->rank < want_rank_min)
        return false;
    int64_t ns = oq_tensor_numel(ts);
    if (ns != 1) {
        int64_t ax = oq_node_attr_int(dq, "axis", 1);
        if (ax < 0)
            ax += (int64_t)tw->rank;
        if (ts->rank != 1 || ax != axis || ns != tw->dims[axis])
            return false;
    }
    if (dq->n_inputs > 2 && dq->inputs[2]) {
        const void *z = const_data(dq, 2, &tz);
        if (!z || tz->dtype != tw->dtype || oq_tensor_numel(tz) != ns)
            return false;
        if (same_zp)
            for (int64_t i = 1; i < ns; i++)
                if (((const uint8_t *)z)[i] != ((const uint8_t *)z)[0])
                    return false;
    }
    return true;
}

static bool bias_ok(const oq_node *dq, int64_t n_out, bool allow_scalar)
{
    oq_tensor *tb;
    const void *b = const_data(dq, 0, &tb);
    if (!b || tb->dtype != OQ_DTYPE_INT32)
        return false;
    int64_t nb = oq_tensor_numel(tb);
    if (allow_scalar && nb == 1 && tb->rank <= 1)
        return true;
    if (nb != n_out)
        return false;
    return tb->rank == 1 || (tb->rank == 2 && tb->dims[0] == 1);
}

/* A MatMul with a constant weight and no Q after it. onnxruntime's MatMulAddFusion
 * (matmul_add_fusion.cc, before the QDQ rules) turns MatMul + Add of a [N] bias into a
 * Gemm: with a DequantizeLinear of int32 as that bias, the Gemm becomes a QGemm with a
 * float output whose accumulator starts at the raw int32 bias (its DQ scale is not
 * read); with any other [N] bias the Gemm stays float (false: the reference runs it).
 * Otherwise the MatMul becomes MatMulIntegerToFloat. Sets grp->add and grp->dq_b for
 * the first case. Not modelled: the fusion's exceptions for attention projections of
 * inputs of rank > 2 (there the Add stays separate: the same values up to float
 * rounding). */
static bool matmul_add(oq_graph *g, oq_node *mm, int64_t n_out, oq_qgroup *grp)
{
    oq_value *y = mm->outputs[0];
    if (!y || y->n_uses != 1 || oq_value_is_graph_output(y))
        return true;
    oq_node *add = y->uses[0].node;
    if (!is_op(add, "Add") || add->n_inputs != 2 || !add->inputs[0] || !add->inputs[1] ||
        add->n_outputs != 1 || !add->outputs[0] || add->inputs[0] == add->inputs[1])
        return true;
    oq_value *bv = add->inputs[add->inputs[0] == y ? 1 : 0];
    oq_node *bdq = producer_dq(bv, g);
    oq_tensor *tb = oq_value_const_tensor(bdq ? bdq->inputs[0] : bv);
    if (!tb) {
        /* an activation bias of static shape [N]: a float Gemm */
        const oq_shape *sh = bv->type ? bv->type->shape : NULL;
        return !(sh && sh->rank == 1 && sh->dims[0].kind == OQ_DIM_VALUE &&
                 sh->dims[0].value == n_out);
    }
    bool shape_n = tb->rank == 1 && tb->dims[0] == n_out;
    if (!shape_n)
        return true;
    if (!bdq || tb->dtype != OQ_DTYPE_INT32 || !bias_ok(bdq, n_out, false))
        return false;
    grp->add = add;
    grp->dq_b = bdq;
    return true;
}

/* Does this anchor start a group? Fills grp (not the step node) on success. */
static bool match(oq_graph *g, oq_node *n, oq_arith arith, oq_qgroup *grp)
{
    memset(grp, 0, sizeof *grp);
    oq_qgroup_kind kind;
    if (is_op(n, "Conv"))
        kind = OQ_QG_CONV;
    else if (is_op(n, "Gemm"))
        kind = OQ_QG_GEMM;
    else if (is_op(n, "MatMul"))
        kind = OQ_QG_MATMUL;
    else if (is_op(n, "Softmax"))
        kind = OQ_QG_SOFTMAX;
    else
        return false;
    if (n->n_outputs != 1 || !n->outputs[0])
        return false;
    /* every present input comes from a DequantizeLinear (CheckQDQNodes) */
    size_t n_present = 0;
    for (size_t i = 0; i < n->n_inputs; i++)
        if (n->inputs[i])
            n_present++;
    size_t n_min = kind == OQ_QG_SOFTMAX ? 1 : 2;
    size_t n_max = kind == OQ_QG_SOFTMAX ? 1 : kind == OQ_QG_MATMUL ? 2 : 3;
    if (n_present < n_min || n_present != n->n_inputs || n_present > n_max)
        return false;
    oq_node *dq[3] = {NULL, NULL, NULL};
    for (size_t i = 0; i < n->n_inputs; i++)
        if (!(dq[i] = producer_dq(n->inputs[i], g)))
            return false;
    /* the output: one consumer, a QuantizeLinear, or a redundant Relu/Clip then Q */
    oq_node *next = only_consumer(n->outputs[0]), *post = NULL;
    if (is_op(next, "Relu") || is_op(next, "Clip")) {
        post = next;
        if (post->n_outputs != 1 || !(next = only_consumer(post->outputs[0])))
            return false;
    }
    oq_node *q = is_op(next, "QuantizeLinear") && next->n_inputs == 3 && next->n_outputs == 1 &&
                 next->outputs[0] ? next : NULL;
    float ys, xs;
    int32_t yzp, xzp, ydt, xdt;
    if (dq[0]->n_inputs != 3 || !scalar_qparams(dq[0], &xs, &xzp, &xdt))
        return false;
    if (!q) {
        /* no Q after a Gemm or MatMul: a float output (QGemm without y_scale,
         * MatMulIntegerToFloat), with the x dtype rules of the quantized forms */
        if (post || (kind != OQ_QG_GEMM && kind != OQ_QG_MATMUL))
            return false;
        ydt = xdt;
    } else if (!scalar_qparams(q, &ys, &yzp, &ydt)) {
        return false;
    }
    if (post && !post_redundant(post, q))
        return false;
    /* dtypes as onnxruntime sees them after QDQS8ToU8Transformer (x86 CPU: int8 QDQ
     * activations are not fused unless converted to uint8) */
    bool x_conv = xdt == OQ_DTYPE_INT8 && s8_pair_converted(producer(dq[0]->inputs[0], g), dq[0]);
    oq_node *y_dq = q ? only_consumer(q->outputs[0]) : NULL;
    bool y_conv = q ? ydt == OQ_DTYPE_INT8 && is_op(y_dq, "DequantizeLinear") &&
                          s8_pair_converted(q, y_dq)
                    : x_conv;
    int32_t xeff = x_conv ? OQ_DTYPE_UINT8 : xdt, yeff = y_conv ? OQ_DTYPE_UINT8 : ydt;
    if (kind == OQ_QG_SOFTMAX) {
        /* UnaryNodeGroupSelector: input and output of the same 8-bit type (int8 allowed) */
        if (xeff != yeff || (x_conv != y_conv))
            return false;
        grp->kind = kind;
        grp->arith = arith;
        grp->anchor = n;
        grp->dq_x = dq[0];
        grp->post = post;
        grp->q = q;
        grp->out = q;
        grp->x_shift = x_conv;
        return true;
    }
    if (xeff != OQ_DTYPE_UINT8 || yeff != OQ_DTYPE_UINT8)
        return false; /* int8 QLinearConv/QLinearMatMul are not fused on x86; int8 QGemm
                       * (S8S8) is left to the reference arithmetic (not verified) */
    if (xdt != ydt)
        return false; /* a uint8 input with a converted int8 output: keep it simple */
    if (!q && kind == OQ_QG_GEMM && n->n_inputs == 3 && n->inputs[2] &&
        oq_node_attr_float(n, "beta", 1.0f) != 1.0f)
        return false;
    oq_tensor *tw = oq_value_const_tensor(dq[1]->inputs[0]);
    if (!tw) {
        /* QLinearMatMul also takes two activations: B per tensor, int8 B as uint8 when
         * its Q/DQ pair is converted */
        float bs;
        int32_t bzp, bdt;
        if (kind != OQ_QG_MATMUL || dq[1]->n_inputs != 3 || !scalar_qparams(dq[1], &bs, &bzp, &bdt))
            return false;
        grp->b_shift = bdt == OQ_DTYPE_INT8 &&
                       s8_pair_converted(producer(dq[1]->inputs[0], g), dq[1]);
        grp->dyn_b = true;
    }
    switch (tw ? kind : OQ_QG_DYN) {
    case OQ_QG_DYN:
    case OQ_QG_SOFTMAX:
    case OQ_QG_LUT:
    case OQ_QG_BIN:
    case OQ_QG_FTAB:
    case OQ_QG_FBIN:
        break;
    case OQ_QG_CONV:
        if (!weight_ok(dq[1], 3, 0, true) || tw->rank > 5)
            return false;
        if (dq[2] && !bias_ok(dq[2], tw->dims[0], false))
            return false;
        break;
    case OQ_QG_MATMUL:
        if (!weight_ok(dq[1], 2, 1, false) || tw->rank != 2)
            return false;
        if (!q && !matmul_add(g, n, tw->dims[1], grp))
            return false;
        break;
    case OQ_QG_GEMM: {
        bool tb = oq_node_attr_int(n, "transB", 0) != 0;
        if (!weight_ok(dq[1], 2, tb ? 0 : 1, false) || tw->rank != 2)
            return false;
        if (dq[2] && (oq_node_attr_float(n, "beta", 1.0f) != 1.0f ||
                      !bias_ok(dq[2], tw->dims[tb ? 0 : 1], true)))
            return false;
        break;
    }
    }
    grp->kind = kind;
    grp->arith = arith;
    grp->anchor = n;
    grp->dq_x = dq[0];
    grp->dq_w = dq[1];
    if (!grp->add)
        grp->dq_b = dq[2];
    grp->post = post;
    grp->q = q;
    grp->out = q ? q : grp->add ? grp->add : n;
    grp->x_shift = x_conv;
    return true;
}

/* ---- DQ -> elementwise chain -> Q as a table (OQ_QG_LUT) --------------------------- */

static bool lut_op(const oq_node *n)
{
    static const char *const ops[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Relu", "LeakyRelu",
                                      "Clip", "HardSigmoid", "HardSwish", "Sigmoid", "Tanh", "Neg",
                                      "Abs", "Identity", "Elu", "Softplus", "Erf", "Exp"};
    if (!n || !oq_domain_is_default(n->domain) || n->n_outputs != 1 || !n->outputs[0])
        return false;
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (is_op(n, ops[i]))
            return true;
    return false;
}

/* a QuantizeLinear with one output and scalar 8-bit parameters */
static bool scalar_q(const oq_node *q)
{
    float sc;
    int32_t zp, dt;
    return is_op(q, "QuantizeLinear") && q->n_inputs == 3 && q->inputs[0] && q->n_outputs == 1 &&
           q->outputs[0] && scalar_qparams(q, &sc, &zp, &dt);
}

static bool in_chain(const oq_qgroup *grp, const oq_node *n)
{
    for (size_t i = 0; i < grp->n_chain; i++)
        if (grp->chain[i] == n)
            return true;
    return false;
}

/* The nodes computing v from one per-tensor 8-bit DequantizeLinear (grp->dq_x) by
 * elementwise float ops whose other operands are float scalar constants, into
 * grp->chain in graph order. Every chain value is read only by the chain and by
 * `reader` (and is no graph output), except v itself when v_free. */
static bool collect_chain(oq_graph *g, const oq_value *v, const oq_node *reader, bool v_free,
                          oq_qgroup *grp)
{
    /* the chain, collected backwards from v (a work list of values) */
    const oq_value *work[2 * OQ_QG_LUT_MAX + 2];
    size_t nw = 0;
    work[nw++] = v;
    oq_node *dq = NULL;
    while (nw) {
        const oq_value *w = work[--nw];
        oq_node *p = producer(w, g);
        if (!p)
            return false;
        if (is_op(p, "DequantizeLinear")) {
            if (dq && dq != p)
                return false;
            dq = p;
            continue;
        }
        if (in_chain(grp, p))
            continue;
        if (!lut_op(p) || grp->n_chain == OQ_QG_LUT_MAX)
            return false;
        grp->chain[grp->n_chain++] = p;
        for (size_t i = 0; i < p->n_inputs; i++) {
            oq_value *in = p->inputs[i];
            if (!in)
                continue;
            oq_tensor *t = oq_value_const_tensor(in);
            if (t) {
                if (!t->has_dtype || t->dtype != OQ_DTYPE_FLOAT || oq_tensor_numel(t) != 1 || t->rank > 1)
                    return false;
                continue;
            }
            if (nw == sizeof work / sizeof *work)
                return false;
            work[nw++] = in;
        }
    }
    float xs;
    int32_t xzp, xdt;
    if (!dq || dq->n_inputs != 3 || !dq->inputs[0] || !scalar_qparams(dq, &xs, &xzp, &xdt))
        return false;
    /* nothing outside reads an intermediate; graph order for evaluation */
    for (size_t i = 0; i < grp->n_chain; i++) {
        const oq_value *o = grp->chain[i]->outputs[0];
        if (v_free && o == v)
            continue;
        if (oq_value_is_graph_output(o))
            return false;
        for (size_t u = 0; u < o->n_uses; u++)
            if (o->uses[u].node != reader && !in_chain(grp, o->uses[u].node))
                return false;
    }
    size_t k = 0;
    for (oq_node *n = g->first; n && k < grp->n_chain; n = n->next)
        if (in_chain(grp, n)) {
            size_t j = k;
            while (grp->chain[j] != n)
                j++;
            grp->chain[j] = grp->chain[k];
            grp->chain[k++] = n;
        }
    grp->dq_x = dq;
    return true;
}

/* q's input computed from one per-tensor 8-bit DequantizeLinear by elementwise float ops
 * whose other operands are float scalar constants, with no reader outside the chain */
static bool match_lut(oq_graph *g, oq_node *q, oq_qgroup *grp)
{
    memset(grp, 0, sizeof *grp);
    if (!scalar_q(q) || !collect_chain(g, q->inputs[0], q, false, grp))
        return false;
    grp->kind = OQ_QG_LUT;
    grp->q = q;
    grp->out = q;
    grp->anchor = q;
    return true;
}

/* n's float output computed from one per-tensor 8-bit DequantizeLinear by such a chain
 * ending at n (read by anything): OQ_QG_FTAB */
static bool match_ftab(oq_graph *g, oq_node *n, oq_qgroup *grp)
{
    memset(grp, 0, sizeof *grp);
    if (!lut_op(n) || !collect_chain(g, n->outputs[0], NULL, true, grp))
        return false;
    grp->kind = OQ_QG_FTAB;
    grp->out = n;
    grp->anchor = n;
    return true;
}

/* v is float32: its declared type says so, or (no declared element type) it comes from a
 * DequantizeLinear with a float scale, or from an op that keeps its input type (the
 * table ops, pooling) applied to a float32 value or constant */
static bool float_value(const oq_value *v, const oq_graph *g, int depth)
{
    if (!v)
        return false;
    if (v->type && v->type->kind == OQ_TYPE_TENSOR && v->type->has_elem_type)
        return v->type->elem_type == OQ_DTYPE_FLOAT;
    oq_tensor *t = oq_value_const_tensor(v);
    if (t)
        return t->has_dtype && t->dtype == OQ_DTYPE_FLOAT;
    oq_node *p = producer(v, g);
    if (!p || depth > 8)
        return false;
    if (is_op(p, "DequantizeLinear")) {
        oq_tensor *ts = p->n_inputs > 1 ? oq_value_const_tensor(p->inputs[1]) : NULL;
        return ts && ts->has_dtype && ts->dtype == OQ_DTYPE_FLOAT;
    }
    if (!lut_op(p) && !is_op(p, "GlobalAveragePool") && !is_op(p, "AveragePool") &&
        !is_op(p, "MaxPool") && !is_op(p, "GlobalMaxPool"))
        return false;
    for (size_t i = 0; i < p->n_inputs && i < 2; i++) /* Clip's bounds: same type too */
        if (float_value(p->inputs[i], g, depth + 1))
            return true;
    return false;
}

/* The Add | Mul (two inputs, one output) that q, a per-tensor QuantizeLinear (scalar_q),
 * alone reads; NULL otherwise. */
static oq_node *add_mul_into_q(oq_graph *g, oq_node *q)
{
    if (!scalar_q(q))
        return NULL;
    oq_node *p = producer(q->inputs[0], g);
    if ((!is_op(p, "Add") && !is_op(p, "Mul")) || p->n_inputs != 2 || p->n_outputs != 1 ||
        only_consumer(p->outputs[0]) != q)
        return NULL;
    return p;
}

/* q <- Add | Mul of two float32 activations, neither a constant (tables, float chains)
 * nor a DequantizeLinear output (OQ_QG_BIN's; and a DQ whose other readers are groups is
 * not run: the step would read nothing) */
static bool match_fbin(oq_graph *g, oq_node *q, oq_qgroup *grp)
{
    memset(grp, 0, sizeof *grp);
    oq_node *p = add_mul_into_q(g, q);
    if (!p || oq_node_opset(p) < 7)
        return false;
    for (int i = 0; i < 2; i++)
        if (!p->inputs[i] || oq_value_const_tensor(p->inputs[i]) ||
            is_op(producer(p->inputs[i], g), "DequantizeLinear") || !float_value(p->inputs[i], g, 0))
            return false;
    grp->kind = OQ_QG_FBIN;
    grp->anchor = p;
    grp->dyn_b = true; /* two run-time inputs */
    grp->q = q;
    grp->out = q;
    return true;
}

/* q <- Add | Mul of two per-tensor 8-bit DequantizeLinear outputs (activations) */
static bool match_bin(oq_graph *g, oq_node *q, oq_qgroup *grp)
{
    memset(grp, 0, sizeof *grp);
    oq_node *p = add_mul_into_q(g, q);
    if (!p)
        return false;
    oq_node *dq[2];
    int nq = 0;
    for (int i = 0; i < 2; i++) {
        dq[i] = producer_dq(p->inputs[i], g);
        float s2;
        int32_t z2, d2;
        if (dq[i] && (dq[i]->n_inputs != 3 || !scalar_qparams(dq[i], &s2, &z2, &d2) ||
                      oq_value_const_tensor(dq[i]->inputs[0])))
            return false;
        nq += dq[i] != NULL;
    }
    /* the other operand float: an activation (not a constant: that is a table's or the
     * fused chains' case) */
    oq_value *fv = NULL;
    if (nq == 1) {
        fv = p->inputs[dq[0] ? 1 : 0];
        if (!fv || oq_value_const_tensor(fv)) /* float: Add and Mul take one type */
            return false;
        if (!dq[0]) {
            dq[0] = dq[1];
            dq[1] = NULL;
        }
    } else if (nq != 2) {
        return false;
    }
    grp->kind = OQ_QG_BIN;
    grp->anchor = p;
    grp->dq_x = dq[0];
    grp->dq_w = dq[1];
    grp->bin_float = fv;
    grp->dyn_b = true; /* two run-time inputs */
    grp->q = q;
    grp->out = q;
    return true;
}

/* q <- Add | Mul of two per-tensor 8-bit DequantizeLinear outputs that onnxruntime fuses
 * into QLinearAdd / QLinearMul (BinarySelector, qdq_selectors.cc: every input from a DQ,
 * the op's output read by the Q alone and no graph output, the input and output types
 * equal; after QDQS8ToU8Transformer, so an int8 pair that it converts counts as uint8).
 * Either operand may be a constant (onnxruntime does not fold DequantizeLinear). */
static bool match_ort_bin(oq_graph *g, oq_node *q, oq_qgroup *grp)
{
    memset(grp, 0, sizeof *grp);
    oq_node *p = add_mul_into_q(g, q);
    if (!p || oq_node_opset(p) < 7 || oq_value_is_graph_output(p->outputs[0]))
        return false;
    oq_node *dq[2];
    int32_t eff[3];
    bool shift[3];
    for (int i = 0; i < 2; i++) {
        float s;
        int32_t z, d;
        dq[i] = producer_dq(p->inputs[i], g);
        if (!dq[i] || dq[i]->n_inputs != 3 || !dq[i]->inputs[0] || !scalar_qparams(dq[i], &s, &z, &d) ||
            oq_value_is_graph_output(dq[i]->outputs[0]))
            return false;
        shift[i] = d == OQ_DTYPE_INT8 && s8_pair_converted(producer(dq[i]->inputs[0], g), dq[i]);
        eff[i] = shift[i] ? OQ_DTYPE_UINT8 : d;
    }
    if (dq[0] == dq[1])
        return false;
    float s;
    int32_t z, d;
    if (!scalar_qparams(q, &s, &z, &d))
        return false;
    const oq_value *qv = q->outputs[0];
    shift[2] = d == OQ_DTYPE_INT8 && qv && !oq_value_is_graph_output(qv) &&
               s8_pair_converted(q, only_consumer(qv));
    eff[2] = shift[2] ? OQ_DTYPE_UINT8 : d;
    if (eff[0] != eff[1] || eff[0] != eff[2] ||
        (eff[0] != OQ_DTYPE_UINT8 && eff[0] != OQ_DTYPE_INT8))
        return false;
    grp->kind = OQ_QG_BIN;
    grp->anchor = p;
    grp->dq_x = dq[0];
    grp->dq_w = dq[1];
    grp->dyn_b = true; /* two run-time inputs */
    grp->q = q;
    grp->out = q;
    grp->ort_bin = true;
    for (int i = 0; i < 3; i++)
        grp->bin_shift[i] = shift[i];
    return true;
}

static bool skipped(const oq_qgroups *gs, const oq_node *n)
{
    return n->id < gs->n_ids && (gs->role[n->id] == 1 || gs->role[n->id] == 3);
}

/* Add a copy of tmp with its step node (run in place of tmp->out); NULL: out of memory. */
static oq_qgroup *push_group(oq_qgroups *gs, size_t *cap, const oq_qgroup *tmp, oq_graph *g)
{
    oq_qgroup **ng = oq_grow(gs->groups, gs->n, cap, sizeof *ng, 16);
    if (!ng)
        return NULL;
    gs->groups = ng;
    oq_qgroup *grp = malloc(sizeof *grp);
    if (!grp)
        return NULL;
    *grp = *tmp;
    oq_node *st = &grp->step;
    st->name = tmp->out->name;
    st->op_type = (char *)(tmp->kind == OQ_QG_FTAB   ? OQ_QGROUP_OP_FTAB
                           : tmp->kind == OQ_QG_FBIN ? OQ_QGROUP_OP_FBIN
                                                     : OQ_QGROUP_OP);
    st->domain = (char *)OQ_QGROUP_DOMAIN;
    if (tmp->kind == OQ_QG_FBIN) { /* the Add | Mul's own operands */
        grp->step_in[0] = tmp->anchor->inputs[0];
        grp->step_in[1] = tmp->anchor->inputs[1];
    } else {
        grp->step_in[0] = tmp->dq_x->inputs[0];
        grp->step_in[1] = !tmp->dyn_b ? NULL : tmp->dq_w ? tmp->dq_w->inputs[0] : tmp->bin_float;
    }
    grp->step_out[0] = tmp->out->outputs[0];
    st->n_inputs = tmp->dyn_b ? 2 : 1;
    st->inputs = grp->step_in;
    st->n_outputs = 1;
    st->outputs = grp->step_out;
    st->n_attrs = tmp->anchor->n_attrs; /* the kernel reads the anchor's attributes */
    st->attrs = tmp->anchor->attrs;
    st->graph = g;
    st->id = tmp->out->id;
    gs->groups[gs->n++] = grp;
    gs->by_out[tmp->out->id] = grp;
    return grp;
}

/* Every DQ(a), DQ(b) -> Add | Mul -> Q that `matches` accepts and no group above has taken
 * becomes a group (its Q the step node, its Add/Mul skipped); false: out of memory. */
static bool claim_bin_groups(oq_qgroups *gs, size_t *cap, oq_graph *g, oq_arith arith,
                             bool (*matches)(oq_graph *, oq_node *, oq_qgroup *))
{
    for (oq_node *n = g->first; n; n = n->next) {
        oq_qgroup tmp;
        if (!matches(g, n, &tmp) || n->id >= gs->n_ids || gs->role[n->id] || gs->by_out[n->id] ||
            tmp.anchor->id >= gs->n_ids || gs->role[tmp.anchor->id])
            continue;
        tmp.arith = arith;
        if (!push_group(gs, cap, &tmp, g))
            return false;
        gs->role[n->id] = 2;
        gs->role[tmp.anchor->id] = 1;
    }
    return true;
}

oq_status oq_qgroups_find(oq_model *m, oq_graph *g, oq_arith arith, oq_qgroups **out)
{
    *out = NULL;
    if (arith == OQ_ARITH_REFERENCE)
        return OQ_OK;
    oq_qgroups *gs = calloc(1, sizeof *gs);
    if (!gs)
        return OQ_ERR_NOMEM;
    gs->n_ids = m->next_id;
    gs->role = calloc(gs->n_ids + 1, 1);
    gs->by_out = calloc(gs->n_ids + 1, sizeof *gs->by_out);
    size_t cap = 0;
    if (!gs->role || !gs->by_out)
        goto nomem;
    for (oq_node *n = g->first; n; n = n->next) {
        oq_qgroup tmp;
        if (!match(g, n, arith, &tmp))
            continue;
        if (tmp.out->id >= gs->n_ids || gs->by_out[tmp.out->id] || gs->role[tmp.out->id] ||
            gs->role[tmp.anchor->id])
            continue;
        if (!push_group(gs, &cap, &tmp, g))
            goto nomem;
        if (tmp.out != tmp.anchor)
            gs->role[tmp.anchor->id] = 1;
        gs->role[tmp.out->id] = tmp.q ? 2 : 3;
        if (tmp.post)
            gs->role[tmp.post->id] = 1;
    }
    /* onnxruntime's QLinearAdd / QLinearMul: its arithmetic, not the nodes' (so not a
     * same-number fusion: found with ONNXQ_NO_LUT=1 too) */
    if (!claim_bin_groups(gs, &cap, g, arith, match_ort_bin))
        goto nomem;
    /* DQ -> elementwise chain -> Q tables, on what the groups above left, then DQ(a),
     * DQ(b) -> Add | Mul -> Q in one pass (ONNXQ_NO_LUT=1: neither; tests compare) */
    bool same_number_fusions = !getenv("ONNXQ_NO_LUT");
    for (oq_node *n = g->first; n && same_number_fusions; n = n->next) {
        oq_qgroup tmp;
        if (!match_lut(g, n, &tmp))
            continue;
        bool free_nodes = n->id < gs->n_ids && !gs->role[n->id] && !gs->by_out[n->id];
        for (size_t i = 0; free_nodes && i < tmp.n_chain; i++)
            free_nodes = tmp.chain[i]->id < gs->n_ids && !gs->role[tmp.chain[i]->id];
        if (!free_nodes)
            continue;
        tmp.arith = arith;
        tmp.model = m;
        oq_qgroup *grp = push_group(gs, &cap, &tmp, g);
        if (!grp)
            goto nomem;
        gs->role[n->id] = 2;
        for (size_t i = 0; i < grp->n_chain; i++)
            gs->role[grp->chain[i]->id] = 1;
    }
    if (same_number_fusions && !claim_bin_groups(gs, &cap, g, arith, match_bin))
        goto nomem;
    /* then what stays float between them: DQ -> elementwise chain -> a float value (last
     * node first: the longest chain), and float a, float b -> Add | Mul -> Q */
    for (oq_node *n = g->last; n && same_number_fusions; n = n->prev) {
        oq_qgroup tmp;
        if (!match_ftab(g, n, &tmp))
            continue;
        bool free_nodes = true;
        for (size_t i = 0; free_nodes && i < tmp.n_chain; i++)
            free_nodes = tmp.chain[i]->id < gs->n_ids && !gs->role[tmp.chain[i]->id] &&
                         !gs->by_out[tmp.chain[i]->id];
        if (!free_nodes)
            continue;
        tmp.arith = arith;
        tmp.model = m;
        oq_qgroup *grp = push_group(gs, &cap, &tmp, g);
        if (!grp)
            goto nomem;
        for (size_t i = 0; i < grp->n_chain; i++)
            gs->role[grp->chain[i]->id] = 1;
        gs->role[n->id] = 3;
    }
    for (oq_node *n = g->first; n && same_number_fusions; n = n->next) {
        oq_qgroup tmp;
        if (!match_fbin(g, n, &tmp) || n->id >= gs->n_ids || gs->role[n->id] || gs->by_out[n->id] ||
            tmp.anchor->id >= gs->n_ids || gs->role[tmp.anchor->id])
            continue;
        tmp.arith = arith;
        if (!push_group(gs, &cap, &tmp, g))
            goto nomem;
        gs->role[n->id] = 2;
        gs->role[tmp.anchor->id] = 1;
    }
    /* a DequantizeLinear of a group is skipped when nothing else reads it */
    for (size_t i = 0; i < gs->n; i++) {
        oq_qgroup *grp = gs->groups[i];
        oq_node *dqs[3] = {grp->dq_x, grp->dq_w, grp->dq_b};
        for (size_t j = 0; j < 3; j++) {
            oq_node *d = dqs[j];
            if (!d || d->id >= gs->n_ids || gs->role[d->id] != 0)
                continue;
            oq_value *v = d->outputs[0];
            bool all = v && !oq_value_is_graph_output(v);
            for (size_t u = 0; all && u < v->n_uses; u++)
                all = skipped(gs, v->uses[u].node);
            if (all)
                gs->role[d->id] = 1;
        }
    }
    if (!gs->n) {
        oq_qgroups_free(gs);
        return OQ_OK;
    }
    *out = gs;
    return OQ_OK;
nomem:
    oq_qgroups_free(gs);
    return OQ_ERR_NOMEM;
}

oq_node *oq_qgroups_step_node(const oq_qgroups *gs, oq_node *n)
{
    if (!gs || n->id >= gs->n_ids)
        return n;
    switch (gs->role[n->id]) {
    case 1:
        return NULL;
    case 2:
    case 3:
        return &gs->by_out[n->id]->step;
    default:
        return n;
    }
}

size_t oq_qgroups_count(const oq_qgroups *gs) { return gs ? gs->n : 0; }

void oq_qgroups_free(oq_qgroups *gs)
{
    if (!gs)
        return;
    for (size_t i = 0; i < gs->n; i++)
        free(gs->groups[i]);
    free(gs->groups);
    free(gs->role);
    free(gs->by_out);
    free(gs);
}
