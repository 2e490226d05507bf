/* fold-bias: small QDQ graphs built with the IR API; every expected int32 bias, scale and
 * requantized weight below is worked out by hand in the comments (not copied from a
 * run of the pass). */
#include <float.h>
#include <math.h>

#include "onnxq/quant.h"
#include "test_pass_util.h"

static const int64_t scalar_dims[1] = {1}; /* rank 0: not read */

/* Q/DQ on activation `x` (a graph input of shape dims): x -> x_quantized -> x_dequant. */
static void act_qdq(oq_model *m, const char *x, float scale, int32_t zdt, int32_t zp)
{
    char s[64], z[64], q[64], dq[64], ins[256];
    snprintf(s, sizeof s, "%s_scale", x);
    snprintf(z, sizeof z, "%s_zero_point", x);
    snprintf(q, sizeof q, "%s_quantized", x);
    snprintf(dq, sizeof dq, "%s_dequant", x);
    tp_qparams(m, x, scale, zdt, zp);
    snprintf(ins, sizeof ins, "%s,%s,%s", x, s, z);
    tp_node(m, "QuantizeLinear", NULL, ins, q);
    snprintf(ins, sizeof ins, "%s,%s,%s", q, s, z);
    tp_node(m, "DequantizeLinear", NULL, ins, dq);
}

/* int8 weight W = DequantizeLinear(W_quantized, W_scale, W_zero_point [, axis]). */
static oq_node *weight_dq(oq_model *m, const char *w, const int8_t *q, const int64_t *dims,
                          size_t rank, const float *scales, int64_t ns, int64_t axis)
{
    char a[64], s[64], z[64], ins[256];
    snprintf(a, sizeof a, "%s_quantized", w);
    snprintf(s, sizeof s, "%s_scale", w);
    snprintf(z, sizeof z, "%s_zero_point", w);
    tp_init(m, a, OQ_DTYPE_INT8, dims, rank, q);
    int8_t zeros[64] = {0};
    int64_t pd[1] = {ns};
    tp_init_f(m, s, ns > 1 ? pd : scalar_dims, ns > 1 ? 1 : 0, scales);
    tp_init(m, z, OQ_DTYPE_INT8, ns > 1 ? pd : scalar_dims, ns > 1 ? 1 : 0, zeros);
    snprintf(ins, sizeof ins, "%s,%s,%s", a, s, z);
    oq_node *n = tp_node(m, "DequantizeLinear", NULL, ins, w);
    if (ns > 1)
        oq_node_set_attr_int(n, "axis", axis);
    return n;
}

typedef struct run_out {
    oq_pass_result r;
    char log[4096];
} run_out;

/* Run a pipeline, keep every diagnostic line, check the result is a valid model. */
static run_out fb_run(oq_model *m, const char *pipeline)
{
    run_out o;
    memset(&o, 0, sizeof o);
    oq_diag d;
    oq_status s = tp_run_diag(m, pipeline, &o.r, &d);
    size_t off = 0;
    for (size_t i = 0; i < d.count && off < sizeof o.log - 2; i++) {
        int k = oq_diag_format(&d.entries[i], o.log + off, sizeof o.log - off - 1);
        if (k < 0)
            break;
        off += (size_t)k < sizeof o.log - off - 1 ? (size_t)k : sizeof o.log - off - 2;
        o.log[off++] = '\n';
        o.log[off] = 0;
    }
    cr_log_info("%s", o.log);
    cr_assert_eq(s, OQ_OK, "pipeline %s failed: %s", pipeline, o.log);
    oq_diag_free(&d);
    tp_assert_valid(m);
    return o;
}

static const int32_t *i32(oq_value *v)
{
    oq_tensor *t = oq_value_const_tensor(v);
    cr_assert(t, "%s is not constant", v ? v->name : "?");
    cr_assert_eq(t->dtype, OQ_DTYPE_INT32, "%s: %s", v->name, oq_dtype_name(t->dtype));
    return oq_tensor_data(t, NULL);
}

static oq_value *find(oq_model *m, const char *name)
{
    oq_value *v = oq_graph_find_value(m->graph, name);
    cr_assert(v, "no value %s", name);
    return v;
}

