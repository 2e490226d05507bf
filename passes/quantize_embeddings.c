/* quantize-embeddings: block-quantized embedding tables for weight-only models (decoder
 * LMs). A Gather on axis 0 of a constant 2-D float32/float16/bfloat16 table E [V, H] of
 * at least min-elements elements becomes
 *
 *   com.microsoft GatherBlockQuantized(Eq uint8, ids, scales [V, H/block]; bits, block_size,
 *                                      gather_axis=0, quantize_axis=1)
 *
 * symmetric round to nearest in blocks of H (the same rule as quantize-weights, one scale
 * per row and block, of the table's type), stored unsigned: q + 2^(bits-1), onnxruntime's
 * default zero point for uint8 data; int4 packs two values per byte, low nibble first.
 * A tied LM head, MatMul(x, Transpose(E, perm=[1,0])), becomes MatMulNBits(x, Eq as
 * [V, H/block, block*bits/8], scales [V*H/block]) from the same quantized values: E's rows
 * are MatMulNBits' output columns and its blocks run along K = H, so the bytes are the
 * same; onnxruntime 1.30 wants B 3-D and scales 1-D or 2-D there, and data and scales of
 * GatherBlockQuantized of the same rank, so the file holds the bytes twice (two views,
 * each 1/4 (int4) of a float16 table). docs/passes/quantize-embeddings.md. */
#include "pass-impl.h"

#include <inttypes.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnxq/gptq.h"

#define WHO "quantize-embeddings"

typedef struct qe_cfg {
    oq_wq_spec spec;
    int64_t min_elements;
    bool tied;
    int64_t accuracy_level;
    regex_t inc, exc;
    bool has_inc, has_exc;
} qe_cfg;

static bool table_dtype(int32_t dt)
{
    return dt == OQ_DTYPE_FLOAT || dt == OQ_DTYPE_FLOAT16 || dt == OQ_DTYPE_BFLOAT16;
}

/* The tied LM heads of table e: MatMul(x, Transpose(e, perm=[1,0])) as B. */
static bool is_tied_head(const oq_node *tr, const oq_value *e, oq_node **mm)
{
    *mm = NULL;
    if (!oq_pass_is_op(tr, "Transpose") || tr->n_inputs < 1 || tr->inputs[0] != e || tr->n_outputs < 1 || !tr->outputs[0])
        return false;
    const int64_t *perm = NULL;
    if (oq_node_attr_ints(tr, "perm", &perm) != 2 || perm[0] != 1 || perm[1] != 0)
        return false;
    const oq_value *y = tr->outputs[0];
    if (y->n_uses != 1 || oq_value_is_graph_output(y))
        return false;
    oq_node *n = y->uses[0].node;
    if (!oq_pass_is_op(n, "MatMul") || y->uses[0].index != 1)
        return false;
    *mm = n;
    return true;
}

/* Quantize E [V, H] (rows of V, blocks along H): packed bytes [V, H*bits/8] and scales
 * [V, nb] as floats. */
static oq_status quantize_table(oq_tensor *et, const qe_cfg *c, uint8_t **packed, float **scales, oq_diag *d)
{
    int64_t V = et->dims[0], H = et->dims[1], B = c->spec.block, nb = H / B;
    int bits = c->spec.dtype == OQ_DTYPE_INT4 ? 4 : 8;
    const void *src = oq_tensor_data(et, d);
    if (!src)
        return OQ_ERR_INVALID;
    /* oq_wq_rtn wants W [K, N] with blocks along K: K = H, N = V */
    float *w = malloc((size_t)(V * H) * sizeof(float));
    int32_t *q = malloc((size_t)(V * H) * sizeof(int32_t)), *zp = malloc((size_t)(nb * V) * sizeof(int32_t));
    float *s = malloc((size_t)(nb * V) * sizeof(float)), *sv = malloc((size_t)(nb * V) * sizeof(float));
    uint8_t *pk = calloc((size_t)(V * H * bits / 8), 1);
    oq_status st = OQ_OK;
    if (!w || !q || !zp || !s || !sv || !pk) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, WHO ": table \"%s\": out of memory", et->name);
        goto done;
    }
    const float *f = src;
    const uint16_t *h16 = src;
    for (int64_t v = 0; v < V; v++)
        for (int64_t k = 0; k < H; k++) {
            int64_t i = v * H + k;
            w[k * V + v] = et->dtype == OQ_DTYPE_FLOAT16    ? oq_half_to_float(h16[i])
                           : et->dtype == OQ_DTYPE_BFLOAT16 ? oq_bfloat16_to_float(h16[i])
                                                            : f[i];
        }
    oq_tensor_release(et);
    oq_wq_spec spec = c->spec;
    spec.half_scales = et->dtype == OQ_DTYPE_FLOAT16;
    st = oq_wq_rtn(w, H, V, &spec, q, s, zp, d);
    if (st != OQ_OK)
        goto done;
    int32_t off = 1 << (bits - 1);
    for (int64_t v = 0; v < V; v++) {
        for (int64_t b = 0; b < nb; b++)
            sv[v * nb + b] = s[b * V + v];
        uint8_t *row = pk + v * (H * bits / 8);
        for (int64_t k = 0; k < H; k++) {
            int32_t u = q[k * V + v] + off;
            if (bits == 8)
                row[k] = (uint8_t)u;
            else
                row[k / 2] |= (uint8_t)(u << (4 * (k % 2)));
        }
    }
    *packed = pk;
    *scales = sv;
    pk = NULL;
    sv = NULL;
