/* Executor speed paths that must not change a result: plan-time constant folding,
 * the vectorised QuantizeLinear / DequantizeLinear rows, elementwise chains fused into
 * one pass, convolutions read in place, and the thread pool. Each is checked against
 * hand-computed values and against the path it replaces (bit for bit). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/exec-impl.h"
#include "exec/kernel.h"
#include "onnxq/exec.h"
#include "onnxq/onnxq.h"
#include "testutil.h"

static const int64_t NO_DIMS[1] = {1};

static uint64_t rng = 7;
static float frand(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

/* n values from frand() (malloc'd) */
static float *frand_array(int64_t n)
{
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    cr_assert_not_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = frand();
    return v;
}

/* Compile m with the options and run it on one input; returns output 0 (owned). */
static oq_rt_tensor run1(oq_model *m, const oq_plan_options *o, int32_t dt, const int64_t *dims,
                         size_t rank, void *x, int64_t *total_bytes)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_plan *p = NULL;
    cr_assert_eq(oq_plan_compile(m, o, &p, &d), OQ_OK, "compile: %s",
                 d.count ? d.entries[0].message : "");
    oq_rt_tensor in, out;
    oq_rt_tensor_borrow(&in, dt, dims, rank, x);
    cr_assert_eq(oq_plan_run(p, &in, 1, &out, 1, &d), OQ_OK, "run: %s",
                 d.count ? d.entries[0].message : "");
    if (total_bytes)
        *total_bytes = oq_plan_total_bytes(p);
    oq_plan_free(p);
    oq_diag_free(&d);
    return out;
}

static void assert_same_bytes(const oq_rt_tensor *a, const oq_rt_tensor *b, const char *what)
{
    cr_assert_eq(a->dtype, b->dtype, "%s: dtype", what);
    cr_assert_eq(a->nbytes, b->nbytes, "%s: size", what);
    cr_assert(memcmp(a->data, b->data, (size_t)a->nbytes) == 0, "%s: bytes differ", what);
}

/* ------------------------------------------------------------------ folding ------ */

typedef struct seen {
    int calls;
    int dq_w1;              /* times the folded weight DequantizeLinear was observed */
    float w1[12];
} seen;

static void count_obs(const oq_node *n, size_t idx, const oq_rt_tensor *t, void *user)
{
    seen *s = user;
    s->calls++;
    if (strcmp(n->name, "w1_DequantizeLinear") == 0) {
        s->dq_w1++;
        cr_assert_eq(oq_rt_tensor_numel(t), 12);
        memcpy(s->w1, t->data, sizeof s->w1);
    }
}

Test(exec_fast, folded_plan_is_bit_identical_and_matches_hand_computed_values)
{
    setenv("ONNXQ_SGEMM_ISA", "generic", 1); /* tu_matmul: multiply, then add */
    tu_mm_make_weights();
    oq_model *m = tu_mm_quant_model();
    float x[4] = {0.7f, -1.3f, 2.2f, 0.05f};
    int64_t xd[2] = {1, 4};
    oq_plan_options fo = oq_plan_options_default(), uo = fo;
    fo.threads = uo.threads = 1;
    uo.no_fold = true;
    oq_rt_tensor yf = run1(m, &fo, OQ_DTYPE_FLOAT, xd, 2, x, NULL);
    oq_rt_tensor yu = run1(m, &uo, OQ_DTYPE_FLOAT, xd, 2, x, NULL);
    assert_same_bytes(&yf, &yu, "folded vs unfolded");
    /* by hand: dequantized weights, QDQ of x, y1, y2 */
    float w1d[12], w2d[6], xq[4], y1[3], y2[2];
    for (int i = 0; i < 12; i++)
        w1d[i] = (float)tu_mm_w1q[i] * TU_MM_SW;
    for (int i = 0; i < 6; i++)
        w2d[i] = (float)tu_mm_w2q[i] * TU_MM_SW;
    for (int i = 0; i < 4; i++)
        xq[i] = tu_hq_u8(x[i], TU_MM_SX, 128);
    tu_matmul(xq, w1d, 4, 3, y1);
    for (int i = 0; i < 3; i++)
        y1[i] = tu_hq_u8(y1[i], TU_MM_SY1, 128);
    tu_matmul(y1, w2d, 3, 2, y2);
    for (int i = 0; i < 2; i++) {
        y2[i] = tu_hq_u8(y2[i], TU_MM_SY2, TU_MM_ZY2);
        cr_assert_eq(((float *)yf.data)[i], y2[i], "y2[%d] %g expected %g", i,
                     ((float *)yf.data)[i], y2[i]);
    }
    /* the observer sees the folded weight once per run, with its values, and as many
       outputs as without folding */
    seen sf = {0}, su = {0};
    fo.on_tensor = uo.on_tensor = count_obs;
    fo.user = &sf;
    uo.user = &su;
    oq_diag d;
    oq_diag_init(&d);
    oq_plan *pf, *pu;
    cr_assert_eq(oq_plan_compile(m, &fo, &pf, &d), OQ_OK);
    cr_assert_eq(oq_plan_compile(m, &uo, &pu, &d), OQ_OK);
    oq_rt_tensor in, o1, o2;
    oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, xd, 2, x);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(oq_plan_run(pf, &in, 1, &o1, 1, &d), OQ_OK);
        cr_assert_eq(oq_plan_run(pu, &in, 1, &o2, 1, &d), OQ_OK);
        assert_same_bytes(&o1, &o2, "observed runs");
        oq_rt_tensor_release(&o1);
        oq_rt_tensor_release(&o2);
    }
    cr_assert_eq(sf.dq_w1, 2, "folded weight observed %d times in 2 runs", sf.dq_w1);
    cr_assert_eq(su.dq_w1, 2);
    cr_assert_eq(sf.calls, su.calls, "observer calls: folded %d, unfolded %d", sf.calls, su.calls);
    for (int i = 0; i < 12; i++)
        cr_assert_eq(sf.w1[i], w1d[i], "w1[%d]", i);
    oq_plan_free(pf);
    oq_plan_free(pu);
    oq_diag_free(&d);
    oq_rt_tensor_release(&yf);
    oq_rt_tensor_release(&yu);
    oq_model_free(m);
}

/* x[1, n] + ConstantOfShape(shape = [1, n], value 1.5); with big_const, also an unused
 * Constant node of 1 MiB */
static oq_model *cos_model(int64_t n, bool big_const)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    oq_value *x = tu_input_1xc(m, "x", n);
    int64_t shp[2] = {1, n}, sd[1] = {2};
    oq_value *sv = oq_graph_add_initializer(m->graph, "shape", OQ_DTYPE_INT64, sd, 1, shp,
                                            sizeof shp);
    oq_value *c = tu_node(m, "ConstantOfShape", "cos", sv, NULL, NULL, "c");
    float v = 1.5f;
    oq_tensor *val = oq_tensor_new(m, "value", OQ_DTYPE_FLOAT, NO_DIMS, 1, &v, 4);
    oq_node_set_attr_tensor(tu_find_node(m, "cos"), "value", val);
    if (big_const) {
        int64_t bd[1] = {1 << 18};
        float *big = calloc((size_t)bd[0], sizeof(float));
        oq_value *o = oq_graph_new_value(m->graph, "big");
        oq_node *k = oq_node_new(m->graph, "Constant", NULL, "big", NULL, 0, &o, 1);
        oq_node_set_attr_tensor(k, "value", oq_tensor_new(m, "big", OQ_DTYPE_FLOAT, bd, 1, big,
                                                          bd[0] * 4));
        oq_graph_append(m->graph, k);
        free(big);
    }
    oq_value *y = tu_node(m, "Add", "add", x, c, NULL, "y");
    oq_graph_add_output(m->graph, y, NULL);
    return m;
}

Test(exec_fast, folding_respects_the_memory_budget)
{
    /* The budget is twice the initializer and Constant bytes, at least 1 MiB. 1 KiB of
       folded constant: held by the plan, not in the run's buffers. 8 MiB: over the
       budget, computed on every run, in the run's buffers. 1.5 MiB: over 1 MiB, but
       within twice a 1 MiB Constant. All give x + 1.5. */
    const int64_t sizes[4] = {256, 2 << 20, 3 << 17, 3 << 17};
    const bool big[4] = {false, false, false, true}, folded[4] = {true, false, false, true};
    for (int k = 0; k < 4; k++) {
        int64_t n = sizes[k];
        oq_model *m = cos_model(n, big[k]);
        float *x = malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++)
            x[i] = (float)(i % 1000) * 0.25f;
        int64_t xd[2] = {1, n}, tf, tu;
        oq_plan_options fo = oq_plan_options_default(), uo = fo;
        fo.threads = uo.threads = 1;
        uo.no_fold = true;
        oq_rt_tensor yf = run1(m, &fo, OQ_DTYPE_FLOAT, xd, 2, x, &tf);
        oq_rt_tensor yu = run1(m, &uo, OQ_DTYPE_FLOAT, xd, 2, x, &tu);
        assert_same_bytes(&yf, &yu, "budget");
        for (int64_t i = 0; i < n; i += 997)
            cr_assert_eq(((float *)yf.data)[i], x[i] + 1.5f);
        int64_t c_bytes = n * 4;
        cr_assert_eq(tu, 2 * c_bytes, "unfolded: c and y in the run's buffers");
        cr_assert_eq(tf, folded[k] ? c_bytes : 2 * c_bytes, "case %d: %lld bytes of buffers", k,
                     (long long)tf);
        oq_rt_tensor_release(&yf);
        oq_rt_tensor_release(&yu);
        free(x);
        oq_model_free(m);
    }
}

/* ------------------------------------------------------------------ Q / DQ ------- */

static const char *const ISAS[3] = {"generic", "avx2", "avx512"};

/* x[n] -> QuantizeLinear(scale, zp of dtype qdt[, axis]) -> y; per axis when nc > 1
 * (x is [2, nc, inner], axis 1) */
static oq_model *q_model(int32_t qdt, bool dequant, const float *s, const int32_t *zp,
                         int64_t nc, const int64_t *xdims, size_t xrank, int32_t xdt)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 19);
    oq_value *x = oq_graph_new_value(m->graph, "x");
    oq_graph_add_input(m->graph, x, oq_type_tensor(m, xdt, xdims, NULL, xrank));
    int64_t cd[1] = {nc};
    size_t rk = nc > 1 ? 1 : 0;
    const int64_t *dd = nc > 1 ? cd : NO_DIMS;
    oq_value *sv = oq_graph_add_initializer(m->graph, "s", OQ_DTYPE_FLOAT, dd, rk, s,
                                            (size_t)nc * 4);
    uint8_t zb[64];
    size_t es = qdt == OQ_DTYPE_INT8 || qdt == OQ_DTYPE_UINT8 ? 1 : 2;
    for (int64_t c = 0; c < nc; c++) {
        if (es == 1)
            zb[c] = (uint8_t)zp[c];
        else {
            uint16_t z = (uint16_t)zp[c];
            memcpy(zb + 2 * c, &z, 2);
        }
    }
    oq_value *zv = oq_graph_add_initializer(m->graph, "z", qdt, dd, rk, zb, (size_t)nc * es);
    oq_value *y = tu_node(m, dequant ? "DequantizeLinear" : "QuantizeLinear", "q", x, sv, zv, "y");
    oq_graph_add_output(m->graph, y, NULL);
    return m;
}

