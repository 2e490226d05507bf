/* fuse-activations: element-wise chains that compute HardSigmoid or HardSwish become
 * that one node.
 *
 *   HardSigmoid(x; alpha, beta) = clip(alpha * x + beta, 0, 1)
 *     from clip(A x + B, 0, 1)              (e.g. clip(x/6 + 0.5, 0, 1))
 *     and  clip(A x + B, 0, h) * s, s h = 1 (e.g. relu6(x + 3) / 6)
 *     with alpha = s A, beta = s B.
 *   HardSwish(x) = x * HardSigmoid(x; 1/6, 1/2)          (opset >= 14)
 *     from x * HardSigmoid(x; 1/6, 1/2)
 *     and  (x * clip(A x + B, 0, h)) * s with s A = 1/6, s B = 1/2, s h = 1
 *          (e.g. x * relu6(x + 3) / 6).
 *
 * "A x + B" is up to two Add / Sub / Mul / Div by scalar constants, in any order;
 * "clip(., lo, hi)" is Clip (bounds as inputs, opset >= 11, or attributes), Relu, Min
 * and Max by scalar constants, nested. "* s" is Mul by s or Div by 1/s. Every value
 * inside a chain must feed only the next node of the chain and not be a graph output.
 * Before opset 14 the HardSwish chains become x * HardSigmoid(x) (two nodes). */
#include "pass-impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CHAIN 12

typedef struct chain {
    oq_node *n[MAX_CHAIN];
    int k;
} chain;

typedef struct ctx {
    oq_pass_result *res;
    oq_diag *d;
    bool hardswish;   /* option */
    bool hardsigmoid; /* option */
    bool changed;
} ctx;

static bool float_type(int32_t t)
{
    return t == OQ_DTYPE_FLOAT || t == OQ_DTYPE_DOUBLE || t == OQ_DTYPE_FLOAT16 ||
           t == OQ_DTYPE_BFLOAT16;
}

/* Value of a scalar (one-element) float constant. */
static bool scalar(const oq_value *v, double *out)
{
    oq_tensor *t = v ? oq_value_const_tensor(v) : NULL;
    if (!t || !float_type(t->dtype) || oq_tensor_numel(t) != 1 || t->rank > 1)
        return false;
    double *vals = NULL;
    int64_t n;
    if (oq_pass_tensor_to_double(t, &vals, &n, NULL) != OQ_OK)
        return false;
    *out = vals[0];
    free(vals);
    return true;
}

/* The producer of v, appended to ch, when v is an intermediate the chain owns: made
 * by a node of g (its only output in use), used once, not a graph output. */
static oq_node *inner(chain *ch, oq_value *v, oq_graph *g)
{
    if (!v || v->kind != OQ_VALUE_NODE || !v->producer || v->producer->graph != g ||
        v->producer_index != 0 || v->n_uses != 1 || oq_value_is_graph_output(v) ||
        ch->k >= MAX_CHAIN)
        return NULL;
    oq_node *p = v->producer;
    for (size_t i = 1; i < p->n_outputs; i++)
        if (p->outputs[i] && oq_pass_value_refs(p->outputs[i]) > 0)
            return NULL;
    ch->n[ch->k++] = p;
    return p;
}

/* Binary node with one scalar constant operand: the data operand's index, and k. */
static int binary_scalar(const oq_node *n, double *k)
{
    if (n->n_inputs != 2 || !n->inputs[0] || !n->inputs[1])
        return -1;
    if (scalar(n->inputs[1], k) && !oq_value_const_tensor(n->inputs[0]))
        return 0;
    if (scalar(n->inputs[0], k) && !oq_value_const_tensor(n->inputs[1]))
        return 1;
    return -1;
}

/* v = A * x + B through at most `max` Add/Sub/Mul/Div by scalars owned by the chain
 * (v itself must be an intermediate). Returns x (v itself with A = 1, B = 0 when no
 * step matches) and the number of steps. */
