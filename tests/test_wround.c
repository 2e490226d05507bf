/* Weight rounding (src/quant/wround.c): GPTQ on the int8 weights of a QDQ model, known
 * answers on hand-built MatMul and Conv layers (the correlated pair worked by hand in
 * tests/test_gptq.c; the Conv's reduction order seen through the pair limit), and on a
 * strided, padded 3x3 convolution a smaller output error than round to nearest on samples
 * the rounding never saw. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnxq/exec.h"
#include "onnxq/gptq.h"
#include "onnxq/onnxq.h"
#include "onnxq/quant.h"
#include "onnxq/wround.h"
#include "testutil.h"

typedef struct fw {
    const char *name;
    const float *w;
    int64_t numel;
} fw;

static const float *float_of(const char *name, int64_t numel, void *user)
{
    const fw *f = user;
    return !strcmp(name, f->name) && numel == f->numel ? f->w : NULL;
}

/* the defaults, the float weights from kept, the pair limit or not */
static oq_wround_options options(fw *kept, bool pairs)
{
    oq_wround_options o = oq_wround_options_default();
    o.float_weight = float_of;
    o.user = kept;
    o.pair_limit = pairs;
    return o;
}

static oq_value *input(oq_model *m, const char *name, const int64_t *dims, size_t rank)
{
    oq_value *v = oq_graph_new_value(m->graph, name);
    oq_graph_add_input(m->graph, v, oq_type_tensor(m, OQ_DTYPE_FLOAT, dims, NULL, rank));
    return v;
}

/* W (int8 dims, scale s) behind a DequantizeLinear, or the float weight */
static oq_value *weight(oq_model *m, const int8_t *q, const float *f, const int64_t *dims, size_t rank, float s)
{
    int64_t n = 1;
    for (size_t i = 0; i < rank; i++)
        n *= dims[i];
    if (f) {
        oq_value *v = oq_graph_add_initializer(m->graph, "W", OQ_DTYPE_FLOAT, dims, rank, f, (size_t)n * sizeof *f);
        cr_assert_not_null(v);
        return v;
    }
    oq_value *qv = oq_graph_add_initializer(m->graph, "W_quantized", OQ_DTYPE_INT8, dims, rank, q, (size_t)n);
    int8_t z = 0;
    const int64_t one[1] = {1};
    oq_value *zv = oq_graph_add_initializer(m->graph, "W_zero_point", OQ_DTYPE_INT8, one, 0, &z, 1);
    return tu_node(m, "DequantizeLinear", "W_DequantizeLinear", qv, tu_scalar_f(m, "W_scale", s), zv, "W");
}

static oq_calib_source *feed(const char *name, const float *x, const int64_t *dims, size_t rank, int n)
{
    oq_calib_source *src = NULL;
    cr_assert_eq(oq_calib_source_feed(&src, NULL), OQ_OK);
    int64_t per = 1;
    for (size_t i = 0; i < rank; i++)
        per *= dims[i];
    for (int k = 0; k < n; k++) {
        oq_rt_tensor t;
        cr_assert_eq(oq_rt_tensor_borrow(&t, OQ_DTYPE_FLOAT, dims, rank, (void *)(x + k * per)), OQ_OK);
        const char *names[1] = {name};
        cr_assert_eq(oq_calib_source_feed_add(src, names, &t, 1, NULL), OQ_OK);
    }
    return src;
}

static const int8_t *wq_of(oq_model *m)
{
    const oq_value *v = oq_graph_find_local(m->graph, "W_quantized");
    cr_assert(v && v->initializer);
    return oq_tensor_data(v->initializer, NULL);
}

/* x [1, 2] -> QDQ (uint8, scale 1) -> MatMul W [2, 1] (int8, scale 1) -> y; float W =
 * [0.6, 0.6], rounded to nearest [1, 1]. The inputs are always equal (x = (k, k)), so GPTQ
 * gives [1, 0] (tests/test_gptq.c works it by hand); the second layer input row of each
 * sample scales H, not the answer. */
