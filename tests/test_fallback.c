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
#include "onnxq/verify.h"
#include "io/json.h"
#include "test_pass_util.h"
#include "testutil.h"

/* The models are tu_mm_float_model / tu_mm_quant_model (tests/testutil.c). */

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

/* verify of qm against fm on every sample of src (one thread) */
static oq_verify *verify_all(oq_model *fm, oq_model *qm, oq_calib_source *src, oq_diag *d)
{
    oq_verify_options vo = oq_verify_options_default();
    vo.threads = 1;
    oq_verify *v = NULL;
    cr_assert_eq(oq_verify_new(fm, qm, &vo, &v, d), OQ_OK, "%s", d->count ? d->entries[0].message : "");
    const oq_plan *fp = oq_verify_float_plan(v);
    for (uint64_t k = 0; k < oq_calib_source_count(src); k++) {
        oq_rt_tensor in;
        memset(&in, 0, sizeof in);
        char label[64];
        cr_assert_eq(oq_calib_source_sample(src, fp, k, &in, 1, label, sizeof label, d), OQ_OK);
        cr_assert_eq(oq_verify_sample(v, &in, 1, label, d), OQ_OK);
        oq_rt_tensor_release(&in);
    }
    return v;
}

/* the layer of v named name (asserted to exist) */
static const oq_verify_layer *layer_named(const oq_verify *v, const char *name)
{
    for (size_t i = 0; i < oq_verify_n_layers(v); i++)
        if (strcmp(oq_verify_layer_at(v, i)->name, name) == 0)
            return oq_verify_layer_at(v, i);
    cr_assert_fail("no layer %s", name);
    return NULL;
}

Test(fallback, node_to_float_with_original_weights, .init = portable_gemm)
{
    tu_mm_make_weights();
    oq_model *fm = tu_mm_float_model(), *qm = tu_mm_quant_model();
    oq_diag d;
    oq_diag_init(&d);
    bool changed = false;
    cr_assert_eq(oq_fallback_node(qm, fm, tu_find_node(qm, "mm2"), &changed, &d), OQ_OK);
    cr_assert(changed);
    cr_assert_eq(oq_model_check(qm, &d), OQ_OK, "%s", d.count ? d.entries[0].message : "");
    oq_node *mm2 = tu_find_node(qm, "mm2");
    /* reads y1 (float, made by mm1 under its name again) and the float w2 */
    cr_assert_str_eq(mm2->inputs[0]->name, "y1");
    cr_assert_eq(mm2->inputs[0]->producer, tu_find_node(qm, "mm1"));
    cr_assert_str_eq(mm2->inputs[1]->name, "w2");
    oq_tensor *w = mm2->inputs[1]->initializer;
    cr_assert(w && w->dtype == OQ_DTYPE_FLOAT);
    cr_assert_eq(memcmp(oq_tensor_data(w, &d), tu_mm_w2, sizeof tu_mm_w2), 0, "w2 is the float model's, bit for bit");
    /* writes y2 itself: the graph output keeps its name */
    cr_assert_str_eq(mm2->outputs[0]->name, "y2");
    cr_assert_eq(qm->graph->outputs[0]->value, mm2->outputs[0]);
    /* only x's pair is left; the y1/y2/w2 initializers are gone */
    cr_assert_eq(tp_count_op(qm, "QuantizeLinear"), 1);
    cr_assert_eq(tp_count_op(qm, "DequantizeLinear"), 2); /* x, w1 */
    cr_assert_null(oq_graph_find_local(qm->graph, "w2_quantized")->initializer);
    cr_assert_null(oq_graph_find_local(qm->graph, "y2_scale")->initializer);
    cr_assert_null(oq_graph_find_local(qm->graph, "y1_zero_point")->initializer);
    /* y2 = (mm1 on QDQ x with dequantized w1, no QDQ) @ tu_mm_w2 */
    float xq[4], w1d[12], y1[3], want[2], got[2];
    for (int i = 0; i < 4; i++)
        xq[i] = tu_hq_u8(X0[i], TU_MM_SX, 128);
    for (int i = 0; i < 12; i++)
        w1d[i] = (float)tu_mm_w1q[i] * TU_MM_SW;
    tu_matmul(xq, w1d, 4, 3, y1);
    tu_matmul(y1, tu_mm_w2, 3, 2, want);
    run(qm, X0, got);
    for (int j = 0; j < 2; j++)
        cr_assert_float_eq(got[j], want[j], 1e-6f, "y2[%d] %g vs %g", j, got[j], want[j]);
    oq_model_free(fm);
    oq_model_free(qm);
    oq_diag_free(&d);
}