done:
    free(w);
    free(q);
    free(zp);
    free(s);
    free(sv);
    free(pk);
    return st;
}

static oq_status rewrite_table(oq_model *m, const qe_cfg *c, oq_graph *g, oq_value *e, oq_pass_result *res, oq_diag *d)
{
    oq_tensor *et = e->initializer;
    int64_t V = et->dims[0], H = et->dims[1], B = c->spec.block, nb = H / B;
    int bits = c->spec.dtype == OQ_DTYPE_INT4 ? 4 : 8;
    int64_t rowb = H * bits / 8;
    uint8_t *pk = NULL;
    float *sv = NULL;
    oq_status st = quantize_table(et, c, &pk, &sv, d);
    if (st != OQ_OK)
        return st;
    int64_t sn = 0;
    void *sb = oq_pass_scale_bytes(sv, V * nb, et->dtype, &sn);
    const char *base = oq_model_strdup(m, e->name);
    oq_value *gq = NULL, *gs = NULL, *mq = NULL, *ms = NULL;
    int64_t n_gather = 0, n_head = 0;
    if (!sb || !base) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* every Gather of the table, then every tied head; the users list changes as we go */
    for (size_t pass = 0; pass < 2 && st == OQ_OK; pass++) {
        for (size_t u = 0; u < e->n_uses && st == OQ_OK;) {
            oq_node *n = e->uses[u].node;
            oq_node *mm = NULL;
            bool gather = pass == 0 && oq_pass_is_op(n, "Gather") && e->uses[u].index == 0 && n->n_inputs == 2 &&
                          oq_node_attr_int(n, "axis", 0) == 0 && n->n_outputs == 1 && n->graph == g;
            bool head = pass == 1 && c->tied && is_tied_head(n, e, &mm) && mm->graph == g &&
                        oq_pass_node_name_selected(mm, c->has_inc ? &c->inc : NULL, c->has_exc ? &c->exc : NULL);
            if (gather && !oq_pass_node_name_selected(n, c->has_inc ? &c->inc : NULL, c->has_exc ? &c->exc : NULL))
                gather = false;
            if (!gather && !head) {
                u++;
                continue;
            }
            if (gather) {
                if (!gq) {
                    int64_t qd[2] = {V, rowb}, sd[2] = {V, nb};
                    char *nq = oq_pass_unique_name2(g, base, "_gq"), *ns = oq_pass_unique_name2(g, base, "_gscale");
                    gq = nq ? oq_graph_add_initializer(g, nq, OQ_DTYPE_UINT8, qd, 2, pk, V * rowb) : NULL;
                    gs = gq && ns ? oq_graph_add_initializer(g, ns, et->dtype, sd, 2, sb, sn) : NULL;
                    if (!gs) {
                        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
                        break;
                    }
                    oq_pass_stat_add(res, "weight_bytes_quantized", V * rowb + sn);
                }
                oq_value *in[3] = {gq, n->inputs[1], gs};
                oq_value *y = n->outputs[0];
                char *nn = oq_pass_unique_name2(g, n->name && *n->name ? n->name : "Gather", "_bq");
                oq_node *pos = n->next;
                oq_pass_remove_node(n);
                oq_node *qn = nn ? oq_node_new(g, "GatherBlockQuantized", "com.microsoft", nn, in, 3, &y, 1) : NULL;
                if (!qn) {
                    st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
                    break;
                }
                oq_node_set_attr_int(qn, "bits", bits);
                oq_node_set_attr_int(qn, "block_size", B);
                oq_node_set_attr_int(qn, "gather_axis", 0);
                oq_node_set_attr_int(qn, "quantize_axis", 1);
                if (pos)
                    oq_graph_insert_before(g, pos, qn);
                else
                    oq_graph_append(g, qn);
                n_gather++;
            } else {
                if (!mq) {
                    int64_t qd[3] = {V, nb, B * bits / 8}, sd[1] = {V * nb};
                    char *nq = oq_pass_unique_name2(g, base, "_wq"), *ns = oq_pass_unique_name2(g, base, "_wscale");
                    mq = nq ? oq_graph_add_initializer(g, nq, OQ_DTYPE_UINT8, qd, 3, pk, V * rowb) : NULL;
                    ms = mq && ns ? oq_graph_add_initializer(g, ns, et->dtype, sd, 1, sb, sn) : NULL;
                    if (!ms) {
                        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
                        break;
                    }
                    oq_pass_stat_add(res, "weight_bytes_quantized", V * rowb + sn);
                }
                oq_value *in[3] = {mm->inputs[0], mq, ms};
                oq_value *y = mm->outputs[0];
                char *nn = oq_pass_unique_name2(g, mm->name && *mm->name ? mm->name : "MatMulNBits", "_nbits");
                oq_node *pos = mm->next;
                oq_pass_remove_node(mm);
                oq_pass_remove_node(n); /* the Transpose */
                oq_node *qn = nn ? oq_node_new(g, "MatMulNBits", "com.microsoft", nn, in, 3, &y, 1) : NULL;
                if (!qn) {
                    st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
                    break;
                }
                oq_node_set_attr_int(qn, "K", H);
                oq_node_set_attr_int(qn, "N", V);
                oq_node_set_attr_int(qn, "bits", bits);
                oq_node_set_attr_int(qn, "block_size", B);
                oq_node_set_attr_int(qn, "accuracy_level", c->accuracy_level);
                if (pos)
                    oq_graph_insert_before(g, pos, qn);
                else
                    oq_graph_append(g, qn);
                n_head++;
            }
            u = 0; /* the use list changed: look again from the start */
        }
    }
    if (st == OQ_OK) {
        oq_pass_stat_add(res, "tables_quantized", 1);
        oq_pass_stat_add(res, "gathers_quantized", n_gather);
        oq_pass_stat_add(res, "tied_heads_quantized", n_head);
        oq_pass_stat_add(res, "weight_bytes_float", oq_dtype_nbytes(et->dtype, V * H));
        if (e->n_uses > 0) {
            char lb[128];
            oq_diag_add(d, OQ_SEV_NOTE, OQ_OK, NULL, oq_node_label(e->uses[0].node, lb, sizeof lb),
                        e->uses[0].node->op_type, WHO ": table \"%s\" also stays in float for %zu other use%s", e->name,
                        e->n_uses, e->n_uses == 1 ? "" : "s");
        }
        oq_pass_drop_if_unused(e);
    }
done:
    free(pk);
    free(sv);
    free(sb);
    return st;
}