Test(wround, matmul_correlated_inputs_by_hand)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    int64_t xd[2] = {1, 2}, wd[2] = {2, 1};
    oq_value *x = input(m, "x", xd, 2);
    const int8_t q[2] = {1, 1};
    const float f[2] = {0.6f, 0.6f};
    oq_value *xq = tu_qdq_u8(m, x, "x", "x_dq", 1.0f, 0);
    oq_graph_add_output(m->graph, tu_node(m, "MatMul", "mm", xq, weight(m, q, NULL, wd, 2, 1.0f), NULL, "y"), NULL);
    float xs[6] = {1, 1, 2, 2, 3, 3};
    oq_calib_source *src = feed("x", xs, xd, 2, 3);
    fw kept = {"W_quantized", f, 2};
    oq_wround_options o = options(&kept, false);
    oq_wround_result r;
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_weight_round(m, src, &o, &r, &d), OQ_OK);
    const int8_t *nq = wq_of(m);
    cr_assert_eq(nq[0], 1);
    cr_assert_eq(nq[1], 0);
    cr_assert_eq(r.layers, 1);
    cr_assert_eq(r.changed, 1);
    cr_assert_eq(r.samples, 3);
    /* the layer's error 0.64 -> 0.04 per unit input (tests/test_gptq.c): 12.04 dB */
    cr_assert_float_eq(r.mean_gain_db, 10.0 * log10(16.0), 1e-3);
    /* no float weight: left alone, counted */
    oq_model *m2 = oq_model_new();
    oq_model_set_opset(m2, "", 13);
    x = input(m2, "x", xd, 2);
    xq = tu_qdq_u8(m2, x, "x", "x_dq", 1.0f, 0);
    oq_graph_add_output(m2->graph, tu_node(m2, "MatMul", "mm", xq, weight(m2, q, NULL, wd, 2, 1.0f), NULL, "y"),
                        NULL);
    kept.name = "other";
    cr_assert_eq(oq_weight_round(m2, src, &o, &r, &d), OQ_OK);
    cr_assert_eq(r.layers, 0);
    cr_assert_eq(r.skipped, 1);
    cr_assert_eq(wq_of(m2)[1], 1);
    oq_diag_free(&d);
    oq_calib_source_free(src);
    oq_model_free(m);
    oq_model_free(m2);
}

/* The Conv's reduction order (kh, kw, cin), seen through the pair limit: W [1, 2, 1, 2]
 * (one output, two input channels, a 1x2 kernel) of whole steps, in the ONNX layout
 * (c0s0, c0s1, c1s0, c1s1) = (60, 100, 60, 60). onnxruntime's pairs are (s0c0, s0c1) =
 * 60 + 60 (fits) and (s1c0, s1c1) = 100 + 60 > 128: the second, c1s1, goes down to 28 and
 * its error has no later feature to go to. The (cin, kh, kw) order would pair c0s0 with
 * c0s1 instead and lower c0s1: the model starts with that rounding, (60, 28, 60, 60), which
 * is replaced. Inputs: independent signs per pixel and channel (no error to spread either
 * way); padding 1 on the width and stride 2 exercise the im2col edges. */
Test(wround, conv_reduction_order_by_the_pair_limit)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    int64_t xd[4] = {1, 2, 3, 6}, wd[4] = {1, 2, 1, 2};
    oq_value *x = input(m, "x", xd, 4);
    const int8_t q[4] = {60, 28, 60, 60};
    const float f[4] = {60, 100, 60, 60};
    oq_value *xq = tu_qdq_u8(m, x, "x", "x_dq", 1.0f, 128);
    oq_value *y = tu_node(m, "Conv", "conv", xq, weight(m, q, NULL, wd, 4, 1.0f), NULL, "y");
    oq_node *cn = tu_find_node(m, "conv");
    const int64_t pads[4] = {0, 1, 0, 1}, strides[2] = {1, 2};
    oq_node_set_attr_ints(cn, "pads", pads, 4);
    oq_node_set_attr_ints(cn, "strides", strides, 2);
    oq_graph_add_output(m->graph, y, NULL);
    enum { NS = 8, PER = 2 * 3 * 6 };
    float xs[NS * PER];
    uint64_t rng = 7;
    for (int i = 0; i < NS * PER; i++)
        xs[i] = tu_urand(&rng) < 0.5 ? -1.0f : 1.0f;
    oq_calib_source *src = feed("x", xs, xd, 4, NS);
    fw kept = {"W_quantized", f, 4};
    oq_wround_options o = options(&kept, true);
    oq_wround_result r;
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_weight_round(m, src, &o, &r, &d), OQ_OK);
    const int8_t *nq = wq_of(m);
    cr_assert_eq(nq[0], 60);
    cr_assert_eq(nq[1], 100);
    cr_assert_eq(nq[2], 60);
    cr_assert_eq(nq[3], 28, "%d %d %d %d (skipped %zu)", nq[0], nq[1], nq[2], nq[3], r.skipped);
    cr_assert_eq(r.layers, 1);
    oq_diag_free(&d);
    oq_calib_source_free(src);
    oq_model_free(m);
}