static int64_t qval(const oq_rt_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case OQ_DTYPE_INT8: return ((int8_t *)t->data)[i];
    case OQ_DTYPE_UINT8: return ((uint8_t *)t->data)[i];
    case OQ_DTYPE_INT16: return ((int16_t *)t->data)[i];
    default: return ((uint16_t *)t->data)[i];
    }
}

/* the spec, written out: saturate(round_half_even(x / s) + zp); NaN -> zp */
static int64_t ref_q(float x, float s, int64_t zp, int64_t lo, int64_t hi)
{
    float q = x / s;
    if (q != q)
        return zp;
    if (q > 1e12f)
        return hi;
    if (q < -1e12f)
        return lo;
    double f = floor((double)q), r = f;
    double frac = (double)q - f;
    if (frac > 0.5 || (frac == 0.5 && fmod(f, 2.0) != 0))
        r = f + 1;
    r += (double)zp;
    return r < (double)lo ? lo : r > (double)hi ? hi : (int64_t)r;
}

Test(exec_fast, quantize_rows_hand_values_every_isa)
{
    /* scale 0.5, uint8 zero point 10: x / 0.5 = 2x */
    const float xs[] = {0.25f, 0.75f, 1.25f, -0.25f, -0.75f, -5.25f, -5.0f, -4.75f,
                        122.25f, 122.75f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN, -0.0f,
                        1e-40f, 3.0f};
    /* 2x: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> -0, -1.5 -> -2, -10.5 -> -10, -10,
       -9.5 -> -10 (all + 10, saturated at 0), 244.5 -> 244 + 10, 245.5 -> 246 + 10 ->
       255, +-1e30 and +-Inf saturate, NaN -> the zero point, -0, a denormal, 6 */
    const int64_t want2[] = {10, 12, 12, 10, 8, 0, 0, 0, 254, 255, 255, 0, 255, 0, 10, 10, 10, 16};
    const size_t nb = sizeof xs / sizeof xs[0];
    enum { N = 18 * 7 + 5 }; /* vector bodies and tails */
    float x[N];
    for (int i = 0; i < N; i++)
        x[i] = xs[i % nb];
    int64_t xd[1] = {N};
    float s = 0.5f;
    int32_t zp = 10;
    oq_model *m = q_model(OQ_DTYPE_UINT8, false, &s, &zp, 1, xd, 1, OQ_DTYPE_FLOAT);
    oq_plan_options o = oq_plan_options_default();
    o.threads = 2;
    int ran = 0;
    for (int k = 0; k < 3; k++) {
        if (!oq_k_quant_set_isa(ISAS[k]))
            continue;
        ran++;
        oq_rt_tensor y = run1(m, &o, OQ_DTYPE_FLOAT, xd, 1, x, NULL);
        for (int i = 0; i < N; i++) {
            cr_assert_eq(qval(&y, i), want2[i % nb], "%s: x=%g -> %lld, expected %lld", ISAS[k],
                         (double)x[i], (long long)qval(&y, i), (long long)want2[i % nb]);
            cr_assert_eq(qval(&y, i), ref_q(x[i], s, zp, 0, 255));
        }
        oq_rt_tensor_release(&y);
    }
    cr_assert(ran >= 1);
    oq_model_free(m);
}

Test(exec_fast, quantize_dequantize_rows_agree_with_the_scalar_path_all_types)
{
    const int32_t types[4] = {OQ_DTYPE_INT8, OQ_DTYPE_UINT8, OQ_DTYPE_INT16, OQ_DTYPE_UINT16};
    const int64_t lo[4] = {-128, 0, -32768, 0}, hi[4] = {127, 255, 32767, 65535};
    for (int ti = 0; ti < 4; ti++)
        for (int per_axis = 0; per_axis < 2; per_axis++) {
            int64_t nc = per_axis ? 3 : 1, inner = 41;
            int64_t xd[3] = {2, 3, inner}, n = 2 * 3 * inner;
            float s[3] = {0.0123f, 0.5f, 3.0f};
            int32_t z[3];
            for (int c = 0; c < 3; c++)
                z[c] = (int32_t)(lo[ti] + (hi[ti] - lo[ti]) * (c + 1) / 4);
            float *x = malloc((size_t)n * sizeof(float));
            for (int64_t i = 0; i < n; i++) {
                float r = frand();
                x[i] = i % 7 == 0 ? (float)(int)(r * 40) * 0.5f * s[(i / inner) % 3] /* ties */
                       : r * (float)(hi[ti] - lo[ti]) * 1.5f * s[(i / inner) % 3];
            }
            x[3] = NAN;
            x[5] = INFINITY;
            x[n - 1] = -INFINITY;
            oq_model *mq = q_model(types[ti], false, s, z, nc, xd, 3, OQ_DTYPE_FLOAT);
            oq_plan_options o = oq_plan_options_default();
            o.threads = 1;
            oq_rt_tensor ref;
            memset(&ref, 0, sizeof ref);
            for (int k = 0; k < 3; k++) {
                if (!oq_k_quant_set_isa(ISAS[k]))
                    continue;
                oq_rt_tensor y = run1(mq, &o, OQ_DTYPE_FLOAT, xd, 3, x, NULL);
                for (int64_t i = 0; i < n; i++) {
                    int64_t c = per_axis ? (i / inner) % 3 : 0;
                    cr_assert_eq(qval(&y, i), ref_q(x[i], s[c], z[c], lo[ti], hi[ti]),
                                 "%s type %d axis %d: x[%lld]=%g", ISAS[k], types[ti], per_axis,
                                 (long long)i, (double)x[i]);
                }
                /* dequantize what came out */
                oq_model *md = q_model(types[ti], true, s, z, nc, xd, 3, types[ti]);
                oq_rt_tensor f = run1(md, &o, types[ti], xd, 3, y.data, NULL);
                for (int64_t i = 0; i < n; i++) {
                    int64_t c = per_axis ? (i / inner) % 3 : 0;
                    float want = (float)(qval(&y, i) - z[c]) * s[c];
                    cr_assert_eq(((float *)f.data)[i], want, "%s dq type %d", ISAS[k], types[ti]);
                }
                if (!ref.data) {
                    ref = f;
                } else {
                    assert_same_bytes(&ref, &f, "dequantized");
                    oq_rt_tensor_release(&f);
                }
                oq_model_free(md);
                oq_rt_tensor_release(&y);
            }
            oq_rt_tensor_release(&ref);
            oq_model_free(mq);
            free(x);
        }
}

/* ------------------------------------------------------------------ fusion ------- */

/* x[1,4,H,W] -> Conv 3x3 (4 -> C) -> Mul(per-channel [C,1,1]) -> Add(scalar) -> the
 * HardSwish chain of PaddleOCR (Add 3, Clip 0..6, Mul, Div 6) -> QuantizeLinear ->
 * DequantizeLinear -> Sub(scalar - x) -> Relu -> HardSigmoid -> y */
static oq_model *chain_model(int64_t C, int64_t group, int64_t H, int64_t W)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    int64_t xd[4] = {1, 4, H, W};
    oq_value *x = oq_graph_new_value(m->graph, "x");
    oq_graph_add_input(m->graph, x, oq_type_tensor(m, OQ_DTYPE_FLOAT, xd, NULL, 4));
    int64_t wd[4] = {C, 4 / group, 3, 3}, cd[3] = {C, 1, 1};
    size_t wn = (size_t)(C * 36 / group);
    float *w = malloc(wn * 4), *pc = malloc((size_t)C * 4);
    for (size_t i = 0; i < wn; i++)
        w[i] = frand();
    for (int64_t i = 0; i < C; i++)
        pc[i] = 0.5f + frand();
    oq_value *wv = oq_graph_add_initializer(m->graph, "w", OQ_DTYPE_FLOAT, wd, 4, w, wn * 4);
    oq_value *cv = oq_graph_add_initializer(m->graph, "pc", OQ_DTYPE_FLOAT, cd, 3, pc,
                                            (size_t)C * 4);
    oq_value *conv = tu_node(m, "Conv", "conv", x, wv, NULL, "conv");
    int64_t pads[4] = {1, 1, 1, 1};
    oq_node_set_attr_ints(tu_find_node(m, "conv"), "pads", pads, 4);
    oq_node_set_attr_int(tu_find_node(m, "conv"), "group", group);
    oq_value *a = tu_node(m, "Mul", "mul0", cv, conv, NULL, "a");
    oq_value *b = tu_node(m, "Add", "add0", a, tu_scalar_f(m, "shift", 0.25f), NULL, "b");
    oq_value *c = tu_node(m, "Add", "add3", b, tu_scalar_f(m, "three", 3.0f), NULL, "c");
    oq_value *d = tu_node(m, "Clip", "clip", c, tu_scalar_f(m, "zero", 0.0f),
                          tu_scalar_f(m, "six", 6.0f), "d");
    oq_value *e = tu_node(m, "Mul", "mul1", b, d, NULL, "e");
    oq_value *f = tu_node(m, "Div", "div6", e, tu_scalar_f(m, "six2", 6.0f), NULL, "f");
    oq_value *g = tu_qdq_u8(m, f, "f", "g", 0.02f, 20);
    oq_value *h = tu_node(m, "Sub", "sub", tu_scalar_f(m, "one", 1.0f), g, NULL, "h");
    oq_value *r = tu_node(m, "Relu", "relu", h, NULL, NULL, "r");
    oq_value *y = tu_node(m, "HardSigmoid", "hsig", r, NULL, NULL, "y");
    oq_graph_add_output(m->graph, y, NULL);
    free(w);
    free(pc);
    return m;
}

static void noop_obs(const oq_node *n, size_t i, const oq_rt_tensor *t, void *u)
{
    (void)n, (void)i, (void)t, (void)u;
}