Test(fallback, first_node_without_float_model_dequantizes, .init = portable_gemm)
{
    tu_mm_make_weights();
    oq_model *qm = tu_mm_quant_model();
    oq_diag d;
    oq_diag_init(&d);
    bool changed = false;
    cr_assert_eq(oq_fallback_node(qm, NULL, tu_find_node(qm, "mm1"), &changed, &d), OQ_OK);
    cr_assert_eq(oq_model_check(qm, &d), OQ_OK, "%s", d.count ? d.entries[0].message : "");
    oq_node *mm1 = tu_find_node(qm, "mm1");
    /* the graph input's pair is gone: mm1 reads x */
    cr_assert_str_eq(mm1->inputs[0]->name, "x");
    cr_assert_null(oq_graph_find_local(qm->graph, "x_scale")->initializer);
    const float *w = oq_tensor_data(mm1->inputs[1]->initializer, &d);
    for (int i = 0; i < 12; i++)
        cr_assert_eq(w[i], (float)tu_mm_w1q[i] * TU_MM_SW, "w1[%d]: the dequantized value", i);
    /* y2 = QDQ_y2(DQ(w2) applied to mm1 in float at x) */
    float y1[3], w2d[6], want[2], got[2];
    for (int i = 0; i < 6; i++)
        w2d[i] = (float)tu_mm_w2q[i] * TU_MM_SW;
    tu_matmul(X0, (const float *)w, 4, 3, y1);
    tu_matmul(y1, w2d, 3, 2, want);
    for (int j = 0; j < 2; j++)
        want[j] = tu_hq_u8(want[j], TU_MM_SY2, TU_MM_ZY2);
    run(qm, X0, got);
    for (int j = 0; j < 2; j++)
        cr_assert_float_eq(got[j], want[j], 1e-6f);
    oq_model_free(qm);
    oq_diag_free(&d);
}

