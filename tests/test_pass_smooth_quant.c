/* smooth-quant: the scales it computes, where 1/s goes, and float equivalence.
 *
 * The calibration samples are built so that max|X_j| is known exactly: LayerNormalization
 * with epsilon 0 on rows like [2,-2,2,-2] or [1,1,-1,-1] gives normalized values of
 * exactly +-1, so its output channel j reaches |gamma_j| + |beta_j|; Mul by a constant
 * on inputs of +-1, +-2 gives |c_j| * 2. The expected s_j = max|X_j|^a / max|W_j|^(1-a)
 * is evaluated here in double from those hand-derived maxima (not from the pass), and the
 * rewritten constants must equal the originals times s_j or 1/s_j up to float rounding of
 * one product (1 ulp: relative 2^-23).
 *
 * Equivalence: the model before (a copy) and after the pass run in onnxq's executor on
 * the same deterministic inputs must agree to 1e-5 relative + 1e-5 absolute: the rewrite
 * is exact in real arithmetic; in float it rounds the new constants once and the layer
 * sums (<= 4 terms of size <= ~20 here) once more (see tests/test_pass_fold_linear.c). */
#include <math.h>

#include "onnxq/tensor_io.h"
#include "test_pass_prep_util.h"
#include "testutil.h"

static bool is_op(const oq_node *n, const char *op) { return strcmp(n->op_type, op) == 0; }

#define REL_ULP 1.2e-7 /* 2^-23: one float rounding of the product */

static void assert_close_rel(float got, double want, const char *what, int j)
{
    cr_assert(fabs((double)got - want) <= REL_ULP * fabs(want) + 1e-30, "%s[%d] = %.9g, want %.9g", what, j, got,
              want);
}

/* Write samples (each rows x K floats, shape [1, rows, K] or [rows, K]) as .npy files. */
static char *write_samples(const float *data, int n_samples, const int64_t *dims, size_t rank)
{
    char *dir = tu_tmpdir();
    int64_t per = oq_dims_numel(dims, rank);
    for (int k = 0; k < n_samples; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/s%d.npy", dir, k);
        oq_rt_tensor t;
        cr_assert_eq(oq_rt_tensor_borrow(&t, OQ_DTYPE_FLOAT, dims, rank, (void *)(data + k * per)), OQ_OK);
        cr_assert_eq(oq_tensor_file_write_npy(path, &t, NULL), OQ_OK);
    }
    return dir;
}

static oq_pass_result run_sq(oq_model *m, const char *dir, double alpha)
{
    char pl[700];
    snprintf(pl, sizeof pl, "smooth-quant{alpha=%g,data=\"%s\",threads=1}", alpha, dir);
    return tp_run(m, pl);
}

static double sq_scale(double xmax, double wmax, double a)
{
    double wp = pow(wmax, 1 - a);
    return pow(xmax, a) / (wp < 1e-5 ? 1e-5 : wp);
}

static void assert_equivalent(oq_model *before, oq_model *m, const int64_t *dims, size_t rank)
{
    int64_t n = oq_dims_numel(dims, rank);
    float *x = malloc((size_t)n * sizeof(float)), *a, *b;
    for (uint32_t seed = 1; seed <= 3; seed++) {
        pp_fill(x, n, 3.0f, seed);
        int64_t na = pp_run(before, x, dims, rank, &a), nb = pp_run(m, x, dims, rank, &b);
        cr_assert_eq(na, nb);
        double max_abs;
        cr_assert(pp_worst(a, b, na, 1e-5, 1e-5, &max_abs) <= 1.0, "outputs differ beyond float rounding (%g)",
                  max_abs);
        free(a);
        free(b);
    }
    free(x);
}

/* Equivalence, then free what a test made. */
static void finish(oq_model *before, oq_model *m, const int64_t *dims, size_t rank, char *dir)
{
    assert_equivalent(before, m, dims, rank);
    oq_model_free(before);
    oq_model_free(m);
    free(dir);
}

/* max |w[j, :]| of a row-major [rows, cols] weight */
static double row_absmax(const float *w, int j, int cols)
{
    double m = 0;
    for (int n = 0; n < cols; n++)
        m = fmax(m, fabs(w[j * cols + n]));
    return m;
}

/* LayerNorm samples: 2 samples of [1, 2, 4] whose rows normalize to exactly +-1. */
static const float ln_rows[2 * 2 * 4] = {2, -2, 2, -2, 1, 1, -1, -1, -3, 3, -3, 3, 0.5f, 0.5f, -0.5f, -0.5f};
static const float gamma4[4] = {1.0f, 8.0f, 0.5f, 2.0f};
static const float beta4[4] = {0.0f, 0.5f, -0.25f, 0.0f};
static const float w43[4 * 3] = {0.5f, -1.0f, 0.25f, 0.25f, 0.125f, -0.5f, 2.0f, 1.0f, -1.0f, -0.25f, 0.5f, 1.0f};

/* x[1,2,4] -> LayerNormalization(gamma, beta, epsilon 0) -> h -> MatMul(W) -> y */
static oq_model *ln_model(void)
{
    oq_model *m = tp_model(17);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 2, 4}, 3);
    tp_init_f(m, "gamma", (int64_t[]){4}, 1, gamma4);
    tp_init_f(m, "beta", (int64_t[]){4}, 1, beta4);
    tp_init_f(m, "W", (int64_t[]){4, 3}, 2, w43);
    oq_node *ln = tp_node(m, "LayerNormalization", "ln", "x,gamma,beta", "h");
    oq_node_set_attr_float(ln, "epsilon", 0.0f);
    tp_node(m, "MatMul", "mm", "h,W", "y");
    tp_output(m, "y");
    return m;
}