/* the chain after a GEMM convolution (group 1, C 6) and a depthwise one (C 4) */
static void check_fusion(int64_t C, int64_t group)
{
    const int64_t H = 9, W = 37;
    oq_model *m = chain_model(C, group, H, W);
    int64_t xd[4] = {1, 4, H, W}, n = 4 * H * W;
    float *x = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        x[i] = frand() * 4.0f;
    x[17] = NAN;
    x[100] = INFINITY;
    x[200] = -INFINITY;
    oq_plan_options o = oq_plan_options_default();
    o.threads = 1;
    int64_t t_fused, t_sep;
    oq_rt_tensor yf = run1(m, &o, OQ_DTYPE_FLOAT, xd, 4, x, &t_fused);
    o.on_tensor = noop_obs; /* with an observer the steps run one by one */
    oq_rt_tensor ys = run1(m, &o, OQ_DTYPE_FLOAT, xd, 4, x, &t_sep);
    assert_same_bytes(&yf, &ys, "fused vs separate");
    /* the fused run holds the Conv output only; separately every value gets a buffer */
    int64_t plane = C * H * W * 4;
    cr_assert_eq(t_fused, plane, "fused: %lld bytes of intermediates", (long long)t_fused);
    cr_assert_eq(t_sep, 11 * plane + C * H * W, "separate: %lld", (long long)t_sep);
    o.on_tensor = NULL;
    o.threads = 3;
    oq_rt_tensor y3 = run1(m, &o, OQ_DTYPE_FLOAT, xd, 4, x, NULL);
    assert_same_bytes(&yf, &y3, "3 threads");
    for (int64_t i = 0; i < C * H * W; i++) {
        float v = ((float *)yf.data)[i];
        cr_assert(v >= 0.0f && v <= 1.0f, "HardSigmoid output %g", (double)v);
    }
    oq_rt_tensor_release(&yf);
    oq_rt_tensor_release(&ys);
    oq_rt_tensor_release(&y3);
    free(x);
    oq_model_free(m);
}

Test(exec_fast, fused_chain_is_bit_identical_to_separate_steps)
{
    check_fusion(6, 1);
    check_fusion(4, 4);
}

Test(exec_fast, fused_chain_is_bit_identical_to_separate_steps_portable_code)
{
    setenv("ONNXQ_SGEMM_ISA", "generic", 1); /* no AVX2 anywhere: scalar chain ops */
    check_fusion(6, 1);
    check_fusion(4, 4);
}

Test(exec_fast, chain_value_read_outside_is_not_fused_away)
{
    /* x -> Relu -> a -> Add 1 -> b -> Mul 2 -> y1, and a is also an output: the chain
       may only start after a; both outputs exact */
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    oq_value *x = tu_input_1xc(m, "x", 40);
    oq_value *a = tu_node(m, "Relu", "relu", x, NULL, NULL, "a");
    oq_value *b = tu_node(m, "Add", "add", a, tu_scalar_f(m, "one", 1.0f), NULL, "b");
    oq_value *y = tu_node(m, "Mul", "mul", b, tu_scalar_f(m, "two", 2.0f), NULL, "y");
    oq_graph_add_output(m->graph, y, NULL);
    oq_graph_add_output(m->graph, a, NULL);
    float xv[40];
    for (int i = 0; i < 40; i++)
        xv[i] = (float)(i - 20) * 0.75f;
    oq_diag d;
    oq_diag_init(&d);
    oq_plan *p;
    oq_plan_options o = oq_plan_options_default();
    o.threads = 1;
    cr_assert_eq(oq_plan_compile(m, &o, &p, &d), OQ_OK);
    oq_rt_tensor in, out[2];
    int64_t xd[2] = {1, 40};
    oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, xd, 2, xv);
    cr_assert_eq(oq_plan_run(p, &in, 1, out, 2, &d), OQ_OK);
    for (int i = 0; i < 40; i++) {
        float r = xv[i] > 0 ? xv[i] : 0.0f;
        cr_assert_eq(((float *)out[1].data)[i], r);
        cr_assert_eq(((float *)out[0].data)[i], (r + 1.0f) * 2.0f);
    }
    oq_rt_tensor_release(&out[0]);
    oq_rt_tensor_release(&out[1]);
    oq_plan_free(p);
    oq_diag_free(&d);
    oq_model_free(m);
}

Test(exec_fast, fused_chain_is_bit_identical_to_separate_steps_avx2_code)
{
    setenv("ONNXQ_SGEMM_ISA", "avx2", 1); /* 8-lane chain ops even with AVX-512 */
    check_fusion(6, 1);
    check_fusion(4, 4);
}

/* ------------------------------------------------------------------ im2col ------- */

Test(exec_fast, strided_padded_conv_matches_a_direct_loop)
{
    /* stride 1 and 2, pad 1 and 2, widths that put panels across output rows and taps
       across the left and right padding */
    const int64_t Cin = 3, M = 5, H = 13;
    const int64_t widths[3] = {45, 20, 33};
    for (int sv = 1; sv <= 2; sv++)
        for (int pv = 1; pv <= 2; pv++)
            for (int wi = 0; wi < 3; wi++) {
                int64_t W = widths[wi];
                oq_model *m = oq_model_new();
                oq_model_set_opset(m, "", 13);
                int64_t xd[4] = {1, Cin, H, W}, wd[4] = {M, Cin, 3, 3};
                oq_value *x = oq_graph_new_value(m->graph, "x");
                oq_graph_add_input(m->graph, x, oq_type_tensor(m, OQ_DTYPE_FLOAT, xd, NULL, 4));
                float w[5 * 3 * 9];
                for (int i = 0; i < 5 * 3 * 9; i++)
                    w[i] = frand();
                oq_value *wv = oq_graph_add_initializer(m->graph, "w", OQ_DTYPE_FLOAT, wd, 4, w,
                                                        sizeof w);
                oq_value *y = tu_node(m, "Conv", "conv", x, wv, NULL, "y");
                int64_t pads[4] = {pv, pv, pv, pv}, st[2] = {sv, sv};
                oq_node_set_attr_ints(tu_find_node(m, "conv"), "pads", pads, 4);
                oq_node_set_attr_ints(tu_find_node(m, "conv"), "strides", st, 2);
                oq_graph_add_output(m->graph, y, NULL);
                float *xv = frand_array(Cin * H * W);
                oq_plan_options o = oq_plan_options_default();
                o.threads = 2;
                oq_rt_tensor out = run1(m, &o, OQ_DTYPE_FLOAT, xd, 4, xv, NULL);
                int64_t OH = (H + 2 * pv - 3) / sv + 1, OW = (W + 2 * pv - 3) / sv + 1;
                cr_assert_eq(out.dims[2], OH);
                cr_assert_eq(out.dims[3], OW);
                for (int64_t mm = 0; mm < M; mm++)
                    for (int64_t oh = 0; oh < OH; oh++)
                        for (int64_t ow = 0; ow < OW; ow++) {
                            double acc = 0, mag = 0;
                            for (int64_t c = 0; c < Cin; c++)
                                for (int kh = 0; kh < 3; kh++)
                                    for (int kw = 0; kw < 3; kw++) {
                                        int64_t ih = oh * sv - pv + kh, iw = ow * sv - pv + kw;
                                        if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                            continue;
                                        double t = (double)xv[(c * H + ih) * W + iw] *
                                                   w[((mm * Cin + c) * 3 + kh) * 3 + kw];
                                        acc += t;
                                        mag += fabs(t);
                                    }
                            float got = ((float *)out.data)[(mm * OH + oh) * OW + ow];
                            cr_assert(fabs(got - acc) <= 1e-5 * (mag + 1e-3),
                                      "s%d p%d W%lld: y[%lld,%lld,%lld] %g expected %g", sv, pv,
                                      (long long)W, (long long)mm, (long long)oh,
                                      (long long)ow, (double)got, acc);
                        }
                oq_rt_tensor_release(&out);
                free(xv);
                oq_model_free(m);
            }
}

/* stride-1 convolutions from a padded copy of the input: dilation 1 and 2, pads different
 * on each side, 2 groups of Cin / 2 channels, a batch of 2, M output channels, bias, the
 * given output widths; 1 and 2 threads give the same bits */
static void stride1_conv_check(int64_t Cin, int64_t M, const int64_t *widths, int n_widths)
{
    const int64_t N = 2, G = 2, H = 9, KH = 3, KW = 3;
    for (int dil = 1; dil <= 2; dil++)
        for (int wi = 0; wi < n_widths; wi++) {
            int64_t W = widths[wi], Cg = Cin / G, Mg = M / G;
            int64_t pads[4] = {1, 2, 2, 1}; /* top, left, bottom, right */
            oq_model *m = oq_model_new();
            oq_model_set_opset(m, "", 13);
            int64_t xd[4] = {N, Cin, H, W}, wd[4] = {M, Cg, KH, KW}, bd[1] = {M};
            oq_value *x = oq_graph_new_value(m->graph, "x");
            oq_graph_add_input(m->graph, x, oq_type_tensor(m, OQ_DTYPE_FLOAT, xd, NULL, 4));
            size_t nw = (size_t)(M * Cg * KH * KW);
            float *w = malloc(nw * sizeof(float)), *b = malloc((size_t)M * sizeof(float));
            for (size_t i = 0; i < nw; i++)
                w[i] = frand();
            for (int i = 0; i < M; i++)
                b[i] = frand();
            oq_value *wv = oq_graph_add_initializer(m->graph, "w", OQ_DTYPE_FLOAT, wd, 4, w,
                                                    nw * sizeof(float));
            oq_value *bv = oq_graph_add_initializer(m->graph, "b", OQ_DTYPE_FLOAT, bd, 1, b,
                                                    (size_t)M * sizeof(float));
            oq_value *y = tu_node(m, "Conv", "conv", x, wv, bv, "y");
            int64_t dl[2] = {dil, dil};
            oq_node_set_attr_ints(tu_find_node(m, "conv"), "pads", pads, 4);
            oq_node_set_attr_ints(tu_find_node(m, "conv"), "dilations", dl, 2);
            oq_node_set_attr_int(tu_find_node(m, "conv"), "group", G);
            oq_graph_add_output(m->graph, y, NULL);
            float *xv = frand_array(N * Cin * H * W);
            oq_plan_options o = oq_plan_options_default();
            o.threads = 1;
            oq_rt_tensor out = run1(m, &o, OQ_DTYPE_FLOAT, xd, 4, xv, NULL);
            o.threads = 2;
            oq_rt_tensor out2 = run1(m, &o, OQ_DTYPE_FLOAT, xd, 4, xv, NULL);
            int64_t OH = H + pads[0] + pads[2] - dil * (KH - 1);
            int64_t OW = W + pads[1] + pads[3] - dil * (KW - 1);
            cr_assert_eq(out.dims[2], OH);
            cr_assert_eq(out.dims[3], OW);
            cr_assert(memcmp(out.data, out2.data, (size_t)(N * M * OH * OW) * sizeof(float)) == 0,
                      "1 and 2 threads differ");
            for (int64_t bn = 0; bn < N; bn++)
                for (int64_t mm = 0; mm < M; mm++)
                    for (int64_t oh = 0; oh < OH; oh++)
                        for (int64_t ow = 0; ow < OW; ow++) {
                            int64_t gr = mm / Mg;
                            double acc = b[mm], mag = fabs(b[mm]);
                            for (int64_t c = 0; c < Cg; c++)
                                for (int64_t kh = 0; kh < KH; kh++)
                                    for (int64_t kw = 0; kw < KW; kw++) {
                                        int64_t ih = oh - pads[0] + kh * dil;
                                        int64_t iw = ow - pads[1] + kw * dil;
                                        if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                            continue;
                                        double t =
                                            (double)xv[((bn * Cin + gr * Cg + c) * H + ih) * W +
                                                       iw] *
                                            w[((mm * Cg + c) * KH + kh) * KW + kw];
                                        acc += t;
                                        mag += fabs(t);
                                    }
                            float got = ((float *)out.data)[((bn * M + mm) * OH + oh) * OW + ow];
                            cr_assert(fabs(got - acc) <= 1e-5 * (mag + 1e-3),
                                      "d%d W%lld: y[%lld,%lld,%lld,%lld] %g expected %g", dil,
                                      (long long)W, (long long)bn, (long long)mm, (long long)oh,
                                      (long long)ow, (double)got, acc);
                        }
            oq_rt_tensor_release(&out);
            oq_rt_tensor_release(&out2);
            free(xv);
            free(w);
            free(b);
            oq_model_free(m);
        }
}

