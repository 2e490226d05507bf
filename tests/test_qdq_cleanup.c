/* qdq-cleanup: structure after the pass, and bit-identical outputs (executor) before and
 * after on inputs that cover the whole quantized range, ties and saturation. */
#include <float.h>
#include <math.h>

#include "onnxq/exec.h"
#include "onnxq/quant.h"
#include "test_pass_util.h"

static void q(oq_model *m, const char *name, const char *in, const char *p, const char *out)
{
    char ins[256];
    snprintf(ins, sizeof ins, "%s,%s_scale,%s_zero_point", in, p, p);
    tp_node(m, "QuantizeLinear", name, ins, out);
}

static void dq(oq_model *m, const char *name, const char *in, const char *p, const char *out)
{
    char ins[256];
    snprintf(ins, sizeof ins, "%s,%s_scale,%s_zero_point", in, p, p);
    tp_node(m, "DequantizeLinear", name, ins, out);
}

#define NX 1000

static void inputs(float *x)
{
    /* -6 .. 6 in steps that hit every uint8 level of scale 0.05, half-way ties and
     * values beyond the range (saturation) */
    for (int i = 0; i < NX; i++)
        x[i] = -8.0f + 0.016f * (float)i;
    x[0] = 0.025f;  /* tie */
    x[1] = -0.075f; /* tie */
}

/* Run m on x [NX] and copy output `k` into y. */
static void run(oq_model *m, const float *x, size_t k, float *y)
{
    oq_diag d;
    oq_plan *p = tp_plan(m, &d);
    oq_rt_tensor in;
    int64_t dims[1] = {NX};
    cr_assert_eq(oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, dims, 1, (void *)x), OQ_OK);
    size_t no = oq_plan_n_outputs(p);
    oq_rt_tensor outs[4];
    memset(outs, 0, sizeof outs);
    cr_assert(no <= 4 && k < no);
    oq_status s = oq_plan_run(p, &in, 1, outs, no, &d);
    tp_print_diag(&d);
    cr_assert_eq(s, OQ_OK);
    cr_assert_eq(outs[k].dtype, OQ_DTYPE_FLOAT);
    cr_assert_eq(oq_rt_tensor_numel(&outs[k]), NX);
    memcpy(y, outs[k].data, NX * sizeof(float));
    for (size_t i = 0; i < no; i++)
        oq_rt_tensor_release(&outs[i]);
    oq_plan_free(p);
    oq_diag_free(&d);
}

/* A model with the float input x [NX]. */
static oq_model *model_x(void)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){NX}, 1);
    return m;
}

/* x -> q1 -> xq -> dq1 -> a -> q2 -> aq -> dq2 -> out, the pairs with parameters p1, p2 */
static void two_pairs(oq_model *m, const char *p1, const char *p2, const char *out)
{
    q(m, "q1", "x", p1, "xq");
    dq(m, "dq1", "xq", p1, "a");
    q(m, "q2", "a", p2, "aq");
    dq(m, "dq2", "aq", p2, out);
}

/* x quantized twice: qa (parameters pa) -> xa -> dqa -> ya and qb (pb) -> xb -> dqb -> yb,
 * both graph outputs */
static void two_quantized(oq_model *m, const char *pa, const char *pb)
{
    q(m, "qa", "x", pa, "xa");
    q(m, "qb", "x", pb, "xb");
    dq(m, "dqa", "xa", pa, "ya");
    dq(m, "dqb", "xb", pb, "yb");
    tp_output(m, "ya");
    tp_output(m, "yb");
}

/* x -> Q1 -> DQ1 -> Q2 -> DQ2 -> Relu -> y, the second pair with parameters p2. */
static oq_model *chain(float s2, int32_t zp2)
{
    oq_model *m = model_x();
    tp_qparams(m, "p1", 0.05f, OQ_DTYPE_UINT8, 128);
    tp_qparams(m, "p2", s2, OQ_DTYPE_UINT8, zp2);
    two_pairs(m, "p1", "p2", "b");
    tp_node(m, "Relu", "relu", "b", "y");
    tp_output(m, "y");
    return m;
}

/* qdq-cleanup on m, whose n (<= 2) outputs on the test input must be bit-identical before
 * and after. */
static oq_pass_result cleanup_exact(oq_model *m, size_t n)
{
    static float before[2][NX], after[2][NX];
    float x[NX];
    inputs(x);
    for (size_t k = 0; k < n; k++)
        run(m, x, k, before[k]);
    oq_pass_result r = tp_run(m, "qdq-cleanup");
    for (size_t k = 0; k < n; k++) {
        run(m, x, k, after[k]);
        cr_assert_eq(memcmp(before[k], after[k], sizeof before[k]), 0,
                     "output %zu is not bit-identical", k);
    }
    return r;
}