Test(smooth_quant, layernorm_matmul_folds_into_gamma_and_beta)
{
    oq_model *m = ln_model();
    char *dir = write_samples(ln_rows, 2, (int64_t[]){1, 2, 4}, 3);
    oq_model *before = pp_clone(m);
    oq_pass_result r = run_sq(m, dir, 0.5);
    cr_assert_eq(tp_stat(&r, "layers_smoothed"), 1);
    cr_assert_eq(tp_stat(&r, "scales_folded"), 1);
    cr_assert_eq(tp_stat(&r, "muls_inserted"), 0);
    cr_assert_eq(tp_count_op(m, "Mul"), 0);
    oq_node *ln = tp_find_op(m, "LayerNormalization"), *mm = tp_find_op(m, "MatMul");
    const float *g = tp_floats(ln->inputs[1]), *b = tp_floats(ln->inputs[2]), *w = tp_floats(mm->inputs[1]);
    for (int j = 0; j < 4; j++) {
        double xmax = fabs(gamma4[j]) + fabs(beta4[j]); /* normalized values are +-1 */
        double wmax = row_absmax(w43, j, 3);
        double s = sq_scale(xmax, wmax, 0.5);
        assert_close_rel(g[j], gamma4[j] / s, "gamma", j);
        assert_close_rel(b[j], beta4[j] / s, "beta", j);
        for (int n = 0; n < 3; n++)
            assert_close_rel(w[j * 3 + n], w43[j * 3 + n] * s, "W", j * 3 + n);
    }
    /* the outlier channel 1 (max 8.5 against 2 elsewhere) is now level with the rest */
    cr_assert(fabs(8.5 / sq_scale(8.5, 0.5, 0.5) - sqrt(8.5 * 0.5)) < 1e-12);
    const char *meta = NULL;
    for (size_t i = 0; i < m->metadata.count; i++)
        if (strcmp(m->metadata.items[i].key, "onnxq.smooth_quant") == 0)
            meta = m->metadata.items[i].value;
    cr_assert(meta && strstr(meta, "\"node\":\"mm\"") && strstr(meta, "folded into LayerNormalization") &&
                  strstr(meta, "\"input\":\"h\"") && strstr(meta, "\"smoothed_input\":\"h_smoothed\""),
              "per-layer record: %s", meta ? meta : "(none)");
    /* h now holds h / s: renamed, so that nothing matches it with the float model's h */
    cr_assert_str_eq(ln->outputs[0]->name, "h_smoothed");
    cr_assert_eq(mm->inputs[0], ln->outputs[0]);
    finish(before, m, (int64_t[]){1, 2, 4}, 3, dir);
}

Test(smooth_quant, alpha_zero_and_one)
{
    for (int k = 0; k < 2; k++) {
        double a = k;
        oq_model *m = ln_model();
        char *dir = write_samples(ln_rows, 2, (int64_t[]){1, 2, 4}, 3);
        oq_model *before = pp_clone(m);
        run_sq(m, dir, a);
        oq_node *ln = tp_find_op(m, "LayerNormalization");
        const float *g = tp_floats(ln->inputs[1]);
        for (int j = 0; j < 4; j++) {
            double wmax = row_absmax(w43, j, 3);
            /* alpha 0: s = 1 / max|W|; alpha 1: s = max|X| (every channel of X ends at 1) */
            double s = a == 0 ? 1 / wmax : fabs(gamma4[j]) + fabs(beta4[j]);
            assert_close_rel(g[j], gamma4[j] / s, "gamma", j);
        }
        finish(before, m, (int64_t[]){1, 2, 4}, 3, dir);
    }
}

/* x[2,4] -> Mul(c) -> a -> Gemm(a, B[3,4], C[3], transB=1) -> y */
static const float c4[4] = {1.0f, 10.0f, -1.0f, 0.5f};
static const float b34[3 * 4] = {0.5f, 0.25f, -1.0f, 2.0f, -0.5f, 0.125f, 0.5f, 1.0f, 1.0f, -0.25f, 0.25f, -0.5f};
static const float gemm_rows[2 * 2 * 4] = {1, -2, 2, -1, -2, 1, -1, 2, 2, 2, -2, -2, -1, -1, 1, 1};

Test(smooth_quant, mul_gemm_transb_folds_into_the_constant)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){2, 4}, 2);
    tp_init_f(m, "c", (int64_t[]){4}, 1, c4);
    tp_init_f(m, "B", (int64_t[]){3, 4}, 2, b34);
    tp_init_f(m, "C", (int64_t[]){3}, 1, (const float[]){0.1f, 0.2f, -0.3f});
    tp_node(m, "Mul", "mul", "x,c", "a");
    oq_node *gemm = tp_node(m, "Gemm", "gemm", "a,B,C", "y");
    oq_node_set_attr_int(gemm, "transB", 1);
    tp_output(m, "y");
    char *dir = write_samples(gemm_rows, 2, (int64_t[]){2, 4}, 2);
    oq_model *before = pp_clone(m);
    oq_pass_result r = run_sq(m, dir, 0.5);
    cr_assert_eq(tp_stat(&r, "scales_folded"), 1);
    oq_node *mul = tp_find_op(m, "Mul");
    gemm = tp_find_op(m, "Gemm");
    const float *c = tp_floats(mul->inputs[1]), *b = tp_floats(gemm->inputs[1]);
    for (int j = 0; j < 4; j++) {
        double xmax = 2.0 * fabs(c4[j]); /* every input channel reaches |2| */
        double wmax = 0;
        for (int n = 0; n < 3; n++)
            wmax = fmax(wmax, fabs(b34[n * 4 + j])); /* transB: column j of B[3,4] */
        double s = sq_scale(xmax, wmax, 0.5);
        assert_close_rel(c[j], c4[j] / s, "c", j);
        for (int n = 0; n < 3; n++)
            assert_close_rel(b[n * 4 + j], b34[n * 4 + j] * s, "B", n * 4 + j);
    }
    cr_assert_float_eq(tp_floats(gemm->inputs[2])[2], -0.3f, 0, "the Gemm bias is not touched");
    finish(before, m, (int64_t[]){2, 4}, 2, dir);
}

/* Two MatMuls share h: one s from the max over both weights, folded once. */
Test(smooth_quant, shared_consumers_share_s)
{
    oq_model *m = ln_model();
    static const float w42[4 * 2] = {4.0f, 0.5f, 0.25f, 0.25f, 0.5f, 8.0f, 1.0f, -1.0f};
    tp_init_f(m, "W2", (int64_t[]){4, 2}, 2, w42);
    tp_node(m, "MatMul", "mm2", "h,W2", "y2");
    tp_output(m, "y2");
    char *dir = write_samples(ln_rows, 2, (int64_t[]){1, 2, 4}, 3);
    oq_model *before = pp_clone(m);
    oq_pass_result r = run_sq(m, dir, 0.5);
    cr_assert_eq(tp_stat(&r, "layers_smoothed"), 2);
    cr_assert_eq(tp_stat(&r, "scales_folded"), 1);
    oq_node *ln = tp_find_op(m, "LayerNormalization");
    oq_node *mm2 = NULL;
    for (oq_node *n = m->graph->first; n; n = n->next)
        if (strcmp(n->name, "mm2") == 0)
            mm2 = n;
    const float *g = tp_floats(ln->inputs[1]), *w2 = tp_floats(mm2->inputs[1]);
    for (int j = 0; j < 4; j++) {
        double wmax = row_absmax(w43, j, 3);
        wmax = fmax(wmax, row_absmax(w42, j, 2));
        double s = sq_scale(fabs(gamma4[j]) + fabs(beta4[j]), wmax, 0.5);
        assert_close_rel(g[j], gamma4[j] / s, "gamma", j);
        for (int n = 0; n < 2; n++)
            assert_close_rel(w2[j * 2 + n], w42[j * 2 + n] * s, "W2", j * 2 + n);
    }
    finish(before, m, (int64_t[]){1, 2, 4}, 3, dir);
}