/* 3 channels a group (K = 27): the GEMM reads the taps in place. 26 output channels (a
 * partial block of rows); widths with full panel pairs, a partial second panel and a lone
 * partial panel. */
Test(exec_fast, stride1_conv_read_in_place_matches_a_direct_loop)
{
    const int64_t widths[2] = {50, 37};
    stride1_conv_check(6, 26, widths, 2);
}

/* 20 channels and 70 output channels a group (K = 180): panels packed from the padded
 * input (padpack_body), within an output row, across two rows (widths 20, 37, 50) and
 * across three (width 7). */
Test(exec_fast, stride1_conv_packed_from_padded_input_matches_a_direct_loop)
{
    const int64_t widths[4] = {50, 37, 20, 7};
    stride1_conv_check(40, 140, widths, 4);
}

/* A 1x1 convolution on a 7x7 map (49 columns: 4 panels) with 200 output channels: the GEMM
 * splits its rows over the threads, in whole blocks of rows. With 3 or more threads a cut
 * inside a block once made rows read another block's packed weights (ResNet-50's last
 * stage, channels 171 on wrong by up to 7 with 4 threads). Every thread count gives the
 * same bits, and a direct loop's values. */
Test(exec_fast, gemm_rows_split_over_any_thread_count_match_a_direct_loop)
{
    const int64_t C = 64, M = 200, H = 7;
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    int64_t xd[4] = {1, C, H, H}, wd[4] = {M, C, 1, 1};
    oq_value *x = oq_graph_new_value(m->graph, "x");
    oq_graph_add_input(m->graph, x, oq_type_tensor(m, OQ_DTYPE_FLOAT, xd, NULL, 4));
    float *w = frand_array(M * C);
    oq_value *wv = oq_graph_add_initializer(m->graph, "w", OQ_DTYPE_FLOAT, wd, 4, w, (size_t)(M * C) * sizeof(float));
    oq_value *y = tu_node(m, "Conv", "conv", x, wv, NULL, "y");
    oq_graph_add_output(m->graph, y, NULL);
    float *xv = frand_array(C * H * H);
    oq_plan_options o = oq_plan_options_default();
    o.threads = 1;
    oq_rt_tensor ref = run1(m, &o, OQ_DTYPE_FLOAT, xd, 4, xv, NULL);
    for (int64_t mm = 0; mm < M; mm++)
        for (int64_t p = 0; p < H * H; p++) {
            double acc = 0, mag = 0;
            for (int64_t c = 0; c < C; c++) {
                double t = (double)w[mm * C + c] * xv[c * H * H + p];
                acc += t;
                mag += fabs(t);
            }
            float got = ((float *)ref.data)[mm * H * H + p];
            cr_assert(fabs(got - acc) <= 1e-5 * (mag + 1e-3), "y[%lld,%lld] %g expected %g", (long long)mm,
                      (long long)p, (double)got, acc);
        }
    const int threads[5] = {2, 3, 4, 5, 8};
    for (int t = 0; t < 5; t++) {
        o.threads = threads[t];
        oq_rt_tensor out = run1(m, &o, OQ_DTYPE_FLOAT, xd, 4, xv, NULL);
        cr_assert(memcmp(out.data, ref.data, (size_t)(M * H * H) * sizeof(float)) == 0, "%d threads differ from 1",
                  threads[t]);
        oq_rt_tensor_release(&out);
    }
    oq_rt_tensor_release(&ref);
    free(xv);
    free(w);
    oq_model_free(m);
}

Test(exec_fast, depthwise_conv_matches_a_direct_loop)
{
    /* 3x3 and 5x5 depthwise, stride 1 and 2: the vector rows (AVX2 or AVX-512, with
       masked last columns) against a direct loop in double */
    const int64_t C = 3, H = 11;
    const int64_t widths[3] = {45, 20, 7};
    for (int K = 3; K <= 5; K += 2)
        for (int sv = 1; sv <= 2; sv++)
            for (int wi = 0; wi < 3; wi++) {
                int64_t W = widths[wi], pv = K / 2;
                oq_model *m = oq_model_new();
                oq_model_set_opset(m, "", 13);
                int64_t xd[4] = {1, C, H, W}, wd[4] = {C, 1, K, K}, bd[1] = {C};
                oq_value *x = oq_graph_new_value(m->graph, "x");
                oq_graph_add_input(m->graph, x, oq_type_tensor(m, OQ_DTYPE_FLOAT, xd, NULL, 4));
                float w[3 * 25], b[3];
                for (int i = 0; i < 3 * 25; i++)
                    w[i] = frand();
                for (int i = 0; i < 3; i++)
                    b[i] = frand();
                oq_value *wv = oq_graph_add_initializer(m->graph, "w", OQ_DTYPE_FLOAT, wd, 4, w,
                                                        (size_t)(C * K * K) * 4);
                oq_value *bv = oq_graph_add_initializer(m->graph, "b", OQ_DTYPE_FLOAT, bd, 1, b,
                                                        sizeof b);
                oq_value *y = tu_node(m, "Conv", "conv", x, wv, bv, "y");
                int64_t pads[4] = {pv, pv, pv, pv}, st[2] = {sv, sv};
                oq_node_set_attr_ints(tu_find_node(m, "conv"), "pads", pads, 4);
                oq_node_set_attr_ints(tu_find_node(m, "conv"), "strides", st, 2);
                oq_node_set_attr_int(tu_find_node(m, "conv"), "group", C);
                oq_graph_add_output(m->graph, y, NULL);
                float *xv = frand_array(C * H * W);
                oq_plan_options o = oq_plan_options_default();
                o.threads = 1;
                oq_rt_tensor out = run1(m, &o, OQ_DTYPE_FLOAT, xd, 4, xv, NULL);
                int64_t OH = (H + 2 * pv - K) / sv + 1, OW = (W + 2 * pv - K) / sv + 1;
                cr_assert_eq(out.dims[3], OW);
                for (int64_t c = 0; c < C; c++)
                    for (int64_t oh = 0; oh < OH; oh++)
                        for (int64_t ow = 0; ow < OW; ow++) {
                            double acc = b[c], mag = fabs(b[c]);
                            for (int kh = 0; kh < K; kh++)
                                for (int kw = 0; kw < K; kw++) {
                                    int64_t ih = oh * sv - pv + kh, iw = ow * sv - pv + kw;
                                    if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                        continue;
                                    double t = (double)xv[(c * H + ih) * W + iw] *
                                               w[(c * K + kh) * K + kw];
                                    acc += t;
                                    mag += fabs(t);
                                }
                            float got = ((float *)out.data)[(c * OH + oh) * OW + ow];
                            cr_assert(fabs(got - acc) <= 1e-5 * (mag + 1e-3),
                                      "K%d s%d W%lld: y[%lld,%lld,%lld] %g expected %g", K, sv,
                                      (long long)W, (long long)c, (long long)oh, (long long)ow,
                                      (double)got, acc);
                        }
                oq_rt_tensor_release(&out);
                free(xv);
                oq_model_free(m);
            }
}

/* Under an integer target a depthwise Conv that onnxruntime runs with its NCHWc kernel
 * (C a multiple of 4, a constant weight) computes as that kernel does: acc = +0, then
 * acc = fma(w, x, acc) for the taps inside the input in (kh, kw) order, then acc + bias
 * (docs/run.md). The AVX-512 / AVX2 rows read a zero-padded plane, the portable code
 * skips the padding: both must give the bits of the formula (fmaf) below, at 1 and 2
 * threads. tests/qlinear_ort.sh compares the same arithmetic with onnxruntime. */
static void dw_ort_case_c(int64_t C, int K, int sh, int sw, int dil, int64_t H, int64_t W,
                          const int64_t *pads)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    int64_t xd[4] = {1, C, H, W}, wd[4] = {C, 1, K, K}, bd[1] = {C};
    oq_value *x = oq_graph_new_value(m->graph, "x");
    oq_graph_add_input(m->graph, x, oq_type_tensor(m, OQ_DTYPE_FLOAT, xd, NULL, 4));
    float *w = frand_array(C * K * K), *b = frand_array(C), *xv = frand_array(C * H * W);
    oq_value *wv = oq_graph_add_initializer(m->graph, "w", OQ_DTYPE_FLOAT, wd, 4, w,
                                            (size_t)(C * K * K) * 4);
    oq_value *bv = oq_graph_add_initializer(m->graph, "b", OQ_DTYPE_FLOAT, bd, 1, b,
                                            (size_t)C * 4);
    oq_value *y = tu_node(m, "Conv", "conv", x, wv, bv, "y");
    int64_t st[2] = {sh, sw}, dl[2] = {dil, dil};
    oq_node_set_attr_ints(tu_find_node(m, "conv"), "pads", pads, 4);
    oq_node_set_attr_ints(tu_find_node(m, "conv"), "strides", st, 2);
    oq_node_set_attr_ints(tu_find_node(m, "conv"), "dilations", dl, 2);
    oq_node_set_attr_int(tu_find_node(m, "conv"), "group", C);
    oq_graph_add_output(m->graph, y, NULL);
    int64_t OH = (H + pads[0] + pads[2] - dil * (K - 1) - 1) / sh + 1;
    int64_t OW = (W + pads[1] + pads[3] - dil * (K - 1) - 1) / sw + 1;
    for (int threads = 1; threads <= 2; threads++) {
        oq_plan_options o = oq_plan_options_default();
        o.threads = threads;
        o.arith = OQ_ARITH_EXACT;
        oq_rt_tensor out = run1(m, &o, OQ_DTYPE_FLOAT, xd, 4, xv, NULL);
        cr_assert_eq(out.dims[2], OH);
        cr_assert_eq(out.dims[3], OW);
        for (int64_t c = 0; c < C; c++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    float acc = 0.0f;
                    for (int kh = 0; kh < K; kh++)
                        for (int kw = 0; kw < K; kw++) {
                            int64_t ih = oh * sh - pads[0] + kh * dil;
                            int64_t iw = ow * sw - pads[1] + kw * dil;
                            if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                                acc = fmaf(w[(c * K + kh) * K + kw], xv[(c * H + ih) * W + iw],
                                           acc);
                        }
                    float want = acc + b[c], got = ((float *)out.data)[(c * OH + oh) * OW + ow];
                    cr_assert(memcmp(&got, &want, sizeof got) == 0,
                              "K%d s%d,%d d%d W%lld %d threads: y[%lld,%lld,%lld] %a want %a", K,
                              sh, sw, dil, (long long)W, threads, (long long)c, (long long)oh,
                              (long long)ow, (double)got, (double)want);
                }
        oq_rt_tensor_release(&out);
    }
    free(w);
    free(b);
    free(xv);
    oq_model_free(m);
}

