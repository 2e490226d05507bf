/* qdq-cleanup: remove QuantizeLinear / DequantizeLinear nodes that do not change values.
 *
 *  1. Chains. Q1 -> DQ1 -> Q2 -> DQ2 where DQ1 and Q2 have identical parameters (same
 *     scale tensor bytes, same zero point type and bytes, same axis and block size):
 *     Q2(DQ1(q)) == q exactly for every q of an integer type up to 16 bits (see
 *     exact_scale()), so Q2's consumers read DQ1's input instead; Q2 then is dead and
 *     DQ2 a duplicate of DQ1. With different parameters both stay (requantizing would
 *     change values: documented in docs/passes/qdq-cleanup.md), counted in
 *     chains_kept_different_params.
 *  2. Duplicates. Two Q (or two DQ) nodes reading the same tensor with identical
 *     parameters compute the same thing: the later one's consumers read the earlier
 *     one's output (unless the later output is a graph output, whose name must stay).
 *  3. Dead. Q/DQ nodes whose outputs nobody reads are removed, with the scale, zero
 *     point and quantized initializers (or Constant nodes) only they used.
 * Everything it does is exact: outputs stay bit-identical. */
#include "pass-impl.h"

#include "onnxq/quant.h"

#include <float.h>
#include <math.h>
#include <string.h>

typedef struct ctx {
    oq_pass_result *res;
    oq_diag *d;
} ctx;

static bool is_q(const oq_node *n)
{
    return oq_pass_is_op(n, "QuantizeLinear");
}

static bool is_dq(const oq_node *n)
{
    return oq_pass_is_op(n, "DequantizeLinear");
}

static oq_tensor *input_const(const oq_node *n, size_t i)
{
    return i < n->n_inputs && n->inputs[i] ? oq_value_const_tensor(n->inputs[i]) : NULL;
}

static bool has_input(const oq_node *n, size_t i)
{
    return i < n->n_inputs && n->inputs[i];
}