Test(fallback, shared_activation_and_weight_stay_for_other_consumers)
{
    tu_mm_make_weights();
    oq_model *qm = tu_mm_quant_model();
    /* a second consumer of y1 and of w2 */
    oq_value *y1 = oq_graph_find_local(qm->graph, "y1"), *w2 = oq_graph_find_local(qm->graph, "w2");
    oq_value *o = tu_node(qm, "MatMul", "mm3", y1, w2, NULL, "y3");
    oq_graph_add_output(qm->graph, o, NULL);
    oq_diag d;
    oq_diag_init(&d);
    bool changed = false;
    cr_assert_eq(oq_fallback_node(qm, NULL, tu_find_node(qm, "mm2"), &changed, &d), OQ_OK);
    cr_assert_eq(oq_model_check(qm, &d), OQ_OK, "%s", d.count ? d.entries[0].message : "");
    oq_node *mm2 = tu_find_node(qm, "mm2"), *mm3 = tu_find_node(qm, "mm3");
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
    tu_mm_make_weights();
    oq_model *fm = tu_mm_float_model(), *qm = tu_mm_quant_model();
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
    cr_assert_eq(tp_count_op(qm, "QuantizeLinear") + tp_count_op(qm, "DequantizeLinear"), 0);
    const char *layers = NULL, *steps = NULL;
    for (size_t i = 0; i < qm->metadata.count; i++) {
        if (strcmp(qm->metadata.items[i].key, OQ_FALLBACK_LAYERS_KEY) == 0)
            layers = qm->metadata.items[i].value;
        if (strcmp(qm->metadata.items[i].key, OQ_FALLBACK_STEPS_KEY) == 0)
            steps = qm->metadata.items[i].value;
    }
    cr_assert(layers && (strcmp(layers, "mm1,mm2") == 0 || strcmp(layers, "mm2,mm1") == 0), "%s", layers);
    cJSON *j = NULL;
    cr_assert(steps);
    cr_assert_eq(oq_json_parse(steps, strlen(steps), "steps", &j, &d), OQ_OK);
    const cJSON *arr = oq_json_get(j, "steps");
    cr_assert(cJSON_GetArraySize(arr) == 3);
    cr_assert_float_eq(oq_json_get(cJSON_GetArrayItem(arr, 0), "sqnr_db")->valuedouble, r.steps[0].sqnr_db, 1e-4);
    /* step 2 returned every layer to float: +inf SQNR, written 1e999, reads back as inf */
    cr_assert(isinf(oq_json_get(cJSON_GetArrayItem(arr, 2), "sqnr_db")->valuedouble));
    cJSON_Delete(j);
    /* max_fallback 0 on a fresh model: measure only */
    oq_model_free(qm);
    qm = tu_mm_quant_model();
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

/* mm1's output y1 is quantized for two readers, mm2 and a Relu r. mm2 returned to float
 * first reads the float y1_prequant beside the Q; then mm1 returned to float removes the
 * Q/DQ pair as well, and r reads the float tensor too (before: the pair stayed, and a
 * quantization the search had "removed" kept costing accuracy). */
Test(fallback, layer_to_float_removes_its_output_pair_beside_float_readers, .init = portable_gemm)
{
    tu_mm_make_weights();
    oq_model *fm = tu_mm_float_model(), *qm = tu_mm_quant_model();
    oq_value *y1 = oq_graph_find_local(qm->graph, "y1");
    cr_assert(y1);
    oq_value *r = tu_node(qm, "Relu", "r", y1, NULL, NULL, "r_out");
    oq_graph_add_output(qm->graph, r, NULL);
    oq_diag d;
    oq_diag_init(&d);
    bool changed = false;
    cr_assert_eq(oq_fallback_node(qm, fm, tu_find_node(qm, "mm2"), &changed, &d), OQ_OK);
    cr_assert_str_eq(tu_find_node(qm, "mm2")->inputs[0]->name, "y1_prequant");
    cr_assert_eq(oq_fallback_node(qm, fm, tu_find_node(qm, "mm1"), &changed, &d), OQ_OK);
    cr_assert(changed);
    cr_assert_eq(oq_model_check(qm, &d), OQ_OK, "%s", d.count ? d.entries[0].message : "");
    oq_node *rn = tu_find_node(qm, "r");
    cr_assert_eq(rn->inputs[0]->producer, tu_find_node(qm, "mm1"), "r reads %s", rn->inputs[0]->name);
    size_t nq = 0;
    for (oq_node *n = qm->graph->first; n; n = n->next)
        nq += strcmp(n->op_type, "QuantizeLinear") == 0;
    /* x's pair went with mm1 (its only reader), y2's with mm2, y1's with mm1 although r and
     * mm2 read it: no QuantizeLinear is left */
    cr_assert_eq(nq, 0, "%zu QuantizeLinear left", nq);
    oq_diag_free(&d);
    oq_model_free(fm);
    oq_model_free(qm);
}

/* y = Concat(big = x * 100, small = x @ w1) [1, 7]; in the quantized model small is
 * MatMul(x, DQ(w1)) -> coarse QDQ (uint8, scale 0.05). The whole output's SQNR is far above
 * the target (big's energy), the small part's below it: the worst part decides, so the
 * search returns mm_small to float (before, whole-output SQNR met the target at once). */
static oq_model *cat_mm_model(bool quant)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    oq_value *x = tu_input_1xc(m, "x", 4);
    oq_value *big = tu_node(m, "Mul", "mul_big", x, tu_scalar_f(m, "k_big", 100.0f), NULL, "big");
    int64_t d1[2] = {4, 3};
    oq_value *small;
    if (quant) {
        oq_value *w = tu_weight_dq_i8(m, "w1", tu_mm_w1q, d1, TU_MM_SW);
        oq_value *pre = tu_node(m, "MatMul", "mm_small", x, w, NULL, "small_prequant");
        small = tu_qdq_u8(m, pre, "small", "small", 0.05f, 128);
    } else {
        oq_value *w = oq_graph_add_initializer(m->graph, "w1", OQ_DTYPE_FLOAT, d1, 2, tu_mm_w1, sizeof tu_mm_w1);
        small = tu_node(m, "MatMul", "mm_small", x, w, NULL, "small");
    }
    oq_value *ins[2] = {big, small};
    oq_value *y = oq_graph_new_value(m->graph, "y");
    oq_node *c = oq_node_new(m->graph, "Concat", NULL, "concat", ins, 2, &y, 1);
    oq_node_set_attr_int(c, "axis", 1);
    oq_graph_append(m->graph, c);
    oq_graph_add_output(m->graph, y, NULL);
    return m;
}

