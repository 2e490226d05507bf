/* quantize-dynamic: dynamic quantization (no calibration). Each selected MatMul, Gemm
 * (and, when asked for, Conv) whose weight is a float initializer becomes the chain that
 * onnxruntime's graph optimizer fuses (matmul_integer_to_float.cc, then
 * dynamic_quantize_matmul_fusion.cc):
 *
 *   x -> DynamicQuantizeLinear -> (x_q, x_scale, x_zp)
 *   MatMulInteger(x_q, W_q, x_zp, W_zp) -> Cast(to=float) -> Mul(., Mul(x_scale, W_scale))
 *     [-> Add(., bias)]
 *
 * into one DynamicQuantizeMatMul (Conv: ConvInteger, which onnxruntime runs unfused).
 * The order of the operands is the one the fusion reads: the scale Mul is
 * Mul(x_scale, W_scale), the bias is input 1 of the Add and a constant. One
 * DynamicQuantizeLinear per activation tensor: where it feeds one node onnxruntime makes
 * a DynamicQuantizeMatMul, where it feeds several (q, k, v projections) one
 * DynamicQuantizeLinear and a MatMulIntegerToFloat each (its common subexpression
 * elimination would merge one DynamicQuantizeLinear per node back into one anyway).
 * Weights are quantized offline with the weight code the
 * static path uses (oq_quantize_weight): per output column (MatMul, Gemm) or per output
 * channel (Conv), symmetric by default; Gemm's transB is applied to the quantized weight,
 * alpha is folded into it and beta into the bias. Then (embedding-dtype=int8) the Gathers
 * of large constant tables read an int8 table (passes/quantize_gather.c).
 * docs/passes/quantize-dynamic.md. */
#include "pass-impl.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { K_MATMUL, K_GEMM, K_CONV } dkind;

typedef struct dql_out {
    const oq_value *x;          /* the float activation */
    oq_value *q, *scale, *zp;   /* its DynamicQuantizeLinear's outputs */
} dql_out;

typedef struct dctx {
    dql_out *dq;                /* one DynamicQuantizeLinear per activation */
    size_t n_dq, cap_dq;
    oq_model *m;
    oq_diag *d;
    oq_pass_result *res;
    int32_t w_dtype;
    bool w_sym, per_channel, reduce_range, pair_limit;
    const char *op_types;
    regex_t inc, exc;
    bool has_inc, has_exc;
} dctx;

static bool type_listed(const char *list, const char *op)
{
    size_t n = strlen(op);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, op, n) == 0)
            return true;
        p += len + (e != NULL);
    }
    return false;
}

static bool float_initializer(const oq_value *v)
{
    return v && v->kind == OQ_VALUE_INITIALIZER && !v->is_graph_input && v->initializer &&
           v->initializer->dtype == OQ_DTYPE_FLOAT;
}

/* A name for a new value or node: base + suffix, unique in g. */
static char *uname(oq_graph *g, const char *base, const char *suffix)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%.400s%s", base, suffix);
    return oq_graph_unique_name(g, buf);
}

static oq_value *new_value(oq_graph *g, const char *base, const char *suffix)
{
    char *nm = uname(g, base, suffix);
    return nm ? oq_graph_new_value(g, nm) : NULL;
}

static oq_value *new_init(oq_graph *g, const char *base, const char *suffix, int32_t dtype, const int64_t *dims,
                          size_t rank, const void *data, int64_t nbytes)
{
    char *nm = uname(g, base, suffix);
    return nm ? oq_graph_add_initializer(g, nm, dtype, dims, rank, data, nbytes) : NULL;
}

/* Insert op(in) -> out before pos; NULL when out of memory. */
static oq_node *emit(oq_graph *g, oq_node *pos, const char *op, const char *base, const char *suffix,
                     oq_value *const *in, size_t nin, oq_value *const *out, size_t nout)
{
    char *nm = uname(g, base, suffix);
    oq_node *n = nm ? oq_node_new(g, op, "", nm, in, nin, out, nout) : NULL;
    if (n)
        oq_graph_insert_before(g, pos, n);
    return n;
}

/* The bias input as the Add wants it (constant: a new initializer unless it can be used
 * as it is), or NULL with *skip set when the node must stay float. */