static void dw_ort_case(int K, int sh, int sw, int dil, int64_t H, int64_t W, const int64_t *pads)
{
    dw_ort_case_c(16, K, sh, sw, dil, H, W, pads);
    dw_ort_case_c(12, K, sh, sw, dil, H, W, pads); /* padded to a block by onnxruntime */
}

Test(exec_fast, depthwise_conv_onnxruntime_nchwc_arithmetic_bit_for_bit)
{
    if (oq_k_ort_nchwc_block() == 0)
        cr_skip_test("no onnxruntime NCHWc kernels on this CPU (AVX2 and FMA needed)");
    const int64_t p1[4] = {1, 1, 1, 1}, p2[4] = {2, 2, 2, 2}, pa[4] = {0, 1, 2, 0};
    const int64_t widths[4] = {45, 20, 7, 70};
    for (int wi = 0; wi < 4; wi++) {
        dw_ort_case(3, 1, 1, 1, 11, widths[wi], p1);
        dw_ort_case(5, 1, 1, 1, 9, widths[wi], p2);
        dw_ort_case(3, 2, 2, 1, 11, widths[wi], pa);
        dw_ort_case(5, 2, 1, 1, 12, widths[wi], p2);
        dw_ort_case(3, 1, 2, 1, 7, widths[wi], p1);
        dw_ort_case(3, 1, 1, 2, 10, widths[wi], p2);
        dw_ort_case(3, 1, 3, 1, 8, widths[wi], p1); /* stride 3: the portable code */
    }
}

/* Which depthwise arithmetic a float Conv gets under an integer target (docs/run.md):
 * onnxruntime 1.30 runs a depthwise Conv with a constant weight and C a multiple of 4 as
 * NCHWc (12 channels too, padded to its block), any other depthwise Conv with its Conv
 * kernel's one-row SGEMM (a weight that is a graph input, 6 channels); a grouped Conv
 * with 2 outputs per group keeps the reference sums. */
static oq_rt_tensor dw_run(int64_t C, int64_t M, bool w_input, oq_arith arith, const float *w,
                           float *xv)
{
    const int64_t H = 9, W = 21, K = 3;
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    int64_t xd[4] = {1, C, H, W}, wd[4] = {M, 1, K, K};
    oq_value *x = oq_graph_new_value(m->graph, "x");
    oq_graph_add_input(m->graph, x, oq_type_tensor(m, OQ_DTYPE_FLOAT, xd, NULL, 4));
    oq_value *wv = oq_graph_add_initializer(m->graph, "w", OQ_DTYPE_FLOAT, wd, 4, w,
                                            (size_t)(M * K * K) * 4);
    if (w_input) /* also a graph input: a default the caller may replace, not a constant */
        oq_graph_add_input(m->graph, wv, oq_type_tensor(m, OQ_DTYPE_FLOAT, wd, NULL, 4));
    oq_value *y = tu_node(m, "Conv", "conv", x, wv, NULL, "y");
    int64_t pads[4] = {1, 1, 1, 1};
    oq_node_set_attr_ints(tu_find_node(m, "conv"), "pads", pads, 4);
    oq_node_set_attr_int(tu_find_node(m, "conv"), "group", C);
    oq_graph_add_output(m->graph, y, NULL);
    oq_plan_options o = oq_plan_options_default();
    o.threads = 1;
    o.arith = arith;
    oq_rt_tensor out = run1(m, &o, OQ_DTYPE_FLOAT, xd, 4, xv, NULL);
    oq_model_free(m);
    return out;
}

/* onnxruntime's one-row SGEMM (MlasSgemmKernelM1Avx) on the K products p[] of one output
 * (zeros in the padding), reduction slices of sk: t = ((p0 + p1) + p2) + p3, c = t + c
 * (t + 0 first), then two and one left over; the formula conv.c must give */
static float m1_sum(const float *p, int64_t K, int64_t sk)
{
    float c = 0.0f;
    for (int64_t s = 0; s < K; s += sk) {
        int64_t n = K - s < sk ? K - s : sk, k = s;
        bool first = s == 0;
        for (; n >= 4; n -= 4, k += 4) {
            float t = p[k] + p[k + 1];
            t = t + p[k + 2];
            t = t + p[k + 3];
            c = t + (first ? 0.0f : c);
            first = false;
        }
        if (n & 2) {
            c = (p[k] + p[k + 1]) + (first ? 0.0f : c);
            first = false;
            k += 2;
        }
        if (n & 1)
            c = p[k] + (first ? 0.0f : c);
    }
    return c;
}

/* the same written as the column sums of MlasSgemmKernelM1TransposeBAvx (a kernel as wide
 * as the input, no padding): eight lanes, reduced by output column position */
static float m1t_sum(const float *p, int64_t K, int64_t n, int64_t N)
{
    float a[8] = {0};
    for (int64_t k = 0; k < K; k++)
        a[k % 8] += p[k];
    if (n < N / 4 * 4)
        return (((a[0] + a[1]) + a[2]) + a[3]) + (((a[4] + a[5]) + a[6]) + a[7]);
    if ((N & 2) && n < N / 4 * 4 + 2)
        return ((a[2] + a[0]) + (a[6] + a[4])) + ((a[3] + a[1]) + (a[7] + a[5]));
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* a C-channel depthwise Conv (C not a multiple of 4: not NCHWc) under an integer target
 * against m1_sum / m1t_sum at 1 and 2 threads; with bias: y = c + b, else c */
static void dw_m1_case(int64_t C, int KH, int KW, int sh, int sw, int dil, int64_t H, int64_t W,
                       const int64_t *pads, bool bias)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    int64_t xd[4] = {1, C, H, W}, wd[4] = {C, 1, KH, KW}, bd[1] = {C};
    oq_value *x = oq_graph_new_value(m->graph, "x");
    oq_graph_add_input(m->graph, x, oq_type_tensor(m, OQ_DTYPE_FLOAT, xd, NULL, 4));
    float *w = frand_array(C * KH * KW), *b = frand_array(C), *xv = frand_array(C * H * W);
    oq_value *wv = oq_graph_add_initializer(m->graph, "w", OQ_DTYPE_FLOAT, wd, 4, w,
                                            (size_t)(C * KH * KW) * 4);
    oq_value *bv = bias ? oq_graph_add_initializer(m->graph, "b", OQ_DTYPE_FLOAT, bd, 1, b,
                                                   (size_t)C * 4)
                        : NULL;
    oq_value *y = tu_node(m, "Conv", "conv", x, wv, bv, "y");
    int64_t st[2] = {sh, sw}, dl[2] = {dil, dil};
    oq_node_set_attr_ints(tu_find_node(m, "conv"), "pads", pads, 4);
    oq_node_set_attr_ints(tu_find_node(m, "conv"), "strides", st, 2);
    oq_node_set_attr_ints(tu_find_node(m, "conv"), "dilations", dl, 2);
    oq_node_set_attr_int(tu_find_node(m, "conv"), "group", C);
    oq_graph_add_output(m->graph, y, NULL);
    int64_t OH = (H + pads[0] + pads[2] - dil * (KH - 1) - 1) / sh + 1;
    int64_t OW = (W + pads[1] + pads[3] - dil * (KW - 1) - 1) / sw + 1;
    int64_t K = KH * KW, N = OH * OW;
    /* MlasConvOperation's reduction slice */
    int64_t sn = 128, sk = 128;
    if (N >= K)
        while (sk / 2 >= K)
            sn *= 2, sk /= 2;
    else
        while (sn > 16 && sn / 2 >= N)
            sk *= 2, sn /= 2;
    bool transposed = sh == 1 && sw == 1 && dil == 1 && !pads[0] && !pads[1] && !pads[2] &&
                      !pads[3] && K > 1 && KW == W;
    float *p = malloc((size_t)K * sizeof(float));
    for (int threads = 1; threads <= 2; threads++) {
        oq_plan_options o = oq_plan_options_default();
        o.threads = threads;
        o.arith = OQ_ARITH_EXACT;
        oq_rt_tensor out = run1(m, &o, OQ_DTYPE_FLOAT, xd, 4, xv, NULL);
        cr_assert_eq(out.dims[2], OH);
        cr_assert_eq(out.dims[3], OW);
        for (int64_t c = 0; c < C; c++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    for (int kh = 0; kh < KH; kh++)
                        for (int kw = 0; kw < KW; kw++) {
                            int64_t ih = oh * sh - pads[0] + kh * dil;
                            int64_t iw = ow * sw - pads[1] + kw * dil;
                            float xx = ih >= 0 && ih < H && iw >= 0 && iw < W
                                           ? xv[(c * H + ih) * W + iw] : 0.0f;
                            p[kh * KW + kw] = w[(c * KH + kh) * KW + kw] * xx;
                        }
                    float acc = transposed ? m1t_sum(p, K, oh * OW + ow, N) + 0.0f
                                           : m1_sum(p, K, sk);
                    float want = bias ? acc + b[c] : acc;
                    float got = ((float *)out.data)[(c * OH + oh) * OW + ow];
                    cr_assert(memcmp(&got, &want, sizeof got) == 0,
                              "C%lld K%dx%d s%d,%d d%d W%lld bias %d %d threads: y[%lld,%lld,%lld] "
                              "%a want %a", (long long)C, KH, KW, sh, sw, dil, (long long)W, bias,
                              threads, (long long)c, (long long)oh, (long long)ow, (double)got,
                              (double)want);
                }
        oq_rt_tensor_release(&out);
    }
    free(p);
    free(w);
    free(b);
    free(xv);
    oq_model_free(m);
}