/* h also feeds a Relu (not a layer): the LayerNorm must keep its output, so a Mul(1/s)
 * goes in front of the MatMul only. */
Test(smooth_quant, other_consumer_gets_a_mul)
{
    oq_model *m = ln_model();
    tp_node(m, "Relu", "relu", "h", "r");
    tp_output(m, "r");
    char *dir = write_samples(ln_rows, 2, (int64_t[]){1, 2, 4}, 3);
    oq_model *before = pp_clone(m);
    oq_pass_result r = run_sq(m, dir, 0.5);
    cr_assert_eq(tp_stat(&r, "muls_inserted"), 1);
    cr_assert_eq(tp_stat(&r, "scales_folded"), 0);
    oq_node *ln = tp_find_op(m, "LayerNormalization"), *mul = tp_find_op(m, "Mul"), *mm = tp_find_op(m, "MatMul");
    cr_assert_float_eq(tp_floats(ln->inputs[1])[1], 8.0f, 0, "gamma unchanged");
    cr_assert(mul && mm->inputs[0] == mul->outputs[0] && mul->inputs[0] == ln->outputs[0]);
    cr_assert_eq(tp_find_op(m, "Relu")->inputs[0], ln->outputs[0]);
    const float *inv = tp_floats(mul->inputs[1]);
    for (int j = 0; j < 4; j++) {
        double wmax = row_absmax(w43, j, 3);
        assert_close_rel(inv[j], 1 / sq_scale(fabs(gamma4[j]) + fabs(beta4[j]), wmax, 0.5), "1/s", j);
    }
    finish(before, m, (int64_t[]){1, 2, 4}, 3, dir);
}

/* MatMul(W1) -> Add(bias) -> MatMul(W2): 1/s goes into W1's output columns and the bias. */
Test(smooth_quant, matmul_add_chain_folds)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){2, 4}, 2);
    tp_init_f(m, "W1", (int64_t[]){4, 4}, 2,
              (const float[]){1, 0, 0, 0, 0, 20, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0.5f});
    tp_init_f(m, "bias", (int64_t[]){4}, 1, (const float[]){0.5f, -1.0f, 0.0f, 0.25f});
    tp_init_f(m, "W2", (int64_t[]){4, 3}, 2, w43);
    tp_node(m, "MatMul", "mm1", "x,W1", "t");
    tp_node(m, "Add", "add", "t,bias", "h");
    tp_node(m, "MatMul", "mm2", "h,W2", "y");
    tp_output(m, "y");
    char *dir = write_samples(gemm_rows, 2, (int64_t[]){2, 4}, 2);
    oq_model *before = pp_clone(m);
    oq_pass_result r = run_sq(m, dir, 0.5);
    /* mm1's input x is a graph input: a Mul; mm2's input h folds into mm1 and the Add */
    cr_assert_eq(tp_stat(&r, "scales_folded"), 1);
    cr_assert_eq(tp_stat(&r, "muls_inserted"), 1);
    cr_assert(oq_graph_find_value(m->graph, "t_smoothed") && oq_graph_find_value(m->graph, "h_smoothed"),
              "both values on the fold path are renamed");
    cr_assert_null(oq_graph_find_value(m->graph, "h"));
    oq_node *mul = tp_find_op(m, "Mul");
    cr_assert_str_eq(mul->inputs[0]->name, "x", "the graph input keeps its name; the Mul reads it");
    finish(before, m, (int64_t[]){2, 4}, 2, dir);
}

/* MatMul(W1) -> Relu -> MatMul(W2): Relu(u / s) = Relu(u) / s, so 1/s goes through the
 * Relu into W1's columns; a Sigmoid in its place gets a Mul. */
Test(smooth_quant, folds_through_relu_not_sigmoid)
{
    for (int k = 0; k < 2; k++) {
        oq_model *m = tp_model(13);
        tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){2, 4}, 2);
        static const float w1[16] = {1, 0, 0.5f, 0, 0, 20, 0, 0, 0, 0, 1, 0, -1, 0, 0, 0.5f};
        tp_init_f(m, "W1", (int64_t[]){4, 4}, 2, w1);
        tp_init_f(m, "W2", (int64_t[]){4, 3}, 2, w43);
        tp_node(m, "MatMul", "mm1", "x,W1", "t");
        tp_node(m, k == 0 ? "Relu" : "Sigmoid", "act", "t", "h");
        tp_node(m, "MatMul", "mm2", "h,W2", "y");
        tp_output(m, "y");
        char *dir = write_samples(gemm_rows, 2, (int64_t[]){2, 4}, 2);
        oq_model *before = pp_clone(m);
        oq_pass_result r = run_sq(m, dir, 0.5);
        cr_assert_eq(tp_stat(&r, "scales_folded"), k == 0 ? 1 : 0);
        cr_assert_eq(tp_count_op(m, "Mul"), k == 0 ? 1 : 2, "x's Mul (graph input), and h's for the Sigmoid");
        if (k == 0) {
            /* t = x W1 on the four sample rows, by hand: t0 in {2,-4,4,-2}, t1 in {-40,20,40,
             * -20}, t2 in {2.5,-2,-1,0.5}, t3 in {-0.5,1,-1,0.5}; max Relu(t_j) = 4, 40, 2.5, 1.
             * W1's column j is divided by mm2's s_j. */
            const double hmax[4] = {4, 40, 2.5, 1};
            const float *nw1 = NULL;
            for (oq_node *n = m->graph->first; n; n = n->next)
                if (strcmp(n->name, "mm1") == 0)
                    nw1 = tp_floats(n->inputs[1]);
            for (int j = 0; j < 4; j++) {
                double sj = sq_scale(hmax[j], row_absmax(w43, j, 3), 0.5);
                for (int i = 0; i < 4; i++) {
                    /* mm1's own smoothing: every channel of x reaches 2; rows of W1 * s_x[i]
                     * (both from the float weights; two float roundings: 2 ulps) */
                    double sx = sq_scale(2.0, row_absmax(w1, i, 4), 0.5), want = w1[i * 4 + j] * sx / sj;
                    cr_assert(fabs(nw1[i * 4 + j] - want) <= 2 * REL_ULP * fabs(want), "W1[%d] = %.9g, want %.9g",
                              i * 4 + j, nw1[i * 4 + j], want);
                }
            }
        }
        finish(before, m, (int64_t[]){2, 4}, 2, dir);
    }
}

