#include <stdlib.h>
/* onnxq verify (src/quant/verify.c): error sums and their guards, and the accumulated,
 * isolated and output-QDQ errors of a two-layer QDQ model against values computed by
 * hand here (float32 arithmetic, ONNX QuantizeLinear rounding half to even). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnxq/onnxq.h"
#include "onnxq/verify.h"
#include "testutil.h"

/* ------------------------------------------------------------ error sums ---- */

Test(verify, sqnr_guards)
{
    oq_err_acc a;
    memset(&a, 0, sizeof a);
    cr_assert(isnan(oq_err_sqnr_db(&a)), "no data: NaN");
    cr_assert(isnan(oq_err_cosine(&a)));
    float x[2] = {3, 4}, y[2] = {3, 3};
    oq_err_acc_add_f32(&a, x, y, 2);
    /* |x|^2 = 25, |x-y|^2 = 1 */
    cr_assert_float_eq(oq_err_sqnr_db(&a), 10 * log10(25.0), 1e-12);
    cr_assert_float_eq(oq_err_cosine(&a), 21.0 / (5.0 * sqrt(18.0)), 1e-12);
    cr_assert_float_eq(a.maxad, 1.0, 0);
    cr_assert_float_eq(oq_err_mean_abs(&a), 0.5, 1e-15);

    memset(&a, 0, sizeof a);
    oq_err_acc_add_f32(&a, x, x, 2);
    cr_assert(isinf(oq_err_sqnr_db(&a)) && oq_err_sqnr_db(&a) > 0, "identical: +inf");
    cr_assert_float_eq(oq_err_cosine(&a), 1.0, 1e-15);

    float z[2] = {0, 0};
    memset(&a, 0, sizeof a);
    oq_err_acc_add_f32(&a, z, z, 2);
    cr_assert(isinf(oq_err_sqnr_db(&a)) && oq_err_sqnr_db(&a) > 0, "both zero: identical");
    cr_assert_float_eq(oq_err_cosine(&a), 1.0, 0);

    memset(&a, 0, sizeof a);
    oq_err_acc_add_f32(&a, z, y, 2);
    cr_assert(isinf(oq_err_sqnr_db(&a)) && oq_err_sqnr_db(&a) < 0, "zero signal, noise: -inf");
    cr_assert_float_eq(oq_err_cosine(&a), 0.0, 0);

    float n1[2] = {NAN, 1}, n2[2] = {2, INFINITY};
    memset(&a, 0, sizeof a);
    oq_err_acc_add_f32(&a, n1, n2, 2);
    cr_assert_eq(a.n, 0);
    cr_assert_eq(a.nonfinite, 2);

    /* the generic path (other dtypes) agrees with the float32 one */
    double xd[2] = {3, 4};
    int8_t yi[2] = {3, 3};
    memset(&a, 0, sizeof a);
    cr_assert(oq_err_acc_add(&a, xd, OQ_DTYPE_DOUBLE, yi, OQ_DTYPE_INT8, 2));
    cr_assert_float_eq(oq_err_sqnr_db(&a), 10 * log10(25.0), 1e-12);
}

/* ------------------------------------------------------------ by hand ------- */
/* The models are tu_mm_float_model / tu_mm_quant_model (tests/testutil.c). */

typedef struct sums {
    double xx, dd;
} sums;

static void add(sums *s, const float *x, const float *y, int n)
{
    for (int i = 0; i < n; i++) {
        s->xx += (double)x[i] * x[i];
        s->dd += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
    }
}

static double db(const sums *s)
{
    return 10 * log10(s->xx / s->dd);
}

static const float XS[3][4] = {
    {0.9f, -0.37f, 0.55f, 0.12f}, {-0.61f, 0.25f, 0.8f, -0.95f}, {0.33f, 0.71f, -0.2f, 0.49f}};