static void dw_m1_cases(void)
{
    const int64_t p0[4] = {0, 0, 0, 0}, p1[4] = {1, 1, 1, 1}, p2[4] = {2, 2, 2, 2};
    const int64_t pa[4] = {0, 1, 2, 0}, p6[4] = {6, 6, 6, 6};
    const int64_t widths[3] = {45, 7, 70};
    for (int wi = 0; wi < 3; wi++) {
        dw_m1_case(6, 3, 3, 1, 1, 1, 11, widths[wi], p1, true);
        dw_m1_case(5, 5, 5, 1, 1, 1, 9, widths[wi], p2, true);
        dw_m1_case(7, 3, 3, 2, 2, 1, 11, widths[wi], pa, false);
        dw_m1_case(3, 5, 5, 2, 1, 1, 12, widths[wi], p2, true);
        dw_m1_case(10, 3, 3, 1, 2, 1, 7, widths[wi], p1, true);
        dw_m1_case(6, 3, 3, 1, 1, 2, 10, widths[wi], p2, true);
        dw_m1_case(6, 3, 3, 1, 3, 1, 8, widths[wi], p1, false); /* stride 3: portable code */
        dw_m1_case(2, 3, 2, 1, 1, 1, 5, widths[wi], p1, true);  /* K = 6: a pair left over */
    }
    dw_m1_case(5, 13, 13, 1, 1, 1, 30, 30, p6, true); /* K = 169: two reduction slices */
    dw_m1_case(3, 9, 9, 1, 1, 1, 9, 9, p0, true);     /* one output, K = 81 > N: slice 128+ */
    dw_m1_case(6, 3, 3, 1, 1, 1, 9, 3, p0, true);     /* kernel as wide as the input: B^T */
    dw_m1_case(5, 5, 5, 1, 1, 1, 14, 5, p0, false);
    dw_m1_case(9, 2, 2, 1, 1, 1, 10, 2, p0, true);
}

Test(exec_fast, depthwise_conv_onnxruntime_m1_arithmetic_bit_for_bit)
{
    if (!oq_k_ort_sgemm_m1())
        cr_skip_test("no onnxruntime one-row SGEMM kernel on this CPU (x86 with AVX needed)");
    dw_m1_cases();
}

Test(exec_fast, depthwise_conv_onnxruntime_m1_arithmetic_portable_code)
{
    setenv("ONNXQ_SGEMM_ISA", "generic", 1); /* read once per process: before any plan */
    if (!oq_k_ort_sgemm_m1())
        cr_skip_test("no onnxruntime one-row SGEMM kernel on this CPU (x86 with AVX needed)");
    dw_m1_cases();
}

Test(exec_fast, depthwise_conv_onnxruntime_arithmetic_only_where_onnxruntime_uses_it)
{
    if (oq_k_ort_nchwc_block() == 0 || !oq_k_ort_sgemm_m1())
        cr_skip_test("no onnxruntime NCHWc kernels on this CPU (AVX2 and FMA needed)");
    float *w = frand_array(32 * 9), *xv = frand_array(16 * 9 * 21);
    /* same: the reference sums; 12 and 16 channels: NCHWc; 6 channels and a weight that is
     * a graph input: the one-row SGEMM; 2 outputs per group: the reference's GEMM */
    struct { int64_t C, M; bool w_input, same; } cases[] = {
        {12, 12, false, false}, {16, 16, true, false}, {16, 32, false, true},
        {16, 16, false, false}, {6, 6, false, false}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        oq_rt_tensor a = dw_run(cases[i].C, cases[i].M, cases[i].w_input, OQ_ARITH_EXACT, w, xv);
        oq_rt_tensor r = dw_run(cases[i].C, cases[i].M, cases[i].w_input, OQ_ARITH_REFERENCE, w, xv);
        size_t bytes = (size_t)oq_rt_tensor_numel(&a) * sizeof(float);
        cr_assert_eq(oq_rt_tensor_numel(&a), oq_rt_tensor_numel(&r));
        cr_assert_eq(memcmp(a.data, r.data, bytes) == 0, cases[i].same,
                     "C %lld M %lld weight input %d: expected %s", (long long)cases[i].C,
                     (long long)cases[i].M, cases[i].w_input,
                     cases[i].same ? "the reference sums" : "onnxruntime's sums");
        oq_rt_tensor_release(&a);
        oq_rt_tensor_release(&r);
    }
    free(w);
    free(xv);
}

Test(exec_fast, depthwise_conv_onnxruntime_nchwc_arithmetic_portable_code)
{
    setenv("ONNXQ_SGEMM_ISA", "generic", 1); /* read once per process: before any plan */
    if (oq_k_ort_nchwc_block() == 0)
        cr_skip_test("no onnxruntime NCHWc kernels on this CPU (AVX2 and FMA needed)");
    const int64_t p1[4] = {1, 1, 1, 1}, p2[4] = {2, 2, 2, 2};
    dw_ort_case(3, 1, 1, 1, 11, 45, p1);
    dw_ort_case(5, 2, 1, 1, 12, 20, p2);
    dw_ort_case(3, 1, 2, 2, 10, 33, p2);
}

/* op(x) for a float vector x of n values, the first of them `special`, the rest
 * frand() * scale + shift, run at `threads` threads with arithmetic `arith`; *xs gets x */
static oq_rt_tensor run_unary_vec(const char *op, int64_t opset, const float *special,
                                  size_t n_special, float scale, float shift, int threads,
                                  oq_arith arith, float **xs)
{
    const int64_t n = 1003; /* 125 vectors of 8 and a tail of 3 */
    float *x = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        x[i] = i < (int64_t)n_special ? special[i] : frand() * scale + shift;
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", opset);
    int64_t xd[1] = {n};
    oq_value *xv = oq_graph_new_value(m->graph, "x");
    oq_graph_add_input(m->graph, xv, oq_type_tensor(m, OQ_DTYPE_FLOAT, xd, NULL, 1));
    oq_value *y = tu_node(m, op, "op", xv, NULL, NULL, "y");
    oq_graph_add_output(m->graph, y, NULL);
    oq_plan_options o = oq_plan_options_default();
    o.threads = threads;
    o.arith = arith;
    oq_rt_tensor out = run1(m, &o, OQ_DTYPE_FLOAT, xd, 1, x, NULL);
    cr_assert_eq(oq_rt_tensor_numel(&out), n);
    oq_model_free(m);
    *xs = x;
    return out;
}

/* Under an integer target Sigmoid is onnxruntime's MLAS logistic (docs/run.md): the
 * rational function below, written out here from MLAS' logistic.cpp constants and its
 * FMA3 kernel's order of operations, bit for bit, for the vector code and its tail. */
static float mlas_logistic_ref(float x)
{
    static const float a[5] = {4.37031012579801e-11f, 1.15627324459942e-07f,
                               6.08574864600143e-05f, 8.51377133304701e-03f,
                               2.48287947061529e-01f};
    static const float b[6] = {6.10247389755681e-13f, 5.76102136993427e-09f,
                               6.29106785017040e-06f, 1.70198817374094e-03f,
                               1.16817656904453e-01f, 9.93151921023180e-01f};
    float v = fminf(18.0f, fmaxf(-18.0f, x)), v2 = v * v;
    float p = fmaf(fmaf(fmaf(fmaf(v2, a[0], a[1]), v2, a[2]), v2, a[3]), v2, a[4]) * v;
    float q = fmaf(fmaf(fmaf(fmaf(fmaf(v2, b[0], b[1]), v2, b[2]), v2, b[3]), v2, b[4]), v2, b[5]);
    return fminf(1.0f, fmaxf(0.0f, p / q + 0.5f));
}

static void check_ort_sigmoid(void)
{
    const float special[] = {0.0f, -0.0f, 18.0f, -18.0f, 18.5f, -40.0f, 1e-30f, -1e-30f,
                             3.4e38f, -3.4e38f, INFINITY, -INFINITY, 0.5f, -7.25f};
    float *x;
    oq_rt_tensor out = run_unary_vec("Sigmoid", 13, special, sizeof special / sizeof *special,
                                     40.0f, -20.0f, 2, OQ_ARITH_AVX2, &x);
    const int64_t n = oq_rt_tensor_numel(&out);
    int64_t differ_from_exact = 0;
    for (int64_t i = 0; i < n; i++) {
        float want = mlas_logistic_ref(x[i]), got = ((float *)out.data)[i];
        cr_assert(memcmp(&got, &want, sizeof got) == 0, "x %a: got %a, want %a", (double)x[i],
                  (double)got, (double)want);
        differ_from_exact += got != (float)(1.0 / (1.0 + exp(-(double)x[i])));
    }
    cr_assert_gt(differ_from_exact, 100, "the approximation, not the exact logistic");
    oq_rt_tensor_release(&out);
    free(x);
}

Test(exec_fast, sigmoid_onnxruntime_logistic_bit_for_bit)
{
    if (oq_k_ort_nchwc_block() == 0)
        cr_skip_test("onnxruntime's FMA logistic needs AVX2 and FMA");
    check_ort_sigmoid();
}

Test(exec_fast, sigmoid_onnxruntime_logistic_portable_code)
{
    setenv("ONNXQ_SGEMM_ISA", "generic", 1); /* read once per process: before any plan */
    if (oq_k_ort_nchwc_block() == 0)
        cr_skip_test("onnxruntime's FMA logistic needs AVX2 and FMA");
    check_ort_sigmoid();
}

/* ------------------------------------------------------------------ thread pool -- */

typedef struct pool_job {
    _Atomic int64_t *hits; /* per item: how many times it ran */
    _Atomic int64_t sum;
} pool_job;

static void pool_range(void *arg, int64_t b, int64_t e, int w)
{
    pool_job *j = arg;
    (void)w;
    for (int64_t i = b; i < e; i++) {
        atomic_fetch_add(&j->hits[i], 1);
        atomic_fetch_add(&j->sum, i);
    }
}

