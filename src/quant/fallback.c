/* Accuracy-driven fallback: measure with the verify engine, return the worst layer to
 * float, measure again. include/onnxq/fallback.h */
#include "onnxq/fallback.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnxq/exec.h"
#include "onnxq/verify.h"
#include "io/json.h"
#include "ir/text.h"
#include "quant/quant-impl.h"

oq_fallback_options oq_fallback_options_default(void)
{
    oq_fallback_options o;
    memset(&o, 0, sizeof o);
    o.target_sqnr_db = 30.0;
    o.max_fallback = 10;
    o.prefer_producer_db = 1.0;
    return o;
}

static oq_node *dq_of(const oq_value *v)
{
    return v && v->kind == OQ_VALUE_NODE && oq_quant_op_is(v->producer, "DequantizeLinear") ? v->producer : NULL;
}

/* the QuantizeLinear feeding a DequantizeLinear, or NULL */
static oq_node *q_of(const oq_node *dq)
{
    const oq_value *in = dq->n_inputs ? dq->inputs[0] : NULL;
    return in && in->kind == OQ_VALUE_NODE && oq_quant_op_is(in->producer, "QuantizeLinear") ? in->producer : NULL;
}

static oq_value *pass_through_input(const oq_node *n);

/* Remove initializers of a removed node's inputs that nothing uses any more. */
static void drop_unused_inits(oq_graph *g, oq_value *const *ins, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        oq_value *v = ins[i];
        if (v && v->n_uses == 0 && v->initializer && !v->is_graph_input && !oq_value_is_graph_output(v)) {
            bool dup = false; /* the same value twice in ins */
            for (size_t j = 0; j < i; j++)
                dup = dup || ins[j] == v;
            if (!dup)
                oq_graph_remove_initializer(g, v);
        }
    }
}

/* The float constant a DequantizeLinear of constants computes. */
static oq_status eval_dq(oq_model *m, oq_node *dq, oq_rt_tensor *out, oq_diag *d)
{
    oq_rt_tensor in[3];
    const oq_rt_tensor *pin[3] = {NULL, NULL, NULL};
    char lb[128];
    memset(in, 0, sizeof in);
    if (dq->n_inputs > 3)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "fallback: node \"%s\" (DequantizeLinear): %zu inputs",
                             oq_node_label(dq, lb, sizeof lb), dq->n_inputs);
    for (size_t i = 0; i < dq->n_inputs; i++) {
        if (!dq->inputs[i])
            continue;
        oq_tensor *t = oq_value_const_tensor(dq->inputs[i]);
        if (!t)
            return oq_diag_error(d, OQ_ERR_UNSUPPORTED,
                                 "fallback: node \"%s\" (DequantizeLinear): input \"%s\" is not a constant",
                                 oq_node_label(dq, lb, sizeof lb), dq->inputs[i]->name);
        const void *data = oq_tensor_data(t, d);
        if (!data && oq_tensor_numel(t) != 0)
            return OQ_ERR_INVALID;
        if (t->rank > OQ_RT_MAX_RANK)
            return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "fallback: tensor \"%s\" has rank %zu", t->name, t->rank);
        oq_status st = oq_rt_tensor_borrow(&in[i], t->dtype, t->dims, t->rank, (void *)data);
        if (st != OQ_OK)
            return oq_diag_error(d, st, "fallback: tensor \"%s\": bad shape", t->name);
        pin[i] = &in[i];
    }
    return oq_exec_eval_node(m, dq, pin, dq->n_inputs, -1, out, 1, d);
}

/* The float model's constant of the same name, dtype and shape as the DQ result, or NULL
 * (a weight folded by fold-batchnorm has a new name: it is then dequantized). */
static oq_tensor *original_const(oq_model *fm, const char *name, const oq_rt_tensor *f)
{
    oq_value *fv = fm && fm->graph ? oq_graph_find_local(fm->graph, name) : NULL;
    oq_tensor *t = fv ? oq_value_const_tensor(fv) : NULL;
    if (!t || t->dtype != f->dtype || t->rank != f->rank)
        return NULL;
    for (size_t j = 0; j < t->rank; j++)
        if (t->dims[j] != f->dims[j])
            return NULL;
    return t;
}

/* Input slot i of n reads DequantizeLinear(constant): read the float constant instead. */
static oq_status unquant_const(oq_model *m, oq_model *fm, oq_node *n, size_t i, oq_node *dq, oq_diag *d)
{
    oq_graph *g = n->graph;
    oq_value *v = n->inputs[i];
    oq_rt_tensor f;
    memset(&f, 0, sizeof f);
    oq_status st = eval_dq(m, dq, &f, d);
    if (st != OQ_OK)
        return st;
    oq_tensor *ot = original_const(fm, v->name, &f);
    const void *odata = ot ? oq_tensor_data(ot, d) : NULL;
    oq_tensor *t = odata ? oq_tensor_new(m, v->name, f.dtype, f.dims, f.rank, odata, f.nbytes)
                         : oq_tensor_new(m, v->name, f.dtype, f.dims, f.rank, f.data, f.nbytes);
    oq_rt_tensor_release(&f);
    if (!t)
        return oq_diag_error(d, OQ_ERR_NOMEM, "fallback: out of memory");
    if (v->n_uses == 1 && !oq_value_is_graph_output(v)) {
        oq_value *ins[3] = {NULL, NULL, NULL};
        for (size_t k = 0; k < dq->n_inputs && k < 3; k++)
            ins[k] = dq->inputs[k];
        oq_node_remove(dq);
        drop_unused_inits(g, ins, 3);
        return oq_graph_set_initializer(g, v, t);
    }
    size_t len = strlen(v->name);
    char *base = malloc(len + 7);
    if (!base)
        return oq_diag_error(d, OQ_ERR_NOMEM, "fallback: out of memory");
    memcpy(base, v->name, len);
    memcpy(base + len, "_float", 7);
    char *name = oq_graph_unique_name(g, base);
    free(base);
    oq_value *nv = name ? oq_graph_new_value(g, name) : NULL;
    if (!nv || oq_graph_set_initializer(g, nv, t) != OQ_OK)
        return oq_diag_error(d, OQ_ERR_NOMEM, "fallback: out of memory");
    return oq_node_set_input(n, i, nv);
}

/* Remove an activation pair Q(xp) -> xq -> DQ -> x whose x has no consumer left but
 * (maybe) one: consumers of x then read the float xp, under the name x when possible. */