/* The hand reference sums products in plain float, k ascending: the executor's portable
 * GEMM does the same, its FMA paths round differently (which can move a value across a
 * quantization step and change the SQNR in the 7th digit). Use the portable path. */
static void portable_gemm(void)
{
    setenv("ONNXQ_SGEMM_ISA", "generic", 1);
}

Test(verify, accumulated_isolated_and_output_qdq_by_hand, .init = portable_gemm)
{
    tu_mm_make_weights();
    float w1d[12], w2d[6];
    for (int i = 0; i < 12; i++)
        w1d[i] = (float)tu_mm_w1q[i] * TU_MM_SW;
    for (int i = 0; i < 6; i++)
        w2d[i] = (float)tu_mm_w2q[i] * TU_MM_SW;
    sums acc1 = {0, 0}, acc2 = {0, 0}, iso2 = {0, 0}, own2 = {0, 0}, xq = {0, 0}, out = {0, 0};
    sums wt1 = {0, 0};
    add(&wt1, tu_mm_w1, w1d, 12);
    uint64_t top1 = 0;
    int clip2 = 0;
    for (int s = 0; s < 3; s++) {
        float x[4], y1f[3], y2f[2], y1q[3], y2q[2], y2i[2], y1qf[3], own[2];
        for (int i = 0; i < 4; i++)
            x[i] = tu_hq_u8(XS[s][i], TU_MM_SX, 128);
        add(&xq, XS[s], x, 4);
        tu_matmul(XS[s], tu_mm_w1, 4, 3, y1f);
        tu_matmul(y1f, tu_mm_w2, 3, 2, y2f);
        tu_matmul(x, w1d, 4, 3, y1q);
        for (int i = 0; i < 3; i++)
            y1q[i] = tu_hq_u8(y1q[i], TU_MM_SY1, 128);
        tu_matmul(y1q, w2d, 3, 2, y2q);
        for (int i = 0; i < 2; i++)
            y2q[i] = tu_hq_u8(y2q[i], TU_MM_SY2, TU_MM_ZY2);
        /* isolated: mm2 on QDQ(float y1) */
        for (int i = 0; i < 3; i++)
            y1qf[i] = tu_hq_u8(y1f[i], TU_MM_SY1, 128);
        tu_matmul(y1qf, w2d, 3, 2, y2i);
        for (int i = 0; i < 2; i++) {
            y2i[i] = tu_hq_u8(y2i[i], TU_MM_SY2, TU_MM_ZY2);
            own[i] = tu_hq_u8(y2f[i], TU_MM_SY2, TU_MM_ZY2);
        }
        for (int i = 0; i < 2; i++) /* saturated: more than half a step past an end */
            clip2 += y2f[i] < (-100.0 - 0.5) * (double)TU_MM_SY2 || y2f[i] > (155.0 + 0.5) * (double)TU_MM_SY2;
        add(&acc1, y1f, y1q, 3);
        add(&acc2, y2f, y2q, 2);
        add(&iso2, y2f, y2i, 2);
        add(&own2, y2f, own, 2);
        add(&out, y2f, y2q, 2);
        top1 += (y2f[0] >= y2f[1]) == (y2q[0] >= y2q[1]);
    }
    /* the test only means something if the three measures differ */
    cr_assert(fabs(db(&acc2) - db(&iso2)) > 0.1, "acc %g iso %g", db(&acc2), db(&iso2));
    cr_assert(fabs(db(&iso2) - db(&own2)) > 0.1, "iso %g own %g", db(&iso2), db(&own2));

    oq_model *fm = tu_mm_float_model(), *qm = tu_mm_quant_model();
    oq_diag d;
    oq_diag_init(&d);
    oq_verify *v;
    oq_verify_options o = oq_verify_options_default();
    o.threads = 1;
    cr_assert_eq(oq_verify_new(fm, qm, &o, &v, &d), OQ_OK);
    for (int s = 0; s < 3; s++) {
        oq_rt_tensor in;
        int64_t dims[2] = {1, 4};
        oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, dims, 2, (void *)XS[s]);
        cr_assert_eq(oq_verify_sample(v, &in, 1, "s", &d), OQ_OK);
    }
    cr_assert(oq_verify_has_isolation(v));
    cr_assert_eq(oq_verify_n_samples(v), 3);
    const oq_verify_output *vo = oq_verify_output_at(v, 0);
    cr_assert_str_eq(vo->name, "y2");
    cr_assert_float_eq(oq_err_sqnr_db(&vo->err), db(&out), 1e-6);
    cr_assert(vo->class_scores);
    cr_assert_eq(vo->rows, 3);
    cr_assert_eq(vo->top1_agree, top1);
    cr_assert_eq(vo->topk, 2);

    const oq_verify_layer *lx = NULL, *l1 = NULL, *l2 = NULL;
    for (size_t i = 0; i < oq_verify_n_layers(v); i++) {
        const oq_verify_layer *L = oq_verify_layer_at(v, i);
        if (strcmp(L->name, "x") == 0)
            lx = L;
        if (strcmp(L->name, "y1") == 0)
            l1 = L;
        if (strcmp(L->name, "y2") == 0)
            l2 = L;
    }
    cr_assert(lx && l1 && l2);
    cr_assert_str_eq(lx->op_type, "input");
    cr_assert(l1->order < l2->order);
    cr_assert_str_eq(l2->op_type, "MatMul");
    cr_assert_float_eq(oq_err_sqnr_db(&lx->acc), db(&xq), 1e-6);
    cr_assert_float_eq(oq_err_sqnr_db(&l1->acc), db(&acc1), 1e-6);
    /* first layer: isolated == accumulated (same inputs) */
    cr_assert_float_eq(oq_err_sqnr_db(&l1->iso), db(&acc1), 1e-6);
    cr_assert_float_eq(oq_err_sqnr_db(&l2->acc), db(&acc2), 1e-6);
    cr_assert_float_eq(oq_err_sqnr_db(&l2->iso), db(&iso2), 1e-6);
    cr_assert_float_eq(oq_err_sqnr_db(&l2->own), db(&own2), 1e-6);
    /* the quantizer's range: uint8, zp 100, scale 0.01 -> [-1.00, 1.55] */
    cr_assert(l2->has_qrange);
    cr_assert_eq(l2->zero_point, TU_MM_ZY2);
    cr_assert_float_eq(l2->qmin, -100.0 * (double)TU_MM_SY2, 1e-9);
    cr_assert_float_eq(l2->qmax, 155.0 * (double)TU_MM_SY2, 1e-9);
    cr_assert_eq(l2->obs.count, 6);
    cr_assert_float_eq(l2->clipped, (double)clip2, 0.0, "clipped %g, by hand %d", l2->clipped, clip2);
    cr_assert(clip2 > 0, "the test only means something if some y2 saturates");

    /* weights: float initializer vs DequantizeLinear output */
    cr_assert_eq(oq_verify_n_weights(v), 2);
    const oq_verify_weight *w = oq_verify_weight_at(v, 0);
    if (strcmp(w->name, "w1") != 0)
        w = oq_verify_weight_at(v, 1);
    cr_assert_str_eq(w->name, "w1");
    cr_assert_float_eq(oq_err_sqnr_db(&w->err), db(&wt1), 1e-6);
    oq_verify_free(v);
    oq_model_free(fm);
    oq_model_free(qm);
    oq_diag_free(&d);
}