Test(exec_fast, thread_pool_runs_every_range_once_back_to_back_and_after_sleeping)
{
    /* jobs back to back (workers still spinning), after pauses longer than the spin
       (workers asleep on the condition variable), of every size from 1 item up: each
       item runs exactly once and the call returns only when all have */
    for (int threads = 2; threads <= 3; threads++) {
        oq_pool *p = oq_pool_new(threads);
        cr_assert_not_null(p);
        for (int round = 0; round < 300; round++) {
            int64_t n = 1 + (round * 37) % 200;
            _Atomic int64_t hits[200];
            for (int64_t i = 0; i < n; i++)
                atomic_init(&hits[i], 0);
            pool_job j = {hits, 0};
            oq_pool_for(p, n, 1 + round % 3, pool_range, &j);
            for (int64_t i = 0; i < n; i++)
                cr_assert_eq(atomic_load(&hits[i]), 1, "round %d item %lld ran %lld times",
                             round, (long long)i, (long long)atomic_load(&hits[i]));
            cr_assert_eq(atomic_load(&j.sum), n * (n - 1) / 2);
            if (round % 50 == 49) {
                struct timespec ts = {0, 2000000}; /* 2 ms: longer than the spin */
                nanosleep(&ts, NULL);
            }
        }
        oq_pool_free(p);
    }
}

/* ------------------------------------------------------------------ HardSwish ---- */

Test(exec_fast, hardswish_vector_rows_equal_the_formula_bit_for_bit)
{
    /* x * max(0, min(1, x * (1/6) + 1/2)) in float as the spec writes it (alpha x + beta,
       alpha = 1/6; onnxruntime computes the same), element by element: the vector rows
       (8 lanes, then a scalar tail) must give the same bits, NaN, infinities, signed
       zeros and the clamp edges included */
    const float special[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 3.0f, -3.0f,
                             2.9999998f, -2.9999998f, 3.0000002f, -3.0000002f, 1e-40f, -1e-40f,
                             3.4e38f, -3.4e38f, 0.5f, -0.5f, 6.0f, -6.0f};
    float *x;
    oq_rt_tensor out = run_unary_vec("HardSwish", 14, special, sizeof special / sizeof *special,
                                     8.0f, 0.0f, 1, OQ_ARITH_REFERENCE, &x);
    const int64_t n = oq_rt_tensor_numel(&out);
    for (int64_t i = 0; i < n; i++) {
        float want = x[i] * fmaxf(0.0f, fminf(1.0f, x[i] * (1.0f / 6.0f) + 0.5f));
        float got = ((float *)out.data)[i];
        cr_assert(memcmp(&got, &want, sizeof got) == 0, "x %a: got %a, want %a", (double)x[i],
                  (double)got, (double)want);
    }
    oq_rt_tensor_release(&out);
    free(x);
}

/* ------------------------------------------------- Sigmoid and Erf, vector rows -- */

/* Steps between a and b on the float line (the ordered integers of their bits). */
static int64_t ulp_steps(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    int64_t oa = ia < 0 ? (int64_t)INT32_MIN - ia : ia, ob = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
    return oa > ob ? oa - ob : ob - oa;
}

/* Sigmoid (reference arithmetic), Erf and Tanh: the AVX2 rows (exp by Cody-Waite
 * reduction and a polynomial, erf by Juffa's approximation, tanh by Cephes' polynomial
 * below 0.625 and e^-2|x| above) and the scalar ones (expf, erff, tanhf) are each
 * within 2 ulp of the function computed in double and rounded, over 8 blocks of 1003
 * values (vectors of 8 and a tail); NaN stays NaN, the infinities, signed zeros and the
 * ranges the vector code hands to the scalar formula give exactly that formula's value. */
static void check_sigmoid_erf(void)
{
    const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 87.0f, -87.0f, 87.5f, 0.625f, -0.625f, 0.62499994f, 9.0f, -9.0f, 9.5f,
                             -87.5f, 100.0f, -100.0f, 1e-40f, -1e-40f, 0.927734375f, -0.927734375f,
                             0.92773443f, 3.9f, -3.9f, 150.0f, -3.4e38f};
    const char *ops[3] = {"Sigmoid", "Erf", "Tanh"};
    for (int op = 0; op < 3; op++) {
        int64_t worst = 0;
        for (int round = 0; round < 8; round++) {
            float *x;
            float scale = round < 4 ? (op ? 8.0f : 40.0f) : (op == 2 ? 1.5f : op ? 2.0f : 200.0f);
            oq_rt_tensor out = run_unary_vec(ops[op], 13, special, sizeof special / sizeof *special, scale,
                                             -scale / 2, 1, OQ_ARITH_REFERENCE, &x);
            const int64_t n = oq_rt_tensor_numel(&out);
            for (int64_t i = 0; i < n; i++) {
                double xd = x[i];
                float want = op == 2 ? (float)tanh(xd) : op ? (float)erf(xd) : (float)(1.0 / (1.0 + exp(-xd)));
                float got = ((float *)out.data)[i];
                if (isnan(x[i])) {
                    cr_assert(isnan(got), "%s(NaN) = %a", ops[op], (double)got);
                    continue;
                }
                int64_t d = ulp_steps(got, want);
                cr_assert(d <= 2, "%s(%a) = %a, exact %a: %lld ulp", ops[op], xd, (double)got, (double)want,
                          (long long)d);
                if (d > worst)
                    worst = d;
            }
            oq_rt_tensor_release(&out);
            free(x);
        }
        cr_log_info("%s: worst %lld ulp", ops[op], (long long)worst);
    }
}

/* Sigmoid, Erf and Tanh on 100003 values (split over the threads; vectors of 8, blocks
 * with an out-of-range lane, a tail): each element's result is the same bits with 1 to 8
 * threads. The vector and scalar codes differ by up to 2 ulp, and ranges once started
 * wherever the thread count cut them (PP-OCR det's output: 6 elements differed between 1
 * and 3 threads). */
Test(exec_fast, transcendental_unary_results_do_not_depend_on_the_thread_count)
{
    const int64_t n = 100003;
    const char *ops[3] = {"Sigmoid", "Erf", "Tanh"};
    float *x = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        x[i] = i % 97 == 0 ? 120.0f : frand() * 12.0f; /* every 97th beyond the vector code's range */
    for (int op = 0; op < 3; op++) {
        oq_model *m = oq_model_new();
        oq_model_set_opset(m, "", 13);
        int64_t xd[1] = {n};
        oq_value *xv = oq_graph_new_value(m->graph, "x");
        oq_graph_add_input(m->graph, xv, oq_type_tensor(m, OQ_DTYPE_FLOAT, xd, NULL, 1));
        oq_value *y = tu_node(m, ops[op], "op", xv, NULL, NULL, "y");
        oq_graph_add_output(m->graph, y, NULL);
        oq_plan_options o = oq_plan_options_default();
        o.threads = 1;
        oq_rt_tensor ref = run1(m, &o, OQ_DTYPE_FLOAT, xd, 1, x, NULL);
        const int threads[4] = {2, 3, 5, 8};
        for (int t = 0; t < 4; t++) {
            o.threads = threads[t];
            oq_rt_tensor out = run1(m, &o, OQ_DTYPE_FLOAT, xd, 1, x, NULL);
            cr_assert(memcmp(out.data, ref.data, (size_t)n * sizeof(float)) == 0, "%s: %d threads differ from 1",
                      ops[op], threads[t]);
            oq_rt_tensor_release(&out);
        }
        oq_rt_tensor_release(&ref);
        oq_model_free(m);
    }
    free(x);
}

Test(exec_fast, sigmoid_and_erf_within_2_ulp)
{
    check_sigmoid_erf();
}

Test(exec_fast, sigmoid_and_erf_within_2_ulp_portable_code)
{
    setenv("ONNXQ_SGEMM_ISA", "generic", 1); /* the scalar rows: expf, erff (read once per process) */
    check_sigmoid_erf();
}

/* ------------------------------------------------------------------ one-row GEMM ---- */

/* Gemm(x[M, K], W[N, K] constant, transB = 1, bias[N], beta) or MatMul(x, W[K, N]) */
static oq_model *row_model(bool gemm, int64_t M, int64_t N, int64_t K, const float *w, const float *bias, float beta)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    int64_t xd[2] = {M, K}, wd[2] = {gemm ? N : K, gemm ? K : N}, bd[1] = {N};
    oq_value *x = oq_graph_new_value(m->graph, "x");
    oq_graph_add_input(m->graph, x, oq_type_tensor(m, OQ_DTYPE_FLOAT, xd, NULL, 2));
    oq_value *wv = oq_graph_add_initializer(m->graph, "w", OQ_DTYPE_FLOAT, wd, 2, w, (size_t)(N * K) * sizeof(float));
    oq_value *bv = bias ? oq_graph_add_initializer(m->graph, "b", OQ_DTYPE_FLOAT, bd, 1, bias, (size_t)N * sizeof(float))
                        : NULL;
    oq_value *y = tu_node(m, gemm ? "Gemm" : "MatMul", "g", x, wv, bv, "y");
    if (gemm) {
        oq_node_set_attr_int(tu_find_node(m, "g"), "transB", 1);
        oq_node_set_attr_float(tu_find_node(m, "g"), "beta", beta);
    }
    oq_graph_add_output(m->graph, y, NULL);
    return m;
}

/* A Gemm or MatMul of one row (M = 1: the row-at-a-time path, B read in place; a constant
 * B under transB transposed once per plan) gives the bytes row 0 of the same product with
 * M = 3 gives (the blocked path), for any thread count, and the sums of a direct loop. */
Test(exec_fast, one_row_gemm_is_bit_identical_to_the_blocked_path)
{
    const int64_t sizes[4][2] = {{7, 5}, {40, 33}, {1000, 300}, {1100, 64}}; /* N, K */
    for (int gemm = 0; gemm < 2; gemm++)
        for (int si = 0; si < 4; si++)
            for (int bi = 0; bi < 3; bi++) {
                int64_t N = sizes[si][0], K = sizes[si][1];
                float beta = bi == 0 ? 1.0f : bi == 1 ? 0.5f : 0.0f;
                float *w = frand_array(N * K), *bias = frand_array(N), *x3 = frand_array(3 * K);
                bool with_bias = gemm && bi < 2;
                oq_model *m1 = row_model(gemm, 1, N, K, w, with_bias ? bias : NULL, beta);
                oq_model *m3 = row_model(gemm, 3, N, K, w, with_bias ? bias : NULL, beta);
                oq_plan_options o = oq_plan_options_default();
                oq_rt_tensor r1[2], r3;
                for (int t = 0; t < 2; t++) {
                    o.threads = t + 1;
                    r1[t] = run1(m1, &o, OQ_DTYPE_FLOAT, (int64_t[]){1, K}, 2, x3, NULL);
                }
                r3 = run1(m3, &o, OQ_DTYPE_FLOAT, (int64_t[]){3, K}, 2, x3, NULL);
                assert_same_bytes(&r1[0], &r1[1], "one row, 1 and 2 threads");
                cr_assert(memcmp(r1[0].data, r3.data, (size_t)N * sizeof(float)) == 0,
                          "%s N %lld K %lld beta %g: one row differs from row 0 of three", gemm ? "Gemm" : "MatMul",
                          (long long)N, (long long)K, (double)beta);
                for (int64_t n = 0; n < N; n++) {
                    double acc = with_bias ? (double)beta * bias[n] : 0, mag = fabs(acc);
                    for (int64_t k = 0; k < K; k++) {
                        double p = (double)x3[k] * (gemm ? w[n * K + k] : w[k * N + n]);
                        acc += p;
                        mag += fabs(p);
                    }
                    float got = ((float *)r1[0].data)[n];
                    cr_assert(fabs(got - acc) <= 1e-5 * (mag + 1e-3), "y[%lld] %g expected %g", (long long)n,
                              (double)got, acc);
                }
                oq_rt_tensor_release(&r1[0]);
                oq_rt_tensor_release(&r1[1]);
                oq_rt_tensor_release(&r3);
                oq_model_free(m1);
                oq_model_free(m3);
                free(w);
                free(bias);
                free(x3);
            }
}

