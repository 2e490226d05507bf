/* Bias correction (src/quant/biascorr.c): known answers on a two-layer Gemm chain, the
 * same corrections from the one-pass lockstep method as from the pass-per-wave method, for
 * any thread count. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnxq/biascorr.h"
#include "onnxq/onnxq.h"
#include "onnxq/tensor_io.h"
#include "testutil.h"

/* int32 bias name = DequantizeLinear(name_quantized, scale 1) */
static oq_value *bias_dq(oq_model *m, const char *name, const int32_t *b, int64_t n)
{
    char q[64], s[64], dq[64];
    snprintf(q, sizeof q, "%s_quantized", name);
    snprintf(s, sizeof s, "%s_scale", name);
    snprintf(dq, sizeof dq, "%s_DequantizeLinear", name);
    oq_value *qv = oq_graph_add_initializer(m->graph, q, OQ_DTYPE_INT32, &n, 1, b, (size_t)n * sizeof *b);
    cr_assert_not_null(qv);
    return tu_node(m, "DequantizeLinear", dq, qv, tu_scalar_f(m, s, 1.0f), NULL, name);
}

static oq_value *fconst(oq_model *m, const char *name, const float *v, const int64_t *dims, size_t rank)
{
    int64_t n = 1;
    for (size_t i = 0; i < rank; i++)
        n *= dims[i];
    oq_value *c = oq_graph_add_initializer(m->graph, name, OQ_DTYPE_FLOAT, dims, rank, v, (size_t)n * sizeof *v);
    cr_assert_not_null(c);
    return c;
}

/* float: x[1,2] -> g1 (W1 = [[1.3, 0], [0, 2]], b1 = [0.2, -0.4]) -> y1
 *              -> g2 (W2 = [[1], [1.2]], b2 = [0.3]) -> y2
 * quant: x -> QDQ (uint8, scale 1) -> g1 (int8 W1 = [[1, 0], [0, 2]], int32 b1 = 0, scale 1)
 *          -> QDQ y1 (uint8, scale 1) -> g2 (int8 W2 = [[1], [1]], int32 b2 = 0) -> y2 */
static oq_model *chain_named(bool quant, const char *y1_name)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    oq_value *x = tu_input_1xc(m, "x", 2);
    int64_t d1[2] = {2, 2}, d2[2] = {2, 1}, n1 = 2, n2 = 1;
    oq_value *y2;
    char y1_pre[64];
    snprintf(y1_pre, sizeof y1_pre, "%s_prequant", y1_name);
    if (quant) {
        const int8_t w1[4] = {1, 0, 0, 2}, w2[2] = {1, 1};
        const int32_t b1[2] = {0, 0}, b2[1] = {0};
        oq_value *xd = tu_qdq_u8(m, x, "x", "x_dequant", 1.0f, 0);
        oq_value *p1 = tu_node(m, "Gemm", "g1", xd, tu_weight_dq_i8(m, "W1", w1, d1, 1.0f),
                               bias_dq(m, "b1", b1, 2), y1_pre);
        oq_value *y1 = tu_qdq_u8(m, p1, y1_name, y1_name, 1.0f, 0);
        y2 = tu_node(m, "Gemm", "g2", y1, tu_weight_dq_i8(m, "W2", w2, d2, 1.0f), bias_dq(m, "b2", b2, 1), "y2");
    } else {
        const float w1[4] = {1.3f, 0, 0, 2}, w2[2] = {1, 1.2f}, b1[2] = {0.2f, -0.4f}, b2[1] = {0.3f};
        oq_value *y1 = tu_node(m, "Gemm", "g1", x, fconst(m, "W1", w1, d1, 2), fconst(m, "b1", b1, &n1, 1), "y1");
        y2 = tu_node(m, "Gemm", "g2", y1, fconst(m, "W2", w2, d2, 2), fconst(m, "b2", b2, &n2, 1), "y2");
    }
    oq_graph_add_output(m->graph, y2, NULL);
    return m;
}

static oq_model *chain(bool quant) { return chain_named(quant, "y1"); }