Test(fallback, worst_output_part_decides, .init = portable_gemm)
{
    tu_mm_make_weights();
    oq_model *fm = cat_mm_model(false), *qm = cat_mm_model(true);
    oq_diag d;
    oq_diag_init(&d);
    oq_calib_source *src = NULL;
    cr_assert_eq(oq_calib_source_random(6, 3, 0, 0, &src, &d), OQ_OK);
    /* the numbers verify gives the model as quantized */
    oq_verify *v = verify_all(fm, qm, src, &d);
    const oq_verify_output *vo0 = oq_verify_output_at(v, 0);
    double whole = oq_err_sqnr_db(&vo0->err), part = oq_err_sqnr_db(&vo0->slices[1].err);
    cr_assert_eq(vo0->n_slices, 2);
    cr_assert(part < 40 && whole > 50, "part %g whole %g", part, whole);
    oq_verify_free(v);

    oq_fallback_options o = oq_fallback_options_default();
    o.target_sqnr_db = 45; /* the whole output meets it, the small part does not */
    o.threads = 1;
    oq_fallback_result r;
    cr_assert_eq(oq_fallback_run(fm, qm, src, &o, &r, &d), OQ_OK, "%s", d.count ? d.entries[0].message : "");
    cr_assert_eq(r.n_steps, 2);
    cr_assert_float_eq(r.steps[0].sqnr_db, part, 1e-9);
    cr_assert_str_eq(r.steps[0].worst_output, "y[1:4..7]");
    cr_assert_str_eq(r.steps[1].nodes, "mm_small");
    cr_assert(r.met);
    cr_assert(isinf(r.steps[1].sqnr_db) && r.steps[1].sqnr_db > 0, "all float: identical outputs");
    oq_fallback_result_free(&r);
    oq_calib_source_free(src);
    oq_model_free(fm);
    oq_model_free(qm);
    oq_diag_free(&d);
}

/* Two outputs: y = Concat(x * 100, Sub(s, 1)) with s = MatMul(x, w1 = 0.5) (values near 1:
 * the Sub leaves small values, so the part's SQNR is far below s's own), and z =
 * MatMul(x, w2). Quantized: s and z through QDQ pairs (scale 0.02). z's layer has the
 * lowest isolated SQNR, but the worst slice is y's second part, upstream of which only
 * mm_s lies: the search returns mm_s first, and that meets the target. */