Test(smooth_quant, bad_alpha_is_a_usage_error)
{
    oq_model *m = ln_model();
    char msg[512];
    cr_assert_eq(tp_run_fail(m, "smooth-quant{alpha=1.5,random=1}", msg, sizeof msg), OQ_ERR_USAGE);
    cr_assert(strstr(msg, "alpha 1.5 is outside [0, 1]"), "%s", msg);
    cr_assert_eq(tp_run_fail(m, "smooth-quant{alpha=0.5}", msg, sizeof msg), OQ_ERR_USAGE);
    cr_assert(strstr(msg, "smooth-quant: give exactly one of"), "%s", msg);
    oq_model_free(m);
}

/* The per-channel observer: max |x| over every axis but the channel axis. */
Test(smooth_quant, absmax_observer)
{
    float acc[3] = {0, 0, 0};
    const float x[2 * 3 * 2] = {1, -4, 2, 0.5f, -3, 3, -6, 1, NAN, 7, 0.25f, INFINITY};
    uint64_t bad = 0;
    cr_assert_eq(oq_absmax_per_channel_update(acc, x, (int64_t[]){2, 3, 2}, 3, 1, &bad, "x", NULL), OQ_OK);
    cr_assert_float_eq(acc[0], 6.0f, 0);
    cr_assert_float_eq(acc[1], 7.0f, 0);
    cr_assert_float_eq(acc[2], 3.0f, 0);
    cr_assert_eq(bad, 2);
    cr_assert_eq(oq_absmax_per_channel_update(acc, x, (int64_t[]){2, 3, 2}, 3, 3, &bad, "x", NULL), OQ_ERR_USAGE);
}

/* ---- search=true: alpha chosen per input on the held-out samples (k % 4 == 3) ---- */

#define SR_ROWS 16
#define SR_K 8
#define SR_N 6
#define SR_SAMPLES 16

/* a deterministic value in [-1, 1] */
static float unit(uint32_t i)
{
    i = i * 2654435761u + 12345u;
    i ^= i >> 13;
    return (float)((i % 2001u) / 1000.0 - 1.0);
}

/* x[rows, K] -> Mul(c = 1) -> a -> MatMul(W[K, N]) -> y */
static oq_model *sr_model(const float *w)
{
    static const float ones[SR_K] = {1, 1, 1, 1, 1, 1, 1, 1};
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){SR_ROWS, SR_K}, 2);
    tp_init_f(m, "c", (int64_t[]){SR_K}, 1, ones);
    tp_init_f(m, "W", (int64_t[]){SR_K, SR_N}, 2, w);
    tp_node(m, "Mul", "mul", "x,c", "a");
    tp_node(m, "MatMul", "mm", "a,W", "y");
    tp_output(m, "y");
    return m;
}

/* samples: channel 0 scaled by big (an outlier channel when big >> 1) */
static char *sr_samples(float big)
{
    static float x[SR_SAMPLES * SR_ROWS * SR_K];
    for (int i = 0; i < SR_SAMPLES * SR_ROWS * SR_K; i++)
        x[i] = unit((uint32_t)i) * (i % SR_K == 0 ? big : 1.0f);
    return write_samples(x, SR_SAMPLES, (int64_t[]){SR_ROWS, SR_K}, 2);
}

static float sr_w[SR_K * SR_N];

/* as in real models, the outlier channel's weights are small: its contribution to y is
 * of the same size as the other channels' */
static void sr_outlier_weights(void)
{
    for (int i = 0; i < SR_K * SR_N; i++)
        sr_w[i] = unit((uint32_t)(1000 + i)) * (i < SR_N ? 0.01f : 1.0f);
}

/* An activation channel 100x the others (its weights 100x smaller): the search smooths it, with one of its
 * candidates, and its s is the formula's for that alpha (max|X_j| over all samples);
 * the held-out output error it reports drops by far more than the 1 dB it needs. */
Test(smooth_quant, search_smooths_an_outlier_channel)
{
    sr_outlier_weights();
    oq_model *m = sr_model(sr_w);
    char *dir = sr_samples(100.0f);
    oq_model *before = pp_clone(m);
    char pl[700];
    snprintf(pl, sizeof pl, "smooth-quant{search=true,data=\"%s\",threads=1}", dir);
    oq_pass_result r = tp_run(m, pl);
    cr_assert_eq(tp_stat(&r, "layers_smoothed"), 1);
    cr_assert_eq(tp_stat(&r, "scales_folded"), 1);
    const char *rec = oq_model_get_metadata(m, OQ_SMOOTH_METADATA_KEY);
    cr_assert(rec && strstr(rec, "\"alpha\":\"search\"") && strstr(rec, "\"range\":\"minmax\""), "%s", rec);
    const char *ap = strstr(rec, ",\"alpha\":"), *b4 = strstr(rec, "heldout_sqnr_db_before\":"),
               *af = strstr(rec, "heldout_sqnr_db_after\":");
    cr_assert(ap && b4 && af, "%s", rec);
    double alpha = atof(ap + 9), db_before = atof(b4 + 24), db_after = atof(af + 23);
    bool candidate = false;
    for (double a = 0.3; a < 0.95; a += 0.1)
        candidate |= fabs(alpha - a) < 1e-9;
    cr_assert(candidate, "alpha %g", alpha);
    cr_assert(db_after > db_before + 10, "held-out SQNR %g -> %g dB", db_before, db_after);
    /* s from the formula: channel j's max |x| over the samples, row j's max |W| */
    const float *c = tp_floats(tp_find_op(m, "Mul")->inputs[1]);
    for (int j = 0; j < SR_K; j++) {
        double xmax = 0;
        for (int i = j; i < SR_SAMPLES * SR_ROWS * SR_K; i += SR_K)
            xmax = fmax(xmax, fabs(unit((uint32_t)i) * (j == 0 ? 100.0 : 1.0)));
        assert_close_rel(c[j], 1.0 / sq_scale(xmax, row_absmax(sr_w, j, SR_N), alpha), "c", j);
    }
    finish(before, m, (int64_t[]){SR_ROWS, SR_K}, 2, dir);
}