/* a 3x3 convolution, stride 2, padding 1, 3 -> 4 channels, over x [1, 3, 9, 9] with
 * weights w (int8 q at scale s per tensor, or float w) */
static oq_model *conv3(const int8_t *q, const float *w, float s)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    int64_t xd[4] = {1, 3, 9, 9}, wd[4] = {4, 3, 3, 3};
    oq_value *x = input(m, "x", xd, 4);
    oq_value *xq = tu_qdq_u8(m, x, "x", "x_dq", 1.0f / 64, 128);
    oq_value *y = tu_node(m, "Conv", "conv", xq, weight(m, q, w, wd, 4, s), NULL, "y");
    oq_node *cn = tu_find_node(m, "conv");
    const int64_t pads[4] = {1, 1, 1, 1}, strides[2] = {2, 2};
    oq_node_set_attr_ints(cn, "pads", pads, 4);
    oq_node_set_attr_ints(cn, "strides", strides, 2);
    oq_graph_add_output(m->graph, y, NULL);
    return m;
}

/* squared output difference of a and b over the samples xs */
static double out_err(oq_model *a, oq_model *b, const float *xs, int n)
{
    oq_plan *pa = NULL, *pb = NULL;
    oq_plan_options po = oq_plan_options_default();
    po.threads = 1;
    cr_assert_eq(oq_plan_compile(a, &po, &pa, NULL), OQ_OK);
    cr_assert_eq(oq_plan_compile(b, &po, &pb, NULL), OQ_OK);
    int64_t xd[4] = {1, 3, 9, 9};
    double e = 0;
    for (int k = 0; k < n; k++) {
        oq_rt_tensor in, oa, ob;
        memset(&oa, 0, sizeof oa);
        memset(&ob, 0, sizeof ob);
        cr_assert_eq(oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, xd, 4, (void *)(xs + k * 243)), OQ_OK);
        cr_assert_eq(oq_plan_run(pa, &in, 1, &oa, 1, NULL), OQ_OK);
        cr_assert_eq(oq_plan_run(pb, &in, 1, &ob, 1, NULL), OQ_OK);
        int64_t nn = oq_rt_tensor_numel(&oa);
        cr_assert_eq(nn, 4 * 5 * 5);
        for (int64_t i = 0; i < nn; i++) {
            double dd = (double)((float *)oa.data)[i] - ((float *)ob.data)[i];
            e += dd * dd;
        }
        oq_rt_tensor_release(&oa);
        oq_rt_tensor_release(&ob);
    }
    oq_plan_free(pa);
    oq_plan_free(pb);
    return e;
}

/* The same GPTQ from an im2col written here from the Conv definition (rows of (kh, kw, cin)
 * per output position, the zero padding outside): q [4 * 27] in the ONNX layout. */