static oq_model *two_out_model(bool quant)
{
    static const int8_t w1q[4] = {50, 50, 50, 50};
    static const int8_t w2q[8] = {50, -20, 30, 40, -60, 70, 15, 25};
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    oq_value *x = tu_input_1xc(m, "x", 4);
    oq_value *big = tu_node(m, "Mul", "mul_big", x, tu_scalar_f(m, "k_big", 100.0f), NULL, "big");
    int64_t d1[2] = {4, 1}, d2[2] = {4, 2};
    oq_value *s, *z;
    if (quant) {
        oq_value *p = tu_node(m, "MatMul", "mm_s", x, tu_weight_dq_i8(m, "w1", w1q, d1, 0.01f), NULL, "s_prequant");
        s = tu_qdq_u8(m, p, "s", "s", 0.02f, 0);
        oq_value *pz = tu_node(m, "MatMul", "mm_z", x, tu_weight_dq_i8(m, "w2", w2q, d2, 0.01f), NULL, "z_prequant");
        z = tu_qdq_u8(m, pz, "z", "z", 0.02f, 128);
    } else {
        float w1[4], w2[8];
        for (int i = 0; i < 4; i++)
            w1[i] = (float)w1q[i] * 0.01f;
        for (int i = 0; i < 8; i++)
            w2[i] = (float)w2q[i] * 0.01f;
        s = tu_node(m, "MatMul", "mm_s", x, oq_graph_add_initializer(m->graph, "w1", OQ_DTYPE_FLOAT, d1, 2, w1, sizeof w1),
                    NULL, "s");
        z = tu_node(m, "MatMul", "mm_z", x, oq_graph_add_initializer(m->graph, "w2", OQ_DTYPE_FLOAT, d2, 2, w2, sizeof w2),
                    NULL, "z");
    }
    oq_value *sc = tu_node(m, "Sub", "sub_s", s, tu_scalar_f(m, "one", 1.0f), NULL, "s_centred");
    oq_value *ins[2] = {big, sc};
    oq_value *y = oq_graph_new_value(m->graph, "y");
    oq_node *c = oq_node_new(m->graph, "Concat", NULL, "concat", ins, 2, &y, 1);
    oq_node_set_attr_int(c, "axis", 1);
    oq_graph_append(m->graph, c);
    oq_graph_add_output(m->graph, y, NULL);
    oq_graph_add_output(m->graph, z, NULL);
    return m;
}

Test(fallback, layer_upstream_of_the_worst_part_first, .init = portable_gemm)
{
    oq_model *fm = two_out_model(false), *qm = two_out_model(true);
    oq_diag d;
    oq_diag_init(&d);
    oq_calib_source *src = NULL;
    cr_assert_eq(oq_calib_source_random(32, 5, 0, 0, &src, &d), OQ_OK);
    oq_verify *v = verify_all(fm, qm, src, &d);
    double iso_s = oq_err_sqnr_db(&layer_named(v, "s")->iso), iso_z = oq_err_sqnr_db(&layer_named(v, "z")->iso);
    size_t wo = 9, ws = 9;
    double worst = oq_verify_worst(v, &wo, &ws);
    double zdb = oq_err_sqnr_db(&oq_verify_output_at(v, 1)->err);
    cr_log_info("iso s %.2f z %.2f, worst part %.2f, z output %.2f", iso_s, iso_z, worst, zdb);
    /* z's layer is the worst layer, y's second part the worst part */
    cr_assert(iso_z < iso_s - 3, "iso s %g z %g", iso_s, iso_z);
    cr_assert(wo == 0 && ws == 1, "worst %zu %zu", wo, ws);
    cr_assert(worst < zdb - 1.5, "worst part %g, z %g", worst, zdb);
    oq_verify_free(v);

    oq_fallback_options o = oq_fallback_options_default();
    o.target_sqnr_db = (worst + zdb) / 2;
    o.threads = 1;
    oq_fallback_result r;
    cr_assert_eq(oq_fallback_run(fm, qm, src, &o, &r, &d), OQ_OK, "%s", d.count ? d.entries[0].message : "");
    cr_assert_str_eq(r.steps[0].worst_output, "y[1:4..5]");
    cr_assert_eq(r.n_steps, 2);
    cr_assert_str_eq(r.steps[1].nodes, "mm_s");
    cr_assert(r.met);
    cr_assert_str_eq(r.steps[1].worst_output, "z");
    oq_fallback_result_free(&r);
    oq_calib_source_free(src);
    oq_model_free(fm);
    oq_model_free(qm);
    oq_diag_free(&d);
}