static oq_value *match_affine(chain *ch, oq_value *v, oq_graph *g, int max, double *A,
                              double *B, int *steps)
{
    *A = 1.0;
    *B = 0.0;
    *steps = 0;
    while (*steps < max) {
        chain save = *ch;
        oq_node *p = inner(ch, v, g);
        double k;
        int xi = p ? binary_scalar(p, &k) : -1;
        if (xi < 0) {
            *ch = save;
            break;
        }
        /* v = A * u + B with u = p(w) */
        if (oq_pass_is_op(p, "Mul")) {
            *A *= k;
        } else if (oq_pass_is_op(p, "Add")) {
            *B += *A * k;
        } else if (oq_pass_is_op(p, "Sub")) {
            if (xi == 0) {
                *B -= *A * k;
            } else {
                *B += *A * k;
                *A = -*A;
            }
        } else if (oq_pass_is_op(p, "Div") && xi == 0 && k != 0.0) {
            *A /= k;
        } else {
            *ch = save;
            break;
        }
        v = p->inputs[xi];
        (*steps)++;
    }
    return v;
}

/* One clipping node: its data input and bounds [l, h]; NULL when p is not one. */
static oq_value *clip_step(const oq_node *p, double *l, double *h)
{
    double k;
    *l = -INFINITY;
    *h = INFINITY;
    if (oq_pass_is_op(p, "Clip") && p->n_inputs >= 1 && p->inputs[0]) {
        if (oq_node_opset(p) < 11) {
            *l = oq_node_attr_float(p, "min", -INFINITY);
            *h = oq_node_attr_float(p, "max", INFINITY);
        } else {
            if (p->n_inputs >= 2 && p->inputs[1] && !scalar(p->inputs[1], l))
                return NULL;
            if (p->n_inputs >= 3 && p->inputs[2] && !scalar(p->inputs[2], h))
                return NULL;
        }
        return *l <= *h ? p->inputs[0] : NULL;
    }
    if (oq_pass_is_op(p, "Relu") && p->n_inputs == 1 && p->inputs[0]) {
        *l = 0.0;
        return p->inputs[0];
    }
    if (oq_pass_is_op(p, "Min") || oq_pass_is_op(p, "Max")) {
        int xi = binary_scalar(p, &k);
        if (xi < 0)
            return NULL;
        if (oq_pass_is_op(p, "Min"))
            *h = k;
        else
            *l = k;
        return isnan(k) ? NULL : p->inputs[xi];
    }
    return NULL;
}

/* v = clip(z, lo, hi) through nested Clip / Relu / Min / Max owned by the chain,
 * starting from bounds [*lo, *hi] already found outside v. Returns z (v itself when
 * no clipping node matched) and the number of nodes taken in *steps. */
static oq_value *match_clip(chain *ch, oq_value *v, oq_graph *g, double *lo, double *hi,
                            int *steps)
{
    *steps = 0;
    while (*steps < 4) {
        chain save = *ch;
        oq_node *p = inner(ch, v, g);
        double l, h;
        oq_value *z = p ? clip_step(p, &l, &h) : NULL;
        /* clip_[l,h] applied before clip_[lo,hi]: the composition clips to the
         * intersection when it is not empty */
        if (!z || fmax(*lo, l) > fmin(*hi, h)) {
            *ch = save;
            break;
        }
        *lo = fmax(*lo, l);
        *hi = fmin(*hi, h);
        v = z;
        (*steps)++;
    }
    return v;
}

static bool near(double x, double want)
{
    return fabs(x - want) <= 1e-6 * fabs(want);
}