/* Every channel with the same peak and every weight row with the same peak: every s_j
 * is the same number, quantization is the same up to scale, nothing is gained: the
 * input is left alone (the model is not changed). outlier-ratio skips inputs whose
 * largest channel peak is not that many times the median one. */
Test(smooth_quant, search_leaves_what_it_cannot_improve)
{
    for (int j = 0; j < SR_K; j++) /* every row: a rotation of the same 6 values */
        for (int n = 0; n < SR_N; n++)
            sr_w[j * SR_N + n] = (float[]){0.5f, -1.0f, 0.25f, 0.75f, -0.125f, 0.375f}[(n + j) % SR_N];
    static float x[SR_SAMPLES * SR_ROWS * SR_K];
    for (int i = 0; i < SR_SAMPLES * SR_ROWS * SR_K; i++) /* rows 0 and 1 reach +-1 in every channel */
        x[i] = (i / SR_K) % SR_ROWS == 0 ? 1.0f : (i / SR_K) % SR_ROWS == 1 ? -1.0f : unit((uint32_t)i) * 0.9f;
    char *dir = write_samples(x, SR_SAMPLES, (int64_t[]){SR_ROWS, SR_K}, 2);
    oq_model *m = sr_model(sr_w);
    char pl[700];
    snprintf(pl, sizeof pl, "smooth-quant{search=true,data=\"%s\",threads=1}", dir);
    oq_pass_result r = tp_run(m, pl);
    cr_assert_eq(tp_stat(&r, "inputs_left"), 1);
    cr_assert_eq(tp_stat(&r, "layers_smoothed"), 0);
    cr_assert_float_eq(tp_floats(tp_find_op(m, "Mul")->inputs[1])[0], 1.0f, 0);
    oq_model_free(m);
    free(dir);

    sr_outlier_weights();
    dir = sr_samples(100.0f);
    m = sr_model(sr_w);
    snprintf(pl, sizeof pl, "smooth-quant{search=true,outlier-ratio=1000,data=\"%s\",threads=1}", dir);
    r = tp_run(m, pl);
    cr_assert_eq(tp_stat(&r, "inputs_left"), 1, "a peak ratio of about 100 is below 1000");
    oq_model_free(m);
    free(dir);
}

/* calibrate gives the inputs the search smoothed their exact min/max (the range the
 * search judged them with) whatever the method; other tensors get the method's range. */
Test(smooth_quant, calibrate_keeps_min_max_for_searched_inputs)
{
    sr_outlier_weights();
    char *dir = sr_samples(100.0f);
    for (int on = 0; on < 2; on++) {
        oq_model *m = sr_model(sr_w);
        char pl[900];
        snprintf(pl, sizeof pl,
                 "smooth-quant{search=true,data=\"%s\",threads=1},calibrate{data=\"%s\",method=percentile,"
                 "percentile=90,smoothed-minmax=%s,threads=1}", dir, dir, on ? "true" : "false");
        oq_pass_result r = tp_run(m, pl);
        cr_assert_eq(tp_stat(&r, "smoothed_minmax"), on ? 1 : 0);
        const char *js = oq_model_get_metadata(m, OQ_CALIB_METADATA_KEY);
        oq_calib_table t;
        cr_assert_eq(oq_calib_table_from_json(js, &t, NULL), OQ_OK);
        const char *xs = tp_find_op(m, "MatMul")->inputs[0]->name;
        bool seen_x = false, seen_y = false;
        for (size_t i = 0; i < t.count; i++) {
            const oq_calib_entry *e = &t.items[i];
            if (!strcmp(e->name, xs)) {
                seen_x = true;
                if (on)
                    cr_assert(e->lo == e->min && e->hi == e->max, "%s: [%g, %g] vs min/max [%g, %g]", xs, e->lo,
                              e->hi, e->min, e->max);
                else
                    cr_assert(e->hi < e->max, "%s: percentile 90 clips (hi %g, max %g)", xs, e->hi, e->max);
            }
            if (!strcmp(e->name, "y")) {
                seen_y = true;
                cr_assert(e->hi < e->max, "y: percentile 90 clips (hi %g, max %g)", e->hi, e->max);
            }
        }
        cr_assert(seen_x && seen_y);
        oq_calib_table_free(&t);
        oq_model_free(m);
    }
    free(dir);
}

/* x -> MatMul(W1) -> t -> Add(bias) -> h -> Relu -> r -> MatMul(W2) -> y, channel 0 of x an
 * outlier that W1 passes on to r: the search smooths x (a Mul: x is a graph input) and/or
 * r (folded through the Relu and the Add into W1's columns and the bias). */
static oq_model *chain_model(void)
{
    static float w1[SR_K * SR_K], bias[SR_K];
    for (int i = 0; i < SR_K; i++) {
        bias[i] = 0.1f * unit((uint32_t)(500 + i));
        for (int j = 0; j < SR_K; j++)
            w1[i * SR_K + j] = i == j ? 1.0f : 0.05f * unit((uint32_t)(700 + i * SR_K + j));
    }
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){SR_ROWS, SR_K}, 2);
    tp_init_f(m, "W1", (int64_t[]){SR_K, SR_K}, 2, w1);
    tp_init_f(m, "bias", (int64_t[]){SR_K}, 1, bias);
    tp_init_f(m, "W2", (int64_t[]){SR_K, SR_N}, 2, sr_w);
    tp_node(m, "MatMul", "mm1", "x,W1", "t");
    tp_node(m, "Add", "add", "t,bias", "h");
    tp_node(m, "Relu", "relu", "h", "r");
    tp_node(m, "MatMul", "mm2", "r,W2", "y");
    tp_output(m, "y");
    return m;
}

static oq_calib_table table_of(const oq_model *m)
{
    oq_calib_table t;
    cr_assert_eq(oq_calib_table_from_json(oq_model_get_metadata(m, OQ_CALIB_METADATA_KEY), &t, NULL), OQ_OK);
    return t;
}