/* The bias DQ: output `b`, inputs b_quantized, b_scale, b_zero_point. */
static oq_node *bias_dq(oq_model *m, const char *b)
{
    oq_value *v = find(m, b);
    cr_assert_eq(v->kind, OQ_VALUE_NODE, "%s is not a node output", b);
    oq_node *dq = v->producer;
    cr_assert_str_eq(dq->op_type, "DequantizeLinear");
    char want[128];
    snprintf(want, sizeof want, "%s_DequantizeLinear", b);
    cr_assert_str_eq(dq->name, want);
    const char *suf[3] = {"_quantized", "_scale", "_zero_point"};
    for (int i = 0; i < 3; i++) {
        snprintf(want, sizeof want, "%s%s", b, suf[i]);
        cr_assert_str_eq(dq->inputs[i]->name, want);
    }
    cr_assert_null(v->initializer, "the float initializer %s is kept", b);
    return dq;
}

static uint8_t *write_bytes(oq_model *m, size_t *len)
{
    uint8_t *buf = NULL;
    cr_assert_eq(oq_model_write_buffer(m, &buf, len, NULL), OQ_OK);
    return buf;
}

/* Conv 2 -> 2 channels, 1x1; x: uint8 scale 0.5 zp 128; W per channel [0.25, 0.125]. */
static oq_model *conv_model(const float *bias, const float *wscales)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 2, 2, 2}, 4);
    act_qdq(m, "x", 0.5f, OQ_DTYPE_UINT8, 128);
    const int8_t wq[4] = {100, -50, 7, 3};
    weight_dq(m, "W", wq, (int64_t[]){2, 2, 1, 1}, 4, wscales, 2, 0);
    tp_init_f(m, "B", (int64_t[]){2}, 1, bias);
    tp_node(m, "Conv", "conv", "x_dequant,W,B", "y");
    tp_output(m, "y");
    return m;
}

Test(fold_bias, conv_per_channel)
{
    /* s_b = 0.5 * [0.25, 0.125] = [0.125, 0.0625];
     * b_q = round([1.0 / 0.125, -0.3 / 0.0625]) = round([8, -4.8]) = [8, -5] */
    const float b[2] = {1.0f, -0.3f}, ws[2] = {0.25f, 0.125f};
    oq_model *m = conv_model(b, ws);
    run_out o = fb_run(m, "fold-bias");
    cr_assert_eq(tp_stat(&o.r, "biases_folded"), 1);
    cr_assert(o.r.changed);
    oq_node *dq = bias_dq(m, "B");
    cr_assert_eq(oq_node_attr_int(dq, "axis", -7), 0);
    const int32_t *q = i32(dq->inputs[0]);
    cr_assert_eq(q[0], 8);
    cr_assert_eq(q[1], -5);
    const float *s = tp_floats(dq->inputs[1]);
    cr_assert_eq(s[0], 0.125f);
    cr_assert_eq(s[1], 0.0625f);
    const int32_t *z = i32(dq->inputs[2]);
    cr_assert_eq(z[0], 0);
    cr_assert_eq(z[1], 0);
    oq_node *conv = tp_find_op(m, "Conv");
    cr_assert_str_eq(conv->inputs[2]->name, "B");
    /* DQ of the bias comes before the Conv and nothing else changed */
    cr_assert_eq(tp_count_op(m, "DequantizeLinear"), 3);
    cr_assert_eq(tp_count_op(m, "QuantizeLinear"), 1);
    cr_assert_eq(tp_stat(&o.r, "weights_adjusted"), 0);
    cr_assert_eq(tp_stat(&o.r, "accumulator_warnings"), 0);
    oq_model_free(m);
}

Test(fold_bias, idempotent_byte_equal)
{
    const float b[2] = {1.0f, -0.3f}, ws[2] = {0.25f, 0.125f};
    oq_model *m = conv_model(b, ws);
    fb_run(m, "fold-bias");
    size_t l1, l2;
    uint8_t *b1 = write_bytes(m, &l1);
    run_out o = fb_run(m, "fold-bias");
    cr_assert_not(o.r.changed);
    cr_assert_eq(tp_stat(&o.r, "biases_folded"), 0);
    uint8_t *b2 = write_bytes(m, &l2);
    cr_assert_eq(l1, l2);
    cr_assert_eq(memcmp(b1, b2, l1), 0, "second run changed the model");
    free(b1);
    free(b2);
    oq_model_free(m);
}