/* Replace the chain rooted at ch->n[0] (whose output is kept) by a new node. */
static oq_status rewrite(ctx *c, chain *ch, const char *op, oq_value *x, double alpha,
                         double beta, bool with_attrs)
{
    oq_node *root = ch->n[0];
    oq_graph *g = root->graph;
    oq_value *y = root->outputs[0];
    oq_node *nn = oq_node_new(g, op, NULL, NULL, &x, 1, &y, 0);
    if (!nn)
        return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
    char name[256];
    snprintf(name, sizeof name, "%.200s_%s", root->name && *root->name ? root->name : "act", op);
    nn->name = oq_graph_unique_name(g, name);
    if (with_attrs) {
        oq_node_set_attr_float(nn, "alpha", (float)alpha);
        oq_node_set_attr_float(nn, "beta", (float)beta);
    }
    oq_node *pos = root->next;
    /* collect the constant operands to drop once the chain is gone */
    oq_value *consts[MAX_CHAIN * 3];
    int nc = 0;
    for (int i = 0; i < ch->k; i++)
        for (size_t j = 0; j < ch->n[i]->n_inputs; j++)
            if (ch->n[i]->inputs[j] && oq_value_const_tensor(ch->n[i]->inputs[j]) && nc < MAX_CHAIN * 3)
                consts[nc++] = ch->n[i]->inputs[j];
    for (int i = 0; i < ch->k; i++)
        oq_pass_remove_node(ch->n[i]);
    if (pos)
        oq_graph_insert_before(g, pos, nn);
    else
        oq_graph_append(g, nn);
    oq_node_set_output(nn, 0, y);
    for (int i = 0; i < nc; i++)
        oq_pass_drop_if_unused(consts[i]);
    return OQ_OK;
}

/* root is Mul/Div by a scalar: its data operand and s (the factor it multiplies by). */
static oq_value *match_scale(oq_node *root, double *s)
{
    double k;
    int xi = binary_scalar(root, &k);
    if (xi < 0)
        return NULL;
    if (oq_pass_is_op(root, "Mul")) {
        *s = k;
    } else if (oq_pass_is_op(root, "Div") && xi == 0 && k != 0.0) {
        *s = 1.0 / k;
    } else {
        return NULL;
    }
    return root->inputs[xi];
}

/* HardSigmoid rooted at n: clip(A x + B, 0, 1) or clip(A x + B, 0, h) * s. */
static int try_hardsigmoid(oq_node *n, chain *ch, oq_value **xo, double *alpha, double *beta)
{
    oq_graph *g = n->graph;
    ch->k = 0;
    ch->n[ch->k++] = n;
    double s = 1.0, lo = -INFINITY, hi = INFINITY, A, B;
    int csteps, asteps;
    oq_value *z;
    bool scaled = oq_pass_is_op(n, "Mul") || oq_pass_is_op(n, "Div");
    if (scaled) {
        oq_value *cv = match_scale(n, &s);
        if (!cv)
            return 0;
        z = match_clip(ch, cv, g, &lo, &hi, &csteps);
    } else {
        z = clip_step(n, &lo, &hi);
        if (!z)
            return 0;
        z = match_clip(ch, z, g, &lo, &hi, &csteps);
        csteps++;
    }
    if (csteps == 0 || lo != 0.0 || !isfinite(hi) || hi <= 0.0 || !near(s * hi, 1.0))
        return 0;
    oq_value *x = match_affine(ch, z, g, 2, &A, &B, &asteps);
    if (asteps == 0 && !scaled)
        return 0; /* a plain clip(x, 0, 1) */
    *alpha = s * A;
    *beta = s * B;
    if (*alpha == 0.0 || !isfinite(*alpha) || !isfinite(*beta))
        return 0;
    *xo = x;
    return 1;
}

static bool is_hardsigmoid_hs(const oq_node *h, oq_value *x)
{
    return oq_pass_is_op(h, "HardSigmoid") && h->n_inputs == 1 && h->inputs[0] == x &&
           near(oq_node_attr_float(h, "alpha", 0.2f), 1.0 / 6.0) &&
           near(oq_node_attr_float(h, "beta", 0.5f), 0.5);
}

/* HardSwish rooted at n: x * HardSigmoid(x; 1/6, 1/2), or
 * (x * clip(A x + B, 0, h)) * s with s A = 1/6, s B = 1/2, s h = 1. */