Test(verify, missing_output_is_refused)
{
    tu_mm_make_weights();
    oq_model *fm = tu_mm_float_model(), *qm = tu_mm_float_model();
    oq_value *y1 = oq_graph_find_local(qm->graph, "y1");
    oq_value *y2 = oq_graph_find_local(qm->graph, "y2");
    oq_graph_replace_output(qm->graph, y2, y1);
    oq_diag d;
    oq_diag_init(&d);
    oq_verify *v = NULL;
    cr_assert_eq(oq_verify_new(fm, qm, NULL, &v, &d), OQ_ERR_INVALID);
    cr_assert_null(v);
    char buf[256];
    oq_diag_format(oq_diag_first_error(&d), buf, sizeof buf);
    cr_assert(strstr(buf, "no output \"y2\""), "%s", buf);
    oq_model_free(fm);
    oq_model_free(qm);
    oq_diag_free(&d);
}

/* ------------------------------------------------------------ slices -------- */
/* y = Concat(big = x * 100, small = x * 0.01): in the quantized model only small goes
 * through a coarse QDQ (uint8, scale 0.004, zero point 128). The whole output's SQNR is
 * high (big's energy), the small part's is computed by hand; big's part is exact. */

enum { CAT_PLAIN, CAT_TRANSPOSE, CAT_RESHAPE, CAT_RESHAPE_MIXED };
#define SMALL_S 0.004f