/* Sample k of the folder dir: x = (x0, x1) in dir/sk/x.npy */
static void write_sample(const char *dir, int k, float x0, float x1)
{
    char sd[256], f[300];
    snprintf(sd, sizeof sd, "%s/s%d", dir, k);
    mkdir(sd, 0755);
    snprintf(f, sizeof f, "%s/x.npy", sd);
    float v[2] = {x0, x1};
    int64_t dims[2] = {1, 2};
    oq_rt_tensor t;
    cr_assert_eq(oq_rt_tensor_borrow(&t, OQ_DTYPE_FLOAT, dims, 2, v), OQ_OK);
    cr_assert_eq(oq_tensor_file_write_npy(f, &t, NULL), OQ_OK);
}

/* Samples x = (1, 2), (3, 4), (5, 6), (7, 8) in a folder; returns the folder. */
static const char *samples(char *dir, size_t size)
{
    snprintf(dir, size, "/tmp/onnxq_test_biascorr_%ld", (long)getpid());
    mkdir(dir, 0755);
    for (int k = 0; k < 4; k++)
        write_sample(dir, k, (float)(2 * k + 1), (float)(2 * k + 2));
    return dir;
}

static void cleanup(const char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static const int32_t *bias_of(oq_model *m, const char *name)
{
    const oq_value *v = oq_graph_find_local(m->graph, name);
    cr_assert_not_null(v);
    cr_assert_not_null(v->initializer);
    return oq_tensor_data(v->initializer, NULL);
}

/* Bias correction of qm against fm on the samples in dir (must succeed) */
static void correct(oq_model *fm, oq_model *qm, const char *dir, const oq_biascorr_options *o, oq_biascorr_result *r)
{
    oq_calib_source *src = NULL;
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_calib_source_dir(dir, &src, &d), OQ_OK);
    oq_status st = oq_bias_correct(fm, qm, src, o, r, &d);
    if (st != OQ_OK)
        for (size_t i = 0; i < d.count; i++)
            fprintf(stderr, "%s\n", d.entries[i].message);
    cr_assert_eq(st, OQ_OK);
    oq_diag_free(&d);
    oq_calib_source_free(src);
}

/* Run bias correction on a fresh quantized chain (on the samples idx[0..nidx) when idx is not
 * NULL); b1[2], b2[1] receive the biases. */
static void run_on(const char *dir, oq_biascorr_method method, int threads, uint64_t max_samples, const uint64_t *idx,
                   size_t nidx, int32_t *b1, int32_t *b2, oq_biascorr_result *r)
{
    oq_model *fm = chain(false), *qm = chain(true);
    oq_biascorr_options o = oq_biascorr_options_default();
    o.method = method;
    o.threads = threads;
    o.max_samples = max_samples;
    o.sample_index = idx;
    o.n_sample_index = nidx;
    correct(fm, qm, dir, &o, r);
    memcpy(b1, bias_of(qm, "b1_quantized"), 2 * sizeof *b1);
    memcpy(b2, bias_of(qm, "b2_quantized"), sizeof *b2);
    oq_model_free(fm);
    oq_model_free(qm);
}

static void run(const char *dir, oq_biascorr_method method, int threads, uint64_t max_samples, int32_t *b1,
                int32_t *b2, oq_biascorr_result *r)
{
    run_on(dir, method, threads, max_samples, NULL, 0, b1, b2, r);
}

/* By hand, over the 4 samples (mean a = 4, mean b = 5):
 *   g1: E[y1_float - y1_quant] = (0.3 * 4 + 0.2, -0.4) = (1.4, -0.4); per sample channel 0
 *       is (0.5, 1.1, 1.7, 2.3): sample variance 0.6, se^2 = 0.15, shrunk by
 *       1 - 0.15 / 1.96 = 0.923 to 1.29; channel 1 is -0.4 on every sample (se 0, not
 *       shrunk) -> b1 += (1, 0)
 *   g2, with g1 corrected (y1_quant = (a + 1, 2b), exact in uint8 with scale 1):
 *       E[(1.3a + 0.2) + 1.2 (2b - 0.4) + 0.3 - (a + 1 + 2b)] = 0.3 * 4 + 0.4 * 5 + 0.02 - 1
 *       = 2.22; per sample 0.7a - 0.58 = (0.12, 1.52, 2.92, 4.32), variance 3.267, se^2
 *       0.817, shrunk by 0.834 to 1.85 -> b2 += 2   (correcting both at once would give
 *       round(3.22) = 3) */
