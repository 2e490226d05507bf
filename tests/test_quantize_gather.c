/* int8 embedding tables (passes/quantize_gather.c): quantize-gather and
 * quantize-dynamic{embedding-dtype}. Known answers: one symmetric int8 scale per row,
 * max |row| / 127; every gathered value within half a step of the table's; the table
 * replaced by int8 (about 4x smaller); what stays float and why. */
#include <math.h>

#include "test_pass_util.h"

enum { V = 1000, D = 64, H = 8 };

static float tab[V * D], mat[D * H];

static void fill(void)
{
    uint32_t s = 12345;
    for (int i = 0; i < V * D; i++) {
        s = s * 1664525u + 1013904223u;
        tab[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * (0.1f + (float)(i / D % 7)); /* row ranges differ */
    }
    for (int j = 0; j < D; j++) /* row 3 all zero, row 5 one outlier */
        tab[3 * D + j] = 0.0f;
    tab[5 * D + 7] = 40.0f;
    for (int i = 0; i < D * H; i++)
        mat[i] = (float)((i * 37) % 11 - 5) * 0.01f;
}

/* ids [2, 3] (int64) -> Gather(table) -> e [2, 3, D] -> MatMul(M [D, H]) -> y; e and y outputs.
 * shared: the table also feeds a MatMul (tied weights); const_ids: the indices are an initializer. */
static oq_model *embed_model(bool shared, bool const_ids)
{
    fill();
    oq_model *m = tp_model(13);
    int64_t td[2] = {V, D}, md[2] = {D, H}, idd[2] = {2, 3};
    tp_init_f(m, "table", td, 2, tab);
    tp_init_f(m, "M", md, 2, mat);
    if (const_ids) {
        int64_t ids[6] = {0, 1, 2, 3, 4, 5};
        tp_init(m, "ids", OQ_DTYPE_INT64, idd, 2, ids);
    } else {
        tp_input(m, "ids", OQ_DTYPE_INT64, idd, 2);
    }
    tp_node(m, "Gather", "emb", "table,ids", "e");
    tp_node(m, "MatMul", "proj", "e,M", "y");
    tp_output(m, "e");
    tp_output(m, "y");
    if (shared) {
        int64_t xd[2] = {1, V};
        tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 2);
        tp_node(m, "MatMul", "tied", "x,table", "z");
        tp_output(m, "z");
    }
    return m;
}

static bool is_op(const oq_node *n, const char *op)
{
    return n->op_type && strcmp(n->op_type, op) == 0;
}

static oq_tensor *init_of(oq_model *m, const char *name)
{
    oq_value *v = oq_graph_find_value(m->graph, name);
    return v && v->initializer ? v->initializer : NULL;
}

/* e for ids {0, 3, 5, 999, -1, 17}: each value within half its row's step of the table */
static void check_rows(oq_model *m)
{
    oq_diag d;
    oq_plan *p = tp_plan(m, &d);
    int64_t ids[6] = {0, 3, 5, 999, -1, 17}, idd[2] = {2, 3};
    oq_rt_tensor in, out[2];
    cr_assert_eq(oq_rt_tensor_borrow(&in, OQ_DTYPE_INT64, idd, 2, ids), OQ_OK);
    cr_assert_eq(oq_plan_run(p, &in, 1, out, 2, &d), OQ_OK);
    cr_assert_eq(out[0].dtype, OQ_DTYPE_FLOAT);
    cr_assert_eq(oq_rt_tensor_numel(&out[0]), 6 * D);
    const float *e = out[0].data;
    for (int k = 0; k < 6; k++) {
        int64_t r = ids[k] < 0 ? ids[k] + V : ids[k];
        float mx = 0.0f;
        for (int j = 0; j < D; j++)
            mx = fmaxf(mx, fabsf(tab[r * D + j]));
        float step = mx / 127.0f;
        for (int j = 0; j < D; j++) {
            float want = tab[r * D + j], got = e[k * D + j];
            cr_assert(fabsf(got - want) <= 0.5f * step * 1.0001f + 1e-12f, "row %lld col %d: %g vs %g (step %g)",
                      (long long)r, j, got, want, step);
        }
        if (r == 3)
            for (int j = 0; j < D; j++)
                cr_assert_eq(e[k * D + j], 0.0f);
        if (r == 5)
            cr_assert_float_eq(e[k * D + 7], 40.0f, 1e-5f);
    }
    oq_rt_tensor_release(&out[0]);
    oq_rt_tensor_release(&out[1]);
    oq_plan_free(p);
    oq_diag_free(&d);
}