static oq_value *cat_init_i64(oq_model *m, const char *name, const int64_t *v, int64_t n)
{
    return oq_graph_add_initializer(m->graph, name, OQ_DTYPE_INT64, &n, 1, v, (size_t)n * sizeof *v);
}

static oq_model *cat_model(bool quant, int variant)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    oq_value *x = tu_input_1xc(m, "x", 4);
    oq_value *big = tu_node(m, "Mul", "mul_big", x, tu_scalar_f(m, "k_big", 100.0f), NULL, "big");
    oq_value *small;
    if (quant) {
        oq_value *pre = tu_node(m, "Mul", "mul_small", x, tu_scalar_f(m, "k_small", 0.01f), NULL,
                                "small_prequant");
        small = tu_qdq_u8(m, pre, "small", "small", SMALL_S, 128);
    } else {
        small = tu_node(m, "Mul", "mul_small", x, tu_scalar_f(m, "k_small", 0.01f), NULL, "small");
    }
    oq_value *ins[3] = {big, small, big};
    bool three = variant == CAT_RESHAPE_MIXED;
    bool direct = variant == CAT_PLAIN;
    oq_value *cat = oq_graph_new_value(m->graph, direct ? "y" : "cat");
    oq_node *c = oq_node_new(m->graph, "Concat", NULL, "concat", ins, three ? 3 : 2, &cat, 1);
    oq_node_set_attr_int(c, "axis", variant == CAT_TRANSPOSE ? 0 : 1);
    oq_graph_append(m->graph, c);
    oq_value *y = cat;
    if (variant == CAT_TRANSPOSE) { /* [2, 4] -> [4, 2] */
        y = tu_node(m, "Transpose", "transpose", cat, NULL, NULL, "y");
        int64_t perm[2] = {1, 0};
        oq_node_set_attr_ints(y->producer, "perm", perm, 2);
    } else if (variant == CAT_RESHAPE) { /* [1, 8] -> [2, 4]: one part per row */
        static const int64_t shape[2] = {2, 4};
        y = tu_node(m, "Reshape", "reshape", cat, cat_init_i64(m, "shape", shape, 2), NULL, "y");
    } else if (variant == CAT_RESHAPE_MIXED) { /* [1, 12] -> [2, 6]: row 0 holds big and small */
        static const int64_t shape[2] = {2, 6};
        y = tu_node(m, "Reshape", "reshape", cat, cat_init_i64(m, "shape", shape, 2), NULL, "y");
    }
    oq_graph_add_output(m->graph, y, NULL);
    return m;
}

/* big part exact; small part: x * 0.01 against its QDQ; whole: both */
static void cat_by_hand(sums *whole, sums *part_small)
{
    for (int s = 0; s < 3; s++) {
        float b[4], sm[4], q[4];
        for (int i = 0; i < 4; i++) {
            b[i] = XS[s][i] * 100.0f;
            sm[i] = XS[s][i] * 0.01f;
            q[i] = tu_hq_u8(sm[i], SMALL_S, 128);
        }
        add(whole, b, b, 4);
        add(whole, sm, q, 4);
        add(part_small, sm, q, 4);
    }
}