static bool remove_pair(oq_graph *g, oq_node *q, oq_node *dq)
{
    oq_value *xp = q->inputs[0], *xq = dq->inputs[0], *x = dq->outputs[0];
    if (!xp || !x || xq->n_uses != 1 || oq_value_is_graph_output(xq))
        return false;
    bool x_out = oq_value_is_graph_output(x);
    /* xp can take the name x back when the Q is its only consumer and a node makes it */
    bool rename = xp->kind == OQ_VALUE_NODE && xp->n_uses == 1 && !oq_value_is_graph_output(xp);
    if (!rename && x_out)
        return false;
    oq_value *qins[3] = {NULL, NULL, NULL}, *dins[3] = {NULL, NULL, NULL};
    for (size_t k = 0; k < q->n_inputs && k < 3; k++)
        qins[k] = q->inputs[k];
    for (size_t k = 0; k < dq->n_inputs && k < 3; k++)
        dins[k] = dq->inputs[k];
    oq_node_remove(dq);
    oq_node_remove(q);
    if (rename) {
        oq_node *p = xp->producer;
        size_t idx = xp->producer_index;
        oq_node_set_output(p, idx, x);
    } else {
        oq_value_replace_all_uses(x, xp);
    }
    drop_unused_inits(g, qins + 1, 2);
    drop_unused_inits(g, dins + 1, 2);
    return true;
}

/* y is read by QuantizeLinear nodes and others (an earlier fallback rewired a consumer to
 * the float y): every Q(y) -> DQ pair goes, its DQ's readers read y. A DQ output that is a
 * graph output (the output keeps its name) is taken over by y's producer, once. Returns
 * whether any pair went. */
static bool remove_output_pairs(oq_graph *g, oq_value *y)
{
    bool changed = false, again = true;
    while (again) {
        again = false;
        for (size_t u = 0; u < y->n_uses && !again; u++) {
            oq_node *q = y->uses[u].node;
            if (!oq_quant_op_is(q, "QuantizeLinear") || y->uses[u].index != 0 || !q->n_outputs || !q->outputs[0])
                continue;
            oq_value *yq = q->outputs[0];
            bool ok = !oq_value_is_graph_output(yq) && yq->n_uses > 0;
            size_t outs = 0; /* DQ outputs that are graph outputs */
            for (size_t k = 0; k < yq->n_uses && ok; k++) {
                oq_node *dq = yq->uses[k].node;
                ok = oq_quant_op_is(dq, "DequantizeLinear") && dq->n_outputs && dq->outputs[0];
                outs += ok && oq_value_is_graph_output(dq->outputs[0]);
            }
            if (!ok || outs > 1 || (outs && (oq_value_is_graph_output(y) || y->kind != OQ_VALUE_NODE)))
                continue;
            while (yq->n_uses) {
                oq_node *dq = yq->uses[0].node;
                oq_value *dins[3] = {NULL, NULL, NULL}, *x = dq->outputs[0];
                for (size_t k = 0; k < dq->n_inputs && k < 3; k++)
                    dins[k] = dq->inputs[k];
                if (oq_value_is_graph_output(x)) { /* y's producer writes the output */
                    oq_node_remove(dq);
                    oq_value_replace_all_uses(y, x);
                    oq_node_set_output(y->producer, y->producer_index, x);
                    y = x;
                } else {
                    oq_value_replace_all_uses(x, y);
                    oq_node_remove(dq);
                }
                drop_unused_inits(g, dins + 1, 2);
            }
            oq_value *qins[3] = {NULL, NULL, NULL};
            for (size_t k = 0; k < q->n_inputs && k < 3; k++)
                qins[k] = q->inputs[k];
            oq_node_remove(q);
            drop_unused_inits(g, qins + 1, 2);
            changed = again = true;
        }
    }
    return changed;
}