static oq_status run(oq_model *m, const oq_pass_options *opts, oq_pass_result *res, oq_diag *d)
{
    qe_cfg c;
    memset(&c, 0, sizeof c);
    const char *dt = oq_pass_opt_string(opts, "dtype", "int4");
    c.spec.dtype = oq_dtype_from_name(dt);
    if (c.spec.dtype != OQ_DTYPE_INT4 && c.spec.dtype != OQ_DTYPE_INT8)
        return oq_diag_error(d, OQ_ERR_USAGE, WHO ": dtype \"%s\" unknown (int4, int8)", dt);
    c.spec.symmetric = true;
    c.spec.block = oq_pass_opt_int(opts, "block-size", 32);
    if (c.spec.block < 16 || c.spec.block > 256 || (c.spec.block & (c.spec.block - 1)) != 0)
        return oq_diag_error(d, OQ_ERR_USAGE, WHO ": block-size %" PRId64 " must be a power of two in 16..256",
                             c.spec.block);
    c.min_elements = oq_pass_opt_int(opts, "min-elements", 65536);
    c.tied = oq_pass_opt_bool(opts, "tied", true);
    c.accuracy_level = oq_pass_opt_int(opts, "accuracy-level", 0);
    if (c.accuracy_level < 0 || c.accuracy_level > 4)
        return oq_diag_error(d, OQ_ERR_USAGE, WHO ": accuracy-level %" PRId64 " must be in 0..4", c.accuracy_level);
    oq_status st = oq_pass_compile_regex(WHO, "include-nodes", oq_pass_opt_string(opts, "include-nodes", ""), &c.inc,
                                         &c.has_inc, d);
    if (st == OQ_OK)
        st = oq_pass_compile_regex(WHO, "exclude-nodes", oq_pass_opt_string(opts, "exclude-nodes", ""), &c.exc,
                                   &c.has_exc, d);
    oq_graph *g = m->graph;
    /* the tables: initializers read by a Gather of the main graph */
    size_t cap = g ? g->n_initializers : 0, nt = 0;
    oq_value **tabs = calloc(cap ? cap : 1, sizeof *tabs);
    if (!tabs && st == OQ_OK)
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < cap && st == OQ_OK; i++) {
        oq_tensor *t = g->initializers[i];
        oq_value *v = t->name ? oq_graph_find_local(g, t->name) : NULL;
        if (!v || v->initializer != t || v->is_graph_input || !table_dtype(t->dtype) || t->rank != 2)
            continue;
        bool gathered = false;
        for (size_t u = 0; u < v->n_uses; u++)
            gathered |= oq_pass_is_op(v->uses[u].node, "Gather") && v->uses[u].index == 0;
        if (!gathered)
            continue;
        if (oq_tensor_numel(t) < c.min_elements) {
            oq_diag_add(d, OQ_SEV_NOTE, OQ_OK, NULL, NULL, NULL,
                        WHO ": table \"%s\" left in float: %" PRId64 " elements, under min-elements %" PRId64,
                        v->name, oq_tensor_numel(t), c.min_elements);
            oq_pass_stat_add(res, "tables_under_min_elements", 1);
            continue;
        }
        if (t->dims[1] % c.spec.block != 0) {
            oq_diag_add(d, OQ_SEV_NOTE, OQ_OK, NULL, NULL, NULL,
                        WHO ": table \"%s\" left in float: its rows (%" PRId64 ") are not a multiple of block-size %" PRId64,
                        v->name, t->dims[1], c.spec.block);
            continue;
        }
        tabs[nt++] = v;
    }
    if (nt > 0 && oq_model_opset(m, "com.microsoft") < 1)
        oq_model_set_opset(m, "com.microsoft", 1);
    for (size_t i = 0; i < nt && st == OQ_OK; i++)
        st = rewrite_table(m, &c, g, tabs[i], res, d);
    free(tabs);
    if (c.has_inc)
        regfree(&c.inc);
    if (c.has_exc)
        regfree(&c.exc);
    if (st == OQ_OK && nt > 0) {
        res->changed = true;
        oq_pass_prune_value_info(g);
    }
    return st;
}

static const oq_pass_option_def options[] = {
    {"dtype", OQ_OPT_STRING, "int4", "int4 or int8 (symmetric, stored as uint8: q + 8 / q + 128)"},
    {"block-size", OQ_OPT_INT, "32", "elements of a row per scale: a power of two in 16..256"},
    {"min-elements", OQ_OPT_INT, "65536", "smallest table quantized"},
    {"tied", OQ_OPT_BOOL, "true", "a tied LM head MatMul(x, Transpose(table)) becomes MatMulNBits too"},
    {"accuracy-level", OQ_OPT_INT, "0", "the tied head's MatMulNBits accuracy_level 0..4"},
    OQ_PASS_NODE_FILTER_OPTIONS,
};

const oq_pass oq_pass_quantize_embeddings = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "quantize-embeddings",
    .summary = "block-quantized embedding tables (GatherBlockQuantized) and tied LM heads (MatMulNBits), weight-only",
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .run = run,
};