static oq_verify *cat_verify(int variant, oq_model **fm, oq_model **qm)
{
    *fm = cat_model(false, variant);
    *qm = cat_model(true, variant);
    oq_diag d;
    oq_diag_init(&d);
    oq_verify *v = NULL;
    oq_verify_options o = oq_verify_options_default();
    o.threads = 1;
    cr_assert_eq(oq_verify_new(*fm, *qm, &o, &v, &d), OQ_OK, "%s", d.count ? d.entries[0].message : "");
    for (int s = 0; s < 3; s++) {
        oq_rt_tensor in;
        int64_t dims[2] = {1, 4};
        oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, dims, 2, (void *)XS[s]);
        cr_assert_eq(oq_verify_sample(v, &in, 1, "s", &d), OQ_OK, "%s", d.count ? d.entries[0].message : "");
    }
    oq_diag_free(&d);
    return v;
}

/* the two parts at axis `axis`, ranges [0, mid) and [mid, end), by hand */
static void check_two_parts(int variant, int64_t axis, int64_t mid, int64_t end, const char *worst_label)
{
    sums whole = {0, 0}, small = {0, 0};
    cat_by_hand(&whole, &small);
    /* the test only means something if the whole output hides the small part's error */
    cr_assert(db(&whole) > db(&small) + 40, "whole %g small %g", db(&whole), db(&small));
    oq_model *fm, *qm;
    oq_verify *v = cat_verify(variant, &fm, &qm);
    const oq_verify_output *o = oq_verify_output_at(v, 0);
    cr_assert_str_eq(o->name, "y");
    cr_assert_null(o->slice_note, "%s", o->slice_note);
    cr_assert_str_eq(o->concat, "concat");
    cr_assert_eq(o->n_slices, 2);
    const oq_verify_slice *s0 = &o->slices[0], *s1 = &o->slices[1];
    cr_assert_str_eq(s0->tensor, "big");
    cr_assert_str_eq(s0->node, "mul_big");
    cr_assert_str_eq(s0->op_type, "Mul");
    cr_assert_str_eq(s1->tensor, "small");
    cr_assert(s0->axis == axis && s1->axis == axis, "axis %lld", (long long)s0->axis);
    cr_assert(s0->start == 0 && s0->end == mid && s1->start == mid && s1->end == end);
    cr_assert_eq(s0->err.n, 12);
    cr_assert_eq(s1->err.n, 12);
    cr_assert(isinf(oq_err_sqnr_db(&s0->err)) && oq_err_sqnr_db(&s0->err) > 0, "big part exact");
    cr_assert_float_eq(oq_err_sqnr_db(&s1->err), db(&small), 1e-9);
    cr_assert_float_eq(oq_err_sqnr_db(&o->err), db(&whole), 1e-9);
    /* the parts add up to the whole */
    cr_assert_float_eq(s0->err.sxx + s1->err.sxx, o->err.sxx, 1e-9 * o->err.sxx);
    cr_assert_float_eq(s0->err.sdd + s1->err.sdd, o->err.sdd, 1e-12);
    /* the worst part decides */
    size_t k = 99, out = 99, ks = 99;
    const oq_err_acc *e = NULL;
    cr_assert_float_eq(oq_verify_output_worst(o, &k, &e), db(&small), 1e-9);
    cr_assert_eq(k, 1);
    cr_assert_eq(e, &s1->err);
    cr_assert_float_eq(oq_verify_worst(v, &out, &ks), db(&small), 1e-9);
    cr_assert(out == 0 && ks == 1);
    char lb[64];
    cr_assert_str_eq(oq_verify_slice_label(o, 1, lb, sizeof lb), worst_label);
    oq_verify_free(v);
    oq_model_free(fm);
    oq_model_free(qm);
}

