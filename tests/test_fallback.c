/* Accuracy-driven fallback (src/quant/fallback.c): returning one node of a hand-built QDQ
 * model to float, checked node by node and against outputs computed by hand here, and the
 * measure / fall back loop on it. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnxq/fallback.h"
#include "onnxq/onnxq.h"

#define SX 0.03125f
#define SW 0.01f
#define SY1 0.02f
#define SY2 0.01f
#define ZY2 100

static const int8_t W1Q[4 * 3] = {50, -20, 10, 30, 40, -60, -70, 15, 25, 5, -35, 80};
static const int8_t W2Q[3 * 2] = {60, -40, -25, 70, 45, 30};
static float W1[4 * 3], W2[3 * 2];
static const int64_t NO_DIMS[1] = {1};

static void make_weights(void)
{
    for (int i = 0; i < 12; i++)
        W1[i] = (float)W1Q[i] * SW + 0.0045f * (float)((i % 3) - 1);
    for (int i = 0; i < 6; i++)
        W2[i] = (float)W2Q[i] * SW - 0.0027f * (float)((i % 2) ? 1 : -1);
}

static oq_value *input(oq_model *m, const char *name, int64_t c)
{
    int64_t d[2] = {1, c};
    oq_value *v = oq_graph_new_value(m->graph, name);
    oq_graph_add_input(m->graph, v, oq_type_tensor(m, OQ_DTYPE_FLOAT, d, NULL, 2));
    return v;
}

static oq_value *node(oq_model *m, const char *op, const char *name, oq_value *a, oq_value *b, oq_value *c,
                      const char *out)
{
    oq_value *ins[3] = {a, b, c};
    size_t n = c ? 3 : b ? 2 : 1;
    oq_value *o = oq_graph_new_value(m->graph, out);
    oq_graph_append(m->graph, oq_node_new(m->graph, op, NULL, name, ins, n, &o, 1));
    return o;
}

static oq_model *float_model(void)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    oq_value *x = input(m, "x", 4);
    int64_t d1[2] = {4, 3}, d2[2] = {3, 2};
    oq_value *w1 = oq_graph_add_initializer(m->graph, "w1", OQ_DTYPE_FLOAT, d1, 2, W1, sizeof W1);
    oq_value *w2 = oq_graph_add_initializer(m->graph, "w2", OQ_DTYPE_FLOAT, d2, 2, W2, sizeof W2);
    oq_value *y1 = node(m, "MatMul", "mm1", x, w1, NULL, "y1");
    oq_value *y2 = node(m, "MatMul", "mm2", y1, w2, NULL, "y2");
    oq_graph_add_output(m->graph, y2, NULL);
    return m;
}

static oq_value *scalar_f(oq_model *m, const char *name, float v)
{
    return oq_graph_add_initializer(m->graph, name, OQ_DTYPE_FLOAT, NO_DIMS, 0, &v, 4);
}

static oq_value *qdq(oq_model *m, oq_value *pre, const char *t, const char *out, float s, uint8_t zp)
{
    char b1[64], b2[64], b3[64], b4[64], b5[64];
    snprintf(b1, sizeof b1, "%s_scale", t);
    snprintf(b2, sizeof b2, "%s_zero_point", t);
    snprintf(b3, sizeof b3, "%s_quantized", t);
    snprintf(b4, sizeof b4, "%s_QuantizeLinear", t);
    snprintf(b5, sizeof b5, "%s_DequantizeLinear", t);
    oq_value *sv = scalar_f(m, b1, s);
    oq_value *zv = oq_graph_add_initializer(m->graph, b2, OQ_DTYPE_UINT8, NO_DIMS, 0, &zp, 1);
    oq_value *q = node(m, "QuantizeLinear", b4, pre, sv, zv, b3);
    return node(m, "DequantizeLinear", b5, q, sv, zv, out);
}

static oq_value *weight(oq_model *m, const char *name, const int8_t *q, const int64_t *dims)
{
    char b1[64], b2[64], b3[64], b4[64];
    snprintf(b1, sizeof b1, "%s_quantized", name);
    snprintf(b2, sizeof b2, "%s_scale", name);
    snprintf(b3, sizeof b3, "%s_zero_point", name);
    snprintf(b4, sizeof b4, "%s_DequantizeLinear", name);
    oq_value *qv = oq_graph_add_initializer(m->graph, b1, OQ_DTYPE_INT8, dims, 2, q, dims[0] * dims[1]);
    int8_t z = 0;
    oq_value *zv = oq_graph_add_initializer(m->graph, b3, OQ_DTYPE_INT8, NO_DIMS, 0, &z, 1);
    return node(m, "DequantizeLinear", b4, qv, scalar_f(m, b2, SW), zv, name);
}

/* x -> QDQ -> mm1(DQ w1) -> QDQ y1 -> mm2(DQ w2) -> QDQ y2 (the QDQ conventions) */
static oq_model *quant_model(void)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    oq_value *x = input(m, "x", 4);
    int64_t d1[2] = {4, 3}, d2[2] = {3, 2};
    oq_value *w1 = weight(m, "w1", W1Q, d1), *w2 = weight(m, "w2", W2Q, d2);
    oq_value *xd = qdq(m, x, "x", "x_dequant", SX, 128);
    oq_value *p1 = node(m, "MatMul", "mm1", xd, w1, NULL, "y1_prequant");
    oq_value *y1 = qdq(m, p1, "y1", "y1", SY1, 128);
    oq_value *p2 = node(m, "MatMul", "mm2", y1, w2, NULL, "y2_prequant");
    oq_value *y2 = qdq(m, p2, "y2", "y2", SY2, ZY2);
    oq_graph_add_output(m->graph, y2, NULL);
    return m;
}