Test(biascorr, two_layer_chain_known_answer)
{
    char dir[200];
    samples(dir, sizeof dir);
    const oq_biascorr_method methods[2] = {OQ_BIASCORR_LOCKSTEP, OQ_BIASCORR_WAVES};
    const int threads[3] = {1, 2, 5};
    for (int mi = 0; mi < 2; mi++)
        for (int ti = 0; ti < 3; ti++) {
            int32_t b1[2], b2[1];
            oq_biascorr_result r;
            run(dir, methods[mi], threads[ti], 16, b1, b2, &r);
            cr_expect_eq(b1[0], 1, "method %d threads %d: b1[0] %d", mi, threads[ti], b1[0]);
            cr_expect_eq(b1[1], 0, "method %d threads %d: b1[1] %d", mi, threads[ti], b1[1]);
            cr_expect_eq(b2[0], 2, "method %d threads %d: b2 %d", mi, threads[ti], b2[0]);
            cr_expect_eq(r.layers, 2);
            cr_expect_eq(r.changed, 2);
            cr_expect_eq(r.samples, 4);
            cr_expect_eq(r.runs, mi == 0 ? 1u : 2u, "method %d: %zu runs", mi, r.runs);
        }
    cleanup(dir);
}

/* g1's output holds other numbers than the float g1's (smooth-quant renamed it: the inliers
 * of a split, "y1_inliers"): g1 is skipped, not corrected against a tensor it no longer
 * computes. g2, with g1 uncorrected (y1_quant = (a, 2b)): E[0.3a + 0.4b + 0.02] = 3.22;
 * per sample (1.12, 2.52, 3.92, 5.32), variance 3.267, se^2 0.817, shrunk by 0.921 to 2.97
 * -> b2 += 3. */
Test(biascorr, layer_computing_another_tensor_is_skipped)
{
    char dir[200];
    samples(dir, sizeof dir);
    const oq_biascorr_method methods[2] = {OQ_BIASCORR_LOCKSTEP, OQ_BIASCORR_WAVES};
    for (int mi = 0; mi < 2; mi++) {
        oq_model *fm = chain(false), *qm = chain_named(true, "y1_inliers");
        oq_biascorr_options o = oq_biascorr_options_default();
        o.method = methods[mi];
        oq_biascorr_result r;
        correct(fm, qm, dir, &o, &r);
        const int32_t *b1 = bias_of(qm, "b1_quantized"), *b2 = bias_of(qm, "b2_quantized");
        cr_expect_eq(b1[0], 0, "method %d: b1[0] %d", mi, b1[0]);
        cr_expect_eq(b1[1], 0, "method %d: b1[1] %d", mi, b1[1]);
        cr_expect_eq(b2[0], 3, "method %d: b2 %d", mi, b2[0]);
        cr_expect_eq(r.layers, 1);
        cr_expect_eq(r.skipped, 1);
        oq_model_free(fm);
        oq_model_free(qm);
    }
    cleanup(dir);
}

/* max_samples 2: samples (1, 2), (3, 4): mean a = 2, mean b = 3.
 *   g1: per sample (0.5, 1.1), mean 0.8, sample variance 0.18, se^2 = 0.09: shrunk by
 *       1 - 0.09 / 0.64 = 0.859 to 0.6875 -> 1; channel 1: -0.4 on both (se 0) -> 0
 *   g2: per sample 0.7a - 0.58 = (0.12, 1.52), mean 0.82, variance 0.98, se^2 0.49:
 *       shrunk by 1 - 0.49 / 0.6724 = 0.271 to 0.22 -> 0 (unshrunk, 0.82 would give 1) */