/* calibrate{smooth-quant=search} (one run over the samples) gives the model and the
 * ranges that smooth-quant{search=true} followed by calibrate give (two runs): the same
 * smoothing, the same tensors in the table, ranges equal up to float rounding (the
 * smoothed tensors' min/max derived from per-channel extremes over s, the others from
 * the unsmoothed run), except that the tensors the fold rescaled before r get their
 * min/max as r does; with a fixed alpha it calibrates again, and the table is exact. */
Test(smooth_quant, calibrate_in_one_run_equals_two_runs)
{
    sr_outlier_weights();
    char *dir = sr_samples(100.0f);
    for (int fixed = 0; fixed < 2; fixed++) {
        oq_model *two = chain_model(), *one = chain_model();
        char pl[900];
        snprintf(pl, sizeof pl,
                 "smooth-quant{%s,split-ratio=0,data=\"%s\",threads=1},calibrate{data=\"%s\",method=percentile,"
                 "percentile=99,threads=1}", fixed ? "alpha=0.5" : "search=true", dir, dir);
        oq_pass_result r2 = tp_run(two, pl);
        snprintf(pl, sizeof pl,
                 "calibrate{data=\"%s\",smooth-quant=%s,smooth-split-ratio=0,method=percentile,percentile=99,"
                 "threads=1}", dir, fixed ? "0.5" : "search");
        oq_pass_result r1 = tp_run(one, pl);
        cr_assert_eq(tp_stat(&r1, "smooth_layers"), tp_stat(&r2, "layers_smoothed"));
        cr_assert_eq(tp_stat(&r1, "smooth_muls_inserted"), tp_stat(&r2, "muls_inserted"));
        cr_assert_eq(tp_stat(&r1, "smooth_recalibrated"), fixed);
        if (!fixed)
            cr_assert(oq_graph_find_value(one->graph, "r_smoothed") && oq_graph_find_value(one->graph, "h_smoothed") &&
                          oq_graph_find_value(one->graph, "t_smoothed"),
                      "the search folds r's scales through the Relu and the Add");
        cr_assert_str_eq(oq_model_get_metadata(one, OQ_SMOOTH_METADATA_KEY),
                         oq_model_get_metadata(two, OQ_SMOOTH_METADATA_KEY));
        for (const char *w = "W1\0W2\0bias\0"; *w; w += strlen(w) + 1) { /* the same weights */
            oq_node *n1 = NULL, *n2 = NULL;
            for (oq_node *n = one->graph->first; n; n = n->next)
                if (!strcmp(n->name, *w == 'W' && w[1] == '1' ? "mm1" : *w == 'W' ? "mm2" : "add"))
                    n1 = n;
            for (oq_node *n = two->graph->first; n; n = n->next)
                if (!strcmp(n->name, n1->name))
                    n2 = n;
            const float *a = tp_floats(n1->inputs[1]), *b = tp_floats(n2->inputs[1]);
            int64_t cnt = oq_tensor_numel(oq_value_const_tensor(n1->inputs[1]));
            cr_assert(memcmp(a, b, (size_t)cnt * sizeof(float)) == 0, "%s differs", w);
        }
        oq_calib_table t1 = table_of(one), t2 = table_of(two);
        cr_assert_eq(t1.count, t2.count);
        size_t smoothed = 0;
        for (size_t i = 0; i < t2.count; i++) {
            const oq_calib_entry *b = &t2.items[i], *a = oq_calib_table_find(&t1, b->name);
            cr_assert(a, "%s missing from the one-run table", b->name);
            double tol = fixed ? 0 : 4 * REL_ULP;
            /* the tensors the fold rescaled before r get min/max, as r does (two runs:
             * the method's range of their own histogram) */
            bool chain = !fixed && (!strcmp(b->name, "t_smoothed") || !strcmp(b->name, "h_smoothed"));
            double lo = chain ? b->min : b->lo, hi = chain ? b->max : b->hi, mag = fmax(fabs(lo), fabs(hi));
            cr_assert(fabs(a->lo - lo) <= tol * mag && fabs(a->hi - hi) <= tol * mag,
                      "%s: [%.9g, %.9g] in one run, [%.9g, %.9g] in two", b->name, a->lo, a->hi, lo, hi);
            cr_assert(fabs(a->min - b->min) <= tol * mag && fabs(a->max - b->max) <= tol * mag,
                      "%s: min/max [%.9g, %.9g] in one run, [%.9g, %.9g] in two", b->name, a->min, a->max, b->min,
                      b->max);
            smoothed += strstr(b->name, "_smooth") != NULL;
        }
        cr_assert(smoothed >= (fixed ? 2u : 3u), "%zu smoothed tensors in the table", smoothed);
        oq_calib_table_free(&t1);
        oq_calib_table_free(&t2);
        oq_model_free(one);
        oq_model_free(two);
    }
    free(dir);
}

/* ---- split-ratio: outlier channels split off into a float MatMul (LLM.int8()-style) ---- */

/* every weight row of the same size: no channel's contribution is small */
static void sr_plain_weights(void)
{
    for (int i = 0; i < SR_K * SR_N; i++)
        sr_w[i] = unit((uint32_t)(1000 + i));
}

/* the smooth-quant search on m with the samples in dir */
static oq_pass_result sr_search(oq_model *m, const char *dir)
{
    char pl[700];
    snprintf(pl, sizeof pl, "smooth-quant{search=true,data=\"%s\",threads=1}", dir);
    return tp_run(m, pl);
}

/* Channel 0 of x 100x the others with ordinary weights: its contribution dominates the
 * output, so no smoothing makes 8 bits hold it and the rest; the search splits it off:
 * W's row 0 is zeroed in the layer, a MatMul of x[..., [0]] by W's row 0 (exact, the
 * weight as it was) is added to its output, the model computes the same function, and
 * the held-out error falls. */