/* qdq-cleanup on m must change nothing and keep both QuantizeLinear. */
static void cleanup_keeps_both(oq_model *m)
{
    oq_pass_result r = tp_run(m, "qdq-cleanup");
    cr_assert_not(r.changed);
    cr_assert_eq(tp_count_op(m, "QuantizeLinear"), 2);
}

Test(qdq_cleanup, identical_chain_collapses_exactly)
{
    oq_model *m = chain(0.05f, 128); /* same values, separate initializers */
    oq_pass_result r = cleanup_exact(m, 1);
    cr_assert(r.changed);
    cr_assert_eq(tp_stat(&r, "chains_collapsed"), 1);
    /* q2's consumer dq2 now reads x_quantized; dq1's output lost its only reader */
    cr_assert_eq(tp_stat(&r, "dead_removed"), 2, "q2 and dq1");
    cr_assert_eq(tp_count_op(m, "QuantizeLinear"), 1);
    cr_assert_eq(tp_count_op(m, "DequantizeLinear"), 1);
    oq_node *d2 = tp_find_op(m, "DequantizeLinear");
    cr_assert_str_eq(d2->name, "dq2");
    cr_assert_str_eq(d2->inputs[0]->name, "xq");
    cr_assert_str_eq(tp_find_op(m, "Relu")->inputs[0]->name, "b");
    cr_assert_null(oq_graph_find_local(m->graph, "a") ? oq_graph_find_local(m->graph, "a")->producer : NULL);
    oq_model_free(m);
}

Test(qdq_cleanup, different_params_kept)
{
    oq_model *m = chain(0.1f, 128);
    size_t n0 = m->graph->n_nodes;
    oq_pass_result r = cleanup_exact(m, 1);
    cr_assert_not(r.changed);
    cr_assert_eq(tp_stat(&r, "chains_kept_different_params"), 1);
    cr_assert_eq(m->graph->n_nodes, n0);
    /* a different zero point alone also keeps both */
    oq_model *m2 = chain(0.05f, 127);
    oq_pass_result r2 = tp_run(m2, "qdq-cleanup");
    cr_assert_eq(tp_stat(&r2, "chains_kept_different_params"), 1);
    cr_assert_eq(tp_count_op(m2, "QuantizeLinear"), 2);
    oq_model_free(m);
    oq_model_free(m2);
}

Test(qdq_cleanup, different_type_kept)
{
    /* same scale, zero point 0 but int8 vs uint8: Q2 saturates negatives differently */
    oq_model *m = model_x();
    tp_qparams(m, "p1", 0.05f, OQ_DTYPE_INT8, 0);
    tp_qparams(m, "p2", 0.05f, OQ_DTYPE_UINT8, 0);
    two_pairs(m, "p1", "p2", "y");
    tp_output(m, "y");
    cleanup_keeps_both(m);
    oq_model_free(m);
}

Test(qdq_cleanup, duplicate_quantize_merged)
{
    /* x quantized twice with the same parameters, each dequantized to a graph output:
     * the second Q goes (its DQ reads the first Q), the DQs stay (output names) */
    oq_model *m = model_x();
    tp_qparams(m, "p", 0.05f, OQ_DTYPE_UINT8, 128);
    two_quantized(m, "p", "p");
    oq_pass_result r = cleanup_exact(m, 2);
    cr_assert_eq(tp_stat(&r, "duplicates_merged"), 1);
    cr_assert_eq(tp_stat(&r, "dead_removed"), 1);
    cr_assert_eq(tp_count_op(m, "QuantizeLinear"), 1);
    cr_assert_eq(tp_count_op(m, "DequantizeLinear"), 2);
    for (oq_node *n = m->graph->first; n; n = n->next)
        if (strcmp(n->op_type, "DequantizeLinear") == 0)
            cr_assert_str_eq(n->inputs[0]->name, "xa");
    oq_model_free(m);
}

Test(qdq_cleanup, duplicate_with_other_params_kept)
{
    oq_model *m = model_x();
    tp_qparams(m, "p", 0.05f, OQ_DTYPE_UINT8, 128);
    tp_qparams(m, "r", 0.04f, OQ_DTYPE_UINT8, 128);
    two_quantized(m, "p", "r");
    cleanup_keeps_both(m);
    oq_model_free(m);
}