static int try_hardswish(oq_node *n, chain *ch, oq_value **xo, bool *as_mul)
{
    oq_graph *g = n->graph;
    ch->k = 0;
    ch->n[ch->k++] = n;
    *as_mul = false;
    if (oq_pass_is_op(n, "Mul") && n->n_inputs == 2 && n->inputs[0] && n->inputs[1]) {
        for (int i = 0; i < 2; i++) {
            oq_value *x = n->inputs[i], *h = n->inputs[1 - i];
            chain save = *ch;
            oq_node *hs = inner(ch, h, g);
            if (hs && is_hardsigmoid_hs(hs, x)) {
                *xo = x;
                return 1;
            }
            *ch = save;
        }
    }
    double s;
    oq_value *pv = NULL;
    if (oq_pass_is_op(n, "Mul") || oq_pass_is_op(n, "Div"))
        pv = match_scale(n, &s);
    if (!pv)
        return 0;
    oq_node *p = inner(ch, pv, g);
    if (!p || !oq_pass_is_op(p, "Mul") || p->n_inputs != 2 || !p->inputs[0] || !p->inputs[1])
        return 0;
    int base = ch->k;
    for (int i = 0; i < 2; i++) {
        oq_value *x = p->inputs[i], *r = p->inputs[1 - i];
        ch->k = base;
        double lo = -INFINITY, hi = INFINITY, A, B;
        int csteps;
        oq_value *z = match_clip(ch, r, g, &lo, &hi, &csteps);
        if (!csteps || lo != 0.0 || !isfinite(hi) || !near(s * hi, 1.0))
            continue;
        int steps;
        oq_value *xx = match_affine(ch, z, g, 2, &A, &B, &steps);
        if (xx != x || !near(s * A, 1.0 / 6.0) || !near(s * B, 0.5))
            continue;
        *xo = x;
        *as_mul = true;
        return 1;
    }
    return 0;
}

/* A rank-0 x with a [1] constant in the chain makes the chain's result [1]: the fused
 * node would change the output's shape. */
static bool shape_kept(const chain *ch, const oq_value *x)
{
    if (oq_pass_value_rank(x) != 0)
        return true;
    for (int i = 0; i < ch->k; i++)
        for (size_t j = 0; j < ch->n[i]->n_inputs; j++) {
            oq_tensor *t = ch->n[i]->inputs[j] ? oq_value_const_tensor(ch->n[i]->inputs[j]) : NULL;
            if (t && t->rank > 0)
                return false;
        }
    return true;
}