Test(biascorr, sample_limit_known_answer)
{
    char dir[200];
    samples(dir, sizeof dir);
    for (int mi = 0; mi < 2; mi++) {
        int32_t b1[2], b2[1];
        oq_biascorr_result r;
        run(dir, mi ? OQ_BIASCORR_WAVES : OQ_BIASCORR_LOCKSTEP, 2, 2, b1, b2, &r);
        cr_expect_eq(b1[0], 1);
        cr_expect_eq(b1[1], 0);
        cr_expect_eq(b2[0], 0, "method %d: b2 %d", mi, b2[0]);
        cr_expect_eq(r.samples, 2);
    }
    cleanup(dir);
}

/* sample_index {0, 3}: samples (1, 2) and (7, 8) only.
 *   g1: channel 0 per sample (0.5, 2.3), mean 1.4, variance 1.62, se^2 0.81: shrunk by
 *       1 - 0.81 / 1.96 = 0.587 to 0.82 -> 1; channel 1 -> 0
 *   g2: per sample (0.12, 4.32), mean 2.22, variance 8.82, se^2 4.41: shrunk by
 *       1 - 4.41 / 4.928 = 0.105 to 0.23 -> 0, where the plain mean would give 2: a shift
 *       the two samples disagree on is not corrected. */
Test(biascorr, sample_index_and_shrinkage_known_answer)
{
    char dir[200];
    samples(dir, sizeof dir);
    const uint64_t use[2] = {0, 3};
    for (int mi = 0; mi < 2; mi++) {
        int32_t b1[2], b2[1];
        oq_biascorr_result r;
        run_on(dir, mi ? OQ_BIASCORR_WAVES : OQ_BIASCORR_LOCKSTEP, 2, 16, use, 2, b1, b2, &r);
        cr_expect_eq(r.samples, 2);
        cr_expect_eq(b1[0], 1, "method %d", mi);
        cr_expect_eq(b1[1], 0, "method %d", mi);
        cr_expect_eq(b2[0], 0, "method %d: b2 %d", mi, b2[0]);
    }
    /* a sample past the end is refused */
    oq_model *fm = chain(false), *qm = chain(true);
    oq_calib_source *src = NULL;
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_calib_source_dir(dir, &src, &d), OQ_OK);
    oq_biascorr_options o = oq_biascorr_options_default();
    const uint64_t bad[1] = {4};
    o.sample_index = bad;
    o.n_sample_index = 1;
    oq_biascorr_result r;
    cr_expect_neq(oq_bias_correct(fm, qm, src, &o, &r, &d), OQ_OK);
    oq_diag_free(&d);
    oq_calib_source_free(src);
    oq_model_free(fm);
    oq_model_free(qm);
    cleanup(dir);
}

/* The automatic choice takes the lockstep pass when it fits, the waves when it does not. */
Test(biascorr, auto_falls_back_to_waves)
{
    char dir[200];
    samples(dir, sizeof dir);
    oq_model *fm = chain(false), *qm = chain(true);
    oq_biascorr_options o = oq_biascorr_options_default();
    o.method = OQ_BIASCORR_AUTO;
    o.max_bytes = 1; /* nothing fits */
    oq_biascorr_result r;
    correct(fm, qm, dir, &o, &r);
    cr_expect_eq(r.runs, 2);
    cr_expect_eq(bias_of(qm, "b2_quantized")[0], 2);
    oq_model_free(fm);
    oq_model_free(qm);
    cleanup(dir);
}

/* A chain of L Gemm layers [1, 2] -> [1, 2]: float W = [[1.3, 0.1], [0, 2]], b = (0.2, -0.4);
 * quantized int8 W = [[1, 0], [0, 2]], int32 b = 0, uint8 Q/DQ (scale 1) between layers.
 * L > OQ_BIASCORR_MAX_WAVES layers depend one on the next: L waves. */