Test(qdq_cleanup, dead_qdq_removed_with_parameters)
{
    oq_model *m = model_x();
    tp_qparams(m, "p", 0.05f, OQ_DTYPE_UINT8, 128);
    tp_qparams(m, "d", 0.5f, OQ_DTYPE_UINT8, 0);
    q(m, "qa", "x", "p", "xa");
    dq(m, "dqa", "xa", "p", "ya");
    q(m, "qdead", "x", "d", "xd");
    dq(m, "dqdead", "xd", "d", "yd"); /* nobody reads yd */
    tp_output(m, "ya");
    oq_pass_result r = tp_run(m, "qdq-cleanup");
    cr_assert_eq(tp_stat(&r, "dead_removed"), 2);
    cr_assert_eq(m->graph->n_nodes, 2);
    cr_assert_eq(m->graph->n_initializers, 2, "d_scale / d_zero_point dropped");
    for (size_t i = 0; i < m->graph->n_initializers; i++)
        cr_assert(m->graph->initializers[i]->name[0] == 'p');
    /* idempotent */
    oq_pass_result r2 = tp_run(m, "qdq-cleanup");
    cr_assert_not(r2.changed);
    oq_model_free(m);
}

Test(qdq_cleanup, graph_output_of_q_kept)
{
    /* Q2's output is a graph output: its name must stay, so the chain is not collapsed */
    oq_model *m = model_x();
    tp_qparams(m, "p", 0.05f, OQ_DTYPE_UINT8, 128);
    q(m, "q1", "x", "p", "xq");
    dq(m, "dq1", "xq", "p", "a");
    q(m, "q2", "a", "p", "aq");
    tp_output(m, "aq");
    cleanup_keeps_both(m);
    oq_model_free(m);
}

Test(qdq_cleanup, chain_with_shared_dequant_merges_duplicate)
{
    /* dq1's output is also read by a Sigmoid: after the collapse dq2 repeats dq1 and its
     * reader (Relu) moves to dq1's output */
    oq_model *m = model_x();
    tp_qparams(m, "p1", 0.05f, OQ_DTYPE_UINT8, 128);
    tp_qparams(m, "p2", 0.05f, OQ_DTYPE_UINT8, 128);
    two_pairs(m, "p1", "p2", "b");
    tp_node(m, "Relu", "relu", "b", "yr");
    tp_node(m, "Sigmoid", "sig", "a", "ys");
    tp_output(m, "yr");
    tp_output(m, "ys");
    oq_pass_result r = cleanup_exact(m, 2);
    cr_assert_eq(tp_stat(&r, "chains_collapsed"), 1);
    cr_assert_eq(tp_stat(&r, "duplicates_merged"), 1);
    cr_assert_eq(tp_stat(&r, "dead_removed"), 2, "q2 and dq2");
    cr_assert_eq(tp_count_op(m, "DequantizeLinear"), 1);
    cr_assert_str_eq(tp_find_op(m, "Relu")->inputs[0]->name, "a");
    cr_assert_eq(m->graph->n_initializers, 2, "p2 parameters dropped");
    oq_model_free(m);
}

Test(qdq_cleanup, requantize_same_params_is_identity)
{
    /* the claim the chain collapse rests on: Q(DQ(q)) == q for every int16/uint16 (hence
     * every 8- and 4-bit) value and normal float32 scales up to FLT_MAX / 2^17, tried on
     * the extremes and on scales spread over the whole exponent range */
    float scales[160];
    int ns = 0;
    scales[ns++] = FLT_MIN;
    scales[ns++] = FLT_MAX / 131072.0f;
    scales[ns++] = nextafterf(FLT_MIN, 1.0f);
    scales[ns++] = 1.0f / 3.0f;
    uint32_t seed = 12345;
    while (ns < 160) {
        seed = seed * 1664525u + 1013904223u;
        /* exponent 1 .. 236 (below FLT_MAX / 2^17), random mantissa */
        uint32_t bits = ((1u + (seed >> 8) % 236u) << 23) | (seed & 0x7fffffu);
        float s;
        memcpy(&s, &bits, 4);
        if (s <= FLT_MAX / 131072.0f)
            scales[ns++] = s;
    }
    for (int k = 0; k < ns; k++) {
        static const int32_t cases[4][3] = {
            {-32768, 32767, 0}, {0, 65535, 0}, {0, 65535, 65535}, {-32768, 32767, -32768}};
        for (int c = 0; c < 4; c++) {
            int32_t qmin = cases[c][0], qmax = cases[c][1], z = cases[c][2];
            for (int32_t v = qmin; v <= qmax; v++) {
                float f = oq_dequantize_value(v, scales[k], z);
                int32_t back = oq_quantize_value(f, scales[k], z, qmin, qmax);
                if (back != v)
                    cr_assert_fail("scale %.9g zp %d: q %d -> %.9g -> %d", (double)scales[k], z,
                                   v, (double)f, back);
            }
        }
    }
}
