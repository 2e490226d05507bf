/* The saturation check (include/onnxq/satcheck.h) and verify's target arithmetic
 * (oq_verify_options.arith) on a hand-computed chain:
 *   x = [255, 255] (uint8, scale 1)
 *   y1 = Q(x @ [127, 127]^T, scale 256)   int8 weights, scale 1
 *   y2 = Q(y1 @ [[1]], scale 256)          int8 weight 1, scale 1
 * reference:  y1 = 64770 / 256 = 253.008 -> 253 (64768); y2 = 253 * 256 / 256 -> 253 (64768)
 * avx2:       255*127 + 255*127 = 64770 saturates to 32767 -> 127.996 -> 128 (32768);
 *             y2 from 128 -> 128 (32768); from the reference's 253 -> 253 (no loss: K = 1)
 * exact:      as reference.
 * y1's loss: E_t = (64768 - 32768)^2 = 32000^2 over one element, E_q = 256^2 / 12:
 *   10 log10(1 + 12 * 125^2) = 10 log10(187501) dB; SQNR(target vs ref) = 20 log10(253 / 125).
 * y2 computed from the reference's y1 loses nothing (isolated); the graph output, computed
 * end to end, is off by the same 125 steps. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "onnxq/fallback.h"
#include "onnxq/onnxq.h"
#include "testutil.h"

static oq_model *quant_model(void)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    oq_value *x = tu_input_1xc(m, "x", 2);
    const int8_t w1q[2] = {127, 127}, w2q[1] = {1};
    int64_t d1[2] = {2, 1}, d2[2] = {1, 1};
    oq_value *w1 = tu_weight_dq_i8(m, "w1", w1q, d1, 1.0f);
    oq_value *w2 = tu_weight_dq_i8(m, "w2", w2q, d2, 1.0f);
    oq_value *xd = tu_qdq_u8(m, x, "x", "x_dequant", 1.0f, 0);
    oq_value *p1 = tu_node(m, "MatMul", "mm1", xd, w1, NULL, "y1_prequant");
    oq_value *y1 = tu_qdq_u8(m, p1, "y1", "y1", 256.0f, 0);
    oq_value *p2 = tu_node(m, "MatMul", "mm2", y1, w2, NULL, "y2_prequant");
    oq_value *y2 = tu_qdq_u8(m, p2, "y2", "y2", 256.0f, 0);
    oq_graph_add_output(m->graph, y2, NULL);
    return m;
}

static oq_value *float_weight(oq_model *m, const char *name, const float *w, const int64_t *dims)
{
    oq_value *v = oq_graph_add_initializer(m->graph, name, OQ_DTYPE_FLOAT, dims, 2, w,
                                           (size_t)(dims[0] * dims[1]) * sizeof(float));
    cr_assert_not_null(v);
    return v;
}

static oq_model *float_model(void)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    oq_value *x = tu_input_1xc(m, "x", 2);
    const float w1[2] = {127, 127}, w2[1] = {1};
    int64_t d1[2] = {2, 1}, d2[2] = {1, 1};
    oq_value *y1 = tu_node(m, "MatMul", "mm1", x, float_weight(m, "w1", w1, d1), NULL, "y1");
    oq_value *y2 = tu_node(m, "MatMul", "mm2", y1, float_weight(m, "w2", w2, d2), NULL, "y2");
    oq_graph_add_output(m->graph, y2, NULL);
    return m;
}

static void sample(float a, float b, oq_rt_tensor *in)
{
    static float xv[2];
    xv[0] = a;
    xv[1] = b;
    int64_t dims[2] = {1, 2};
    cr_assert_eq(oq_rt_tensor_borrow(in, OQ_DTYPE_FLOAT, dims, 2, xv), OQ_OK);
}

static const oq_satcheck_layer *layer(const oq_satcheck *s, const char *tensor)
{
    for (size_t i = 0; i < oq_satcheck_n_layers(s); i++)
        if (strcmp(oq_satcheck_layer_at(s, i)->tensor, tensor) == 0)
            return oq_satcheck_layer_at(s, i);
    cr_assert_fail("no layer %s", tensor);
    return NULL;
}

Test(satcheck, avx2_saturation_is_the_layers_own_loss)
{
    oq_model *m = quant_model();
    oq_diag d;
    oq_diag_init(&d);
    oq_satcheck *s = NULL;
    cr_assert_eq(oq_satcheck_new(m, OQ_ARITH_AVX2, 1, &s, &d), OQ_OK);
    oq_rt_tensor in;
    sample(255, 255, &in);
    cr_assert_eq(oq_satcheck_sample(s, &in, 1, &d), OQ_OK);
    cr_assert_eq(oq_satcheck_n_samples(s), 1);
    cr_assert_eq(oq_satcheck_n_layers(s), 3); /* x, y1, y2 */
    const oq_satcheck_layer *y1 = layer(s, "y1"), *y2 = layer(s, "y2"), *x = layer(s, "x_dequant");
    cr_expect_str_eq(y1->op_type, "MatMul");
    cr_expect_str_eq(y1->node, "mm1");
    cr_expect_str_eq(x->op_type, "input");
    cr_expect(y1->product && y2->product && !x->product);
    cr_expect_eq(y1->err.n, 1);
    cr_expect_eq(y1->err.sdd, 32000.0 * 32000.0);
    cr_expect_eq(y1->err.sxx, 64768.0 * 64768.0);
    cr_expect_float_eq(oq_satcheck_loss_db(y1), 10.0 * log10(187501.0), 1e-9);
    cr_expect_float_eq(oq_err_sqnr_db(&y1->err), 20.0 * log10(253.0 / 125.0), 1e-9);
    /* y2 from the reference's y1: nothing lost; x: not computed by a group */
    cr_expect_eq(y2->err.n, 1);
    cr_expect_eq(oq_satcheck_loss_db(y2), 0.0);
    cr_expect_eq(x->err.n, 2);
    cr_expect_eq(oq_satcheck_loss_db(x), 0.0);
    /* end to end the output carries y1's error */
    cr_assert_eq(oq_satcheck_n_outputs(s), 1);
    const oq_satcheck_output *o = oq_satcheck_output_at(s, 0);
    cr_expect_str_eq(o->name, "y2");
    cr_expect_eq(o->err.sdd, 32000.0 * 32000.0);
    /* a second sample that does not saturate (x = [1, 1]: 254 / 256 -> 1 either way) adds
     * one element to E_q and nothing to E_t */
    sample(1, 1, &in);
    cr_assert_eq(oq_satcheck_sample(s, &in, 1, &d), OQ_OK);
    cr_expect_eq(y1->err.n, 2);
    cr_expect_eq(y1->err.sdd, 32000.0 * 32000.0);
    cr_expect_float_eq(oq_satcheck_loss_db(y1), 10.0 * log10(1.0 + 6.0 * 125.0 * 125.0), 1e-9);
    oq_satcheck_free(s);
    oq_diag_free(&d);
    oq_model_free(m);
}