oq_status oq_fallback_node(oq_model *m, oq_model *float_model, oq_node *n, bool *changed, oq_diag *d)
{
    oq_graph *g = n->graph;
    *changed = false;
    for (size_t i = 0; i < n->n_inputs; i++) {
        oq_value *v = n->inputs[i];
        oq_node *dq = dq_of(v);
        if (!dq)
            continue;
        if (dq->n_inputs && dq->inputs[0] && oq_value_const_tensor(dq->inputs[0])) {
            oq_status st = unquant_const(m, float_model, n, i, dq, d);
            if (st != OQ_OK)
                return st;
            *changed = true;
            continue;
        }
        oq_node *q = q_of(dq);
        if (!q || !q->n_inputs || !q->inputs[0])
            continue;
        oq_value *xp = q->inputs[0];
        /* n reads the float tensor; the pair goes when nobody else reads it */
        bool only_n = true;
        for (size_t u = 0; u < v->n_uses; u++)
            only_n = only_n && v->uses[u].node == n;
        if (only_n && !oq_value_is_graph_output(v) && remove_pair(g, q, dq)) {
            *changed = true;
            continue;
        }
        if (oq_node_set_input(n, i, xp) != OQ_OK)
            return oq_diag_error(d, OQ_ERR_NOMEM, "fallback: out of memory");
        *changed = true;
    }
    for (size_t k = 0; k < n->n_outputs; k++) {
        oq_value *y = n->outputs[k];
        /* the output's quantization may sit after single-consumer nodes without weights
         * (insert-qdq quantizes Conv -> Relu after the Relu) */
        for (int hop = 0; hop < 8 && y && y->n_uses == 1 && !oq_value_is_graph_output(y); hop++) {
            oq_node *u = y->uses[0].node;
            if (oq_quant_op_is(u, "QuantizeLinear") || u->n_outputs != 1 || pass_through_input(u) != y)
                break;
            y = u->outputs[0];
        }
        if (y && y->n_uses > 1) { /* Q(y) and float readers: the pairs go, all read y */
            if (remove_output_pairs(g, y))
                *changed = true;
            continue;
        }
        if (!y || y->n_uses != 1 || !oq_quant_op_is(y->uses[0].node, "QuantizeLinear"))
            continue;
        oq_node *q = y->uses[0].node;
        oq_value *yq = q->n_outputs ? q->outputs[0] : NULL;
        if (!yq || yq->n_uses != 1 || !oq_quant_op_is(yq->uses[0].node, "DequantizeLinear"))
            continue;
        if (remove_pair(g, q, yq->uses[0].node))
            *changed = true;
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ the loop ---- */

/* How the record names node n: its name, or for a node without one "Op:output" (its first
 * output's name: stable across steps, where a position in the graph is not). */
static const char *fb_label(const oq_node *n, char *buf, size_t size)
{
    if (n->name && *n->name)
        return n->name;
    snprintf(buf, size, "%s:%s", n->op_type, n->n_outputs && n->outputs[0] ? n->outputs[0]->name : "?");
    return buf;
}

static char *xstrdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

static void logf_(const oq_fallback_options *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void logf_(const oq_fallback_options *o, const char *fmt, ...)
{
    if (!o->log)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    o->log(buf, o->log_user);
}

static bool is_weighted(const oq_node *n);

/* a's producer (NULL when a is not a node's output) */
static oq_node *prod(const oq_value *a)
{
    return a && a->kind == OQ_VALUE_NODE ? a->producer : NULL;
}

/* n is smooth-quant's split Add (passes/smooth_quant.c: Add(layer [+ bias Add], MatMul of
 * a Gather of the outlier channels)): the layer, whose output it completes; else NULL */
static oq_node *split_layer(oq_node *n)
{
    if (!n || !oq_quant_op_is(n, "Add") || n->n_inputs != 2)
        return NULL;
    for (int i = 0; i < 2; i++) {
        oq_node *mm = prod(n->inputs[1 - i]), *l = prod(n->inputs[i]);
        if (!mm || !oq_quant_op_is(mm, "MatMul") || mm->n_inputs < 1 || !oq_quant_op_is(prod(mm->inputs[0]), "Gather"))
            continue;
        if (l && oq_quant_op_is(l, "Add") && l->n_inputs == 2) /* the layer's bias Add */
            l = is_weighted(prod(l->inputs[0])) ? prod(l->inputs[0]) : prod(l->inputs[1]);
        if (is_weighted(l))
            return l;
    }
    return NULL;
}

/* The node of the quantized model that computes tensor `name`: the producer of the
 * float value its QDQ pair quantizes, or its producer; for the output of a layer with
 * outlier channels split off, the layer. */
static oq_node *quant_producer(oq_graph *qg, const char *name)
{
    oq_value *v = oq_graph_find_local(qg, name);
    if (!v || v->kind != OQ_VALUE_NODE)
        return NULL;
    oq_node *dq = dq_of(v), *q = dq ? q_of(dq) : NULL;
    if (q) {
        oq_value *xp = q->n_inputs ? q->inputs[0] : NULL;
        v = xp && xp->kind == OQ_VALUE_NODE ? xp : NULL;
        if (!v)
            return NULL;
    }
    oq_node *l = split_layer(v->producer);
    return l ? l : v->producer;
}

/* A node with a quantized constant input (a weight or bias DequantizeLinear). */
static bool is_weighted(const oq_node *n)
{
    if (!n || oq_quant_op_is(n, "QuantizeLinear") || oq_quant_op_is(n, "DequantizeLinear"))
        return false;
    for (size_t i = 0; i < n->n_inputs; i++) {
        oq_node *dq = dq_of(n->inputs[i]);
        if (dq && dq->n_inputs && dq->inputs[0] && oq_value_const_tensor(dq->inputs[0]))
            return true;
    }
    return false;
}

/* The single non-constant input of a node without weights, or NULL. */
static oq_value *pass_through_input(const oq_node *n)
{
    /* ops that compute with weights: not pass-through even in float */
    static const char *const compute[] = {"Conv", "ConvTranspose", "Gemm", "MatMul", "Einsum", "LSTM", "GRU",
                                          "RNN", "Attention", "QuantizeLinear", "DequantizeLinear"};
    if (!n || is_weighted(n))
        return NULL;
    for (size_t i = 0; i < sizeof compute / sizeof compute[0]; i++)
        if (oq_quant_op_is(n, compute[i]))
            return NULL;
    oq_value *act = NULL;
    for (size_t i = 0; i < n->n_inputs; i++) {
        oq_value *v = n->inputs[i];
        if (!v || oq_value_const_tensor(v))
            continue;
        oq_node *dq = dq_of(v);
        if (dq && dq->n_inputs && dq->inputs[0] && oq_value_const_tensor(dq->inputs[0]))
            continue;
        if (act)
            return NULL;
        act = v;
    }
    return act;
}

static const oq_verify_layer *find_layer(const oq_verify *v, const char *name)
{
    for (size_t i = 0; i < oq_verify_n_layers(v); i++) {
        const oq_verify_layer *L = oq_verify_layer_at(v, i);
        if (strcmp(L->name, name) == 0)
            return L;
    }
    return NULL;
}

/* The layer name an input value of a quantized-model node stands for (X for a DQ
 * output X, the graph input X for X_dequant). */
static const char *input_layer_name(const oq_value *v)
{
    oq_node *dq = dq_of(v), *q = dq ? q_of(dq) : NULL;
    if (!q || !q->inputs[0])
        return NULL;
    return q->inputs[0]->is_graph_input ? q->inputs[0]->name : v->name;
}

/* Rule 2's nodes for a quantized input value x of a node: x's producer and, through
 * nodes without weights that read one quantized activation (Relu, MaxPool, Reshape, ...),
 * up to the first node with weights. Returns the count (0: none). */
static size_t producer_chain(oq_value *x, oq_node **out, size_t max)
{
    size_t n = 0;
    while (n < max) {
        oq_node *dq = dq_of(x), *q = dq ? q_of(dq) : NULL;
        if (dq && !q)
            break;
        /* through a QDQ pair, or a float edge (insert-qdq quantizes Conv -> Relu after the Relu) */
        oq_value *xp = q ? (q->n_inputs ? q->inputs[0] : NULL) : x;
        if (!xp || xp->kind != OQ_VALUE_NODE)
            break;
        oq_node *p = xp->producer;
        if (is_weighted(p)) {
            out[n++] = p;
            break;
        }
        oq_value *in = pass_through_input(p);
        if (!in)
            break;
        out[n++] = p;
        x = in;
    }
    return n;
}

#define CHAIN_MAX 16
#define REGION_MAX 64 /* float nodes followed after a layer's output */
/* A drop below this is left out of the ranking: within what the errors of other layers move
 * an accumulated SQNR (YOLOv8n's largest, 1.2 dB, changed its bisect by 3 nodes either way;
 * PicoDet's stem: 16.6 dB) */
#define REGION_DROP_MIN_DB 3.0

/* How much the float nodes that read L's quantized output (up to the next QuantizeLinear
 * or quantized-weight node, at most REGION_MAX of them) lower the accumulated SQNR below
 * L's own, in dB (0 when they do not): the error of L's output amplified where nothing is
 * quantized again, which L's isolated error cannot show (a BN-folded float depthwise
 * convolution after a quantized convolution: PicoDet's stem 39.8 dB at its output, 23.3
 * dB after the depthwise convolution). The walk stops at a node that also reads a float
 * activation from outside (joins_other): a Concat or Add joining another layer's output
 * mixes that layer's error in (YOLOv8n's box branch and the class logits). */
/* Node c reads a float value that is neither in the region (region[0..n)) nor a constant:
 * an activation from elsewhere, whose error c mixes with the region's. */
static bool joins_other(const oq_node *c, oq_value *const *region, size_t n)
{
    for (size_t i = 0; i < c->n_inputs; i++) {
        const oq_value *in = c->inputs[i];
        if (!in || in->kind == OQ_VALUE_INITIALIZER)
            continue;
        if (in->kind == OQ_VALUE_NODE && in->producer && oq_quant_op_is(in->producer, "Constant"))
            continue;
        if (in->type && in->type->has_elem_type && !oq_dtype_is_float(in->type->elem_type))
            continue; /* a shape, indices: no error of their own */
        bool mine = false;
        for (size_t k = 0; k < n && !mine; k++)
            mine = region[k] == in;
        if (!mine)
            return true;
    }
    return false;
}

static double float_region_drop(const oq_verify *v, oq_graph *qg, const oq_verify_layer *L)
{
    oq_value *y = oq_graph_find_local(qg, L->name);
    if (!y || L->acc.n == 0)
        return 0;
    double acc = oq_err_sqnr_db(&L->acc), lo = acc;
    if (isnan(acc))
        return 0;
    oq_value *stack[REGION_MAX], *in_region[REGION_MAX * 4 + 1];
    size_t sp = 0, seen = 0, nr = 0;
    stack[sp++] = y;
    in_region[nr++] = y;
    while (sp && seen < REGION_MAX) {
        oq_value *x = stack[--sp];
        for (size_t u = 0; u < x->n_uses && seen < REGION_MAX; u++) {
            oq_node *c = x->uses[u].node;
            if (!c || c->graph != qg || oq_quant_op_is(c, "QuantizeLinear") || oq_quant_op_is(c, "DequantizeLinear") || is_weighted(c))
                continue;
            if (joins_other(c, in_region, nr))
                continue; /* its error is not L's alone (a Concat with other layers' outputs) */
            seen++;
            for (size_t o = 0; o < c->n_outputs; o++) {
                oq_value *co = c->outputs[o];
                const oq_verify_layer *F = co ? find_layer(v, co->name) : NULL;
                double db = F && F->acc.n ? oq_err_sqnr_db(&F->acc) : NAN;
                if (db < lo) /* false for NaN */
                    lo = db;
                if (co && sp < REGION_MAX)
                    stack[sp++] = co;
                if (co && nr < sizeof in_region / sizeof *in_region)
                    in_region[nr++] = co;
            }
        }
    }
    return acc - lo;
}

/* Layer L (its node in the quantized model: wn) is eligible when it has an isolated
 * error and wn has weights, or L is a quantized graph output. *db: its isolated SQNR;
 * *rank_db, what ranks it: *db lowered by float_region_drop when that is over
 * REGION_DROP_MIN_DB. */
static bool eligible(const oq_verify *v, const oq_verify_layer *L, oq_graph *qg, oq_node **wn, double *db,
                     double *rank_db)
{
    /* graph inputs are not layers (a node without a name is: the quantized node is found
     * by the tensor it computes) */
    if (!L->has_iso || L->iso.n == 0 || L->shape_mismatch || strcmp(L->op_type, "input") == 0)
        return false;
    *db = oq_err_sqnr_db(&L->iso);
    if (isnan(*db))
        return false;
    oq_node *n = quant_producer(qg, L->name);
    oq_value *lv = oq_graph_find_local(qg, L->name);
    if (!is_weighted(n) && !(n && L->quantized && lv && oq_value_is_graph_output(lv)))
        return false;
    *wn = n;
    double drop = float_region_drop(v, qg, L);
    *rank_db = drop > REGION_DROP_MIN_DB ? *db - drop : *db;
    return true;
}

/* The nodes to return to float for layer L (weighted node last), with rules 1 and 2. */
static size_t choose_for(const oq_verify *v, const oq_fallback_options *o, const oq_verify_layer *worst,
                         oq_node *wn, double wdb, oq_fallback_step *s, oq_node **out)
{
    s->tensor = xstrdup(worst->name);
    s->layer_iso_db = wdb;
    /* rule 2: an input whose own quantization is as bad explains the drop */
    size_t best_n = 0;
    double best_db = wdb + o->prefer_producer_db;
    for (size_t i = 0; i < wn->n_inputs; i++) {
        const char *ln = input_layer_name(wn->inputs[i]);
        const oq_verify_layer *X = ln ? find_layer(v, ln) : NULL;
        if (!X || !X->has_qrange || X->own.n == 0)
            continue;
        double own = oq_err_sqnr_db(&X->own);
        if (isnan(own) || own > best_db)
            continue;
        oq_node *chain[CHAIN_MAX];
        size_t cn = producer_chain(wn->inputs[i], chain, CHAIN_MAX);
        if (cn == 0)
            continue;
        /* weighted producer first, then the nodes down to wn */
        for (size_t k = 0; k < cn; k++)
            out[k] = chain[cn - 1 - k];
        best_n = cn;
        best_db = own;
        free(s->input);
        s->input = xstrdup(X->name);
        s->input_own_db = own;
    }
    if (best_n) {
        s->via_producer = true;
        return best_n;
    }
    out[0] = wn;
    return 1;
}

/* The values of qg upstream of the worst output slice of v (its Concat input, or the whole
 * output), by value id (malloc'ed, *n ids); NULL when unknown or out of memory. */
static bool *upstream_of_worst(const oq_verify *v, oq_graph *qg, uint32_t *n)
{
    size_t wo, ws;
    oq_verify_worst(v, &wo, &ws);
    const oq_verify_output *O = wo != SIZE_MAX ? oq_verify_output_at(v, wo) : NULL;
    if (!O || ws == SIZE_MAX)
        return NULL;
    oq_value *start = oq_graph_find_local(qg, O->slices[ws].tensor);
    uint32_t ids = qg->model->next_id;
    bool *up = start ? calloc((size_t)ids + 1, sizeof *up) : NULL;
    oq_value **stack = up ? malloc(((size_t)ids + 1) * sizeof *stack) : NULL;
    if (!stack) {
        free(up);
        return NULL;
    }
    size_t sp = 0;
    if (start->id < ids) {
        up[start->id] = true;
        stack[sp++] = start;
    }
    while (sp) {
        oq_value *x = stack[--sp];
        if (x->kind != OQ_VALUE_NODE || !x->producer)
            continue;
        const oq_node *p = x->producer;
        for (size_t i = 0; i < p->n_inputs; i++) {
            oq_value *in = p->inputs[i];
            if (in && in->id < ids && !up[in->id]) {
                up[in->id] = true;
                stack[sp++] = in;
            }
        }
    }
    free(stack);
    *n = ids;
    return up;
}

/* Choose the nodes to return to float (weighted node last); 0 when none can. The worst
 * output slice decides: the layers upstream of it come first (any other layer only when
 * none of those can fall back). */
static size_t choose(const oq_verify *v, oq_graph *qg, const oq_fallback_options *o, oq_fallback_step *s,
                     oq_node **out)
{
    uint32_t n_up = 0;
    bool *up = upstream_of_worst(v, qg, &n_up);
    const oq_verify_layer *worst = NULL;
    oq_node *wn = NULL;
    double wdb = INFINITY, wrank = INFINITY;
    for (int pass = up ? 0 : 1; pass < 2 && !worst; pass++)
        for (size_t i = 0; i < oq_verify_n_layers(v); i++) {
            const oq_verify_layer *L = oq_verify_layer_at(v, i);
            oq_node *n = NULL;
            double db, rank;
            if (!eligible(v, L, qg, &n, &db, &rank) || rank >= wrank)
                continue;
            if (pass == 0 && !(n->n_outputs && n->outputs[0] && n->outputs[0]->id < n_up && up[n->outputs[0]->id]))
                continue;
            worst = L;
            wn = n;
            wdb = db;
            wrank = rank;
        }
    free(up);
    if (!worst)
        return 0;
    return choose_for(v, o, worst, wn, wdb, s, out);
}

/* The label of the worst output slice ("out[1:4..84]", or the output's name) */
#define WORST_LABEL_MAX 512

static oq_status measure(oq_model *fm, oq_model *qm, oq_calib_source *src, const oq_fallback_options *o,
                         bool isolated, oq_verify **out, double *min_db, char *worst_out,
                         uint64_t *samples, oq_diag *d)
{
    oq_verify_options vo = oq_verify_options_default();
    vo.threads = o->threads;
    vo.isolated = isolated;
    vo.arith = o->arith;
    vo.arith_loss = false; /* the search needs the float-vs-target numbers only */
    vo.float_ranges = false;
    oq_verify *v = NULL;
    oq_rt_tensor *in = NULL;
    size_t n_in = 0;
    oq_status st = oq_verify_new(fm, qm, &vo, &v, d);
    if (st != OQ_OK)
        goto fail;
    const oq_plan *fp = oq_verify_float_plan(v);
    n_in = oq_plan_n_inputs(fp);
    in = calloc(n_in ? n_in : 1, sizeof *in);
    if (!in) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "fallback: out of memory");
        goto fail;
    }
    uint64_t ns = oq_calib_source_count(src);
    if (o->progress)
        o->progress(0, ns, "", o->progress_user);
    for (uint64_t k = 0; k < ns; k++) {
        char label[512];
        st = oq_calib_source_sample(src, fp, k, in, n_in, label, sizeof label, d);
        if (st == OQ_OK)
            st = oq_verify_sample(v, in, n_in, label, d);
        for (size_t i = 0; i < n_in; i++)
            oq_rt_tensor_release(&in[i]);
        if (st != OQ_OK)
            goto fail;
        if (o->progress)
            o->progress(k + 1, ns, label, o->progress_user);
    }
    /* the worst part of any output decides (a Concat output is judged per input) */
    size_t wo, ws;
    *min_db = oq_verify_worst(v, &wo, &ws);
    worst_out[0] = 0;
    if (wo != SIZE_MAX)
        oq_verify_slice_label(oq_verify_output_at(v, wo), ws, worst_out, WORST_LABEL_MAX);
    else
        *min_db = INFINITY; /* no output: as before, nothing to improve */
    *samples = ns;
    free(in);
    *out = v;
    return OQ_OK;
fail:
    free(in);
    oq_verify_free(v);
    return st;
}

/* A number of the steps JSON: 4 decimals; +-Inf (identical outputs) as +-1e999, which
 * JSON readers (Python's, onnxq's) read back as infinity; NaN as null. */
static bool add_db(cJSON *o, const char *key, double x)
{
    char num[64];
    if (isnan(x))
        return cJSON_AddNullToObject(o, key) != NULL;
    if (isinf(x))
        snprintf(num, sizeof num, x > 0 ? "1e999" : "-1e999");
    else
        snprintf(num, sizeof num, "%.4f", x);
    return oq_json_add_raw(o, key, num);
}

static bool add_count(cJSON *o, const char *key, unsigned long long n)
{
    char num[32];
    snprintf(num, sizeof num, "%llu", n);
    return oq_json_add_raw(o, key, num);
}

/* A string member, or null for NULL. */
static bool add_str(cJSON *o, const char *key, const char *s)
{
    return (s ? cJSON_AddStringToObject(o, key, s) : cJSON_AddNullToObject(o, key)) != NULL;
}

static bool add_step(cJSON *steps, const oq_fallback_step *s, size_t i)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(steps, o)) {
        cJSON_Delete(o);
        return false;
    }
    bool ok = add_count(o, "step", i) && add_str(o, "node", s->node);
    if (ok && s->node) {
        ok = add_str(o, "op_type", s->op_type) && add_str(o, "worst_layer", s->tensor) &&
             add_db(o, "worst_layer_isolated_sqnr_db", s->layer_iso_db) &&
             add_str(o, "nodes", s->nodes) && cJSON_AddBoolToObject(o, "via_producer", s->via_producer);
        if (ok && s->via_producer)
            ok = add_str(o, "input", s->input) &&
                 add_db(o, "input_output_qdq_sqnr_db", s->input_own_db);
    }
    return ok && add_count(o, "layers_in_float", s->layers) && add_db(o, "sqnr_db", s->sqnr_db) &&
           add_str(o, "worst_output", s->worst_output);
}