Test(smooth_quant, search_splits_a_dominant_channel)
{
    sr_plain_weights();
    oq_model *m = sr_model(sr_w);
    char *dir = sr_samples(100.0f);
    oq_model *before = pp_clone(m);
    oq_pass_result r = sr_search(m, dir);
    cr_assert_eq(tp_stat(&r, "layers_split"), 1);
    cr_assert_eq(tp_stat(&r, "channels_split"), 1);
    oq_node *g = tp_find_op(m, "Gather");
    cr_assert(g);
    const int64_t *ix = oq_tensor_data(oq_value_const_tensor(g->inputs[1]), NULL);
    cr_assert_eq(ix[0], 0, "the outlier channel is 0, not %lld", (long long)ix[0]);
    oq_node *mm = NULL, *mo = NULL;
    for (oq_node *n = m->graph->first; n; n = n->next)
        if (is_op(n, "MatMul"))
            *(n->inputs[0] == g->outputs[0] ? &mo : &mm) = n;
    cr_assert(mm && mo);
    const float *wm = tp_floats(mm->inputs[1]), *wo = tp_floats(mo->inputs[1]);
    double s0 = 0;
    for (int c = 0; c < SR_N; c++) {
        cr_assert_float_eq(wm[c], 0.0f, 0, "row 0 of the quantized layer's weight is zeroed");
        s0 = fmax(s0, fabs(wo[c]));
    }
    /* the split-off row: W's row 0 times the s the layer's other rows got for channel 0
     * (s_0 = 1: the channel is not smoothed) */
    for (int c = 0; c < SR_N; c++)
        assert_close_rel(wo[c], sr_w[c], "outlier weight", c);
    const char *keep = oq_model_get_metadata(m, OQ_KEEP_FLOAT_METADATA_KEY);
    cr_assert(keep && strstr(keep, mo->name), "%s", keep ? keep : "(none)");
    const char *rec = oq_model_get_metadata(m, OQ_SMOOTH_METADATA_KEY);
    const char *b4 = strstr(rec, "heldout_sqnr_db_before\":"), *af = strstr(rec, "heldout_sqnr_db_after\":"),
               *ns = strstr(rec, "heldout_sqnr_db_without_split\":");
    cr_assert(b4 && af && ns && strstr(rec, "\"split_channels\":1"), "%s", rec);
    cr_assert(atof(af + 23) > atof(ns + 31), "with the split %g dB, without %g dB", atof(af + 23), atof(ns + 31));
    cr_assert(atof(af + 23) > atof(b4 + 24) + 10, "%s", rec);
    finish(before, m, (int64_t[]){SR_ROWS, SR_K}, 2, dir);
}

/* The split's gain must stand out of its noise over the held-out samples: the same
 * outlier channel on 8 samples (2 held out: no standard error to judge by) is not split;
 * on 16 (4 held out) it is, and the record gives the gain's standard error, which the
 * gain exceeds twice over; split-z=0 (no such rule) splits it on 8. */
Test(smooth_quant, split_needs_held_out_samples)
{
    sr_plain_weights();
    static float x[SR_SAMPLES * SR_ROWS * SR_K];
    for (int i = 0; i < SR_SAMPLES * SR_ROWS * SR_K; i++)
        x[i] = unit((uint32_t)i) * (i % SR_K == 0 ? 100.0f : 1.0f);
    char *few = write_samples(x, 8, (int64_t[]){SR_ROWS, SR_K}, 2);
    char *dir = write_samples(x, SR_SAMPLES, (int64_t[]){SR_ROWS, SR_K}, 2);
    oq_model *m8 = sr_model(sr_w), *m16 = sr_model(sr_w);
    oq_pass_result r8 = sr_search(m8, few), r16 = sr_search(m16, dir);
    cr_assert_eq(tp_stat(&r8, "layers_split"), 0);
    cr_assert_null(tp_find_op(m8, "Gather"));
    oq_model *m8z = sr_model(sr_w); /* split-z=0: the gain alone decides */
    char pl[700];
    snprintf(pl, sizeof pl, "smooth-quant{search=true,split-z=0,data=\"%s\",threads=1}", few);
    oq_pass_result r8z = tp_run(m8z, pl);
    cr_assert_eq(tp_stat(&r8z, "layers_split"), 1);
    oq_model_free(m8z);
    cr_assert_eq(tp_stat(&r16, "layers_split"), 1);
    const char *rec = oq_model_get_metadata(m16, OQ_SMOOTH_METADATA_KEY);
    const char *af = strstr(rec, "heldout_sqnr_db_after\":"), *ns = strstr(rec, "heldout_sqnr_db_without_split\":"),
               *se = strstr(rec, "split_gain_se_db\":");
    cr_assert(af && ns && se && strstr(rec, "\"split_heldout_samples\":4"), "%s", rec);
    double gain = atof(af + 23) - atof(ns + 31), e = atof(se + 18);
    cr_assert(e > 0 && gain > 2 * e, "gain %g dB, standard error %g dB", gain, e);
    oq_model_free(m8);
    oq_model_free(m16);
    free(few);
    free(dir);
}

/* In calibrate's sample loop, the layer's input gets the range of its channels but the
 * split one (which it reads with zero weights), from their per-channel extremes, the
 * same as with the smooth-quant pass and calibrate in two runs; insert-qdq (plain
 * placement: Q/DQ on the layer's output too) leaves the parts the split adds float quantizes the layer and leaves the split-off MatMul in float, and drops the
 * list of nodes to leave float. */
Test(smooth_quant, split_ranges_and_placement)
{
    sr_plain_weights();
    char *dir = sr_samples(100.0f);
    oq_model *one = sr_model(sr_w), *two = sr_model(sr_w);
    char pl[900];
    snprintf(pl, sizeof pl, "calibrate{data=\"%s\",smooth-quant=search,method=minmax,threads=1}", dir);
    oq_pass_result r1 = tp_run(one, pl);
    cr_assert_eq(tp_stat(&r1, "smooth_layers_split"), 1);
    cr_assert_eq(tp_stat(&r1, "smooth_recalibrated"), 0, "the split's ranges follow from the first run");
    snprintf(pl, sizeof pl, "smooth-quant{search=true,data=\"%s\",threads=1},calibrate{data=\"%s\",method=minmax,"
             "threads=1}", dir, dir);
    tp_run(two, pl);
    oq_node *g = tp_find_op(one, "Gather"), *mm = NULL;
    for (oq_node *n = one->graph->first; n; n = n->next)
        if (is_op(n, "MatMul") && n->inputs[0] != g->outputs[0])
            mm = n;
    cr_assert(g && mm);
    oq_calib_table t1 = table_of(one), t2 = table_of(two);
    const char *xn = mm->inputs[0]->name;
    const oq_calib_entry *a = oq_calib_table_find(&t1, xn), *b = oq_calib_table_find(&t2, xn);
    cr_assert(a && b, "%s in both tables", xn);
    double mag = fmax(fabs(b->min), fabs(b->max));
    cr_assert(fabs(a->lo - b->lo) <= 4 * REL_ULP * mag && fabs(a->hi - b->hi) <= 4 * REL_ULP * mag,
              "[%.9g, %.9g] in one pass, [%.9g, %.9g] in two", a->lo, a->hi, b->lo, b->hi);
    cr_assert(b->hi < 1.01f && b->lo > -1.01f && b->max > 50.0f,
              "channel 0 (up to 100) is out of the range: [%g, %g], min/max [%g, %g]", b->lo, b->hi, b->min, b->max);
    oq_calib_table_free(&t1);
    oq_calib_table_free(&t2);
    tp_run(one, "insert-qdq");
    cr_assert_null(oq_model_get_metadata(one, OQ_KEEP_FLOAT_METADATA_KEY));
    int quantized = 0, float_mm = 0;
    for (oq_node *n = one->graph->first; n; n = n->next)
        if (is_op(n, "MatMul")) {
            bool q = n->inputs[0]->producer && is_op(n->inputs[0]->producer, "DequantizeLinear");
            quantized += q;
            float_mm += !q && n->inputs[0] == g->outputs[0];
        }
    cr_assert_eq(quantized, 1);
    cr_assert_eq(float_mm, 1, "the split-off MatMul reads the Gather in float");
    oq_model_free(one);
    oq_model_free(two);
    free(dir);
}