static oq_value *bias_of(dctx *c, oq_graph *g, oq_node *n, dkind k, const char *base, bool *skip)
{
    *skip = false;
    oq_value *b = n->n_inputs > 2 ? n->inputs[2] : NULL;
    if (!b)
        return NULL;
    float beta = k == K_GEMM ? oq_node_attr_float(n, "beta", 1.0f) : 1.0f;
    if (beta == 0.0f)
        return NULL;
    oq_tensor *t = oq_value_const_tensor(b);
    if (!t) { /* a computed bias: Add it as it is (Gemm beta 1) */
        *skip = beta != 1.0f;
        return *skip ? NULL : b;
    }
    if (t->dtype != OQ_DTYPE_FLOAT) {
        *skip = true;
        return NULL;
    }
    int64_t nb = oq_tensor_numel(t);
    if (k == K_CONV && (t->rank != 1 || nb < 1)) {
        *skip = true;
        return NULL;
    }
    if (k != K_CONV && beta == 1.0f)
        return b;
    const float *src = oq_tensor_data(t, c->d);
    float *v = src ? malloc((size_t)(nb ? nb : 1) * sizeof(float)) : NULL;
    if (!v)
        return NULL;
    for (int64_t i = 0; i < nb; i++)
        v[i] = beta * src[i];
    int64_t dims[OQ_RT_MAX_RANK];
    size_t rank = t->rank;
    memcpy(dims, t->dims, rank * sizeof(int64_t));
    if (k == K_CONV) { /* [M] -> [M, 1, ...]: broadcast over the output's spatial axes */
        const oq_tensor *w = oq_value_const_tensor(n->inputs[1]);
        rank = w->rank - 1;
        for (size_t i = 1; i < rank; i++)
            dims[i] = 1;
    }
    oq_value *out = new_init(g, base, "_bias", OQ_DTYPE_FLOAT, dims, rank, v, nb * 4);
    free(v);
    return out;
}

/* The DynamicQuantizeLinear of activation x (made before n the first time), or NULL when
 * out of memory. */
static dql_out *dql_of(dctx *c, oq_graph *g, oq_node *n, oq_value *x)
{
    for (size_t i = 0; i < c->n_dq; i++)
        if (c->dq[i].x == x && c->dq[i].q->graph == g)
            return &c->dq[i];
    if (c->n_dq == c->cap_dq) {
        size_t cap = c->cap_dq ? 2 * c->cap_dq : 16;
        dql_out *p = realloc(c->dq, cap * sizeof *p);
        if (!p)
            return NULL;
        c->dq = p;
        c->cap_dq = cap;
    }
    dql_out *r = &c->dq[c->n_dq];
    r->x = x;
    r->q = new_value(g, x->name, "_quantized");
    r->scale = r->q ? new_value(g, x->name, "_scale") : NULL;
    r->zp = r->scale ? new_value(g, x->name, "_zero_point") : NULL;
    if (!r->zp || !emit(g, n, "DynamicQuantizeLinear", x->name, "_DynamicQuantizeLinear", &x, 1,
                        (oq_value *[]){r->q, r->scale, r->zp}, 3))
        return NULL;
    c->n_dq++;
    return r;
}