Test(fold_bias, gemm_per_tensor_constant_node_bias)
{
    /* x int8 scale 0.1 zp 0; W [3, 2] transB per tensor 0.02 (float32 product
     * 0.1f * 0.02f); b = [0.5, -0.25, 0.001]: 0.5/0.002 = 250, -125, 0.5 -> 0 (half to
     * even) */
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 2}, 2);
    act_qdq(m, "x", 0.1f, OQ_DTYPE_INT8, 0);
    const int8_t wq[6] = {1, 2, 3, 4, 5, 6};
    const float ws = 0.02f;
    weight_dq(m, "W", wq, (int64_t[]){3, 2}, 2, &ws, 1, 0);
    oq_node *c = tp_node(m, "Constant", "bconst", "", "B");
    const float bv[3] = {0.5f, -0.25f, 0.001f};
    oq_node_set_attr_tensor(c, "value", oq_tensor_new(m, "", OQ_DTYPE_FLOAT, (int64_t[]){3}, 1, bv, 12));
    oq_node *g = tp_node(m, "Gemm", "gemm", "x_dequant,W,B", "y");
    oq_node_set_attr_int(g, "transB", 1);
    tp_output(m, "y");
    run_out o = fb_run(m, "fold-bias");
    cr_assert_eq(tp_stat(&o.r, "biases_folded"), 1);
    cr_assert_eq(tp_count_op(m, "Constant"), 0, "the float Constant is removed");
    oq_node *dq = bias_dq(m, "B");
    cr_assert_null(oq_node_attr(dq, "axis"), "per-tensor bias DQ has no axis");
    oq_tensor *st = oq_value_const_tensor(dq->inputs[1]);
    cr_assert_eq(st->rank, 0);
    float sb = 0.1f * 0.02f;
    cr_assert_eq(tp_floats(dq->inputs[1])[0], sb);
    const int32_t *q = i32(dq->inputs[0]);
    /* recompute the quotients in float32 the way QuantizeLinear does */
    cr_assert_eq(q[0], (int32_t)nearbyint((double)(0.5f / sb)));
    cr_assert_eq(q[0], 250);
    cr_assert_eq(q[1], -125);
    cr_assert_eq(q[2], 0);
    oq_model_free(m);
}

Test(fold_bias, matmul_add_keeps_add)
{
    /* x uint8 scale 0.25; W [2, 3] per column [0.5, 0.25, 1.0] axis 1;
     * Add(mm, B), B = [1.0, 0.1, -2.0]: s_b = [0.125, 0.0625, 0.25],
     * b_q = [8, round(1.6) = 2, -8] */
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){4, 2}, 2);
    act_qdq(m, "x", 0.25f, OQ_DTYPE_UINT8, 0);
    const int8_t wq[6] = {1, 2, 3, 4, 5, 6};
    const float ws[3] = {0.5f, 0.25f, 1.0f};
    weight_dq(m, "W", wq, (int64_t[]){2, 3}, 2, ws, 3, 1);
    const float bv[3] = {1.0f, 0.1f, -2.0f};
    tp_init_f(m, "B", (int64_t[]){3}, 1, bv);
    tp_node(m, "MatMul", "mm", "x_dequant,W", "mmout");
    tp_node(m, "Add", "add", "B,mmout", "y"); /* bias first: slot 0 */
    tp_output(m, "y");
    run_out o = fb_run(m, "fold-bias");
    cr_assert_eq(tp_stat(&o.r, "biases_folded"), 1);
    oq_node *add = tp_find_op(m, "Add");
    cr_assert(add);
    cr_assert_str_eq(add->inputs[0]->name, "B");
    cr_assert_str_eq(add->inputs[1]->name, "mmout");
    oq_node *dq = bias_dq(m, "B");
    cr_assert_eq(oq_node_attr_int(dq, "axis", -7), 0);
    const int32_t *q = i32(dq->inputs[0]);
    cr_assert_eq(q[0], 8);
    cr_assert_eq(q[1], 2);
    cr_assert_eq(q[2], -8);
    oq_model_free(m);
}