static oq_status run_graph(oq_graph *g, void *vc)
{
    ctx *c = vc;
    for (int round = 0; round < 16; round++) {
        bool changed = false;
        for (oq_node *n = g->first; n;) {
            oq_node *next = n->next;
            if (!n->n_outputs || !n->outputs[0] ||
                !(oq_pass_is_op(n, "Mul") || oq_pass_is_op(n, "Div") || oq_pass_is_op(n, "Clip") ||
                  oq_pass_is_op(n, "Min") || oq_pass_is_op(n, "Max"))) {
                n = next;
                continue;
            }
            chain ch = {{0}, 0};
            oq_value *x;
            bool long_form;
            double alpha, beta;
            oq_status st = OQ_OK;
            if (c->hardswish && try_hardswish(n, &ch, &x, &long_form)) {
                int32_t et = oq_pass_value_elem_type(x);
                if ((et > 0 && !float_type(et)) || !shape_kept(&ch, x)) {
                    n = next;
                    continue;
                }
                if (oq_node_opset(n) >= 14) {
                    st = rewrite(c, &ch, "HardSwish", x, 0, 0, false);
                    oq_pass_stat_add(c->res, "hardswish", 1);
                    changed = true;
                } else if (long_form) {
                    /* x * HardSigmoid(x): the Mul stays, the rest becomes HardSigmoid */
                    oq_value *h = oq_graph_new_value(g, NULL);
                    oq_node *mul = h ? oq_node_new(g, "Mul", NULL, NULL, (oq_value *[]){x, h}, 2,
                                                   &n->outputs[0], 0)
                                     : NULL;
                    if (!mul)
                        return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
                    oq_value *y = n->outputs[0];
                    char name[256];
                    snprintf(name, sizeof name, "%.200s_mul", n->name && *n->name ? n->name : "act");
                    mul->name = oq_graph_unique_name(g, name);
                    oq_node *hs = oq_node_new(g, "HardSigmoid", NULL, NULL, &x, 1, &h, 1);
                    if (!hs)
                        return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
                    snprintf(name, sizeof name, "%.200s_HardSigmoid", n->name && *n->name ? n->name : "act");
                    hs->name = oq_graph_unique_name(g, name);
                    oq_node_set_attr_float(hs, "alpha", (float)(1.0 / 6.0));
                    oq_node_set_attr_float(hs, "beta", 0.5f);
                    oq_node *pos = n->next;
                    oq_value *consts[MAX_CHAIN * 3];
                    int nc = 0;
                    for (int i = 0; i < ch.k; i++)
                        for (size_t j = 0; j < ch.n[i]->n_inputs; j++)
                            if (ch.n[i]->inputs[j] && oq_value_const_tensor(ch.n[i]->inputs[j]) &&
                                nc < MAX_CHAIN * 3)
                                consts[nc++] = ch.n[i]->inputs[j];
                    for (int i = 0; i < ch.k; i++)
                        oq_pass_remove_node(ch.n[i]);
                    if (pos) {
                        oq_graph_insert_before(g, pos, hs);
                        oq_graph_insert_before(g, pos, mul);
                    } else {
                        oq_graph_append(g, hs);
                        oq_graph_append(g, mul);
                    }
                    oq_node_set_output(mul, 0, y);
                    for (int i = 0; i < nc; i++)
                        oq_pass_drop_if_unused(consts[i]);
                    oq_pass_stat_add(c->res, "hardswish_as_mul", 1);
                    changed = true;
                } else if (round == 0) {
                    oq_pass_stat_add(c->res, "hardswish_skipped_opset", 1);
                }
            } else if (c->hardsigmoid && try_hardsigmoid(n, &ch, &x, &alpha, &beta)) {
                int32_t et = oq_pass_value_elem_type(x);
                if ((et > 0 && !float_type(et)) || !shape_kept(&ch, x)) {
                    n = next;
                    continue;
                }
                st = rewrite(c, &ch, "HardSigmoid", x, alpha, beta, true);
                oq_pass_stat_add(c->res, "hardsigmoid", 1);
                changed = true;
            }
            if (st != OQ_OK)
                return st;
            n = next;
        }
        if (!changed)
            break;
        c->changed = true;
    }
    oq_pass_prune_value_info(g);
    return OQ_OK;
}

static oq_status run(oq_model *m, const oq_pass_options *o, oq_pass_result *res, oq_diag *d)
{
    ctx c = {res, d, oq_pass_opt_bool(o, "hardswish", true), oq_pass_opt_bool(o, "hardsigmoid", true),
             false};
    oq_status s = oq_pass_for_each_graph(m, run_graph, &c);
    if (c.changed)
        res->changed = true;
    return s;
}

static const oq_pass_option_def options[] = {
    {"hardswish", OQ_OPT_BOOL, "true", "recognise x * clip(x + 3, 0, 6) / 6 and its variants"},
    {"hardsigmoid", OQ_OPT_BOOL, "true", "recognise clip(a x + b, 0, 1) and relu6(x + 3) / 6"},
};

const oq_pass oq_pass_fuse_activations = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "fuse-activations",
    .summary = "recognise HardSwish and HardSigmoid written as Add/Clip/Mul/Div (or Min/Max) chains",
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .run = run,
};