Test(quantize_gather, table_int8_per_row)
{
    oq_model *m = embed_model(false, false);
    oq_pass_result r = tp_run(m, "quantize-gather");
    cr_assert(r.changed);
    cr_assert_eq(tp_stat(&r, "gathers_quantized"), 1);
    cr_assert_eq(tp_stat(&r, "tables_quantized"), 1);
    cr_assert_eq(tp_stat(&r, "table_bytes_saved"), (int64_t)V * D * 3 - V * 4);
    cr_assert_null(init_of(m, "table"), "float table dropped");
    oq_tensor *q = init_of(m, "table_quantized"), *s = init_of(m, "table_scale");
    cr_assert(q && s);
    cr_assert_eq(q->dtype, OQ_DTYPE_INT8);
    cr_assert_eq(q->rank, 2);
    cr_assert_eq(q->dims[0], V);
    cr_assert_eq(q->dims[1], D);
    cr_assert_eq(s->rank, 2);
    cr_assert_eq(s->dims[0], V);
    cr_assert_eq(s->dims[1], 1);
    const int8_t *qd = oq_tensor_data(q, NULL);
    const float *sd = oq_tensor_data(s, NULL);
    for (int r2 = 0; r2 < V; r2++) {
        float mx = 0.0f;
        for (int j = 0; j < D; j++)
            mx = fmaxf(mx, fabsf(tab[r2 * D + j]));
        cr_assert_float_eq(sd[r2], mx > 0 ? mx / 127.0f : 1.0f, 1e-12f, "row %d scale", r2);
        for (int j = 0; j < D; j++) {
            float want = nearbyintf(tab[r2 * D + j] / sd[r2]);
            cr_assert_eq(qd[r2 * D + j], (int8_t)want);
            cr_assert(qd[r2 * D + j] >= -127);
        }
    }
    /* the chain: Gather(int8) -> Cast -> Mul(., Gather(scales)) -> e */
    oq_value *e = oq_graph_find_value(m->graph, "e");
    cr_assert(e->producer && is_op(e->producer, "Mul"));
    size_t gathers = 0, casts = 0;
    for (oq_node *n = m->graph->first; n; n = n->next) {
        gathers += is_op(n, "Gather");
        casts += is_op(n, "Cast");
    }
    cr_assert_eq(gathers, 2);
    cr_assert_eq(casts, 1);
    check_rows(m);
    /* a second run: nothing left to do */
    oq_pass_result r2 = tp_run(m, "quantize-gather");
    cr_assert_not(r2.changed);
    oq_model_free(m);
}

Test(quantize_gather, file_shrinks_about_4x)
{
    oq_model *m = embed_model(false, false);
    uint8_t *b0 = NULL, *b1 = NULL;
    size_t l0 = 0, l1 = 0;
    cr_assert_eq(oq_model_write_buffer(m, &b0, &l0, NULL), OQ_OK);
    tp_run(m, "quantize-gather");
    cr_assert_eq(oq_model_write_buffer(m, &b1, &l1, NULL), OQ_OK);
    /* 256000 float bytes -> 64000 int8 + 4000 scale bytes (+ M and the graph in both):
     * more than 3.5x smaller */
    cr_assert(l0 > (size_t)V * D * 4 && l1 * 7 < l0 * 2, "%zu -> %zu bytes", l0, l1);
    free(b0);
    free(b1);
    oq_model_free(m);
}