/* smallest float32 s with |round(b / (s_in * s))| <= limit (at most 2147483520, the
 * largest float32 below 2^31), found by bisection over the float32 bit patterns (monotone
 * in s). */
static float min_scale_ref(float b, float s_in, double limit)
{
    uint32_t lo = 1, hi = 0x7f000000u; /* hi fits for any test value */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        float s;
        memcpy(&s, &mid, 4);
        float bs = s_in * s;
        bool fits = bs > 0.0f && fabs(nearbyint((double)(fabsf(b) / bs))) <= limit;
        if (fits)
            hi = mid;
        else
            lo = mid + 1;
    }
    float s;
    memcpy(&s, &lo, 4);
    return s;
}

static oq_model *overflow_model(void)
{
    /* s_in = 1e-3, W channel 0 scale 1e-6: 10 / (1e-3 * 1e-6) = 1e10 > int32 */
    const float b[2] = {10.0f, 1.0f}, ws[2] = {1e-6f, 0.01f};
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 2, 1, 1}, 4);
    act_qdq(m, "x", 1e-3f, OQ_DTYPE_UINT8, 128);
    const int8_t wq[4] = {100, -50, 7, 3};
    weight_dq(m, "W", wq, (int64_t[]){2, 2, 1, 1}, 4, ws, 2, 0);
    tp_init_f(m, "B", (int64_t[]){2}, 1, b);
    tp_node(m, "Conv", "conv", "x_dequant,W,B", "y");
    tp_output(m, "y");
    return m;
}

Test(fold_bias, overflow_raises_weight_scale)
{
    oq_model *m = overflow_model();
    run_out o = fb_run(m, "fold-bias");
    cr_assert_eq(tp_stat(&o.r, "biases_folded"), 1);
    cr_assert_eq(tp_stat(&o.r, "weights_adjusted"), 1);
    cr_assert_eq(tp_stat(&o.r, "values_clipped"), 0);
    /* just enough for the bias: about 10 / (1e-3 * 2^31) = 4.6566e-6 */
    float s0 = min_scale_ref(10.0f, 1e-3f, 2147483520.0);
    cr_assert(fabs(s0 - 4.6566e-6) < 1e-9, "reference scale %.9g", (double)s0);
    /* and room in the int32 accumulator: x is uint8 with zero point 128, so
     * max|x_q| = 128; channel 0 has K = 2 weights, sum|w| = (100 + 50) * 1e-6, so
     * sum|w_q| <= 150e-6 / s + 2 after requantizing at s >= s0 */
    double room = 128.0 * (150e-6 / (double)s0 + 2.0);
    float want = min_scale_ref(10.0f, 1e-3f, 2147483520.0 - room);
    cr_assert(want > s0, "want %.9g s0 %.9g", (double)want, (double)s0);
    const float *ws = tp_floats(find(m, "W_scale"));
    cr_assert_eq(ws[0], want, "W_scale[0] = %.9g, want %.9g", (double)ws[0], (double)want);
    cr_assert_eq(ws[1], 0.01f, "channel 1 untouched");
    /* channel 0 requantized from its dequantized values 100e-6 and -50e-6:
     * 1e-4 / 4.6566e-6 = 21.47 -> 21, -5e-5 / 4.6566e-6 = -10.74 -> -11 */
    oq_tensor *wt = oq_value_const_tensor(find(m, "W_quantized"));
    const int8_t *wq = oq_tensor_data(wt, NULL);
    cr_assert_eq(wq[0], 21);
    cr_assert_eq(wq[1], -11);
    cr_assert_eq(wq[2], 7);
    cr_assert_eq(wq[3], 3);
    /* bias now fits, with the accumulator: |b_q[0]| + (21 + 11) * 128 <= INT32_MAX */
    oq_node *dq = bias_dq(m, "B");
    const int32_t *q = i32(dq->inputs[0]);
    cr_assert(q[0] > 2000000000 && (double)q[0] + 32.0 * 128.0 <= 2147483647.0, "b_q[0] = %d", q[0]);
    cr_assert(!strstr(o.log, "accumulator can overflow"), "%s", o.log);
    cr_assert_eq(q[1], 100000, "1 / (1e-3 * 0.01)");
    cr_assert(strstr(o.log, "node \"conv\" (Conv)"), "%s", o.log);
    cr_assert(strstr(o.log, "bias \"B\" channel 0"), "%s", o.log);
    cr_assert(strstr(o.log, "scale raised from"), "%s", o.log);
    oq_model_free(m);
}

