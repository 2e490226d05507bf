/* fold-batchnorm: BatchNormalization (inference) with constant scale, bias, mean and
 * variance
 *   y = scale * (x - mean) / sqrt(var + eps) + B = a * x + b,
 *   a = scale / sqrt(var + eps),  b = B - mean * a        (computed in double)
 * folds into the weights and bias of a preceding Conv, ConvTranspose, Gemm or MatMul
 * whose weight is constant and whose output feeds only this BN. A BN that cannot be
 * folded into its producer becomes Mul(x, a) + Add(., b) when the rank of x is known
 * (the constants are shaped [C, 1, ..., 1] to broadcast over axis 1). */
#include "pass-impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ctx {
    oq_pass_result *res;
    oq_diag *d;
    bool standalone;
} ctx;

static bool float_type(int32_t t)
{
    return t == OQ_DTYPE_FLOAT || t == OQ_DTYPE_DOUBLE || t == OQ_DTYPE_FLOAT16 ||
           t == OQ_DTYPE_BFLOAT16;
}

/* a and b of the BN, or not foldable (returns false with no error). */
static bool bn_coeffs(oq_node *bn, double **a_out, double **b_out, int64_t *c_out, int32_t *dt,
                      oq_diag *d)
{
    *a_out = *b_out = NULL;
    if (bn->n_inputs != 5 || bn->n_outputs < 1 || !bn->outputs[0])
        return false;
    for (size_t i = 1; i < bn->n_outputs; i++)
        if (bn->outputs[i] && oq_pass_value_refs(bn->outputs[i]) > 0)
            return false; /* training outputs in use */
    if (oq_node_attr_int(bn, "training_mode", 0) != 0 || oq_node_attr_int(bn, "spatial", 1) != 1 ||
        oq_node_attr_int(bn, "is_test", 1) == 0)
        return false;
    oq_tensor *t[4];
    for (int i = 0; i < 4; i++) {
        t[i] = oq_value_const_tensor(bn->inputs[i + 1]);
        if (!t[i] || !float_type(t[i]->dtype) || t[i]->rank != 1)
            return false;
    }
    int64_t c = t[0]->dims[0];
    for (int i = 1; i < 4; i++)
        if (t[i]->dims[0] != c)
            return false;
    double *v[4] = {0};
    int64_t n;
    bool ok = true;
    for (int i = 0; i < 4 && ok; i++)
        ok = oq_pass_tensor_to_double(t[i], &v[i], &n, d) == OQ_OK;
    double *a = ok ? malloc((size_t)(c ? c : 1) * sizeof(double)) : NULL;
    double *b = ok ? malloc((size_t)(c ? c : 1) * sizeof(double)) : NULL;
    if (a && b) {
        double eps = (double)oq_node_attr_float(bn, "epsilon", 1e-5f);
        for (int64_t k = 0; k < c; k++) {
            a[k] = v[0][k] / sqrt(v[3][k] + eps);
            b[k] = v[1][k] - v[2][k] * a[k];
        }
    } else {
        free(a);
        free(b);
        a = b = NULL;
    }
    for (int i = 0; i < 4; i++)
        free(v[i]);
    *a_out = a;
    *b_out = b;
    *c_out = c;
    *dt = t[0]->dtype;
    return a != NULL;
}