Test(satcheck, exact_arithmetic_loses_nothing)
{
    oq_model *m = quant_model();
    oq_diag d;
    oq_diag_init(&d);
    oq_satcheck *s = NULL;
    cr_assert_eq(oq_satcheck_new(m, OQ_ARITH_EXACT, 1, &s, &d), OQ_OK);
    oq_rt_tensor in;
    sample(255, 255, &in);
    cr_assert_eq(oq_satcheck_sample(s, &in, 1, &d), OQ_OK);
    for (size_t i = 0; i < oq_satcheck_n_layers(s); i++) {
        const oq_satcheck_layer *L = oq_satcheck_layer_at(s, i);
        cr_expect_eq(L->err.n, strcmp(L->tensor, "x_dequant") == 0 ? 2u : 1u, "%s", L->tensor);
        cr_expect_eq(oq_satcheck_loss_db(oq_satcheck_layer_at(s, i)), 0.0);
    }
    cr_expect_eq(oq_satcheck_output_at(s, 0)->err.sdd, 0.0);
    oq_satcheck_free(s);
    oq_diag_free(&d);
    oq_model_free(m);
}

static const oq_verify_layer *vlayer(const oq_verify *v, const char *name)
{
    for (size_t i = 0; i < oq_verify_n_layers(v); i++)
        if (strcmp(oq_verify_layer_at(v, i)->name, name) == 0)
            return oq_verify_layer_at(v, i);
    cr_assert_fail("no layer %s", name);
    return NULL;
}

/* verify --target avx2: the quantized model runs with avx2 arithmetic (y1's DequantizeLinear
 * only feeds the fused mm2 group, so y1 is taken from its QuantizeLinear output); the
 * per-layer and per-output loss against the reference arithmetic. */