static void reference_rounding(const float *xs, int n, const float *w, float s, int8_t *q)
{
    enum { K = 27, N = 4 };
    oq_gptq_stats h;
    cr_assert_eq(oq_gptq_stats_init(&h, K, NULL), OQ_OK);
    float rows[25 * K];
    for (int k = 0; k < n; k++) {
        const float *x = xs + k * 243;
        for (int oy = 0; oy < 5; oy++)
            for (int ox = 0; ox < 5; ox++)
                for (int ky = 0; ky < 3; ky++)
                    for (int kx = 0; kx < 3; kx++)
                        for (int c = 0; c < 3; c++) {
                            int iy = 2 * oy - 1 + ky, ix = 2 * ox - 1 + kx;
                            /* the input as the model reads it: after its uint8 QDQ */
                            float v = iy < 0 || iy >= 9 || ix < 0 || ix >= 9 ? 0.0f : x[(c * 9 + iy) * 9 + ix];
                            float dq = (float)(oq_quantize_value(v, 1.0f / 64, 128, 0, 255) - 128) / 64;
                            rows[(oy * 5 + ox) * K + (ky * 3 + kx) * 3 + c] = dq;
                        }
        cr_assert_eq(oq_gptq_stats_add(&h, rows, 25, NULL), OQ_OK);
    }
    float wk[K * N], sc[N] = {s, s, s, s};
    int32_t qk[K * N];
    for (int m = 0; m < N; m++)
        for (int c = 0; c < 3; c++)
            for (int t = 0; t < 9; t++)
                wk[(t * 3 + c) * N + m] = w[(m * 3 + c) * 9 + t];
    cr_assert_eq(oq_gptq_round_fixed(wk, K, N, sc, true, &h, 0.01, qk, NULL, NULL), OQ_OK);
    for (int m = 0; m < N; m++)
        for (int c = 0; c < 3; c++)
            for (int t = 0; t < 9; t++)
                q[(m * 3 + c) * 9 + t] = (int8_t)qk[(t * 3 + c) * N + m];
    oq_gptq_stats_free(&h);
}

/* Smooth inputs (neighbouring pixels correlated, as in images; each channel its own
 * pattern), coarse weights: the rounding is the one computed from the reference im2col
 * above, every pair stays within the limit, and the output error against the float
 * weights is smaller than round to nearest's on 16 samples the rounding never saw. */
Test(wround, strided_padded_conv_as_the_reference_and_better_on_new_samples)
{
    enum { NF = 24, NE = 16, PER = 243, NW = 108 };
    static float xs[(NF + NE) * PER];
    uint64_t rng = 99;
    for (int k = 0; k < NF + NE; k++)
        for (int ch = 0; ch < 3; ch++) {
            float a = tu_nrand(&rng), b = tu_nrand(&rng), c = tu_nrand(&rng), f = 0.2f + 0.1f * (float)ch;
            for (int i = 0; i < 9; i++)
                for (int j = 0; j < 9; j++)
                    xs[k * PER + (ch * 9 + i) * 9 + j] =
                        0.8f * (a * sinf(f * (float)i + b) + c * cosf(f * (float)j + (float)ch)) + 0.1f * tu_nrand(&rng);
        }
    float w[NW], mx = 0;
    int8_t q[NW], ref[NW];
    for (int i = 0; i < NW; i++) {
        w[i] = tu_nrand(&rng);
        mx = fabsf(w[i]) > mx ? fabsf(w[i]) : mx;
    }
    float s = mx / 127.0f * 6.0f; /* about 4 bits: the rounding matters */
    for (int i = 0; i < NW; i++)
        q[i] = (int8_t)oq_quantize_value(w[i], s, 0, -127, 127);
    oq_model *fm = conv3(NULL, w, s), *rtn = conv3(q, NULL, s), *m = conv3(q, NULL, s);
    oq_calib_source *src = feed("x", xs, (const int64_t[]){1, 3, 9, 9}, 4, NF);
    fw kept = {"W_quantized", w, NW};
    oq_wround_options o = options(&kept, true);
    oq_wround_result r;
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_weight_round(m, src, &o, &r, &d), OQ_OK, "%s", d.count ? d.entries[0].message : "");
    cr_assert_eq(r.layers, 1);
    cr_assert_gt(r.changed, 0);
    reference_rounding(xs, NF, w, s, ref);
    const int8_t *nq = wq_of(m);
    for (int i = 0; i < NW; i++)
        cr_assert_eq(nq[i], ref[i], "weight %d: %d, the reference im2col gives %d", i, nq[i], ref[i]);
    double e_rtn = out_err(fm, rtn, xs + NF * PER, NE), e_new = out_err(fm, m, xs + NF * PER, NE);
    cr_assert_lt(e_new, 0.8 * e_rtn, "new samples: GPTQ %g vs round to nearest %g", e_new, e_rtn);
    const int64_t wd[4] = {4, 3, 3, 3};
    oq_node *cn = tu_find_node(m, "conv");
    cr_assert(oq_weight_pairs_fit(cn, nq, wd, 4));
    oq_diag_free(&d);
    oq_calib_source_free(src);
    oq_model_free(fm);
    oq_model_free(rtn);
    oq_model_free(m);
}