Test(verify, concat_output_judged_per_part_by_hand)
{
    check_two_parts(CAT_PLAIN, 1, 4, 8, "y[1:4..8]");
}

Test(verify, concat_then_transpose_parts_follow_the_axis)
{
    /* Concat on axis 0 of [1, 4] + [1, 4] = [2, 4], transposed to [4, 2]: each part is a
     * column (axis 1), its elements strided */
    check_two_parts(CAT_TRANSPOSE, 1, 1, 2, "y[1:1..2]");
}

Test(verify, concat_then_reshape_parts_follow_the_rows)
{
    /* [1, 8] reshaped to [2, 4]: part 0 is row 0, part 1 row 1 (axis 0) */
    check_two_parts(CAT_RESHAPE, 0, 1, 2, "y[0:1..2]");
}

Test(verify, reshape_that_mixes_parts_is_judged_whole)
{
    /* [1, 12] = (big, small, big) reshaped to [2, 6]: a row holds two parts, so no axis
     * separates them: one slice, the whole output, and a note saying why */
    sums whole = {0, 0}, small = {0, 0};
    cat_by_hand(&whole, &small);
    oq_model *fm, *qm;
    oq_verify *v = cat_verify(CAT_RESHAPE_MIXED, &fm, &qm);
    const oq_verify_output *o = oq_verify_output_at(v, 0);
    cr_assert_eq(o->n_slices, 1);
    cr_assert(o->slice_note && strstr(o->slice_note, "reshape"), "%s", o->slice_note ? o->slice_note : "(none)");
    cr_assert_eq(o->slices[0].axis, -1);
    cr_assert_eq(memcmp(&o->slices[0].err, &o->err, sizeof o->err), 0);
    size_t k = 99;
    cr_assert_float_eq(oq_verify_output_worst(o, &k, NULL), oq_err_sqnr_db(&o->err), 0);
    cr_assert_eq(k, 0);
    char lb[64];
    cr_assert_str_eq(oq_verify_slice_label(o, k, lb, sizeof lb), "y");
    oq_verify_free(v);
    oq_model_free(fm);
    oq_model_free(qm);
}

Test(verify, output_without_concat_is_one_whole_slice, .init = portable_gemm)
{
    tu_mm_make_weights();
    oq_model *fm = tu_mm_float_model(), *qm = tu_mm_quant_model();
    oq_diag d;
    oq_diag_init(&d);
    oq_verify *v;
    cr_assert_eq(oq_verify_new(fm, qm, NULL, &v, &d), OQ_OK);
    for (int s = 0; s < 3; s++) {
        oq_rt_tensor in;
        int64_t dims[2] = {1, 4};
        oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, dims, 2, (void *)XS[s]);
        cr_assert_eq(oq_verify_sample(v, &in, 1, "s", &d), OQ_OK);
    }
    const oq_verify_output *o = oq_verify_output_at(v, 0);
    cr_assert_eq(o->n_slices, 1);
    cr_assert_null(o->concat);
    cr_assert_null(o->slice_note);
    const oq_verify_slice *sl = &o->slices[0];
    cr_assert_eq(sl->axis, -1);
    cr_assert_str_eq(sl->tensor, "y2");
    cr_assert_str_eq(sl->node, "mm2");
    cr_assert_str_eq(sl->op_type, "MatMul");
    cr_assert_eq(memcmp(&sl->err, &o->err, sizeof o->err), 0, "the slice is the whole output");
    size_t out = 99, k = 99;
    cr_assert_float_eq(oq_verify_worst(v, &out, &k), oq_err_sqnr_db(&o->err), 0);
    cr_assert(out == 0 && k == 0);
    char lb[64];
    cr_assert_str_eq(oq_verify_slice_label(o, k, lb, sizeof lb), "y2");
    oq_verify_free(v);
    oq_model_free(fm);
    oq_model_free(qm);
    oq_diag_free(&d);
}