Test(satcheck, verify_with_target_arithmetic)
{
    oq_model *fm = float_model(), *qm = quant_model();
    oq_diag d;
    oq_diag_init(&d);
    for (int arith = 0; arith <= 2; arith++) {
        oq_verify_options o = oq_verify_options_default();
        o.arith = (oq_arith)arith;
        o.threads = 1;
        oq_verify *v = NULL;
        cr_assert_eq(oq_verify_new(fm, qm, &o, &v, &d), OQ_OK);
        oq_rt_tensor in;
        sample(255, 255, &in);
        cr_assert_eq(oq_verify_sample(v, &in, 1, "s0", &d), OQ_OK);
        const oq_verify_layer *y1 = vlayer(v, "y1"), *y2 = vlayer(v, "y2");
        const oq_verify_output *out = oq_verify_output_at(v, 0);
        /* float y1 = y2 = 64770 */
        double q1 = arith == OQ_ARITH_AVX2 ? 32768.0 : 64768.0;
        cr_expect_eq(y1->acc.n, 1, "arith %d", arith);
        cr_expect_eq(y1->acc.sdd, (64770.0 - q1) * (64770.0 - q1), "arith %d", arith);
        cr_expect_eq(out->err.sdd, (64770.0 - q1) * (64770.0 - q1), "arith %d", arith);
        /* the isolated y2 reads the float y1 (quantized: 253): no saturation in mm2 */
        cr_expect_eq(y2->iso.sdd, 2.0 * 2.0, "arith %d", arith);
        if (arith == OQ_ARITH_REFERENCE) {
            cr_expect(!y1->has_arith);
            cr_expect_eq(out->arith.n, 0);
        } else {
            cr_expect(y1->has_arith && y2->has_arith);
            double e = arith == OQ_ARITH_AVX2 ? 32000.0 * 32000.0 : 0.0;
            cr_expect_eq(y1->arith.sdd, e, "arith %d", arith);
            cr_expect_eq(y2->arith.sdd, 0.0, "arith %d", arith);
            cr_expect_eq(out->arith.n, 1);
            cr_expect_eq(out->arith.sdd, e, "arith %d", arith);
        }
        oq_verify_free(v);
    }
    oq_diag_free(&d);
    oq_model_free(fm);
    oq_model_free(qm);
}

/* The fallback search measures with the target's arithmetic: with the reference
 * arithmetic the chain's output is 64768 against the float 64770 (SQNR 20 log10(64770 / 2),
 * target met as quantized); with avx2 it is 32768 (20 log10(64770 / 32002)), and mm1, the
 * saturating layer, goes back to float, after which y1 = 64770 -> 253 and the output is
 * 64768 again. */
Test(satcheck, fallback_measures_with_the_target_arithmetic)
{
    for (int arith = 0; arith <= 2; arith += 2) {
        oq_model *fm = float_model(), *qm = quant_model();
        oq_diag d;
        oq_diag_init(&d);
        oq_calib_source *src = NULL;
        cr_assert_eq(oq_calib_source_random(1, 1, 0, 0, &src, &d), OQ_OK);
        cr_assert_eq(oq_calib_source_set_value(src, "x", 255.0, &d), OQ_OK);
        oq_fallback_options o = oq_fallback_options_default();
        o.target_sqnr_db = 30;
        o.threads = 1;
        o.arith = (oq_arith)arith;
        oq_fallback_result r;
        memset(&r, 0, sizeof r);
        cr_assert_eq(oq_fallback_run(fm, qm, src, &o, &r, &d), OQ_OK);
        double good = 20.0 * log10(64770.0 / 2.0);
        cr_expect(r.met, "arith %d", arith);
        cr_expect_float_eq(r.sqnr_db, good, 1e-6, "arith %d: %g", arith, r.sqnr_db);
        if (arith == OQ_ARITH_REFERENCE) {
            cr_expect_eq(r.n_steps, 1);
        } else {
            cr_assert_eq(r.n_steps, 2);
            cr_expect_float_eq(r.steps[0].sqnr_db, 20.0 * log10(64770.0 / 32002.0), 1e-6, "%g",
                               r.steps[0].sqnr_db);
            cr_expect_str_eq(r.steps[1].node, "mm1");
        }
        oq_fallback_result_free(&r);
        oq_calib_source_free(src);
        oq_diag_free(&d);
        oq_model_free(fm);
        oq_model_free(qm);
    }
}