Test(fold_bias, overflow_clips_without_adjust)
{
    oq_model *m = overflow_model();
    run_out o = fb_run(m, "fold-bias{no-bias-weight-adjust=true}");
    cr_assert_eq(tp_stat(&o.r, "weights_adjusted"), 0);
    cr_assert_eq(tp_stat(&o.r, "values_clipped"), 1);
    cr_assert_eq(tp_floats(find(m, "W_scale"))[0], 1e-6f, "weight scale kept");
    const int8_t *wq = oq_tensor_data(oq_value_const_tensor(find(m, "W_quantized")), NULL);
    cr_assert_eq(wq[0], 100);
    const int32_t *q = i32(bias_dq(m, "B")->inputs[0]);
    cr_assert_eq(q[0], INT32_MAX, "saturated");
    cr_assert(strstr(o.log, "warning: node \"conv\" (Conv): fold-bias: bias \"B\": 1 value clipped to int32"),
              "%s", o.log);
    oq_model_free(m);
}

Test(fold_bias, accumulator_warning)
{
    /* x int16 zero point 0: max|x_q| = 32768. Conv weight [2, 600, 1, 1]:
     * channel 0 all 127 (sum 76200), channel 1 all 1 (sum 600). s_in = s_w = 1,
     * b = [3, 0]: b_q = [3, 0]. Channel 0: 76200 * 32768 + 3 = 2496921603 > 2^31-1;
     * channel 1: 600 * 32768 = 19660800 is fine. */
    oq_model *m = tp_model(21);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 600, 1, 1}, 4);
    act_qdq(m, "x", 1.0f, OQ_DTYPE_INT16, 0);
    int8_t *wq = malloc(1200);
    for (int i = 0; i < 600; i++) {
        wq[i] = 127;
        wq[600 + i] = (i % 2) ? 1 : -1;
    }
    const float ws[2] = {1.0f, 1.0f}, b[2] = {3.0f, 0.0f};
    weight_dq(m, "W", wq, (int64_t[]){2, 600, 1, 1}, 4, ws, 2, 0);
    free(wq);
    tp_init_f(m, "B", (int64_t[]){2}, 1, b);
    tp_node(m, "Conv", "big_conv", "x_dequant,W,B", "y");
    tp_output(m, "y");
    run_out o = fb_run(m, "fold-bias");
    cr_assert_eq(tp_stat(&o.r, "accumulator_warnings"), 1);
    cr_assert(strstr(o.log, "warning: node \"big_conv\" (Conv): fold-bias: layer \"big_conv\": int32 "
                            "accumulator can overflow in 1 of 2 output channels; worst channel 0: "
                            "sum|w_q| 76200 x max|x_q| 32768 + |b_q| 3 = 2496921603 > 2147483647"),
              "%s", o.log);
    /* a second run still warns (reading the int32 bias back) but changes nothing */
    run_out o2 = fb_run(m, "fold-bias");
    cr_assert_eq(tp_stat(&o2.r, "accumulator_warnings"), 1);
    cr_assert_not(o2.r.changed);
    cr_assert(strstr(o2.log, "+ |b_q| 3 = 2496921603"), "%s", o2.log);
    oq_model_free(m);
}