/* Pow with a scalar exponent 2 or 3 computes what onnxruntime's Pow does (x * x and
 * (x * x) * x), bit for bit; for 3 that is two roundings, not powf's one, and inputs exist
 * where the two differ (the test finds one among its inputs, so it would fail on powf). */
Test(exec_fast, pow_square_and_cube_as_onnxruntime)
{
    const int64_t n = 4096;
    float *x = frand_array(n);
    for (int64_t i = 0; i < n; i++)
        x[i] *= 7.0f;
    for (int e = 2; e <= 3; e++) {
        oq_model *m = oq_model_new();
        oq_model_set_opset(m, "", 13);
        int64_t xd[1] = {n};
        oq_value *xv = oq_graph_new_value(m->graph, "x");
        oq_graph_add_input(m->graph, xv, oq_type_tensor(m, OQ_DTYPE_FLOAT, xd, NULL, 1));
        oq_value *y = tu_node(m, "Pow", "p", xv, tu_scalar_f(m, "e", (float)e), NULL, "y");
        oq_graph_add_output(m->graph, y, NULL);
        oq_plan_options o = oq_plan_options_default();
        oq_rt_tensor out = run1(m, &o, OQ_DTYPE_FLOAT, xd, 1, x, NULL);
        const float *got = out.data;
        int64_t differs_from_powf = 0;
        for (int64_t i = 0; i < n; i++) {
            float want = e == 2 ? x[i] * x[i] : x[i] * x[i] * x[i];
            cr_assert(memcmp(&got[i], &want, sizeof want) == 0, "x^%d of %.9g: %.9g, want %.9g", e, (double)x[i],
                      (double)got[i], (double)want);
            differs_from_powf += got[i] != powf(x[i], (float)e);
        }
        if (e == 3)
            cr_assert(differs_from_powf > 0, "no input where (x * x) * x and powf differ");
        oq_rt_tensor_release(&out);
        oq_model_free(m);
    }
    free(x);
}

/* x [2, 3, 4, 5] -> op(axes) with keepdims 0 (opset 11: axes an attribute for all four) */
static oq_model *reduce_model(const char *op, const int64_t *axes, size_t na)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 11);
    int64_t xd[4] = {2, 3, 4, 5};
    oq_value *x = oq_graph_new_value(m->graph, "x");
    oq_graph_add_input(m->graph, x, oq_type_tensor(m, OQ_DTYPE_FLOAT, xd, NULL, 4));
    oq_value *y = tu_node(m, op, "r", x, NULL, NULL, "y");
    oq_node_set_attr_ints(tu_find_node(m, "r"), "axes", axes, na);
    oq_node_set_attr_int(tu_find_node(m, "r"), "keepdims", 0);
    oq_graph_add_output(m->graph, y, NULL);
    return m;
}

/* Sum, Mean, Max, Min over inner and trailing axes (the input read in memory order) give
 * exactly the float of a direct double loop over the reduced axes in row-major order, a NaN
 * included (Max and Min keep it) */
Test(exec_fast, reductions_over_inner_axes_match_a_direct_loop_exactly)
{
    const char *ops[4] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"};
    const int64_t axes_sets[5][3] = {{1, 2, -1}, {0, 2, -1}, {0, 3, -1}, {1, -1, -1}, {2, 3, -1}};
    const size_t n_axes[5] = {2, 2, 2, 1, 2};
    const int64_t dims[4] = {2, 3, 4, 5};
    float *x = frand_array(120);
    for (int i = 0; i < 120; i++)
        x[i] *= 1000.0f; /* sums that round differently in another order */
    x[37] = NAN;
    for (int oi = 0; oi < 4; oi++)
        for (int ai = 0; ai < 5; ai++) {
            oq_model *m = reduce_model(ops[oi], axes_sets[ai], n_axes[ai]);
            oq_plan_options o = oq_plan_options_default();
            oq_rt_tensor r = run1(m, &o, OQ_DTYPE_FLOAT, dims, 4, x, NULL);
            bool red[4] = {false};
            for (size_t k = 0; k < n_axes[ai]; k++)
                red[axes_sets[ai][k]] = true;
            /* the output in row-major order over the kept axes, each a loop over the reduced ones */
            int64_t o_i = 0;
            for (int a = 0; a < (red[0] ? 1 : 2); a++)
                for (int b = 0; b < (red[1] ? 1 : 3); b++)
                    for (int c = 0; c < (red[2] ? 1 : 4); c++)
                        for (int d = 0; d < (red[3] ? 1 : 5); d++, o_i++) {
                            double acc = oi == 2 ? -INFINITY : oi == 3 ? INFINITY : 0;
                            int64_t cnt = 0;
                            for (int a2 = 0; a2 < (red[0] ? 2 : 1); a2++)
                                for (int b2 = 0; b2 < (red[1] ? 3 : 1); b2++)
                                    for (int c2 = 0; c2 < (red[2] ? 4 : 1); c2++)
                                        for (int d2 = 0; d2 < (red[3] ? 5 : 1); d2++, cnt++) {
                                            int64_t i = (((int64_t)(a + a2) * 3 + (b + b2)) * 4 + (c + c2)) * 5 + (d + d2);
                                            double v = x[i];
                                            if (oi == 2)
                                                acc = v > acc || v != v ? v : acc;
                                            else if (oi == 3)
                                                acc = v < acc || v != v ? v : acc;
                                            else
                                                acc += v;
                                        }
                            float want = (float)(oi == 1 ? acc / (double)cnt : acc), got = ((float *)r.data)[o_i];
                            cr_assert((isnan(want) && isnan(got)) || memcmp(&want, &got, sizeof got) == 0,
                                      "%s axes set %d, output %lld: %.9g, want %.9g", ops[oi], ai, (long long)o_i,
                                      (double)got, (double)want);
                        }
            cr_assert_eq(o_i, oq_rt_tensor_numel(&r));
            oq_rt_tensor_release(&r);
            oq_model_free(m);
        }
    free(x);
}

/* Transpose and Slice large enough to be split over threads: the bytes of an index-by-index
 * reference, with 1, 2 and 3 threads */
Test(exec_fast, transpose_and_slice_split_over_threads_match_direct_indexing)
{
    const int64_t d[4] = {2, 64, 48, 40}, n = 2 * 64 * 48 * 40;
    float *x = frand_array(n);
    for (int op = 0; op < 2; op++) {
        oq_model *m = oq_model_new();
        oq_model_set_opset(m, "", 13);
        oq_value *xv = oq_graph_new_value(m->graph, "x");
        oq_graph_add_input(m->graph, xv, oq_type_tensor(m, OQ_DTYPE_FLOAT, d, NULL, 4));
        oq_value *y;
        if (op == 0) {
            y = tu_node(m, "Transpose", "t", xv, NULL, NULL, "y");
            oq_node_set_attr_ints(tu_find_node(m, "t"), "perm", (const int64_t[]){0, 2, 3, 1}, 4);
        } else { /* x[:, 1:63:2, 3:, ::-1] */
            int64_t st[4] = {1, 3, -1, 0}, en[4] = {63, 48, INT64_MIN, 2}, ax[4] = {1, 2, 3, 0}, sp[4] = {2, 1, -1, 1};
            oq_value *a = oq_graph_add_initializer(m->graph, "s", OQ_DTYPE_INT64, (int64_t[]){4}, 1, st, sizeof st);
            oq_value *b = oq_graph_add_initializer(m->graph, "e", OQ_DTYPE_INT64, (int64_t[]){4}, 1, en, sizeof en);
            oq_value *c = oq_graph_add_initializer(m->graph, "a", OQ_DTYPE_INT64, (int64_t[]){4}, 1, ax, sizeof ax);
            oq_value *s4 = oq_graph_add_initializer(m->graph, "p", OQ_DTYPE_INT64, (int64_t[]){4}, 1, sp, sizeof sp);
            oq_value *ins[5] = {xv, a, b, c, s4};
            y = oq_graph_new_value(m->graph, "y");
            oq_node *sl = oq_node_new(m->graph, "Slice", "", "sl", ins, 5, &y, 1);
            oq_graph_append(m->graph, sl);
        }
        oq_graph_add_output(m->graph, y, NULL);
        oq_rt_tensor r[3];
        for (int t = 0; t < 3; t++) {
            oq_plan_options o = oq_plan_options_default();
            o.threads = t + 1;
            r[t] = run1(m, &o, OQ_DTYPE_FLOAT, d, 4, x, NULL);
        }
        assert_same_bytes(&r[0], &r[1], "1 and 2 threads");
        assert_same_bytes(&r[0], &r[2], "1 and 3 threads");
        const float *g = r[1].data;
        int64_t k = 0;
        if (op == 0) {
            for (int64_t a = 0; a < 2; a++)
                for (int64_t h = 0; h < 48; h++)
                    for (int64_t w = 0; w < 40; w++)
                        for (int64_t c = 0; c < 64; c++, k++)
                            cr_assert(g[k] == x[((a * 64 + c) * 48 + h) * 40 + w], "transpose [%lld]", (long long)k);
        } else {
            for (int64_t a = 0; a < 2; a++)
                for (int64_t c = 1; c < 63; c += 2)
                    for (int64_t h = 3; h < 48; h++)
                        for (int64_t w = 39; w >= 0; w--, k++)
                            cr_assert(g[k] == x[((a * 64 + c) * 48 + h) * 40 + w], "slice [%lld]", (long long)k);
        }
        cr_assert_eq(k, oq_rt_tensor_numel(&r[1]));
        for (int t = 0; t < 3; t++)
            oq_rt_tensor_release(&r[t]);
        oq_model_free(m);
    }
    free(x);
}