static oq_model *deep_chain(bool quant, int L)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    oq_value *v = tu_input_1xc(m, "x", 2);
    int64_t d[2] = {2, 2}, n2 = 2;
    if (quant)
        v = tu_qdq_u8(m, v, "x", "x_dequant", 1.0f, 0);
    for (int l = 0; l < L; l++) {
        char w[32], b[32], g[32], y[32], yp[40];
        snprintf(w, sizeof w, "W%d", l);
        snprintf(b, sizeof b, "b%d", l);
        snprintf(g, sizeof g, "g%d", l);
        snprintf(y, sizeof y, "y%d", l);
        snprintf(yp, sizeof yp, "y%d_prequant", l);
        if (quant) {
            const int8_t wq[4] = {1, 0, 0, 2};
            const int32_t bq[2] = {0, 0};
            oq_value *p = tu_node(m, "Gemm", g, v, tu_weight_dq_i8(m, w, wq, d, 1.0f), bias_dq(m, b, bq, 2),
                                  l + 1 < L ? yp : y);
            v = l + 1 < L ? tu_qdq_u8(m, p, y, y, 1.0f, 0) : p;
        } else {
            const float wf[4] = {1.3f, 0.1f, 0, 2}, bf[2] = {0.2f, -0.4f};
            v = tu_node(m, "Gemm", g, v, fconst(m, w, wf, d, 2), fconst(m, b, bf, &n2, 1), y);
        }
    }
    oq_graph_add_output(m->graph, v, NULL);
    return m;
}

/* Bias correction of deep_chain(L) with the method and budget given */
static void deep_run(const char *dir, int L, oq_biascorr_method method, uint64_t budget, uint64_t max_samples,
                     int32_t *biases, oq_biascorr_result *r)
{
    oq_model *fm = deep_chain(false, L), *qm = deep_chain(true, L);
    oq_biascorr_options o = oq_biascorr_options_default();
    o.method = method;
    o.max_bytes = budget;
    o.max_samples = max_samples;
    correct(fm, qm, dir, &o, r);
    for (int l = 0; l < L; l++) {
        char b[40];
        snprintf(b, sizeof b, "b%d_quantized", l);
        memcpy(biases + 2 * l, bias_of(qm, b), 2 * sizeof *biases);
    }
    oq_model_free(fm);
    oq_model_free(qm);
}

/* When not every sample's run fits: with few waves (2 layers), the pass per wave on every
 * sample; with more than OQ_BIASCORR_MAX_WAVES (6 layers), the one lockstep pass on the
 * first samples that fit, if at least OQ_BIASCORR_MIN_LOCKSTEP do, with the corrections of
 * the lockstep pass limited to that many samples. The budget doubles from 1 KiB until a
 * lockstep run fits: the first that does holds 4 to 7 of the 8 samples. */
Test(biascorr, auto_lockstep_on_the_samples_that_fit)
{
    char dir[200];
    snprintf(dir, sizeof dir, "/tmp/onnxq_test_biascorr_fit_%ld", (long)getpid());
    mkdir(dir, 0755);
    for (int k = 0; k < 8; k++)
        write_sample(dir, k, (float)(2 * k + 1), (float)(3 - k));
    enum { L = 6 };
    oq_biascorr_result r;
    int32_t b[2 * L], l[2 * L];
    deep_run(dir, 2, OQ_BIASCORR_AUTO, 1024, 16, b, &r); /* 2 waves: every sample */
    cr_expect_eq(r.samples, 8);
    cr_expect_eq(r.runs, 2);
    uint64_t budget = 1024;
    for (;; budget *= 2) {
        cr_assert(budget < (1ull << 40), "no budget fits");
        deep_run(dir, L, OQ_BIASCORR_AUTO, budget, 16, b, &r);
        if (r.samples < 8 || r.runs == 1)
            break;
        cr_assert_eq(r.runs, (size_t)L, "waves on every sample below the budget of 4 runs");
    }
    cr_expect(r.samples >= OQ_BIASCORR_MIN_LOCKSTEP && r.samples < 8, "%llu samples at %llu bytes",
              (unsigned long long)r.samples, (unsigned long long)budget);
    cr_expect_eq(r.runs, 1);
    oq_biascorr_result rl;
    deep_run(dir, L, OQ_BIASCORR_LOCKSTEP, 0, r.samples, l, &rl);
    cr_expect_eq(rl.samples, r.samples);
    cr_expect(memcmp(b, l, sizeof b) == 0, "auto and lockstep on %llu samples differ", (unsigned long long)r.samples);
    bool some = false;
    for (int i = 0; i < 2 * L; i++)
        some |= b[i] != 0;
    cr_expect(some, "some correction");
    cleanup(dir);
}