char *oq_fallback_steps_json(const oq_fallback_result *r, double target_sqnr_db)
{
    cJSON *root = cJSON_CreateObject(), *steps = NULL;
    bool ok = root && add_db(root, "target_sqnr_db", target_sqnr_db) &&
              add_count(root, "samples", (unsigned long long)r->samples) &&
              cJSON_AddBoolToObject(root, "met", r->met) && add_db(root, "sqnr_db", r->sqnr_db) &&
              add_count(root, "layers_in_float", r->layers) &&
              (steps = cJSON_AddArrayToObject(root, "steps"));
    for (size_t i = 0; ok && i < r->n_steps; i++)
        ok = add_step(steps, &r->steps[i], i);
    char *js = ok ? cJSON_PrintUnformatted(root) : NULL; /* malloc'ed (cJSON's default hooks) */
    cJSON_Delete(root);
    return js;
}

static oq_status record(oq_model *qm, const oq_fallback_result *r, double target, oq_diag *d)
{
    char *js = oq_fallback_steps_json(r, target);
    if (!js)
        return oq_diag_error(d, OQ_ERR_NOMEM, "fallback: out of memory");
    oq_model_set_metadata(qm, OQ_FALLBACK_LAYERS_KEY, r->in_float ? r->in_float : "");
    oq_model_set_metadata(qm, OQ_FALLBACK_STEPS_KEY, js);
    free(js);
    return OQ_OK;
}

