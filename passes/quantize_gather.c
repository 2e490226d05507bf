/* quantize-gather: int8 embedding tables. A Gather whose data (input 0) is a constant
 * float initializer of at least min-elements elements, gathered on axis 0 with computed
 * indices (the word embedding of a text encoder), reads an int8 table instead:
 *
 *   Gather(W_q [V, D...], ids) -> Cast(to=float) -> Mul(., Gather(W_scale [V, 1...], ids)) -> y
 *
 * one symmetric scale per row (max |row| / 127, zero point 0). Only the gathered rows are
 * converted, at run time, and the float table is gone from the file and from memory.
 * Measured in onnxruntime 1.30 (all-MiniLM-L6-v2, docs/passes/quantize-dynamic.md): per
 * row costs 3e-5 of embedding cosine where one scale for the table (onnxruntime's
 * quantize_dynamic: Gather on a uint8 table -> DequantizeLinear) costs 4e-4; a
 * DequantizeLinear of the whole table before the Gather (per row) is not constant-folded
 * by onnxruntime and dequantizes all of it on every run (1.4x the model's latency). The
 * pass `quantize-gather` (static mode, after insert-qdq) and quantize-dynamic's
 * `embedding-dtype` run the same code (oq_pass_quantize_gathers). */
#include "pass-impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gtable {
    oq_value *w;           /* the float table */
    oq_value *q, *scale;   /* its int8 copy and the per-row scales */
} gtable;

typedef struct gctx {
    const oq_gather_spec *s;
    oq_pass_result *res;
    oq_diag *d;
    gtable *t;
    size_t n_t, cap_t;
} gctx;

static char *gname(oq_graph *g, const char *base, const char *suffix)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%.400s%s", base, suffix);
    return oq_graph_unique_name(g, buf);
}

/* Gather n reads v as its table on axis 0 (rank >= 2). */
static bool table_gather(const oq_node *n, const oq_value *v, size_t rank)
{
    if (!oq_pass_is_op(n, "Gather") || n->n_inputs < 2 || n->inputs[0] != v || n->inputs[1] == v || !n->inputs[1] ||
        n->n_outputs < 1 || !n->outputs[0])
        return false;
    int64_t axis = oq_node_attr_int(n, "axis", 0);
    return axis == 0 || axis == -(int64_t)rank;
}