/* y = MatMul(Mul(Sub(s, 1), 1), w2) with s = MatMul(x, w1 = 0.5) (values near 1). Quantized:
 * s, d = Mul(...) and y through QDQ pairs, Sub and Mul in float. s's isolated error is
 * small, but the float Sub after it leaves small values with the same error: the
 *  accumulated SQNR drops from s's to c's; y's layer has the lower
 * isolated SQNR (44 dB against s's 51). Ranked by the isolated SQNR lowered by that drop
 * (11 dB), mm_s goes first. */
static oq_model *amplified_model(bool quant)
{
    static const int8_t w1q[4] = {50, 50, 50, 50};
    static const int8_t w2q[2] = {100, -100};
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    oq_value *x = tu_input_1xc(m, "x", 4);
    int64_t d1[2] = {4, 1}, d2[2] = {1, 2};
    oq_value *s;
    if (quant) {
        oq_value *p = tu_node(m, "MatMul", "mm_s", x, tu_weight_dq_i8(m, "w1", w1q, d1, 0.01f), NULL, "s_prequant");
        s = tu_qdq_u8(m, p, "s", "s", 0.02f, 0);
    } else {
        float w1[4];
        for (int i = 0; i < 4; i++)
            w1[i] = (float)w1q[i] * 0.01f;
        s = tu_node(m, "MatMul", "mm_s", x, oq_graph_add_initializer(m->graph, "w1", OQ_DTYPE_FLOAT, d1, 2, w1, sizeof w1),
                    NULL, "s");
    }
    oq_value *c = tu_node(m, "Sub", "sub_s", s, tu_scalar_f(m, "one", 1.0f), NULL, "c");
    oq_value *dv;
    if (quant) {
        oq_value *p = tu_node(m, "Mul", "mul_c", c, tu_scalar_f(m, "k1", 1.0f), NULL, "d_prequant");
        dv = tu_qdq_u8(m, p, "d", "d", 0.008f, 128);
        oq_value *py = tu_node(m, "MatMul", "mm_y", dv, tu_weight_dq_i8(m, "w2", w2q, d2, 0.01f), NULL, "y_prequant");
        oq_value *y = tu_qdq_u8(m, py, "y", "y", 0.008f, 128);
        oq_graph_add_output(m->graph, y, NULL);
    } else {
        dv = tu_node(m, "Mul", "mul_c", c, tu_scalar_f(m, "k1", 1.0f), NULL, "d");
        float w2[2] = {1.0f, -1.0f};
        oq_value *y = tu_node(m, "MatMul", "mm_y", dv,
                              oq_graph_add_initializer(m->graph, "w2", OQ_DTYPE_FLOAT, d2, 2, w2, sizeof w2), NULL, "y");
        oq_graph_add_output(m->graph, y, NULL);
    }
    return m;
}

/* The ranking cases below: fm against qm on 32 random samples (seed 5); check(v) asserts
 * what the case is about on verify's numbers; the first node the search returns must be
 * `first`. */
static void first_returned(oq_model *fm, oq_model *qm, void (*check)(oq_verify *v), const char *first)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_calib_source *src = NULL;
    cr_assert_eq(oq_calib_source_random(32, 5, 0, 0, &src, &d), OQ_OK);
    oq_verify *v = verify_all(fm, qm, src, &d);
    check(v);
    oq_verify_free(v);

    oq_fallback_options o = oq_fallback_options_default();
    o.target_sqnr_db = 200; /* every step */
    o.max_fallback = 1;
    o.threads = 1;
    oq_fallback_result r;
    cr_assert_eq(oq_fallback_run(fm, qm, src, &o, &r, &d), OQ_OK, "%s", d.count ? d.entries[0].message : "");
    cr_assert_geq(r.n_steps, 2);
    cr_assert_str_eq(r.steps[1].nodes, first);
    oq_fallback_result_free(&r);
    oq_calib_source_free(src);
    oq_model_free(fm);
    oq_model_free(qm);
    oq_diag_free(&d);
}