static oq_fallback_step *new_step(oq_fallback_result *r, oq_diag *d)
{
    oq_fallback_step *ns = realloc(r->steps, (r->n_steps + 1) * sizeof *ns);
    if (!ns) {
        oq_diag_error(d, OQ_ERR_NOMEM, "fallback: out of memory");
        return NULL;
    }
    r->steps = ns;
    memset(&ns[r->n_steps], 0, sizeof ns[0]);
    ns[r->n_steps].sqnr_db = NAN;
    ns[r->n_steps].layer_iso_db = NAN;
    return &ns[r->n_steps++];
}

/* ------------------------------------------------------------ bisect */

typedef struct fb_group {
    oq_node *nodes[CHAIN_MAX]; /* of the model measured first (quant_model, unedited) */
    size_t n;
    oq_fallback_step info;     /* tensor, layer_iso_db, via_producer, input, input_own_db */
} fb_group;

typedef struct fb_rank {
    const oq_verify_layer *L;
    oq_node *wn;
    double db;      /* isolated SQNR (reported) */
    double rank_db; /* what ranks it (eligible) */
    size_t order;
} fb_rank;

static int rank_cmp(const void *a, const void *b)
{
    const fb_rank *x = a, *y = b;
    if (x->rank_db != y->rank_db)
        return x->rank_db < y->rank_db ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

typedef struct fb_ptr_idx {
    const oq_node *p;
    size_t i;
} fb_ptr_idx;

static int ptr_cmp(const void *a, const void *b)
{
    const oq_node *x = ((const fb_ptr_idx *)a)->p, *y = ((const fb_ptr_idx *)b)->p;
    return x < y ? -1 : x > y;
}

static size_t graph_nodes(oq_graph *g, oq_node ***out)
{
    size_t n = 0;
    for (oq_node *x = g->first; x; x = x->next)
        n++;
    *out = malloc((n ? n : 1) * sizeof **out);
    if (!*out)
        return (size_t)-1;
    n = 0;
    for (oq_node *x = g->first; x; x = x->next)
        (*out)[n++] = x;
    return n;
}

static void free_step_strings(oq_fallback_step *s)
{
    free(s->node);
    free(s->op_type);
    free(s->tensor);
    free(s->nodes);
    free(s->input);
    free(s->worst_output);
}

/* Return the nodes of groups[0..k) of model m to float; idx[g][j] is the graph position
 * of groups[g].nodes[j] in the model measured first, and m is a copy of it. */
static oq_status apply_groups(oq_model *m, oq_model *fm, size_t *const *idx, const fb_group *groups, size_t k,
                              oq_diag *d)
{
    oq_node **all = NULL;
    size_t n = graph_nodes(m->graph, &all);
    if (n == (size_t)-1)
        return oq_diag_error(d, OQ_ERR_NOMEM, "fallback: out of memory");
    oq_status st = OQ_OK;
    /* resolve every node before editing (the edits remove Q/DQ nodes) */
    size_t total = 0;
    for (size_t g = 0; g < k; g++)
        total += groups[g].n;
    oq_node **chosen = malloc((total ? total : 1) * sizeof *chosen);
    if (!chosen) {
        free(all);
        return oq_diag_error(d, OQ_ERR_NOMEM, "fallback: out of memory");
    }
    size_t t = 0;
    for (size_t g = 0; g < k; g++)
        for (size_t j = 0; j < groups[g].n; j++) {
            size_t i = idx[g][j];
            if (i >= n) {
                st = oq_diag_error(d, OQ_ERR_INTERNAL, "fallback: node position out of range");
                goto done;
            }
            chosen[t++] = all[i];
        }
    for (size_t i = 0; i < t && st == OQ_OK; i++) {
        bool changed = false;
        st = oq_fallback_node(m, fm, chosen[i], &changed, d);
    }
    if (st == OQ_OK) {
        oq_diag cd;
        oq_diag_init(&cd);
        if (oq_model_check(m, &cd) != OQ_OK)
            st = oq_diag_error(d, OQ_ERR_INTERNAL, "fallback: the model is invalid after returning %zu layers to float: %s",
                               k, cd.count ? cd.entries[0].message : "?");
        oq_diag_free(&cd);
    }
done:
    free(chosen);
    free(all);
    return st;
}

static char *group_nodes_list(const fb_group *groups, size_t k)
{
    oq_sbuf b = {0};
    char lb[128];
    for (size_t g = 0; g < k; g++)
        for (size_t j = 0; j < groups[g].n; j++)
            oq_sb_printf(&b, "%s%s", b.len ? "," : "", fb_label(groups[g].nodes[j], lb, sizeof lb));
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p ? b.p : xstrdup("");
}

/* Measure with the first k groups in float (a copy of the pristine model) and record the step. */
static oq_status bisect_eval(oq_model *fm, const uint8_t *buf, size_t len, oq_calib_source *src,
                             const oq_fallback_options *o, size_t *const *idx, const fb_group *groups, size_t k,
                             oq_fallback_result *res, double *db, oq_diag *d)
{
    oq_model *mk = NULL;
    oq_verify *v = NULL;
    oq_status st = oq_model_read_buffer(buf, len, "fallback copy", NULL, &mk, d);
    if (st != OQ_OK)
        return st;
    st = apply_groups(mk, fm, idx, groups, k, d);
    char wo[WORST_LABEL_MAX] = "";
    if (st == OQ_OK)
        st = measure(fm, mk, src, o, false, &v, db, wo, &res->samples, d);
    if (st == OQ_OK) {
        oq_fallback_step *s = new_step(res, d);
        if (!s) {
            st = OQ_ERR_NOMEM;
        } else {
            const fb_group *last = &groups[k - 1];
            char lb[128];
            s->node = xstrdup(fb_label(last->nodes[last->n - 1], lb, sizeof lb));
            s->op_type = xstrdup(last->nodes[last->n - 1]->op_type);
            s->tensor = xstrdup(last->info.tensor);
            s->layer_iso_db = last->info.layer_iso_db;
            s->via_producer = last->info.via_producer;
            s->input = xstrdup(last->info.input);
            s->input_own_db = last->info.input_own_db;
            s->nodes = group_nodes_list(groups, k);
            s->sqnr_db = *db;
            s->worst_output = xstrdup(*wo ? wo : NULL);
            s->layers = k;
            logf_(o, "step %zu: the %zu worst layer(s) in float (last: %s, isolated %.2f dB): output SQNR %.2f dB",
                  res->n_steps - 1, k, s->tensor ? s->tensor : "?", s->layer_iso_db, *db);
        }
    }
    oq_verify_free(v);
    oq_model_free(mk);
    return st;
}

/* The BISECT strategy, after the first measurement v0 (with isolated errors) missed the
 * target. Leaves qm with the chosen layers in float. */
static oq_status bisect(oq_model *fm, oq_model *qm, oq_calib_source *src, const oq_fallback_options *o,
                        const oq_verify *v0, oq_fallback_result *res, oq_diag *d)
{
    oq_status st = OQ_OK;
    size_t nl = oq_verify_n_layers(v0), nr = 0, ng = 0, n_all = 0, n_taken = 0;
    fb_rank *rk = malloc((nl ? nl : 1) * sizeof *rk);
    size_t cap = o->max_fallback > 0 ? (size_t)o->max_fallback : 0;
    fb_group *groups = calloc(cap ? cap : 1, sizeof *groups);
    size_t **idx = calloc(cap ? cap : 1, sizeof *idx);
    oq_node **taken = NULL, **all = NULL;
    fb_ptr_idx *pi = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    if (!rk || !groups || !idx) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "fallback: out of memory");
        goto done;
    }
    for (size_t i = 0; i < nl; i++) {
        const oq_verify_layer *L = oq_verify_layer_at(v0, i);
        oq_node *wn = NULL;
        double db, rank;
        if (eligible(v0, L, qm->graph, &wn, &db, &rank))
            rk[nr++] = (fb_rank){L, wn, db, rank, i};
    }
    qsort(rk, nr, sizeof *rk, rank_cmp);
    taken = malloc((nr * CHAIN_MAX + 1) * sizeof *taken);
    if (!taken) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "fallback: out of memory");
        goto done;
    }
    /* candidates: rules 1 and 2 in rank order, without nodes an earlier one took */
    for (size_t r = 0; r < nr && ng < cap; r++) {
        fb_group *G = &groups[ng];
        memset(G, 0, sizeof *G);
        oq_node *out[CHAIN_MAX];
        size_t nc = choose_for(v0, o, rk[r].L, rk[r].wn, rk[r].db, &G->info, out);
        /* rule 2 took the producer of an input; with one ranking there is no second look
         * at the layer itself, so it goes with it */
        if (G->info.via_producer && nc < CHAIN_MAX && out[nc - 1] != rk[r].wn)
            out[nc++] = rk[r].wn;
        for (size_t k = 0; k < nc; k++) {
            bool dup = false;
            for (size_t t = 0; t < n_taken && !dup; t++)
                dup = taken[t] == out[k];
            if (!dup) {
                G->nodes[G->n++] = out[k];
                taken[n_taken++] = out[k];
            }
        }
        if (G->n == 0) {
            free_step_strings(&G->info);
            memset(G, 0, sizeof *G);
            continue;
        }
        ng++;
    }
    if (ng == 0) {
        logf_(o, "stopping: no quantized layer left to return to float");
        res->in_float = xstrdup("");
        res->sqnr_db = res->steps[0].sqnr_db;
        goto done;
    }
    logf_(o, "bisect: %zu candidate layer(s), worst first: %s (%.2f dB)%s%s%s", ng, groups[0].info.tensor,
          groups[0].info.layer_iso_db, ng > 1 ? ", " : "", ng > 1 ? groups[1].info.tensor : "", ng > 2 ? ", ..." : "");
    /* graph positions of the candidates' nodes */
    n_all = graph_nodes(qm->graph, &all);
    if (n_all == (size_t)-1) {
        all = NULL;
        st = oq_diag_error(d, OQ_ERR_NOMEM, "fallback: out of memory");
        goto done;
    }
    pi = malloc((n_all ? n_all : 1) * sizeof *pi);
    if (!pi) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "fallback: out of memory");
        goto done;
    }
    for (size_t i = 0; i < n_all; i++)
        pi[i] = (fb_ptr_idx){all[i], i};
    qsort(pi, n_all, sizeof *pi, ptr_cmp);
    for (size_t g = 0; g < ng; g++) {
        idx[g] = malloc(CHAIN_MAX * sizeof **idx);
        if (!idx[g]) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "fallback: out of memory");
            goto done;
        }
        for (size_t j = 0; j < groups[g].n; j++) {
            fb_ptr_idx key = {groups[g].nodes[j], 0};
            fb_ptr_idx *f = bsearch(&key, pi, n_all, sizeof *pi, ptr_cmp);
            if (!f) {
                st = oq_diag_error(d, OQ_ERR_INTERNAL, "fallback: node not in the graph");
                goto done;
            }
            idx[g][j] = f->i;
        }
    }
    st = oq_model_write_buffer(qm, &buf, &len, d);
    if (st != OQ_OK)
        goto done;
    /* smallest k in [1, ng] meeting the target; k = ng when none does */
    size_t lo = 0, hi = ng;
    double db_hi = NAN, db;
    st = bisect_eval(fm, buf, len, src, o, idx, groups, ng, res, &db_hi, d);
    if (st != OQ_OK)
        goto done;
    bool met = db_hi >= o->target_sqnr_db;
    if (met) {
        while (hi - lo > 1) {
            size_t mid = lo + (hi - lo) / 2;
            st = bisect_eval(fm, buf, len, src, o, idx, groups, mid, res, &db, d);
            if (st != OQ_OK)
                goto done;
            if (db >= o->target_sqnr_db) {
                hi = mid;
                db_hi = db;
            } else {
                lo = mid;
            }
        }
    } else {
        logf_(o, "stopping: the target is not met with all %zu candidate layer(s) in float (--max-fallback %d)", ng,
              o->max_fallback);
    }
    /* leave qm (unedited so far: the positions hold) with the first hi candidates in float */
    st = apply_groups(qm, fm, idx, groups, hi, d);
    if (st != OQ_OK)
        goto done;
    res->met = met;
    res->layers = hi;
    res->sqnr_db = db_hi;
    res->in_float = group_nodes_list(groups, hi);
    if (!res->in_float)
        st = oq_diag_error(d, OQ_ERR_NOMEM, "fallback: out of memory");