Test(fold_bias, uint8_input_range_relative_to_zero_point)
{
    /* uint8 x with zero point 200: max|x_q - zp| = max(255 - 200, 200 - 0) = 200 (not
     * 255). MatMul weight [K, 1], all 127, no bias:
     *   K = 84547: 127 * 84547 * 200 = 2147493800 > 2147483647 (warns)
     *   K = 84546: 127 * 84546 * 200 = 2147468400 <= 2147483647 (quiet) */
    for (int k = 0; k < 2; k++) {
        int64_t K = k == 0 ? 84547 : 84546;
        oq_model *m = tp_model(13);
        tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, K}, 2);
        act_qdq(m, "x", 1.0f, OQ_DTYPE_UINT8, 200);
        int8_t *wq = malloc((size_t)K);
        memset(wq, 127, (size_t)K);
        const float ws = 1.0f;
        weight_dq(m, "W", wq, (int64_t[]){K, 1}, 2, &ws, 1, 0);
        free(wq);
        tp_node(m, "MatMul", "mm", "x_dequant,W", "y");
        tp_output(m, "y");
        run_out o = fb_run(m, "fold-bias");
        cr_assert_eq(tp_stat(&o.r, "accumulator_warnings"), k == 0 ? 1 : 0, "K=%lld: %s",
                     (long long)K, o.log);
        cr_assert_not(o.r.changed, "no bias: nothing to fold");
        oq_model_free(m);
    }
}

/* Two Convs reading the same float bias with different weight scales. */
static oq_model *shared_model(void)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 1, 1, 1}, 4);
    act_qdq(m, "x", 0.5f, OQ_DTYPE_UINT8, 0);
    const int8_t w1[2] = {1, 2}, w2[2] = {3, 4};
    const float s1[2] = {0.5f, 0.5f}, s2[2] = {0.25f, 0.125f};
    weight_dq(m, "W1", w1, (int64_t[]){2, 1, 1, 1}, 4, s1, 2, 0);
    weight_dq(m, "W2", w2, (int64_t[]){2, 1, 1, 1}, 4, s2, 2, 0);
    const float b[2] = {1.0f, -1.0f};
    tp_init_f(m, "B", (int64_t[]){2}, 1, b);
    tp_node(m, "Conv", "c1", "x_dequant,W1,B", "y1");
    tp_node(m, "Conv", "c2", "x_dequant,W2,B", "y2");
    tp_output(m, "y1");
    tp_output(m, "y2");
    return m;
}

Test(fold_bias, shared_bias_per_user)
{
    /* c1: s_b = 0.25 -> [4, -4]; c2: s_b = [0.125, 0.0625] -> [8, -16] */
    oq_model *m = shared_model();
    run_out o = fb_run(m, "fold-bias");
    cr_assert_eq(tp_stat(&o.r, "biases_folded"), 2);
    oq_node *c1 = NULL, *c2 = NULL;
    for (oq_node *n = m->graph->first; n; n = n->next)
        if (strcmp(n->op_type, "Conv") == 0)
            *(c1 ? &c2 : &c1) = n;
    cr_assert_str_eq(c1->inputs[2]->name, "B_c1");
    cr_assert_str_eq(c2->inputs[2]->name, "B", "the last user takes the plain name");
    const int32_t *q1 = i32(bias_dq(m, "B_c1")->inputs[0]);
    const int32_t *q2 = i32(bias_dq(m, "B")->inputs[0]);
    cr_assert_eq(q1[0], 4);
    cr_assert_eq(q1[1], -4);
    cr_assert_eq(q2[0], 8);
    cr_assert_eq(q2[1], -16);
    cr_assert(strstr(o.log, "bias \"B\" is shared by 2 users"), "%s", o.log);
    for (size_t i = 0; i < m->graph->n_initializers; i++)
        cr_assert(m->graph->initializers[i]->dtype != OQ_DTYPE_FLOAT ||
                      strcmp(m->graph->initializers[i]->name, "B") != 0,
                  "float B is gone");
    oq_model_free(m);
}

Test(fold_bias, shared_bias_skip)
{
    oq_model *m = shared_model();
    run_out o = fb_run(m, "fold-bias{shared-bias=skip}");
    cr_assert_eq(tp_stat(&o.r, "biases_folded"), 0);
    cr_assert_eq(tp_stat(&o.r, "skipped_shared"), 2);
    cr_assert_not(o.r.changed);
    cr_assert(oq_value_const_tensor(find(m, "B")), "float B kept");
    cr_assert(strstr(o.log, "shared by 2 users (shared-bias=skip)"), "%s", o.log);
    oq_model_free(m);
}