static void amplified_case(oq_verify *v)
{
    double iso_s = oq_err_sqnr_db(&layer_named(v, "s")->iso), acc_s = oq_err_sqnr_db(&layer_named(v, "s")->acc);
    double acc_c = oq_err_sqnr_db(&layer_named(v, "c")->acc), iso_y = oq_err_sqnr_db(&layer_named(v, "y")->iso);
    cr_log_info("iso s %.2f acc s %.2f acc c %.2f iso y %.2f", iso_s, acc_s, acc_c, iso_y);
    /* the case: y's layer is worse alone, s's worse once the Sub's drop counts */
    cr_assert(iso_y < iso_s - 1, "iso s %g y %g", iso_s, iso_y);
    cr_assert(iso_s - (acc_s - acc_c) < iso_y - 1, "iso s %g drop %g iso y %g", iso_s, acc_s - acc_c, iso_y);
}

Test(fallback, float_nodes_that_amplify_a_layers_error_rank_it_first, .init = portable_gemm)
{
    first_returned(amplified_model(false), amplified_model(true), amplified_case, "mm_s");
}

/* y = Add(a, b): a = MatMul(x, w_a) written in float (no Q/DQ after it), b = MatMul(x, w_b)
 * through a coarse QDQ pair (scale 0.05); w_b = -w_a roughly, so y is small and its error is
 * mostly b's. a's layer has the better isolated SQNR (its weights round a little; b's are
 * exact, its output pair is coarse), b's the worse. The Add after a is float, but it also
 * reads b: what it does to the error is not a's, so a's rank is not lowered by it, and
 * mm_b goes first (a rank lowered by the Add's drop would have put mm_a first). */
static oq_model *joined_model(bool quant)
{
    static const float wa[4] = {0.403f, 0.397f, 0.401f, 0.399f}, wb[4] = {-0.41f, -0.39f, -0.40f, -0.40f};
    static const int8_t waq[4] = {40, 40, 40, 40}, wbq[4] = {-41, -39, -40, -40};
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    oq_value *x = tu_input_1xc(m, "x", 4);
    int64_t d1[2] = {4, 1};
    oq_value *a, *b;
    if (quant) {
        a = tu_node(m, "MatMul", "mm_a", x, tu_weight_dq_i8(m, "w_a", waq, d1, 0.01f), NULL, "a");
        oq_value *p = tu_node(m, "MatMul", "mm_b", x, tu_weight_dq_i8(m, "w_b", wbq, d1, 0.01f), NULL, "b_prequant");
        b = tu_qdq_u8(m, p, "b", "b", 0.05f, 128);
    } else {
        a = tu_node(m, "MatMul", "mm_a", x, oq_graph_add_initializer(m->graph, "w_a", OQ_DTYPE_FLOAT, d1, 2, wa, sizeof wa),
                    NULL, "a");
        b = tu_node(m, "MatMul", "mm_b", x, oq_graph_add_initializer(m->graph, "w_b", OQ_DTYPE_FLOAT, d1, 2, wb, sizeof wb),
                    NULL, "b");
    }
    oq_value *y = tu_node(m, "Add", "add_y", a, b, NULL, "y");
    oq_graph_add_output(m->graph, y, NULL);
    return m;
}

static void joined_case(oq_verify *v)
{
    double iso_a = oq_err_sqnr_db(&layer_named(v, "a")->iso), acc_a = oq_err_sqnr_db(&layer_named(v, "a")->acc);
    double iso_b = oq_err_sqnr_db(&layer_named(v, "b")->iso), acc_y = oq_err_sqnr_db(&layer_named(v, "y")->acc);
    cr_log_info("iso a %.2f acc a %.2f iso b %.2f acc y %.2f", iso_a, acc_a, iso_b, acc_y);
    /* the case: a is better alone; counting the Add's drop against a would rank it first */
    cr_assert(iso_b < iso_a - 3, "iso a %g b %g", iso_a, iso_b);
    cr_assert(iso_a - (acc_a - acc_y) < iso_b - 3, "iso a %g drop %g iso b %g", iso_a, acc_a - acc_y, iso_b);
}

Test(fallback, a_float_node_joining_another_layer_does_not_rank_the_first, .init = portable_gemm)
{
    first_returned(joined_model(false), joined_model(true), joined_case, "mm_b");
}