/* x [1, 2] -> MatMul(DQ(int8 W [2, 1])): the pair (w0, w1) is added in one int16 on AVX2 */
static oq_model *pair_model(int8_t w0, int8_t w1)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    oq_value *x = tu_input_1xc(m, "x", 2);
    const int8_t wq[2] = {w0, w1};
    int64_t d[2] = {2, 1};
    oq_value *w = tu_weight_dq_i8(m, "w", wq, d, 1.0f);
    oq_value *xd = tu_qdq_u8(m, x, "x", "x_dequant", 1.0f, 0);
    oq_value *p = tu_node(m, "MatMul", "mm", xd, w, NULL, "y_prequant");
    oq_graph_add_output(m->graph, tu_qdq_u8(m, p, "y", "y", 256.0f, 0), NULL);
    return m;
}

Test(satcheck, can_saturate_only_where_an_int8_pair_exceeds_128_steps)
{
    /* 255 * (64 + 64) = 32640 fits in int16; 255 * (64 + 65) = 32895 does not */
    const struct { int8_t a, b; bool avx2; } cases[] = {
        {64, 64, false}, {64, 65, true}, {127, 1, false}, {127, 2, true},
        {-64, -64, false}, {-64, -65, true}, {127, -127, false}, {0, 127, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        oq_model *m = pair_model(cases[i].a, cases[i].b);
        cr_assert_eq(oq_satcheck_can_saturate(m, OQ_ARITH_AVX2), cases[i].avx2, "pair %d, %d", cases[i].a,
                     cases[i].b);
        cr_assert_not(oq_satcheck_can_saturate(m, OQ_ARITH_EXACT));
        cr_assert_not(oq_satcheck_can_saturate(m, OQ_ARITH_REFERENCE));
        oq_model_free(m);
    }
}

/* A MatMul group with no Q after it (insert-qdq's placement by value leaves an output float
 * when only float ops read it; onnxruntime runs it as MatMulIntegerToFloat, integer
 * products all the same): a layer too, its float output compared as it is, its loss
 * measured against the rounding noise of a uint8 step of its range.
 *   y1 = x_dq @ [127, 127]^T (float, a graph output): reference 64770, avx2 32767;
 *   E_t = 32003^2; scale = 64770 / 255 = 254, E_q = 254^2 / 12. */
Test(satcheck, float_output_group_is_a_layer)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    oq_value *x = tu_input_1xc(m, "x", 2);
    const int8_t w1q[2] = {127, 127};
    int64_t d1[2] = {2, 1};
    oq_value *w1 = tu_weight_dq_i8(m, "w1", w1q, d1, 1.0f);
    oq_value *xd = tu_qdq_u8(m, x, "x", "x_dequant", 1.0f, 0);
    oq_value *y1 = tu_node(m, "MatMul", "mm1", xd, w1, NULL, "y1");
    oq_graph_add_output(m->graph, y1, NULL);
    oq_diag d;
    oq_diag_init(&d);
    oq_satcheck *s = NULL;
    cr_assert_eq(oq_satcheck_new(m, OQ_ARITH_AVX2, 1, &s, &d), OQ_OK);
    oq_rt_tensor in;
    sample(255, 255, &in);
    cr_assert_eq(oq_satcheck_sample(s, &in, 1, &d), OQ_OK);
    cr_assert_eq(oq_satcheck_n_layers(s), 2); /* x, y1 */
    const oq_satcheck_layer *L = layer(s, "y1");
    cr_expect_str_eq(L->node, "mm1");
    cr_expect_str_eq(L->op_type, "MatMul");
    cr_expect(L->product);
    cr_expect_eq(L->err.n, 1);
    cr_expect_eq(L->err.sdd, 32003.0 * 32003.0);
    cr_expect_float_eq(L->scale, 64770.0f / 255.0f, 1e-3f);
    double eq = (64770.0 / 255.0) * (64770.0 / 255.0) / 12.0;
    cr_expect_float_eq(oq_satcheck_loss_db(L), 10.0 * log10(1.0 + 32003.0 * 32003.0 / eq), 1e-4);
    oq_satcheck_free(s);
    /* exact arithmetic: nothing lost */
    cr_assert_eq(oq_satcheck_new(m, OQ_ARITH_EXACT, 1, &s, &d), OQ_OK);
    cr_assert_eq(oq_satcheck_sample(s, &in, 1, &d), OQ_OK);
    cr_expect_eq(oq_satcheck_loss_db(layer(s, "y1")), 0.0);
    oq_satcheck_free(s);
    oq_diag_free(&d);
    oq_model_free(m);
}