static oq_node *find_node(oq_model *m, const char *name)
{
    for (oq_node *n = m->graph->first; n; n = n->next)
        if (n->name && strcmp(n->name, name) == 0)
            return n;
    return NULL;
}

static size_t count_op(oq_model *m, const char *op)
{
    size_t k = 0;
    for (oq_node *n = m->graph->first; n; n = n->next)
        k += strcmp(n->op_type, op) == 0;
    return k;
}

static float hq(float v, float s, int zp)
{
    float q = rintf(v / s) + (float)zp;
    q = q < 0 ? 0 : q > 255 ? 255 : q;
    return (q - (float)zp) * s;
}

static void matmul(const float *a, const float *w, int k, int n, float *out)
{
    for (int j = 0; j < n; j++) {
        float s = 0;
        for (int i = 0; i < k; i++)
            s += a[i] * w[i * n + j];
        out[j] = s;
    }
}

static void run(oq_model *m, const float *x, float *y2)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_plan *p = NULL;
    oq_plan_options po = oq_plan_options_default();
    po.threads = 1;
    cr_assert_eq(oq_plan_compile(m, &po, &p, &d), OQ_OK, "%s", d.count ? d.entries[0].message : "");
    oq_rt_tensor in, out;
    int64_t dims[2] = {1, 4};
    memset(&out, 0, sizeof out);
    oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, dims, 2, (void *)x);
    cr_assert_eq(oq_plan_run(p, &in, 1, &out, 1, &d), OQ_OK);
    memcpy(y2, out.data, 2 * sizeof(float));
    oq_rt_tensor_release(&out);
    oq_plan_free(p);
    oq_diag_free(&d);
}

static void portable_gemm(void)
{
    setenv("ONNXQ_SGEMM_ISA", "generic", 1);
}

static const float X0[4] = {0.9f, -0.37f, 0.55f, 0.12f};