static bool same_tensor(oq_tensor *a, oq_tensor *b)
{
    if (a == b)
        return true;
    if (!a || !b || a->dtype != b->dtype || a->rank != b->rank)
        return false;
    for (size_t i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    int64_t n = oq_tensor_numel(a);
    int64_t nb = oq_dtype_nbytes(a->dtype, n);
    const void *pa = oq_tensor_data(a, NULL), *pb = oq_tensor_data(b, NULL);
    return n >= 0 && nb >= 0 && pa && pb && memcmp(pa, pb, (size_t)nb) == 0;
}

static int64_t attr_or(const oq_node *n, const char *name, int64_t dflt)
{
    return oq_node_attr_int(n, name, dflt);
}

/* Integer type of a Q's output. */
static int32_t q_out_type(const oq_node *q)
{
    oq_tensor *zp = input_const(q, 2);
    if (zp)
        return zp->dtype;
    if (has_input(q, 2))
        return -1;
    int64_t od = attr_or(q, "output_dtype", 0);
    return od ? (int32_t)od : OQ_DTYPE_UINT8;
}

/* Integer type a DQ reads, -1 when unknown. */
static int32_t dq_in_type(const oq_node *dq)
{
    oq_tensor *zp = input_const(dq, 2);
    if (zp)
        return zp->dtype;
    if (has_input(dq, 2))
        return -1;
    oq_tensor *x = input_const(dq, 0);
    if (x)
        return x->dtype;
    const oq_value *v = dq->inputs[0];
    if (v && v->kind == OQ_VALUE_NODE && v->producer && is_q(v->producer))
        return q_out_type(v->producer);
    int32_t t = oq_pass_value_elem_type(v);
    return t > 0 ? t : -1;
}

/* Same scale, zero point, axis and block size (both constant). Q and DQ may be
 * compared with each other. */
static bool same_params(const oq_node *a, const oq_node *b)
{
    oq_tensor *sa = input_const(a, 1), *sb = input_const(b, 1);
    if (!sa || !sb || !same_tensor(sa, sb))
        return false;
    if (has_input(a, 2) != has_input(b, 2))
        return false;
    if (has_input(a, 2)) {
        oq_tensor *za = input_const(a, 2), *zb = input_const(b, 2);
        if (!za || !zb || !same_tensor(za, zb))
            return false;
    }
    if (oq_tensor_numel(sa) != 1 && attr_or(a, "axis", 1) != attr_or(b, "axis", 1))
        return false;
    if (attr_or(a, "block_size", 0) != attr_or(b, "block_size", 0))
        return false;
    if (is_q(a) && is_q(b) &&
        (attr_or(a, "output_dtype", 0) != attr_or(b, "output_dtype", 0) ||
         attr_or(a, "saturate", 1) != attr_or(b, "saturate", 1)))
        return false;
    return true;
}

/* Q(DQ(q)) == q holds exactly when (q-zp)*s rounds to a float whose quotient by s
 * rounds back to q-zp: for |q-zp| < 2^17 and a normal float32 scale with
 * s * 2^17 finite, the two roundings move the value by at most |q-zp| * 2^-23 < 1/2. */
static bool exact_scale(oq_tensor *s, int32_t qtype)
{
    if (!s || s->dtype != OQ_DTYPE_FLOAT)
        return false;
    if (!(qtype == OQ_DTYPE_INT8 || qtype == OQ_DTYPE_UINT8 || qtype == OQ_DTYPE_INT16 ||
          qtype == OQ_DTYPE_UINT16 || qtype == OQ_DTYPE_INT4 || qtype == OQ_DTYPE_UINT4))
        return false;
    const float *v = oq_tensor_data(s, NULL);
    int64_t n = oq_tensor_numel(s);
    if (!v || n < 1)
        return false;
    for (int64_t i = 0; i < n; i++)
        if (!(v[i] >= FLT_MIN) || !(v[i] <= FLT_MAX / 131072.0f))
            return false;
    return true;
}

static oq_node *dq_producer(const oq_value *v)
{
    if (!v || v->kind != OQ_VALUE_NODE || !v->producer || v->producer_index != 0)
        return NULL;
    return is_dq(v->producer) ? v->producer : NULL;
}

/* DQ1 -> Q2 with identical parameters: Q2's consumers read DQ1's input. */
static bool collapse_chain(ctx *c, oq_node *q)
{
    oq_node *dq = dq_producer(q->inputs[0]);
    if (!dq || dq->graph != q->graph || q->n_outputs < 1 || !q->outputs[0])
        return false;
    oq_value *out = q->outputs[0];
    if (out->n_uses == 0 || oq_value_is_graph_output(out))
        return false;
    if (!same_params(dq, q))
        return false;
    int32_t t = q_out_type(q);
    if (t < 0 || dq_in_type(dq) != t || !exact_scale(input_const(q, 1), t))
        return false;
    oq_value_replace_all_uses(out, dq->inputs[0]);
    oq_pass_stat_add(c->res, "chains_collapsed", 1);
    return true;
}

static bool comes_before(const oq_node *a, const oq_node *b)
{
    for (const oq_node *p = a->next; p; p = p->next)
        if (p == b)
            return true;
    return false;
}

/* A later Q/DQ of the same tensor with the same parameters: its consumers read ours. */
static bool merge_duplicates(ctx *c, oq_node *n)
{
    oq_value *x = n->inputs[0];
    if (!x || n->n_outputs < 1 || !n->outputs[0] || !input_const(n, 1))
        return false;
    bool changed = false;
    for (size_t k = 0; k < x->n_uses; k++) {
        oq_node *m = x->uses[k].node;
        if (m == n || x->uses[k].index != 0 || m->graph != n->graph ||
            strcmp(m->op_type, n->op_type) != 0 || !oq_domain_is_default(m->domain) ||
            m->n_outputs < 1 || !m->outputs[0])
            continue;
        oq_value *mo = m->outputs[0];
        if (mo->n_uses == 0 || oq_value_is_graph_output(mo) || !same_params(n, m) ||
            !comes_before(n, m))
            continue;
        oq_value_replace_all_uses(mo, n->outputs[0]);
        oq_pass_stat_add(c->res, "duplicates_merged", 1);
        changed = true;
    }
    return changed;
}

static bool remove_dead(ctx *c, oq_graph *g)
{
    bool changed = false;
    for (oq_node *n = g->first; n;) {
        oq_node *next = n->next;
        if ((is_q(n) || is_dq(n)) && n->n_outputs >= 1) {
            bool dead = true;
            for (size_t i = 0; i < n->n_outputs; i++)
                if (n->outputs[i] && oq_pass_value_refs(n->outputs[i]) > 0)
                    dead = false;
            if (dead) {
                oq_value *ins[3] = {NULL, NULL, NULL};
                for (size_t i = 0; i < n->n_inputs && i < 3; i++)
                    ins[i] = n->inputs[i];
                oq_pass_remove_node(n);
                for (int i = 0; i < 3; i++)
                    oq_pass_drop_if_unused(ins[i]);
                oq_pass_stat_add(c->res, "dead_removed", 1);
                changed = true;
                next = g->first; /* a dropped Constant may have been anywhere */
            }
        }
        n = next;
    }
    return changed;
}

static oq_status run_graph(oq_graph *g, void *vc)
{
    ctx *c = vc;
    for (int iter = 0; iter < 64; iter++) {
        bool changed = false;
        for (oq_node *n = g->first; n; n = n->next) {
            if (is_q(n) && collapse_chain(c, n))
                changed = true;
            if ((is_q(n) || is_dq(n)) && merge_duplicates(c, n))
                changed = true;
        }
        if (remove_dead(c, g))
            changed = true;
        if (!changed)
            break;
        c->res->changed = true;
    }
    /* what stays: DQ -> Q pairs whose parameters differ */
    for (oq_node *n = g->first; n; n = n->next) {
        oq_node *dq = is_q(n) ? dq_producer(n->inputs[0]) : NULL;
        if (dq && !same_params(dq, n)) {
            char buf[160];
            oq_diag_add(c->d, OQ_SEV_NOTE, OQ_OK, NULL, oq_node_label(n, buf, sizeof buf), n->op_type,
                        "qdq-cleanup: \"%s\" is requantized with other parameters than its "
                        "DequantizeLinear; both kept", n->inputs[0]->name);
            oq_pass_stat_add(c->res, "chains_kept_different_params", 1);
        }
    }
    if (c->res->changed)
        oq_pass_prune_value_info(g);
    return OQ_OK;
}

static oq_status run(oq_model *m, const oq_pass_options *o, oq_pass_result *res, oq_diag *d)
{
    (void)o;
    ctx c = {res, d};
    return oq_pass_for_each_graph(m, run_graph, &c);
}

const oq_pass oq_pass_qdq_cleanup = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "qdq-cleanup",
    .summary = "remove redundant Q/DQ: identical DQ->Q pairs, duplicates, dead nodes (exact)",
    .options = NULL,
    .n_options = 0,
    .run = run,
};