/* The int8 copy of table w, made the first time (NULL + *why when it stays float). */
static gtable *table_of(gctx *c, oq_value *w, const char **why, oq_status *st)
{
    *st = OQ_OK;
    for (size_t i = 0; i < c->n_t; i++)
        if (c->t[i].w == w)
            return &c->t[i];
    oq_tensor *t = w->initializer;
    /* every use a Gather on axis 0 (else the float table stays for the others), not an
     * output of its graph */
    if (oq_pass_value_refs(w) != w->n_uses) {
        *why = "gathers_skipped_shared_table";
        return NULL;
    }
    for (size_t i = 0; i < w->n_uses; i++)
        if (w->uses[i].index != 0 || !table_gather(w->uses[i].node, w, t->rank)) {
            *why = "gathers_skipped_shared_table";
            return NULL;
        }
    const float *src = oq_tensor_data(t, c->d);
    if (!src) {
        *st = OQ_ERR_INVALID;
        return NULL;
    }
    int64_t rows = t->dims[0], numel = oq_tensor_numel(t);
    for (int64_t i = 0; i < numel; i++)
        if (!isfinite(src[i])) {
            *why = "gathers_skipped_not_finite";
            return NULL;
        }
    /* one symmetric int8 scale per row: the weight quantizer, per channel on axis 0 */
    oq_weight_spec spec;
    oq_weight_spec_default(&spec);
    int8_t *q = malloc((size_t)numel);
    float *sc = malloc((size_t)rows * sizeof(float));
    int32_t *zp = malloc((size_t)rows * sizeof(int32_t));
    if (!q || !sc || !zp) {
        free(q);
        free(sc);
        free(zp);
        *st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        return NULL;
    }
    *st = oq_quantize_weight(src, t->dims, t->rank, &spec, sc, zp, q, w->name, c->d);
    free(zp);
    if (*st != OQ_OK) {
        free(q);
        free(sc);
        return NULL;
    }
    int64_t sdims[OQ_RT_MAX_RANK];
    sdims[0] = rows;
    for (size_t i = 1; i < t->rank; i++)
        sdims[i] = 1;
    oq_graph *g = w->graph;
    char *nq = gname(g, w->name, "_quantized");
    oq_value *vq = nq ? oq_graph_add_initializer(g, nq, OQ_DTYPE_INT8, t->dims, t->rank, q, numel) : NULL;
    char *ns = vq ? gname(g, w->name, "_scale") : NULL;
    oq_value *vs = ns ? oq_graph_add_initializer(g, ns, OQ_DTYPE_FLOAT, sdims, t->rank, sc, rows * 4) : NULL;
    free(q);
    free(sc);
    if (!vs) {
        *st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (c->n_t == c->cap_t) {
        size_t cap = c->cap_t ? 2 * c->cap_t : 8;
        gtable *p = realloc(c->t, cap * sizeof *p);
        if (!p) {
            *st = oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
            return NULL;
        }
        c->t = p;
        c->cap_t = cap;
    }
    gtable *e = &c->t[c->n_t++];
    e->w = w;
    e->q = vq;
    e->scale = vs;
    oq_pass_stat_add(c->res, "tables_quantized", 1);
    oq_pass_stat_add(c->res, "table_bytes_saved", numel * 3 - rows * 4);
    return e;
}

static oq_node *emit(oq_graph *g, oq_node *pos, const char *op, const char *base, const char *suffix,
                     oq_value *const *in, size_t nin, oq_value *const *out, size_t nout)
{
    char *nm = gname(g, base, suffix);
    oq_node *n = nm ? oq_node_new(g, op, "", nm, in, nin, out, nout) : NULL;
    if (n)
        oq_graph_insert_before(g, pos, n);
    return n;
}

static oq_status on_graph(oq_graph *g, void *ctx)
{
    gctx *c = ctx;
    oq_node *next;
    for (oq_node *n = g->first; n; n = next) {
        next = n->next;
        if (!oq_domain_is_default(n->domain) || !oq_pass_is_op(n, "Gather") || n->n_inputs < 2 || !n->inputs[0] ||
            !n->inputs[1] || n->n_outputs < 1 || !n->outputs[0])
            continue;
        oq_value *w = n->inputs[0], *ids = n->inputs[1], *y = n->outputs[0];
        oq_tensor *t = w->kind == OQ_VALUE_INITIALIZER && !w->is_graph_input ? w->initializer : NULL;
        if (!t || t->dtype != OQ_DTYPE_FLOAT || oq_tensor_numel(t) < c->s->min_elements || !oq_pass_node_name_selected(n, c->s->inc, c->s->exc))
            continue;
        oq_pass_stat_add(c->res, "gathers_seen", 1);
        if (t->rank < 2 || t->rank > OQ_RT_MAX_RANK || t->dims[0] <= 0 || !table_gather(n, w, t->rank)) {
            oq_pass_stat_add(c->res, "gathers_skipped_shape", 1);
            continue;
        }
        if (oq_value_const_tensor(ids)) { /* a constant expression: fold-constants' business */
            oq_pass_stat_add(c->res, "gathers_skipped_constant_indices", 1);
            continue;
        }
        const char *why = NULL;
        oq_status st;
        gtable *e = table_of(c, w, &why, &st);
        if (st != OQ_OK)
            return st;
        if (!e) {
            oq_pass_stat_add(c->res, why, 1);
            continue;
        }
        const char *base = n->name && *n->name ? n->name : y->name;
        char *n1 = gname(g, y->name, "_quantized"), *n2 = n1 ? gname(g, y->name, "_row_scale") : NULL;
        oq_value *gq = n1 ? oq_graph_new_value(g, n1) : NULL;
        oq_value *gs = gq && n2 ? oq_graph_new_value(g, n2) : NULL;
        char *n3 = gs ? gname(g, y->name, "_int8_float") : NULL;
        oq_value *gf = n3 ? oq_graph_new_value(g, n3) : NULL;
        oq_node *a = gf ? emit(g, n, "Gather", base, "_quantized", (oq_value *[]){e->q, ids}, 2, &gq, 1) : NULL;
        oq_node *b = a ? emit(g, n, "Gather", base, "_scale", (oq_value *[]){e->scale, ids}, 2, &gs, 1) : NULL;
        oq_node *cc = b ? emit(g, n, "Cast", base, "_Cast", &gq, 1, &gf, 1) : NULL;
        oq_node *mm = cc ? emit(g, n, "Mul", base, "_Mul", (oq_value *[]){gf, gs}, 2, NULL, 0) : NULL;
        if (!mm)
            return oq_diag_error(c->d, OQ_ERR_NOMEM, "out of memory");
        oq_node_set_attr_int(cc, "to", OQ_DTYPE_FLOAT);
        oq_pass_remove_node(n);
        if ((st = oq_node_set_output(mm, 0, y)) != OQ_OK)
            return oq_diag_error(c->d, st, "out of memory");
        oq_pass_drop_if_unused(w);
        oq_pass_stat_add(c->res, "gathers_quantized", 1);
        c->res->changed = true;
    }
    return OQ_OK;
}

oq_status oq_pass_quantize_gathers(oq_model *m, const oq_gather_spec *s, oq_pass_result *res, oq_diag *d)
{
    gctx c;
    memset(&c, 0, sizeof c);
    c.s = s;
    c.res = res;
    c.d = d;
    oq_status st = oq_pass_for_each_graph(m, on_graph, &c);
    free(c.t);
    return st;
}

/* dtype option: "int8" (quantize) or "float" (leave the tables); *on out. */
oq_status oq_pass_gather_dtype(const char *who, const char *opt, const char *v, bool *on, oq_diag *d)
{
    if (strcmp(v, "int8") == 0 || strcmp(v, "float") == 0) {
        *on = v[0] == 'i';
        return OQ_OK;
    }
    return oq_diag_error(d, OQ_ERR_USAGE, "%s: %s \"%s\": int8 or float", who, opt, v);
}

static oq_status run(oq_model *m, const oq_pass_options *opts, oq_pass_result *res, oq_diag *d)
{
    bool on = true;
    oq_status st = oq_pass_gather_dtype("quantize-gather", "dtype", oq_pass_opt_string(opts, "dtype", "int8"), &on, d);
    if (st != OQ_OK)
        return st;
    oq_gather_spec s = {.min_elements = oq_pass_opt_int(opts, "min-elements", OQ_GATHER_MIN_ELEMENTS)};
    regex_t inc, exc;
    bool has_inc = false, has_exc = false;
    st = oq_pass_compile_regex("quantize-gather", "include-nodes", oq_pass_opt_string(opts, "include-nodes", ""), &inc,
                               &has_inc, d);
    if (st == OQ_OK)
        st = oq_pass_compile_regex("quantize-gather", "exclude-nodes", oq_pass_opt_string(opts, "exclude-nodes", ""),
                                   &exc, &has_exc, d);
    s.inc = has_inc ? &inc : NULL;
    s.exc = has_exc ? &exc : NULL;
    if (st == OQ_OK && on) {
        oq_pass_stat_add(res, "gathers_quantized", 0); /* present even when 0 */
        st = oq_pass_quantize_gathers(m, &s, res, d);
    }
    if (has_inc)
        regfree(&inc);
    if (has_exc)
        regfree(&exc);
    return st;
}

static const oq_pass_option_def options[] = {
    {"dtype", OQ_OPT_STRING, "int8", "int8 (one symmetric scale per row) or float (leave the tables)"},
    {"min-elements", OQ_OPT_INT, "16384", "only tables of at least this many elements"},
    OQ_PASS_NODE_FILTER_OPTIONS,
};

const oq_pass oq_pass_quantize_gather = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "quantize-gather",
    .summary = "int8 embedding tables: Gather of a large constant float table -> Gather of an int8 table, Cast, Mul "
               "by the gathered row scales",
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .run = run,
};