Test(fallback, node_to_float_with_original_weights, .init = portable_gemm)
{
    make_weights();
    oq_model *fm = float_model(), *qm = quant_model();
    oq_diag d;
    oq_diag_init(&d);
    bool changed = false;
    cr_assert_eq(oq_fallback_node(qm, fm, find_node(qm, "mm2"), &changed, &d), OQ_OK);
    cr_assert(changed);
    cr_assert_eq(oq_model_check(qm, &d), OQ_OK, "%s", d.count ? d.entries[0].message : "");
    oq_node *mm2 = find_node(qm, "mm2");
    /* reads y1 (float, made by mm1 under its name again) and the float w2 */
    cr_assert_str_eq(mm2->inputs[0]->name, "y1");
    cr_assert_eq(mm2->inputs[0]->producer, find_node(qm, "mm1"));
    cr_assert_str_eq(mm2->inputs[1]->name, "w2");
    oq_tensor *w = mm2->inputs[1]->initializer;
    cr_assert(w && w->dtype == OQ_DTYPE_FLOAT);
    cr_assert_eq(memcmp(oq_tensor_data(w, &d), W2, sizeof W2), 0, "w2 is the float model's, bit for bit");
    /* writes y2 itself: the graph output keeps its name */
    cr_assert_str_eq(mm2->outputs[0]->name, "y2");
    cr_assert_eq(qm->graph->outputs[0]->value, mm2->outputs[0]);
    /* only x's pair is left; the y1/y2/w2 initializers are gone */
    cr_assert_eq(count_op(qm, "QuantizeLinear"), 1);
    cr_assert_eq(count_op(qm, "DequantizeLinear"), 2); /* x, w1 */
    cr_assert_null(oq_graph_find_local(qm->graph, "w2_quantized")->initializer);
    cr_assert_null(oq_graph_find_local(qm->graph, "y2_scale")->initializer);
    cr_assert_null(oq_graph_find_local(qm->graph, "y1_zero_point")->initializer);
    /* y2 = (mm1 on QDQ x with dequantized w1, no QDQ) @ W2 */
    float xq[4], w1d[12], y1[3], want[2], got[2];
    for (int i = 0; i < 4; i++)
        xq[i] = hq(X0[i], SX, 128);
    for (int i = 0; i < 12; i++)
        w1d[i] = (float)W1Q[i] * SW;
    matmul(xq, w1d, 4, 3, y1);
    matmul(y1, W2, 3, 2, want);
    run(qm, X0, got);
    for (int j = 0; j < 2; j++)
        cr_assert_float_eq(got[j], want[j], 1e-6f, "y2[%d] %g vs %g", j, got[j], want[j]);
    oq_model_free(fm);
    oq_model_free(qm);
    oq_diag_free(&d);
}

Test(fallback, first_node_without_float_model_dequantizes, .init = portable_gemm)
{
    make_weights();
    oq_model *qm = quant_model();
    oq_diag d;
    oq_diag_init(&d);
    bool changed = false;
    cr_assert_eq(oq_fallback_node(qm, NULL, find_node(qm, "mm1"), &changed, &d), OQ_OK);
    cr_assert_eq(oq_model_check(qm, &d), OQ_OK, "%s", d.count ? d.entries[0].message : "");
    oq_node *mm1 = find_node(qm, "mm1");
    /* the graph input's pair is gone: mm1 reads x */
    cr_assert_str_eq(mm1->inputs[0]->name, "x");
    cr_assert_null(oq_graph_find_local(qm->graph, "x_scale")->initializer);
    const float *w = oq_tensor_data(mm1->inputs[1]->initializer, &d);
    for (int i = 0; i < 12; i++)
        cr_assert_eq(w[i], (float)W1Q[i] * SW, "w1[%d]: the dequantized value", i);
    /* y2 = QDQ_y2(DQ(w2) applied to mm1 in float at x) */
    float y1[3], w2d[6], want[2], got[2];
    for (int i = 0; i < 6; i++)
        w2d[i] = (float)W2Q[i] * SW;
    matmul(X0, (const float *)w, 4, 3, y1);
    matmul(y1, w2d, 3, 2, want);
    for (int j = 0; j < 2; j++)
        want[j] = hq(want[j], SY2, ZY2);
    run(qm, X0, got);
    for (int j = 0; j < 2; j++)
        cr_assert_float_eq(got[j], want[j], 1e-6f);
    oq_model_free(qm);
    oq_diag_free(&d);
}