/* x -> Mul(c) -> a -> MatMul(W) -> y, and a -> Relu -> r (the first output): a is read by
 * more than the layer, so a split without smoothing makes the layer read Mul(a, mask)
 * (its 8-bit range leaves channel 0 out) and the Relu keeps a as it is: after calibrate
 * and insert-qdq, r equals the float model's on samples whose channel 0 reaches 100. */
Test(smooth_quant, split_keeps_other_readers_whole)
{
    static const float ones[SR_K] = {1, 1, 1, 1, 1, 1, 1, 1};
    sr_plain_weights();
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){SR_ROWS, SR_K}, 2);
    tp_init_f(m, "c", (int64_t[]){SR_K}, 1, ones);
    tp_init_f(m, "W", (int64_t[]){SR_K, SR_N}, 2, sr_w);
    tp_node(m, "Mul", "mul", "x,c", "a");
    tp_node(m, "Relu", "relu", "a", "r");
    tp_node(m, "MatMul", "mm", "a,W", "y");
    tp_output(m, "r");
    tp_output(m, "y");
    oq_model *before = pp_clone(m);
    char *dir = sr_samples(100.0f);
    char pl[900];
    snprintf(pl, sizeof pl, "calibrate{data=\"%s\",smooth-quant=search,threads=1},insert-qdq", dir);
    oq_pass_result r = tp_run(m, pl);
    cr_assert_eq(tp_stat(&r, "smooth_layers_split"), 1);
    oq_node *mm = NULL;
    for (oq_node *n = m->graph->first; n; n = n->next)
        if (!strcmp(n->name, "mm"))
            mm = n;
    cr_assert(mm && mm->inputs[0]->producer && is_op(mm->inputs[0]->producer, "DequantizeLinear"));
    cr_assert(!strcmp(tp_find_op(m, "Relu")->inputs[0]->name, "a"), "the Relu reads %s",
              tp_find_op(m, "Relu")->inputs[0]->name);
    static float x[SR_ROWS * SR_K];
    for (int i = 0; i < SR_ROWS * SR_K; i++)
        x[i] = unit((uint32_t)i) * (i % SR_K == 0 ? 100.0f : 1.0f);
    float *a, *b;
    int64_t na = pp_run(before, x, (int64_t[]){SR_ROWS, SR_K}, 2, &a), nb = pp_run(m, x, (int64_t[]){SR_ROWS, SR_K}, 2, &b);
    cr_assert_eq(na, nb);
    for (int64_t i = 0; i < na; i++)
        cr_assert_float_eq(a[i], b[i], 0, "r[%lld] %g, float %g", (long long)i, b[i], a[i]);
    free(a);
    free(b);
    oq_model_free(before);
    oq_model_free(m);
    free(dir);
}

/* x -> Mul(c) -> a -> MatMul(W) -> t -> Add(bias) -> y: the split's Add comes after the
 * bias Add (onnxruntime fuses an integer MatMul with its bias Add), and the MatMul's own
 * output, which now holds the inlier part only, gets a new name (t is gone: tools that
 * match tensors by name would report a false error for it); the model stays equivalent. */
Test(smooth_quant, split_after_the_bias_add)
{
    static const float ones[SR_K] = {1, 1, 1, 1, 1, 1, 1, 1};
    static const float bias[SR_N] = {0.5f, -0.25f, 1.0f, 0.0f, -1.0f, 0.125f};
    sr_plain_weights();
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){SR_ROWS, SR_K}, 2);
    tp_init_f(m, "c", (int64_t[]){SR_K}, 1, ones);
    tp_init_f(m, "W", (int64_t[]){SR_K, SR_N}, 2, sr_w);
    tp_init_f(m, "b", (int64_t[]){SR_N}, 1, bias);
    tp_node(m, "Mul", "mul", "x,c", "a");
    tp_node(m, "MatMul", "mm", "a,W", "t");
    tp_node(m, "Add", "bias_add", "t,b", "y");
    tp_output(m, "y");
    oq_model *before = pp_clone(m);
    char *dir = sr_samples(100.0f);
    oq_pass_result r = sr_search(m, dir);
    cr_assert_eq(tp_stat(&r, "layers_split"), 1);
    oq_value *t = oq_graph_find_value(m->graph, "t");
    cr_assert(!t || (!t->producer && t->n_uses == 0), "the MatMul's output keeps its name");
    oq_value *y = oq_graph_find_value(m->graph, "y");
    cr_assert(y && y->producer && is_op(y->producer, "Add") && strcmp(y->producer->name, "bias_add") != 0);
    oq_node *ba = NULL;
    for (size_t i = 0; i < y->producer->n_inputs; i++)
        if (y->producer->inputs[i]->producer && !strcmp(y->producer->inputs[i]->producer->name, "bias_add"))
            ba = y->producer->inputs[i]->producer;
    cr_assert(ba, "the split's Add reads the bias Add's output");
    cr_assert(ba->inputs[0]->producer && !strcmp(ba->inputs[0]->producer->name, "mm"), "the bias Add reads the MatMul");
    finish(before, m, (int64_t[]){SR_ROWS, SR_K}, 2, dir);
}