/* Fold into the producer p of x (output 0). Returns 1 folded, 0 not applicable, <0 err. */
static int fold_into(ctx *c, oq_node *bn, oq_node *p, const double *a, const double *b, int64_t C)
{
    oq_graph *g = bn->graph;
    bool conv = oq_pass_is_op(p, "Conv"), convt = oq_pass_is_op(p, "ConvTranspose");
    bool gemm = oq_pass_is_op(p, "Gemm"), matmul = oq_pass_is_op(p, "MatMul");
    if (!(conv || convt || gemm || matmul) || p->n_inputs < 2 || p->n_outputs != 1)
        return 0;
    oq_tensor *w = oq_value_const_tensor(p->inputs[1]);
    if (!w || !float_type(w->dtype))
        return 0;
    int64_t wn = oq_tensor_numel(w);
    oq_tensor *bias = p->n_inputs >= 3 && p->inputs[2] ? oq_value_const_tensor(p->inputs[2]) : NULL;
    if (p->n_inputs >= 3 && p->inputs[2] && !bias)
        return 0; /* a bias that is not constant */
    int64_t M, inner, outer = 1;
    /* W'[..] = W[..] * a[channel(..)] with the element index split as
     * (outer, M, inner): channel = middle index */
    double beta = 1.0;
    if (conv) {
        if (w->rank < 3 || w->dims[0] != C)
            return 0;
        M = C;
        inner = wn / (C ? C : 1);
    } else if (convt) {
        int64_t group = oq_node_attr_int(p, "group", 1);
        if (w->rank < 3 || group < 1 || w->dims[1] * group != C || w->dims[0] % group)
            return 0;
        /* W: [Cin, C/group, k...]; output channel = g*(C/group) + j */
        M = C; /* handled below */
        inner = wn / (w->dims[0] * w->dims[1]);
        outer = w->dims[0];
    } else if (gemm) {
        if (w->rank != 2 || oq_node_attr_int(p, "transA", 0) < 0)
            return 0;
        bool tb = oq_node_attr_int(p, "transB", 0) != 0;
        if ((tb ? w->dims[0] : w->dims[1]) != C)
            return 0;
        M = C;
        inner = tb ? w->dims[1] : 1;
        outer = tb ? 1 : w->dims[0];
        beta = oq_node_attr_float(p, "beta", 1.0f);
        if (bias && (oq_tensor_numel(bias) != C || bias->rank < 1 || bias->dims[bias->rank - 1] != C))
            return 0;
        if (bias && beta == 0.0)
            bias = NULL; /* beta*C contributes nothing */
    } else {
        /* MatMul: BN's channel axis is 1, the weight's columns only when x is 2-D */
        if (w->rank != 2 || w->dims[1] != C || oq_pass_value_rank(p->inputs[0]) != 2)
            return 0;
        M = C;
        inner = 1;
        outer = w->dims[0];
    }
    if (bias && (conv || convt) && (bias->rank != 1 || bias->dims[0] != C))
        return 0;

    double *wv = NULL, *bv = NULL, *nb = NULL;
    int64_t n;
    int rc = -1;
    if (oq_pass_tensor_to_double(w, &wv, &n, c->d) != OQ_OK)
        goto done;
    if (bias && oq_pass_tensor_to_double(bias, &bv, &n, c->d) != OQ_OK)
        goto done;
    if (convt) {
        int64_t group = oq_node_attr_int(p, "group", 1);
        int64_t cin = w->dims[0], cpg = w->dims[1];
        for (int64_t ic = 0; ic < cin; ic++)
            for (int64_t j = 0; j < cpg; j++) {
                int64_t oc = (ic / (cin / group)) * cpg + j;
                for (int64_t k = 0; k < inner; k++)
                    wv[(ic * cpg + j) * inner + k] *= a[oc];
            }
    } else {
        for (int64_t o = 0; o < outer; o++)
            for (int64_t m = 0; m < M; m++)
                for (int64_t k = 0; k < inner; k++)
                    wv[(o * M + m) * inner + k] *= a[m];
    }
    nb = malloc((size_t)(C ? C : 1) * sizeof(double));
    if (!nb)
        goto done;
    /* y = a*(z + bias) + b  ->  z' + (a*bias + b); Gemm: beta*C' = a*beta*C + b */
    for (int64_t m = 0; m < C; m++)
        nb[m] = (bv ? a[m] * bv[m] * (gemm ? beta : 1.0) : 0.0) + b[m];
    if (gemm) {
        for (int64_t m = 0; m < C; m++)
            nb[m] /= beta == 0.0 ? 1.0 : beta;
    }
    char base[256];
    snprintf(base, sizeof base, "%.200s_bnfold", p->inputs[1]->name);
    oq_value *old_w = p->inputs[1], *old_b = p->n_inputs >= 3 ? p->inputs[2] : NULL;
    oq_value *nw = oq_pass_new_initializer(g, base, w->dtype, w->dims, w->rank, wv);
    int64_t bdims[1] = {C};
    snprintf(base, sizeof base, "%.200s_bnfold_bias", p->outputs[0] ? p->outputs[0]->name : "b");
    int32_t bdt = bias ? bias->dtype : w->dtype;
    oq_value *nbv = oq_pass_new_initializer(g, base, bdt, bdims, 1, nb);
    if (!nw || !nbv) {
        oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    oq_value *x = bn->inputs[0], *y = bn->outputs[0];
    oq_value *bn_in[4] = {bn->inputs[1], bn->inputs[2], bn->inputs[3], bn->inputs[4]};
    oq_pass_remove_node(bn);
    for (int i = 0; i < 4; i++)
        oq_pass_drop_if_unused(bn_in[i]);
    oq_node_set_input(p, 1, nw);
    if (matmul) {
        /* MatMul has no bias: the output gets an Add */
        oq_value *mm = oq_graph_new_value(g, NULL);
        oq_value *ins[2] = {mm, nbv};
        oq_node *add = mm ? oq_node_new(g, "Add", NULL, NULL, ins, 2, &y, 1) : NULL;
        if (!add) {
            oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
            goto done;
        }
        char nm[256];
        snprintf(nm, sizeof nm, "%.200s_bnfold_add", bn->name ? bn->name : "bn");
        add->name = oq_graph_unique_name(g, nm);
        oq_node_set_output(p, 0, mm);
        oq_graph_insert_after(g, p, add);
    } else {
        oq_node_set_input(p, 2, nbv);
        if (gemm && beta == 0.0)
            oq_node_set_attr_float(p, "beta", 1.0f);
        oq_node_set_output(p, 0, y);
    }
    x->kind = OQ_VALUE_UNDEFINED;
    x->producer = NULL;
    oq_pass_drop_if_unused(old_w);
    oq_pass_drop_if_unused(old_b);
    rc = 1;
done:
    free(wv);
    free(bv);
    free(nb);
    return rc;
}

static int to_mul_add(ctx *c, oq_node *bn, const double *a, const double *b, int64_t C, int32_t dt)
{
    oq_graph *g = bn->graph;
    oq_value *x = bn->inputs[0], *y = bn->outputs[0];
    int64_t r = oq_pass_value_rank(x);
    if (r < 2 || r > 16) {
        oq_pass_stat_add(c->res, "skipped_unknown_rank", 1);
        return 0;
    }
    int32_t xt = oq_pass_value_elem_type(x);
    if (xt > 0 && float_type(xt))
        dt = xt;
    int64_t dims[16];
    dims[0] = C;
    for (int64_t i = 1; i < r - 1; i++)
        dims[i] = 1;
    const char *bname = bn->name && *bn->name ? bn->name : "bn";
    char base[256];
    snprintf(base, sizeof base, "%.200s_scale", bname);
    oq_value *av = oq_pass_new_initializer(g, base, dt, dims, (size_t)(r - 1), a);
    snprintf(base, sizeof base, "%.200s_shift", bname);
    oq_value *bv = oq_pass_new_initializer(g, base, dt, dims, (size_t)(r - 1), b);
    oq_value *mid = oq_graph_new_value(g, NULL);
    if (!av || !bv || !mid)
        return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory"), -1;
    oq_value *in1[2] = {x, av}, *in2[2] = {mid, bv};
    oq_value *old[4] = {bn->inputs[1], bn->inputs[2], bn->inputs[3], bn->inputs[4]};
    oq_node *mul = oq_node_new(g, "Mul", NULL, NULL, in1, 2, &mid, 1);
    oq_node *add = oq_node_new(g, "Add", NULL, NULL, in2, 2, &y, 1);
    if (!mul || !add)
        return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory"), -1;
    snprintf(base, sizeof base, "%.200s_mul", bname);
    mul->name = oq_graph_unique_name(g, base);
    snprintf(base, sizeof base, "%.200s_add", bname);
    add->name = oq_graph_unique_name(g, base);
    oq_node *pos = bn->next;
    oq_pass_remove_node(bn);
    oq_graph_insert_before(g, pos, mul);
    oq_graph_insert_before(g, pos, add);
    for (int i = 0; i < 4; i++)
        oq_pass_drop_if_unused(old[i]);
    return 1;
}

static oq_status run_graph(oq_graph *g, void *vc)
{
    ctx *c = vc;
    size_t errs0 = c->d ? c->d->errors : 0;
    for (oq_node *n = g->first; n;) {
        oq_node *next = n->next;
        if (!oq_pass_is_op(n, "BatchNormalization")) {
            n = next;
            continue;
        }
        double *a, *b;
        int64_t C;
        int32_t dt;
        if (!bn_coeffs(n, &a, &b, &C, &dt, c->d)) {
            if (c->d && c->d->errors > errs0)
                return OQ_ERR_INVALID;
            oq_pass_stat_add(c->res, "skipped_not_constant", 1);
            n = next;
            continue;
        }
        oq_value *x = n->inputs[0];
        int rc = 0;
        if (x && x->kind == OQ_VALUE_NODE && x->producer && x->producer->graph == g &&
            x->n_uses == 1 && !oq_value_is_graph_output(x) && x->producer_index == 0)
            rc = fold_into(c, n, x->producer, a, b, C);
        if (rc == 1) {
            oq_pass_stat_add(c->res, "folded", 1);
        } else if (rc == 0 && c->standalone) {
            rc = to_mul_add(c, n, a, b, C, dt);
            if (rc == 1)
                oq_pass_stat_add(c->res, "to_mul_add", 1);
        }
        free(a);
        free(b);
        if (rc < 0)
            return OQ_ERR_NOMEM;
        if (rc == 1)
            c->res->changed = true;
        n = next;
    }
    oq_pass_prune_value_info(g);
    return OQ_OK;
}

static oq_status run(oq_model *m, const oq_pass_options *o, oq_pass_result *res, oq_diag *d)
{
    ctx c = {res, d, oq_pass_opt_bool(o, "standalone", true)};
    return oq_pass_for_each_graph(m, run_graph, &c);
}

static const oq_pass_option_def options[] = {
    {"standalone", OQ_OPT_BOOL, "true",
     "rewrite a BN that cannot be folded into its producer as Mul + Add"},
};

const oq_pass oq_pass_fold_batchnorm = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "fold-batchnorm",
    .summary = "fold BatchNormalization into Conv/ConvTranspose/Gemm/MatMul weights (else Mul+Add)",
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .run = run,
};