Test(fallback, shared_activation_and_weight_stay_for_other_consumers)
{
    make_weights();
    oq_model *qm = quant_model();
    /* a second consumer of y1 and of w2 */
    oq_value *y1 = oq_graph_find_local(qm->graph, "y1"), *w2 = oq_graph_find_local(qm->graph, "w2");
    oq_value *o = node(qm, "MatMul", "mm3", y1, w2, NULL, "y3");
    oq_graph_add_output(qm->graph, o, NULL);
    oq_diag d;
    oq_diag_init(&d);
    bool changed = false;
    cr_assert_eq(oq_fallback_node(qm, NULL, find_node(qm, "mm2"), &changed, &d), OQ_OK);
    cr_assert_eq(oq_model_check(qm, &d), OQ_OK, "%s", d.count ? d.entries[0].message : "");
    oq_node *mm2 = find_node(qm, "mm2"), *mm3 = find_node(qm, "mm3");
    cr_assert_str_eq(mm2->inputs[0]->name, "y1_prequant", "mm2 alone reads the float y1");
    cr_assert_str_eq(mm3->inputs[0]->name, "y1");
    cr_assert_str_eq(mm3->inputs[0]->producer->op_type, "DequantizeLinear");
    cr_assert_str_eq(mm2->inputs[1]->name, "w2_float");
    cr_assert_str_eq(mm3->inputs[1]->producer->op_type, "DequantizeLinear");
    oq_model_free(qm);
    oq_diag_free(&d);
}

Test(fallback, loop_records_steps_until_float)
{
    make_weights();
    oq_model *fm = float_model(), *qm = quant_model();
    oq_diag d;
    oq_diag_init(&d);
    oq_calib_source *src = NULL;
    cr_assert_eq(oq_calib_source_random(6, 3, 0, 0, &src, &d), OQ_OK);
    oq_fallback_options o = oq_fallback_options_default();
    o.target_sqnr_db = 1000; /* only an all-float model meets it (+inf) */
    o.threads = 1;
    oq_fallback_result r;
    cr_assert_eq(oq_fallback_run(fm, qm, src, &o, &r, &d), OQ_OK, "%s", d.count ? d.entries[0].message : "");
    cr_assert(r.met);
    cr_assert_eq(r.n_steps, 3, "quantized, then mm1 and mm2 (any order)");
    cr_assert(r.steps[0].sqnr_db < 60 && isfinite(r.steps[0].sqnr_db));
    cr_assert(isinf(r.steps[2].sqnr_db) && r.steps[2].sqnr_db > 0, "all float: identical outputs");
    cr_assert_eq(count_op(qm, "QuantizeLinear") + count_op(qm, "DequantizeLinear"), 0);
    const char *layers = NULL, *steps = NULL;
    for (size_t i = 0; i < qm->metadata.count; i++) {
        if (strcmp(qm->metadata.items[i].key, OQ_FALLBACK_LAYERS_KEY) == 0)
            layers = qm->metadata.items[i].value;
        if (strcmp(qm->metadata.items[i].key, OQ_FALLBACK_STEPS_KEY) == 0)
            steps = qm->metadata.items[i].value;
    }
    cr_assert(layers && (strcmp(layers, "mm1,mm2") == 0 || strcmp(layers, "mm2,mm1") == 0), "%s", layers);
    oq_json *j = NULL;
    cr_assert(steps);
    cr_assert_eq(oq_json_parse(steps, strlen(steps), "steps", &j, &d), OQ_OK);
    const oq_json *arr = oq_json_get(j, "steps");
    cr_assert(arr && arr->n == 3);
    cr_assert_float_eq(oq_json_get(&arr->items[0], "sqnr_db")->num, r.steps[0].sqnr_db, 1e-4);
    oq_json_free(j);
    /* max_fallback 0 on a fresh model: measure only */
    oq_model_free(qm);
    qm = quant_model();
    oq_fallback_result_free(&r);
    o.max_fallback = 0;
    cr_assert_eq(oq_fallback_run(fm, qm, src, &o, &r, &d), OQ_OK);
    cr_assert(!r.met);
    cr_assert_eq(r.n_steps, 1);
    oq_fallback_result_free(&r);
    oq_calib_source_free(src);
    oq_model_free(fm);
    oq_model_free(qm);
    oq_diag_free(&d);
}