Test(quantize_gather, left_float)
{
    /* the table also feeds a MatMul: quantizing would keep both copies */
    oq_model *m = embed_model(true, false);
    oq_pass_result r = tp_run(m, "quantize-gather");
    cr_assert_not(r.changed);
    cr_assert_eq(tp_stat(&r, "gathers_skipped_shared_table"), 1);
    oq_model_free(m);
    /* constant indices: a constant expression */
    m = embed_model(false, true);
    r = tp_run(m, "quantize-gather");
    cr_assert_not(r.changed);
    cr_assert_eq(tp_stat(&r, "gathers_skipped_constant_indices"), 1);
    oq_model_free(m);
    /* below min-elements; dtype=float; exclude-nodes */
    m = embed_model(false, false);
    r = tp_run(m, "quantize-gather{min-elements=64001}");
    cr_assert_not(r.changed);
    r = tp_run(m, "quantize-gather{dtype=float}");
    cr_assert_not(r.changed);
    r = tp_run(m, "quantize-gather{exclude-nodes=\"^emb$\"}");
    cr_assert_not(r.changed);
    r = tp_run(m, "quantize-gather{min-elements=64000,include-nodes=\"^emb$\"}");
    cr_assert(r.changed);
    oq_model_free(m);
    /* a non-finite value: the table stays float */
    m = embed_model(false, false);
    float nan = NAN;
    oq_tensor *t = init_of(m, "table");
    float *w = (float *)oq_tensor_data(t, NULL);
    w[100] = nan;
    r = tp_run(m, "quantize-gather");
    cr_assert_not(r.changed);
    cr_assert_eq(tp_stat(&r, "gathers_skipped_not_finite"), 1);
    oq_model_free(m);
}

Test(quantize_gather, axis_not_zero)
{
    oq_model *m = embed_model(false, false);
    oq_node_set_attr_int(oq_graph_find_value(m->graph, "e")->producer, "axis", 1);
    oq_pass_result r = tp_run(m, "quantize-gather");
    cr_assert_not(r.changed);
    cr_assert_eq(tp_stat(&r, "gathers_skipped_shape"), 1);
    oq_model_free(m);
}

Test(quantize_gather, bad_option)
{
    oq_model *m = embed_model(false, false);
    char msg[512];
    cr_assert_eq(tp_run_fail(m, "quantize-gather{dtype=int4}", msg, sizeof msg), OQ_ERR_USAGE);
    cr_assert(strstr(msg, "dtype \"int4\": int8 or float"), "%s", msg);
    cr_assert_eq(tp_run_fail(m, "quantize-dynamic{embedding-dtype=uint8}", msg, sizeof msg), OQ_ERR_USAGE);
    cr_assert(strstr(msg, "embedding-dtype \"uint8\": int8 or float"), "%s", msg);
    oq_model_free(m);
}

Test(quantize_gather, dynamic_mode)
{
    /* quantize-dynamic: the MatMul becomes MatMulInteger, the table int8 (the default) */
    oq_model *m = embed_model(false, false);
    oq_pass_result r = tp_run(m, "quantize-dynamic");
    cr_assert_eq(tp_stat(&r, "nodes_quantized"), 1);
    cr_assert_eq(tp_stat(&r, "gathers_quantized"), 1);
    cr_assert_null(init_of(m, "table"));
    check_rows(m);
    oq_model_free(m);
    /* tied weights: the MatMul gets its own quantized copy first, then the table is only
     * read by the Gather */
    m = embed_model(true, false);
    r = tp_run(m, "quantize-dynamic");
    cr_assert_eq(tp_stat(&r, "nodes_quantized"), 2);
    cr_assert_eq(tp_stat(&r, "gathers_quantized"), 1);
    oq_model_free(m);
    /* embedding-dtype=float: the table stays */
    m = embed_model(false, false);
    r = tp_run(m, "quantize-dynamic{embedding-dtype=float}");
    cr_assert_eq(tp_stat(&r, "nodes_quantized"), 1);
    cr_assert_eq(tp_stat(&r, "gathers_quantized"), 0);
    cr_assert(init_of(m, "table"));
    oq_model_free(m);
}