/* Rewrite node n; *done false when it stays float (reason counted in the statistics). */
static oq_status convert(dctx *c, oq_graph *g, oq_node *n, dkind k, bool *done)
{
    *done = false;
    oq_value *x = n->inputs[0], *wv = n->inputs[1], *y = n->outputs[0];
    oq_tensor *t = wv->initializer;
    size_t rank = t->rank;
    int32_t xt = oq_pass_value_elem_type(x);
    if ((xt > 0 && xt != OQ_DTYPE_FLOAT) || oq_tensor_numel(t) <= 0 || rank > OQ_RT_MAX_RANK ||
        (k == K_MATMUL && rank < 2) || (k == K_GEMM && rank != 2) || (k == K_CONV && rank < 3) ||
        (k == K_GEMM && oq_node_attr_int(n, "transA", 0) != 0)) {
        oq_pass_stat_add(c->res, "nodes_skipped_shape", 1);
        return OQ_OK;
    }
    char lb[128];
    const char *base = n->name && *n->name ? n->name : y->name;
    bool skip = false;
    oq_value *bias = bias_of(c, g, n, k, base, &skip);
    if (skip) {
        oq_pass_stat_add(c->res, "nodes_skipped_bias", 1);
        return OQ_OK;
    }
    if (n->n_inputs > 2 && n->inputs[2] && !bias && !(k == K_GEMM && oq_node_attr_float(n, "beta", 1.0f) == 0.0f))
        return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");

    const float *w = oq_tensor_data(t, c->d);
    if (!w)
        return OQ_ERR_INVALID;
    int64_t numel = oq_tensor_numel(t);
    float alpha = k == K_GEMM ? oq_node_attr_float(n, "alpha", 1.0f) : 1.0f;
    int ch_axis = oq_weight_channel_axis(n, 1, rank);
    oq_weight_spec s;
    oq_weight_spec_default(&s);
    s.dtype = c->w_dtype;
    /* the pair limit follows MatMul's K order; ConvInteger reduces in another order, so its
     * weights go to uint8 with zero point 128 (U8U8 cannot saturate) */
    bool conv_u8 = c->pair_limit && k == K_CONV && s.dtype == OQ_DTYPE_INT8 && c->w_sym && !c->reduce_range;
    if (conv_u8)
        s.dtype = OQ_DTYPE_UINT8;
    s.symmetric = c->w_sym;
    s.reduce_range = c->reduce_range;
    /* per column needs a 2-D weight (onnxruntime's MatMulInteger zero points); ConvInteger
     * takes one weight zero point: per channel only with symmetric weights */
    s.per_channel = c->per_channel && ch_axis >= 0 && (k != K_MATMUL || rank == 2) && (k != K_CONV || c->w_sym);
    s.axis = s.per_channel ? ch_axis : 0;
    int64_t pdims[OQ_RT_MAX_RANK];
    size_t prank = 0;
    int64_t np = oq_weight_param_shape(t->dims, rank, &s, pdims, &prank, c->d);
    if (np <= 0)
        return oq_diag_error(c->d, OQ_ERR_INVALID, "weight \"%s\": bad shape", wv->name);
    float *wa = malloc((size_t)numel * sizeof(float));
    float *scales = malloc((size_t)np * sizeof(float));
    int32_t *zps = malloc((size_t)np * sizeof(int32_t));
    uint8_t *q = malloc((size_t)numel), *qt = k == K_GEMM ? malloc((size_t)numel) : NULL;
    oq_status st = OQ_OK;
    if (!wa || !scales || !zps || !q || (k == K_GEMM && !qt)) {
        st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < numel; i++)
        wa[i] = alpha * w[i];
    char what[300];
    snprintf(what, sizeof what, "weight \"%s\" of node \"%s\"", wv->name, oq_node_label(n, lb, sizeof lb));
    st = oq_quantize_weight(wa, t->dims, rank, &s, scales, zps, q, what, c->d);
    if (st != OQ_OK)
        goto done;
    if (conv_u8)
        oq_pass_stat_add(c->res, "pair_limit_conv_uint8", 1);
    if (c->pair_limit && s.dtype == OQ_DTYPE_INT8 && s.symmetric && !s.reduce_range) {
        int64_t fixed = 0;
        int64_t raised = oq_pass_limit_weight_pairs(n, t->dims, rank, (int8_t *)q, wa, scales, np,
                                                    s.per_channel ? s.axis : -1, &fixed);
        if (raised < 0) {
            st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
            goto done;
        }
        oq_pass_stat_add(c->res, "pair_limit_channels_raised", raised);
        oq_pass_stat_add(c->res, "pair_limit_steps_removed", fixed);
    }
    int64_t qdims[OQ_RT_MAX_RANK];
    memcpy(qdims, t->dims, rank * sizeof(int64_t));
    const uint8_t *qdata = q;
    if (k == K_GEMM && oq_node_attr_int(n, "transB", 0)) { /* [N, K] -> [K, N] */
        int64_t N = t->dims[0], K = t->dims[1];
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < K; j++)
                qt[j * N + i] = q[i * K + j];
        qdims[0] = K;
        qdims[1] = N;
        qdata = qt;
    }
    /* the weight's parameters in the shapes the integer op and the output Mul need */
    bool one_zp = true;
    for (int64_t i = 1; i < np; i++)
        one_zp = one_zp && zps[i] == zps[0];
    int64_t sdims[OQ_RT_MAX_RANK];
    size_t srank = prank;
    memcpy(sdims, pdims, prank * sizeof(int64_t));
    if (k == K_CONV && np > 1) { /* [M] -> [M, 1, ...] against the output [N, M, spatial...] */
        srank = rank - 1;
        for (size_t i = 1; i < srank; i++)
            sdims[i] = 1;
    }
    uint8_t zpb[OQ_RT_MAX_RANK];
    uint8_t *zpv = one_zp ? zpb : malloc((size_t)np);
    if (!zpv) {
        st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    st = oq_pack_ints(s.dtype, zps, one_zp ? 1 : np, zpv, c->d);
    const char *wbase = oq_model_strdup(c->m, wv->name);
    oq_value *wq = st == OQ_OK ? new_init(g, wbase, "_quantized", s.dtype, qdims, rank, qdata, numel) : NULL;
    oq_value *ws = wq ? new_init(g, wbase, "_scale", OQ_DTYPE_FLOAT, sdims, srank, scales, np * 4) : NULL;
    oq_value *wz = ws ? new_init(g, wbase, "_zero_point", s.dtype, pdims, one_zp ? 0 : prank, zpv, one_zp ? 1 : np)
                      : NULL;
    if (!one_zp)
        free(zpv);
    if (st != OQ_OK)
        goto done;
    /* the chain, inserted before n; n's output is kept (its consumers and graph outputs) */
    dql_out *dq = dql_of(c, g, n, x);
    oq_value *xq = dq ? dq->q : NULL, *xs = dq ? dq->scale : NULL, *xz = dq ? dq->zp : NULL;
    oq_value *acc = new_value(g, base, "_int32");
    oq_value *accf = new_value(g, base, "_int32_float"), *sc = new_value(g, base, "_output_scale");
    oq_value *pre = bias ? new_value(g, base, "_unbiased") : NULL;
    if (!wz || !xq || !xs || !xz || !acc || !accf || !sc || (bias && !pre)) {
        st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    oq_node *ni = emit(g, n, k == K_CONV ? "ConvInteger" : "MatMulInteger", base,
                       k == K_CONV ? "_ConvInteger" : "_MatMulInteger", (oq_value *[]){xq, wq, xz, wz}, 4, &acc, 1);
    oq_node *nc = ni ? emit(g, n, "Cast", base, "_Cast", &acc, 1, &accf, 1) : NULL;
    oq_node *ns = nc ? emit(g, n, "Mul", base, "_scale_Mul", (oq_value *[]){xs, ws}, 2, &sc, 1) : NULL;
    oq_node *nm = ns ? emit(g, n, "Mul", base, "_Mul", (oq_value *[]){accf, sc}, 2, NULL, 0) : NULL;
    oq_node *na = nm && bias ? emit(g, n, "Add", base, "_Add", (oq_value *[]){pre, bias}, 2, NULL, 0) : NULL;
    if (!nm || (bias && !na)) {
        st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    oq_node_set_attr_int(nc, "to", OQ_DTYPE_FLOAT);
    if (k == K_CONV) { /* ConvInteger takes Conv's attributes */
        ni->attrs = n->attrs;
        ni->n_attrs = n->n_attrs;
        n->attrs = NULL;
        n->n_attrs = 0;
    }
    oq_value *old_b = n->n_inputs > 2 ? n->inputs[2] : NULL;
    oq_pass_remove_node(n);
    if ((st = oq_node_set_output(nm, 0, bias ? pre : y)) != OQ_OK ||
        (bias && (st = oq_node_set_output(na, 0, y)) != OQ_OK)) {
        oq_diag_error(c->d, st, "out of memory");
        goto done;
    }
    oq_pass_drop_if_unused(wv);
    if (old_b)
        oq_pass_drop_if_unused(old_b);
    oq_pass_stat_add(c->res, "nodes_quantized", 1);
    *done = true;
done:
    free(wa);
    free(scales);
    free(zps);
    free(q);
    free(qt);
    return st;
}

static oq_status on_graph(oq_graph *g, void *ctx)
{
    dctx *c = ctx;
    oq_node *next;
    for (oq_node *n = g->first; n; n = next) {
        next = n->next;
        dkind k;
        if (!oq_domain_is_default(n->domain) || !n->op_type || !type_listed(c->op_types, n->op_type))
            continue;
        if (oq_pass_is_op(n, "MatMul"))
            k = K_MATMUL;
        else if (oq_pass_is_op(n, "Gemm"))
            k = K_GEMM;
        else if (oq_pass_is_op(n, "Conv"))
            k = K_CONV;
        else
            continue;
        if (!oq_pass_node_name_selected(n, c->has_inc ? &c->inc : NULL, c->has_exc ? &c->exc : NULL))
            continue;
        oq_pass_stat_add(c->res, "nodes_seen", 1);
        if (n->n_inputs < 2 || !n->inputs[0] || !n->inputs[1] || n->n_outputs < 1 || !n->outputs[0] ||
            !float_initializer(n->inputs[1])) {
            oq_pass_stat_add(c->res, "nodes_skipped_weight_not_constant", 1);
            continue;
        }
        bool done = false;
        oq_status st = convert(c, g, n, k, &done);
        if (st != OQ_OK)
            return st;
        c->res->changed = c->res->changed || done;
    }
    return OQ_OK;
}

static oq_status compile_re(dctx *c, const char *pat, regex_t *re, bool *has, const char *opt)
{
    return oq_pass_compile_regex("quantize-dynamic", opt, pat, re, has, c->d);
}

static oq_status run(oq_model *m, const oq_pass_options *opts, oq_pass_result *res, oq_diag *d)
{
    dctx c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.d = d;
    c.res = res;
    const char *wdt = oq_pass_opt_string(opts, "weight-dtype", "uint8");
    c.w_dtype = strcmp(wdt, "uint8") == 0 ? OQ_DTYPE_UINT8 : strcmp(wdt, "int8") == 0 ? OQ_DTYPE_INT8 : 0;
    if (!c.w_dtype)
        return oq_diag_error(d, OQ_ERR_USAGE,
                             "quantize-dynamic: weight-dtype \"%s\": uint8 or int8 (the integer ops take 8-bit weights)",
                             wdt);
    c.w_sym = oq_pass_opt_bool(opts, "weight-symmetric", true);
    c.per_channel = oq_pass_opt_bool(opts, "per-channel", true);
    c.reduce_range = oq_pass_opt_bool(opts, "reduce-range", false);
    c.pair_limit = oq_pass_opt_bool(opts, "pair-limit", false);
    c.op_types = oq_pass_opt_string(opts, "op-types", "MatMul,Gemm");
    int64_t opset = oq_model_opset(m, "");
    if (opset < 11)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED,
                             "quantize-dynamic: model opset %lld; DynamicQuantizeLinear needs 11 (run upgrade-opset{to=13} "
                             "first)",
                             (long long)opset);
    oq_status st = compile_re(&c, oq_pass_opt_string(opts, "include-nodes", ""), &c.inc, &c.has_inc, "include-nodes");
    if (st == OQ_OK)
        st = compile_re(&c, oq_pass_opt_string(opts, "exclude-nodes", ""), &c.exc, &c.has_exc, "exclude-nodes");
    bool emb = true;
    if (st == OQ_OK)
        st = oq_pass_gather_dtype("quantize-dynamic", "embedding-dtype",
                                  oq_pass_opt_string(opts, "embedding-dtype", "int8"), &emb, d);
    if (st == OQ_OK) {
        oq_pass_stat_add(res, "nodes_quantized", 0); /* present even when 0 */
        st = oq_pass_for_each_graph(m, on_graph, &c);
    }
    /* embedding tables after the MatMuls: a table a MatMul also reads has its own copy by
     * now (passes/quantize_gather.c) */
    if (st == OQ_OK && emb) {
        oq_gather_spec gs = {.min_elements = oq_pass_opt_int(opts, "embedding-min-elements", OQ_GATHER_MIN_ELEMENTS),
                             .inc = c.has_inc ? &c.inc : NULL,
                             .exc = c.has_exc ? &c.exc : NULL};
        st = oq_pass_quantize_gathers(m, &gs, res, d);
    }
    free(c.dq);
    if (c.has_inc)
        regfree(&c.inc);
    if (c.has_exc)
        regfree(&c.exc);
    return st;
}

static const oq_pass_option_def options[] = {
    {"weight-dtype", OQ_OPT_STRING, "uint8",
     "uint8 (zero point 128 when symmetric: U8U8, cannot saturate on AVX2) or int8 (U8S8: fastest with VNNI)"},
    {"weight-symmetric", OQ_OPT_BOOL, "true", "symmetric weights"},
    {"per-channel", OQ_OPT_BOOL, "true", "one weight scale per output column (MatMul, Gemm) or channel (Conv)"},
    {"reduce-range", OQ_OPT_BOOL, "false", "7-bit weights, as onnxruntime's reduce_range"},
    OQ_PASS_PAIR_LIMIT_OPTION,
    {"op-types", OQ_OPT_STRING, "MatMul,Gemm", "op types to quantize: MatMul, Gemm, Conv (ConvInteger: slow in onnxruntime)"},
    {"embedding-dtype", OQ_OPT_STRING, "int8",
     "int8: Gather of a large constant table (embeddings) reads an int8 table with a scale per row; float: leave it"},
    {"embedding-min-elements", OQ_OPT_INT, "16384", "embedding-dtype=int8: only tables of at least this many elements"},
    OQ_PASS_NODE_FILTER_OPTIONS,
};

const oq_pass oq_pass_quantize_dynamic = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "quantize-dynamic",
    .summary = "dynamic quantization: MatMul/Gemm with constant weights -> DynamicQuantizeLinear + MatMulInteger "
               "(the chain onnxruntime fuses into DynamicQuantizeMatMul)",
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .run = run,
};