done:
    for (size_t g = 0; g < ng; g++) {
        free_step_strings(&groups[g].info);
        if (idx)
            free(idx[g]);
    }
    free(groups);
    free(idx);
    free(rk);
    free(taken);
    free(all);
    free(pi);
    free(buf);
    return st;
}

oq_status oq_fallback_run(oq_model *fm, oq_model *qm, oq_calib_source *src, const oq_fallback_options *o,
                          oq_fallback_result *res, oq_diag *d)
{
    oq_status st = OQ_OK;
    oq_verify *v = NULL;
    memset(res, 0, sizeof *res);
    oq_fallback_step *s = new_step(res, d);
    if (!s)
        return OQ_ERR_NOMEM;
    for (;;) {
        double db = NAN;
        char wo[WORST_LABEL_MAX] = "";
        st = measure(fm, qm, src, o, true, &v, &db, wo, &res->samples, d);
        if (st != OQ_OK)
            goto fail;
        s = &res->steps[res->n_steps - 1];
        s->sqnr_db = db;
        s->worst_output = xstrdup(*wo ? wo : NULL);
        if (s->node)
        {
            if (s->via_producer)
                logf_(o,
                      "step %zu: %s back to float (worst layer %s, isolated %.2f dB; its input %s alone "
                      "quantizes at %.2f dB): output SQNR %.2f dB",
                      res->n_steps - 1, s->nodes, s->tensor, s->layer_iso_db, s->input, s->input_own_db, db);
            else
                logf_(o, "step %zu: %s (%s) back to float (worst layer %s, isolated %.2f dB): output SQNR %.2f dB",
                      res->n_steps - 1, s->nodes, s->op_type, s->tensor, s->layer_iso_db, db);
        }
        else
            logf_(o, "step 0: quantized model: output SQNR %.2f dB (%s) on %llu samples, target %.2f dB", db,
                  *wo ? wo : "?", (unsigned long long)res->samples, o->target_sqnr_db);
        s->layers = res->n_steps - 1;
        if (db >= o->target_sqnr_db) {
            res->met = true;
            break;
        }
        if ((int)res->n_steps - 1 >= o->max_fallback) {
            logf_(o, "stopping: --max-fallback %d reached%s", o->max_fallback,
                  o->search == OQ_FALLBACK_GREEDY && o->max_fallback > 0
                      ? " (for a model that needs many layers back: --fallback-search bisect with a larger "
                        "--max-fallback)"
                      : "");
            break;
        }
        if (o->search == OQ_FALLBACK_BISECT) {
            st = bisect(fm, qm, src, o, v, res, d);
            oq_verify_free(v);
            v = NULL;
            if (st != OQ_OK)
                return st;
            return record(qm, res, o->target_sqnr_db, d);
        }
        oq_fallback_step tmp;
        memset(&tmp, 0, sizeof tmp);
        tmp.sqnr_db = NAN;
        oq_node *chosen[CHAIN_MAX];
        size_t nc = choose(v, qm->graph, o, &tmp, chosen);
        oq_verify_free(v);
        v = NULL;
        if (nc == 0) {
            free(tmp.tensor);
            logf_(o, "stopping: no quantized layer left to return to float");
            break;
        }
        s = new_step(res, d);
        if (!s) {
            free(tmp.tensor);
            free(tmp.input);
            st = OQ_ERR_NOMEM;
            goto fail;
        }
        char lb[128];
        *s = tmp;
        bool any = false;
        for (size_t k = 0; k < nc; k++) {
            bool changed = false;
            st = oq_fallback_node(qm, fm, chosen[k], &changed, d);
            if (st != OQ_OK)
                goto fail;
            any |= changed;
        }
        /* named after the change (an output that was quantized has its name back) */
        s->node = xstrdup(fb_label(chosen[0], lb, sizeof lb));
        s->op_type = xstrdup(chosen[0]->op_type);
        oq_sbuf nb = {0};
        for (size_t k = 0; k < nc; k++)
            oq_sb_printf(&nb, "%s%s", k ? "," : "", fb_label(chosen[k], lb, sizeof lb));
        s->nodes = nb.p;
        if (nb.oom || !s->node || !s->op_type) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "fallback: out of memory");
            goto fail;
        }
        if (!any) { /* measuring again would choose the same nodes */
            logf_(o, "stopping: %s cannot be returned to float further", s->nodes);
            free_step_strings(s);
            res->n_steps--;
            break;
        }
        oq_diag cd;
        oq_diag_init(&cd);
        if (oq_model_check(qm, &cd) != OQ_OK) {
            st = oq_diag_error(d, OQ_ERR_INTERNAL, "fallback: the model is invalid after returning \"%s\" to float: %s",
                               s->node, cd.count ? cd.entries[0].message : "?");
            oq_diag_free(&cd);
            goto fail;
        }
        oq_diag_free(&cd);
        if (o->after_step && (st = o->after_step(qm, o->after_step_user, d)) != OQ_OK)
            goto fail;
    }
    oq_verify_free(v);
    {
        oq_sbuf b = {0};
        for (size_t i = 1; i < res->n_steps; i++)
            oq_sb_printf(&b, "%s%s", i > 1 ? "," : "", res->steps[i].nodes);
        if (b.oom)
            return oq_diag_error(d, OQ_ERR_NOMEM, "fallback: out of memory");
        res->in_float = b.p;
        res->layers = res->n_steps - 1;
        res->sqnr_db = res->steps[res->n_steps - 1].sqnr_db;
    }
    return record(qm, res, o->target_sqnr_db, d);
fail:
    oq_verify_free(v);
    return st;
}

void oq_fallback_result_free(oq_fallback_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_steps; i++) {
        free(r->steps[i].node);
        free(r->steps[i].op_type);
        free(r->steps[i].tensor);
        free(r->steps[i].nodes);
        free(r->steps[i].input);
        free(r->steps[i].worst_output);
    }
    free(r->steps);
    free(r->in_float);
    memset(r, 0, sizeof *r);
}