Test(fold_bias, non_constant_scale_left_alone)
{
    /* the input's scale is a graph input: nothing may change */
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 2, 1, 1}, 4);
    tp_input(m, "xs", OQ_DTYPE_FLOAT, NULL, 0);
    const uint8_t zp = 0;
    tp_init(m, "xz", OQ_DTYPE_UINT8, scalar_dims, 0, &zp);
    tp_node(m, "QuantizeLinear", NULL, "x,xs,xz", "xq");
    tp_node(m, "DequantizeLinear", NULL, "xq,xs,xz", "x_dequant");
    const int8_t wq[4] = {1, 2, 3, 4};
    const float ws[2] = {0.5f, 0.5f}, b[2] = {1.0f, 2.0f};
    weight_dq(m, "W", wq, (int64_t[]){2, 2, 1, 1}, 4, ws, 2, 0);
    tp_init_f(m, "B", (int64_t[]){2}, 1, b);
    tp_node(m, "Conv", "conv", "x_dequant,W,B", "y");
    tp_output(m, "y");
    size_t l1, l2;
    uint8_t *b1 = write_bytes(m, &l1);
    run_out o = fb_run(m, "fold-bias");
    uint8_t *b2 = write_bytes(m, &l2);
    cr_assert_not(o.r.changed);
    cr_assert_eq(l1, l2);
    cr_assert_eq(memcmp(b1, b2, l1), 0);
    cr_assert(strstr(o.log, "bias \"B\" left in float: the input's scale or zero point is not constant"),
              "%s", o.log);
    free(b1);
    free(b2);
    oq_model_free(m);
}

Test(fold_bias, float_weight_not_touched)
{
    /* weight not dequantized (a float initializer): not a QDQ layer, no change */
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 2, 1, 1}, 4);
    act_qdq(m, "x", 0.5f, OQ_DTYPE_UINT8, 0);
    const float w[4] = {1, 2, 3, 4}, b[2] = {1.0f, 2.0f};
    tp_init_f(m, "W", (int64_t[]){2, 2, 1, 1}, 4, w);
    tp_init_f(m, "B", (int64_t[]){2}, 1, b);
    tp_node(m, "Conv", "conv", "x_dequant,W,B", "y");
    tp_output(m, "y");
    run_out o = fb_run(m, "fold-bias");
    cr_assert_not(o.r.changed);
    cr_assert(oq_value_const_tensor(find(m, "B")));
    oq_model_free(m);
}

Test(fold_bias, convtranspose_groups)
{
    /* ConvTranspose W [Cin=2, Cout/group=1, 1, 1], group 2 -> 2 output channels; weight
     * per channel along axis 1 has dims[1] = 1 scale: use per tensor 0.25.
     * s_in 0.5: s_b = 0.125; b = [0.25, -0.5] -> [2, -4] */
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 2, 1, 1}, 4);
    act_qdq(m, "x", 0.5f, OQ_DTYPE_UINT8, 0);
    const int8_t wq[2] = {1, 2};
    const float ws = 0.25f, b[2] = {0.25f, -0.5f};
    weight_dq(m, "W", wq, (int64_t[]){2, 1, 1, 1}, 4, &ws, 1, 0);
    tp_init_f(m, "B", (int64_t[]){2}, 1, b);
    oq_node *n = tp_node(m, "ConvTranspose", "ct", "x_dequant,W,B", "y");
    oq_node_set_attr_int(n, "group", 2);
    tp_output(m, "y");
    run_out o = fb_run(m, "fold-bias");
    cr_assert_eq(tp_stat(&o.r, "biases_folded"), 1);
    const int32_t *q = i32(bias_dq(m, "B")->inputs[0]);
    cr_assert_eq(q[0], 2);
    cr_assert_eq(q[1], -4);
    oq_model_free(m);
}

Test(fold_bias, on_a_model_read_from_bytes)
{
    /* a model read from a file has exactly-sized arrays (6 initializers here): the
     * three new ones must not write past them (regression: run under ASan) */
    const float b[2] = {1.0f, -0.3f}, ws[2] = {0.25f, 0.125f};
    oq_model *m0 = conv_model(b, ws);
    size_t len;
    uint8_t *buf = write_bytes(m0, &len);
    oq_model_free(m0);
    oq_model *m = NULL;
    cr_assert_eq(oq_model_read_buffer(buf, len, "conv.onnx", NULL, &m, NULL), OQ_OK);
    free(buf);
    cr_assert_eq(m->graph->n_initializers, 6);
    run_out o = fb_run(m, "fold-bias");
    cr_assert_eq(tp_stat(&o.r, "biases_folded"), 1);
    cr_assert_eq(m->graph->n_initializers, 8, "B replaced by B_quantized, B_scale, B_zero_point");
    const int32_t *q = i32(bias_dq(m, "B")->inputs[0]);
    cr_assert_eq(q[0], 8);
    cr_assert_eq(q[1], -5);
    oq_model_free(m);
}

Test(fold_bias, gemm_bias_1xN_per_column)
{
    /* Gemm transB=0: W [K=2, N=3], per column (axis 1) [0.5, 0.25, 1.0]; C shaped [1, 3].
     * x scale 0.25: s_b = [0.125, 0.0625, 0.25]; C = [0.3, -0.2, 0.6]:
     * 0.3/0.125 = 2.4 -> 2, -0.2/0.0625 = -3.2 -> -3, 0.6/0.25 = 2.4 -> 2.
     * The bias DQ is per axis along C's last axis (1). */
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){4, 2}, 2);
    act_qdq(m, "x", 0.25f, OQ_DTYPE_UINT8, 0);
    const int8_t wq[6] = {1, 2, 3, 4, 5, 6};
    const float ws[3] = {0.5f, 0.25f, 1.0f}, c[3] = {0.3f, -0.2f, 0.6f};
    weight_dq(m, "W", wq, (int64_t[]){2, 3}, 2, ws, 3, 1);
    tp_init_f(m, "C", (int64_t[]){1, 3}, 2, c);
    tp_node(m, "Gemm", "gemm", "x_dequant,W,C", "y");
    tp_output(m, "y");
    run_out o = fb_run(m, "fold-bias");
    cr_assert_eq(tp_stat(&o.r, "biases_folded"), 1);
    oq_node *dq = bias_dq(m, "C");
    cr_assert_eq(oq_node_attr_int(dq, "axis", -7), 1);
    oq_tensor *qt = oq_value_const_tensor(dq->inputs[0]);
    cr_assert_eq(qt->rank, 2);
    cr_assert_eq(qt->dims[0], 1);
    cr_assert_eq(qt->dims[1], 3);
    const int32_t *q = i32(dq->inputs[0]);
    cr_assert_eq(q[0], 2);
    cr_assert_eq(q[1], -3);
    cr_assert_eq(q[2], 2);
    oq_model_free(m);
}

Test(fold_bias, shared_weight_is_not_adjusted)
{
    /* two Convs read the same dequantized W; the overflowing bias of the first must not
     * change W under the second: it is clipped instead, with a note */
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 2, 1, 1}, 4);
    act_qdq(m, "x", 1e-3f, OQ_DTYPE_UINT8, 128);
    const int8_t wq[4] = {100, -50, 7, 3};
    const float ws[2] = {1e-6f, 0.01f}, b1[2] = {10.0f, 1.0f}, b2[2] = {0.0f, 0.0f};
    weight_dq(m, "W", wq, (int64_t[]){2, 2, 1, 1}, 4, ws, 2, 0);
    tp_init_f(m, "B1", (int64_t[]){2}, 1, b1);
    tp_init_f(m, "B2", (int64_t[]){2}, 1, b2);
    tp_node(m, "Conv", "c1", "x_dequant,W,B1", "y1");
    tp_node(m, "Conv", "c2", "x_dequant,W,B2", "y2");
    tp_output(m, "y1");
    tp_output(m, "y2");
    run_out o = fb_run(m, "fold-bias");
    cr_assert_eq(tp_stat(&o.r, "biases_folded"), 2);
    cr_assert_eq(tp_stat(&o.r, "weights_adjusted"), 0);
    cr_assert_eq(tp_stat(&o.r, "values_clipped"), 1);
    cr_assert_eq(tp_floats(find(m, "W_scale"))[0], 1e-6f);
    cr_assert_eq(i32(bias_dq(m, "B1")->inputs[0])[0], INT32_MAX);
    cr_assert(strstr(o.log, "weight \"W\" or its parameters are shared with other nodes"), "%s", o.log);
    oq_model_free(m);
}
