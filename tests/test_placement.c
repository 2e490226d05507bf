/* insert-qdq, placement by value (placement=ort-cpu): which tensors get a Q/DQ pair, on
 * small hand-built graphs whose answer follows from onnxruntime's CPU fusion rules
 * (docs/passes/insert-qdq.md, "Placement by value"):
 *   - a Q/DQ pair stays where an integer kernel reads the tensor, or where a selected Conv
 *     needs the Q after it (QLinearConv);
 *   - a chain of data-movement ops that ends in float ops or graph outputs keeps float;
 *   - a Concat whose inputs' ranges differ by more than concat-range-ratio gets no common
 *     scale; inputs with similar ranges share one. */
#include <math.h>

#include "onnxq/calib.h"
#include "test_pass_util.h"
#include "testutil.h"

#define ORT "insert-qdq{placement=ort-cpu,op-types=\"Conv,Gemm,MatMul\"}"

/* Does tensor t have its own Q -> DQ pair (named as insert-qdq names them)? */
static bool has_qdq(oq_model *m, const char *t)
{
    char q[128];
    snprintf(q, sizeof q, "%s_QuantizeLinear", t);
    return tu_find_node(m, q) != NULL;
}

static float scale_of(oq_model *m, const char *t)
{
    char s[128];
    snprintf(s, sizeof s, "%s_scale", t);
    oq_value *v = oq_graph_find_value(m->graph, s);
    cr_assert(v, "no %s", s);
    return tp_floats(v)[0];
}

/* 1x1 Conv with C_out x C_in weights w[i] = scale * ((i % 5) - 2 + 0.5) */
static void conv1x1(oq_model *m, const char *name, const char *in, const char *out, int64_t cout, int64_t cin,
                    float scale)
{
    char wn[64];
    snprintf(wn, sizeof wn, "%s_w", name);
    int64_t wd[4] = {cout, cin, 1, 1};
    float *w = malloc((size_t)(cout * cin) * sizeof(float));
    for (int64_t i = 0; i < cout * cin; i++)
        w[i] = scale * ((float)(i % 5) - 1.5f);
    tp_init_f(m, wn, wd, 4, w);
    free(w);
    char ins[160];
    snprintf(ins, sizeof ins, "%s,%s", in, wn);
    tp_node(m, "Conv", name, ins, out);
}

static void matmul(oq_model *m, const char *name, const char *in, const char *out, int64_t k, int64_t n)
{
    char wn[64];
    snprintf(wn, sizeof wn, "%s_w", name);
    int64_t wd[2] = {k, n};
    float *w = malloc((size_t)(k * n) * sizeof(float));
    for (int64_t i = 0; i < k * n; i++)
        w[i] = 0.1f * ((float)(i % 7) - 3.0f);
    tp_init_f(m, wn, wd, 2, w);
    free(w);
    char ins[160];
    snprintf(ins, sizeof ins, "%s,%s", in, wn);
    tp_node(m, "MatMul", name, ins, out);
}

static void shape_init(oq_model *m, const char *name, int64_t a, int64_t b, int64_t c)
{
    int64_t d[1] = {3}, v[3] = {a, b, c};
    tp_init(m, name, OQ_DTYPE_INT64, d, 1, v);
}

/* x -> Conv -> c -> Reshape -> r -> Transpose -> t -> Sigmoid -> s (graph output) */
static oq_model *chain_to_sigmoid(void)
{
    oq_model *m = tp_model(13);
    int64_t xd[4] = {1, 4, 2, 2};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 4);
    conv1x1(m, "conv", "x", "c", 4, 4, 0.5f);
    shape_init(m, "shp", 1, 4, 4);
    tp_node(m, "Reshape", "reshape", "c,shp", "r");
    oq_node *tr = tp_node(m, "Transpose", "transpose", "r", "t");
    int64_t perm[3] = {0, 2, 1};
    oq_node_set_attr_ints(tr, "perm", perm, 3);
    tp_node(m, "Sigmoid", "sigmoid", "t", "s");
    tp_output(m, "s");
    static const char *const names[] = {"x", "c", "r", "t", "s"};
    static const float ranges[][2] = {{-1, 1}, {-6, 6}, {-6, 6}, {-6, 6}, {0.01f, 0.99f}};
    tp_set_calib_table(m, names, ranges, 5);
    return m;
}

Test(placement, chain_into_float_sigmoid_keeps_float)
{
    oq_model *m = chain_to_sigmoid();
    oq_pass_result r = tp_run(m, ORT);
    /* the Conv reads x and writes c as QLinearConv: both keep their pairs */
    cr_assert(has_qdq(m, "x"));
    cr_assert(has_qdq(m, "c"));
    /* Reshape, Transpose, Sigmoid: nothing downstream runs in integers */
    cr_assert_not(has_qdq(m, "r"));
    cr_assert_not(has_qdq(m, "t"));
    cr_assert_not(has_qdq(m, "s"));
    cr_assert_eq(tp_stat(&r, "qdq_dropped_float_readers"), 3);
    oq_model_free(m);

    /* by-value=false: the rules before (the chain shares c's pair, Sigmoid gets [0, 1]) */
    m = chain_to_sigmoid();
    tp_run(m, "insert-qdq{placement=ort-cpu,op-types=\"Conv,Gemm,MatMul\",by-value=false}");
    cr_assert(has_qdq(m, "r") && has_qdq(m, "t") && has_qdq(m, "s"));
    oq_model_free(m);

    /* plain placement is not touched by the rule */
    m = chain_to_sigmoid();
    tp_run(m, "insert-qdq{op-types=\"Conv\"}");
    cr_assert(has_qdq(m, "r") && has_qdq(m, "t"));
    oq_model_free(m);
}

/* MatMul and Gemm run as integer kernels without a Q after them (MatMulIntegerToFloat,
 * QGemm with float output): their output keeps float when only float ops read it. */
Test(placement, matmul_output_read_only_by_float_ops_keeps_float)
{
    oq_model *m = tp_model(13);
    int64_t xd[2] = {1, 4};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 2);
    matmul(m, "mm", "x", "y", 4, 4);
    tp_node(m, "Relu", "relu", "y", "yr");
    oq_node *sm = tp_node(m, "Softmax", "softmax", "yr", "p");
    oq_node_set_attr_int(sm, "axis", 1);
    tp_output(m, "p");
    static const char *const names[] = {"x", "y", "yr", "p"};
    static const float ranges[][2] = {{-1, 1}, {-3, 3}, {0, 3}, {0, 1}};
    tp_set_calib_table(m, names, ranges, 4);
    tp_run(m, ORT);
    cr_assert(has_qdq(m, "x"));
    cr_assert_not(has_qdq(m, "yr")); /* the Relu fused into the MatMul's group: no reader */
    cr_assert_not(has_qdq(m, "y"));
    cr_assert_not(has_qdq(m, "p")); /* Softmax: no QLinearSoftmax for a graph output */
    /* the weight is still quantized */
    cr_assert_str_eq(tu_find_node(m, "mm")->inputs[1]->producer->op_type, "DequantizeLinear");
    oq_model_free(m);
}

/* x -> Conv -> c -> Reshape -> r -> Transpose -> t -> Conv -> y: the chain runs on the
 * quantized tensor (DropQDQNodesRules) and keeps c's parameters */
Test(placement, chain_into_conv_keeps_pairs)
{
    oq_model *m = tp_model(13);
    int64_t xd[4] = {1, 4, 2, 2};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 4);
    conv1x1(m, "conv1", "x", "c", 4, 4, 0.5f);
    shape_init(m, "shp", 1, 4, 4);
    tp_node(m, "Reshape", "reshape", "c,shp", "r");
    int64_t s4[1] = {4}, shp4[4] = {1, 4, 2, 2};
    tp_init(m, "shp4", OQ_DTYPE_INT64, s4, 1, shp4);
    tp_node(m, "Reshape", "reshape2", "r,shp4", "t");
    conv1x1(m, "conv2", "t", "y", 2, 4, 0.25f);
    tp_output(m, "y");
    static const char *const names[] = {"x", "c", "r", "t", "y"};
    static const float ranges[][2] = {{-1, 1}, {-6, 6}, {-6, 6}, {-6, 6}, {-3, 3}};
    tp_set_calib_table(m, names, ranges, 5);
    oq_pass_result r = tp_run(m, ORT);
    cr_assert(has_qdq(m, "c") && has_qdq(m, "r") && has_qdq(m, "t"));
    cr_assert_eq(scale_of(m, "r"), scale_of(m, "c"));
    cr_assert_eq(scale_of(m, "t"), scale_of(m, "c"));
    /* the last Conv's output is read by nobody, but QLinearConv needs its Q */
    cr_assert(has_qdq(m, "y"));
    cr_assert_eq(tp_stat(&r, "qdq_dropped_float_readers"), 0);
    oq_model_free(m);
}

/* x -> MatMul a, MatMul b -> Concat -> k -> MatMul -> y with ranges of a and b given;
 * side: b is also read by MatMul -> z */
static oq_model *concat_model(float a_hi, float b_hi, bool side)
{
    oq_model *m = tp_model(13);
    int64_t xd[2] = {1, 4};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 2);
    matmul(m, "mm_a", "x", "a", 4, 4);
    matmul(m, "mm_b", "x", "b", 4, 4);
    oq_node *cc = tp_node(m, "Concat", "cat", "a,b", "k");
    oq_node_set_attr_int(cc, "axis", 1);
    matmul(m, "mm_c", "k", "y", 8, 2);
    tp_output(m, "y");
    if (side) {
        matmul(m, "mm_side", "b", "z", 4, 2);
        tp_output(m, "z");
    }
    static const char *const names[] = {"x", "a", "b", "k", "y", "z"};
    float ranges[6][2] = {{-1, 1}, {-a_hi, a_hi}, {-b_hi, b_hi}, {-fmaxf(a_hi, b_hi), fmaxf(a_hi, b_hi)}, {-2, 2}, {-2, 2}};
    tp_set_calib_table(m, names, (const float(*)[2])ranges, 6);
    return m;
}

Test(placement, concat_of_similar_ranges_shares_one_scale)
{
    oq_model *m = concat_model(2.0f, 3.0f, true);
    oq_pass_result r = tp_run(m, ORT);
    cr_assert(has_qdq(m, "a") && has_qdq(m, "b") && has_qdq(m, "k"));
    cr_assert_eq(scale_of(m, "a"), scale_of(m, "k"));
    cr_assert_eq(scale_of(m, "b"), scale_of(m, "k"));
    cr_assert_float_eq(scale_of(m, "k"), 6.0f / 255.0f, 1e-7f);
    cr_assert_eq(tp_stat(&r, "concats_wide_ranges"), 0);
    oq_model_free(m);
}

Test(placement, concat_of_ranges_100x_apart_gives_shared_inputs_their_own_scale)
{
    /* b (+-1) is read by the Concat and by mm_side: it keeps its own scale, 2/255 instead of
     * the common 200/255 (QLinearConcat requantizes it); a, read only by the Concat, and
     * the output keep the common scale */
    oq_model *m = concat_model(100.0f, 1.0f, true);
    oq_pass_result r = tp_run(m, ORT);
    cr_assert_eq(tp_stat(&r, "concats_wide_ranges"), 1);
    cr_assert_eq(tp_stat(&r, "concat_inputs_own_scale"), 1);
    cr_assert(has_qdq(m, "a") && has_qdq(m, "b") && has_qdq(m, "k"));
    cr_assert_float_eq(scale_of(m, "b"), 2.0f / 255.0f, 1e-7f);
    cr_assert_float_eq(scale_of(m, "k"), 200.0f / 255.0f, 1e-5f);
    cr_assert_eq(scale_of(m, "a"), scale_of(m, "k"));
    oq_model_free(m);

    /* no other reader: one scale for all (an own scale would only round b twice) */
    m = concat_model(100.0f, 1.0f, false);
    r = tp_run(m, ORT);
    cr_assert_eq(tp_stat(&r, "concat_inputs_own_scale"), 0);
    cr_assert_eq(scale_of(m, "b"), scale_of(m, "k"));
    oq_model_free(m);

    /* concat-range-ratio=0: one scale, as before */
    m = concat_model(100.0f, 1.0f, true);
    tp_run(m, "insert-qdq{placement=ort-cpu,op-types=\"Conv,Gemm,MatMul\",concat-range-ratio=0}");
    cr_assert_eq(scale_of(m, "b"), scale_of(m, "k"));
    oq_model_free(m);

    /* the default ratio is 2 (widths 4 and 2: not beyond it; 5 and 2: beyond) */
    m = concat_model(2.0f, 1.0f, true);
    tp_run(m, ORT);
    cr_assert_eq(scale_of(m, "b"), scale_of(m, "k"));
    oq_model_free(m);
    m = concat_model(2.5f, 1.0f, true);
    tp_run(m, ORT);
    cr_assert_float_eq(scale_of(m, "b"), 2.0f / 255.0f, 1e-7f);
    oq_model_free(m);
}

/* A YOLO-style head: box (range +-100) and class (range +-8) Convs -> Concat -> Reshape
 * -> Split -> Sigmoid on the class part. Nothing after the Convs runs in integers, so the
 * Concat imposes no common scale and the chain keeps float. */
/* A YOLO-style head: x -> stem Conv -> f -> Relu (or SiLU: Sigmoid fs, Mul) -> fr -> box
 * and class Convs (bx, cl) -> Concat cat -> Reshape rs -> Split (boxes, logits) -> Sigmoid
 * scores; boxes and scores are the graph outputs. */
static oq_model *detection_head(bool silu)
{
    oq_model *m = tp_model(13);
    int64_t xd[4] = {1, 4, 2, 2};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 4);
    conv1x1(m, "stem", "x", "f", 4, 4, 0.5f);
    if (silu) {
        tp_node(m, "Sigmoid", "silu_sig", "f", "fs");
        tp_node(m, "Mul", "silu_mul", "f,fs", "fr");
    } else {
        tp_node(m, "Relu", "stem_relu", "f", "fr");
    }
    conv1x1(m, "box", "fr", "bx", 4, 4, 4.0f);
    conv1x1(m, "cls", "fr", "cl", 2, 4, 0.3f);
    oq_node *cc = tp_node(m, "Concat", "cat", "bx,cl", "cat");
    oq_node_set_attr_int(cc, "axis", 1);
    shape_init(m, "shp", 1, 6, 4);
    tp_node(m, "Reshape", "reshape", "cat,shp", "rs");
    int64_t sd[1] = {2}, split[2] = {4, 2};
    tp_init(m, "split", OQ_DTYPE_INT64, sd, 1, split);
    oq_node *sp = tp_node(m, "Split", "split", "rs,split", "boxes,logits");
    oq_node_set_attr_int(sp, "axis", 1);
    tp_node(m, "Sigmoid", "sigmoid", "logits", "scores");
    tp_output(m, "boxes");
    tp_output(m, "scores");
    return m;
}

Test(placement, detection_head_concat_into_split_keeps_float)
{
    oq_model *m = detection_head(false);
    static const char *const names[] = {"x", "f", "fr", "bx", "cl", "cat", "rs", "boxes", "logits", "scores"};
    static const float ranges[][2] = {{-1, 1},    {-3, 3},    {0, 3},   {-100, 100}, {-8, 8},
                                      {-100, 100}, {-100, 100}, {-100, 100}, {-8, 8},   {0, 1}};
    tp_set_calib_table(m, names, ranges, 10);
    oq_pass_result r = tp_run(m, ORT);
    cr_assert(has_qdq(m, "x") && has_qdq(m, "fr"));
    cr_assert(has_qdq(m, "bx") && has_qdq(m, "cl")); /* QLinearConv outputs */
    cr_assert_not(has_qdq(m, "cat"));
    cr_assert_not(has_qdq(m, "rs"));
    /* each Conv output its own range, not the union */
    cr_assert_float_eq(scale_of(m, "bx"), 200.0f / 255.0f, 1e-5f);
    cr_assert_float_eq(scale_of(m, "cl"), 16.0f / 255.0f, 1e-6f);
    cr_assert_eq(tp_stat(&r, "qdq_dropped_float_readers"), 2);
    oq_model_free(m);
}

/* The logit of a probability output: a class Conv whose calibrated range never passed 0
 * (no object in the calibration samples) would cap every score at sigmoid(0) = 0.5. Its
 * range is widened to hold [-ln 511, ln 511]; a SiLU's Sigmoid (read by a Mul) is not a
 * probability output and leaves its input's range alone. */
Test(placement, logit_of_a_probability_output_holds_the_decision_range)
{
    const float L = 6.2363f;
    oq_model *m = detection_head(true);
    static const char *const names[] = {"x", "f", "fs", "fr", "bx", "cl", "cat", "rs", "boxes", "logits", "scores"};
    static const float ranges[][2] = {{-1, 1},      {-3, 3},      {0.05f, 0.95f}, {-0.3f, 3},    {-100, 100}, {-9, 0},
                                      {-100, 100}, {-100, 100}, {-100, 100},  {-9, 0}, {0, 0.5f}};
    tp_set_calib_table(m, names, ranges, 11);
    oq_pass_result r = tp_run(m, ORT);
    cr_assert(has_qdq(m, "cl"));
    cr_assert_float_eq(scale_of(m, "cl"), (9.0f + L) / 255.0f, 1e-6f, "the class logits hold [-9, ln 511]");
    cr_assert_float_eq(scale_of(m, "bx"), 200.0f / 255.0f, 1e-5f, "a range that holds [-L, L] already is kept");
    cr_assert_float_eq(scale_of(m, "f"), 6.0f / 255.0f, 1e-6f, "a SiLU's input is not a logit");
    cr_assert_eq(tp_stat(&r, "logit_ranges_widened"), 1);
    oq_model_free(m);
}

/* Fixed point: Conv outputs -> Add (QLinearAdd candidate) -> Sigmoid -> Mul -> graph
 * output. Dropping the Mul's pair makes the Mul float, then the Sigmoid's and the Add's
 * pairs have no integer reader either. The Conv outputs keep theirs. */
Test(placement, dropping_repeats_to_a_fixed_point)
{
    oq_model *m = tp_model(13);
    int64_t xd[4] = {1, 4, 2, 2};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 4);
    conv1x1(m, "ca", "x", "a", 4, 4, 0.5f);
    conv1x1(m, "cb", "x", "b", 4, 4, 0.5f);
    tp_node(m, "Add", "add", "a,b", "s");
    tp_node(m, "Sigmoid", "sig", "s", "g");
    tp_node(m, "Mul", "mul", "s,g", "y");
    tp_output(m, "y");
    static const char *const names[] = {"x", "a", "b", "s", "g", "y"};
    static const float ranges[][2] = {{-1, 1}, {-4, 4}, {-4, 4}, {-8, 8}, {0, 1}, {-1, 8}};
    tp_set_calib_table(m, names, ranges, 6);
    oq_pass_result r = tp_run(m, ORT);
    cr_assert(has_qdq(m, "a") && has_qdq(m, "b"));
    cr_assert_not(has_qdq(m, "s"));
    cr_assert_not(has_qdq(m, "g"));
    cr_assert_not(has_qdq(m, "y"));
    cr_assert_eq(tp_stat(&r, "qdq_dropped_float_readers"), 3);
    oq_model_free(m);

    /* the same block feeding a Conv: every pair has an integer reader (QLinearAdd,
     * QLinearSigmoid, QLinearMul, QLinearConv) */
    m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 4);
    conv1x1(m, "ca", "x", "a", 4, 4, 0.5f);
    conv1x1(m, "cb", "x", "b", 4, 4, 0.5f);
    tp_node(m, "Add", "add", "a,b", "s");
    tp_node(m, "Sigmoid", "sig", "s", "g");
    tp_node(m, "Mul", "mul", "s,g", "y");
    conv1x1(m, "cc", "y", "z", 4, 4, 0.5f);
    tp_output(m, "z");
    static const char *const names2[] = {"x", "a", "b", "s", "g", "y", "z"};
    static const float ranges2[][2] = {{-1, 1}, {-4, 4}, {-4, 4}, {-8, 8}, {0, 1}, {-1, 8}, {-3, 3}};
    tp_set_calib_table(m, names2, ranges2, 7);
    r = tp_run(m, ORT);
    cr_assert(has_qdq(m, "s") && has_qdq(m, "g") && has_qdq(m, "y") && has_qdq(m, "z"));
    cr_assert_eq(tp_stat(&r, "qdq_dropped_float_readers"), 0);
    oq_model_free(m);
}

Test(placement, negative_ratio_refused)
{
    oq_model *m = concat_model(2.0f, 3.0f, false);
    char msg[512];
    cr_assert_eq(tp_run_fail(m, "insert-qdq{placement=ort-cpu,concat-range-ratio=-1}", msg, sizeof msg), OQ_ERR_USAGE);
    cr_assert(strstr(msg, "concat-range-ratio"), "%s", msg);
    oq_model_free(m);
}

/* x -> Conv -> c -> Pad (zeros) -> p -> depthwise Conv -> d -> Clip -> k -> Conv -> y, with
 * depthwise=false: onnxruntime's PadFusion folds the Pad into the depthwise Conv, and its
 * WeightBiasQuantization then quantizes the float weight between c's DequantizeLinear and
 * k's QuantizeLinear per tensor (EfficientNet-Lite0 from PyTorch: 14.4 dB with its weights
 * quantized per channel by onnxq, 8.3 dB per tensor by onnxruntime). So the depthwise Conv
 * is quantized per channel here, and the Pad's output shares c's parameters. */
static oq_model *pad_depthwise_model(float pad_value)
{
    oq_model *m = tp_model(13);
    int64_t xd[4] = {1, 4, 4, 4};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 4);
    conv1x1(m, "conv1", "x", "c", 4, 4, 0.5f);
    int64_t pd[1] = {8}, pads[8] = {0, 0, 1, 1, 0, 0, 1, 1};
    tp_init(m, "pads", OQ_DTYPE_INT64, pd, 1, pads);
    int64_t s0[1] = {1};
    tp_init_f(m, "pad_value", s0, 0, &pad_value);
    tp_node(m, "Pad", "pad", "c,pads,pad_value", "p");
    int64_t wd[4] = {4, 1, 3, 3};
    float w[36];
    for (int i = 0; i < 36; i++)
        w[i] = (float)(i % 4 + 1) * ((i / 9) % 2 ? 0.01f : 1.0f); /* channels 1, 3: 100x narrower */
    tp_init_f(m, "dw_w", wd, 4, w);
    oq_node *dw = tp_node(m, "Conv", "dw", "p,dw_w", "d");
    oq_node_set_attr_int(dw, "group", 4);
    float lo = 0.0f, hi = 6.0f;
    tp_init_f(m, "clip_lo", s0, 0, &lo);
    tp_init_f(m, "clip_hi", s0, 0, &hi);
    tp_node(m, "Clip", "clip", "d,clip_lo,clip_hi", "k");
    conv1x1(m, "conv2", "k", "y", 2, 4, 0.25f);
    tp_output(m, "y");
    static const char *const names[] = {"x", "c", "p", "d", "k", "y"};
    static const float ranges[][2] = {{-1, 1}, {-6, 6}, {-6, 6}, {-20, 20}, {0, 6}, {-3, 3}};
    tp_set_calib_table(m, names, ranges, 6);
    return m;
}

Test(placement, zero_pad_before_float_depthwise_gets_it_quantized_per_channel)
{
    oq_model *m = pad_depthwise_model(0.0f);
    oq_pass_result r = tp_run(m, "insert-qdq{placement=ort-cpu,op-types=\"Conv\",depthwise=false}");
    oq_node *dw = tu_find_node(m, "dw");
    cr_assert(dw);
    /* the weight comes from a DequantizeLinear with one scale per channel */
    oq_node *wdq = dw->inputs[1]->producer;
    cr_assert(wdq && !strcmp(wdq->op_type, "DequantizeLinear"), "depthwise weight left float");
    const oq_tensor *ws = oq_value_const_tensor(wdq->inputs[1]);
    cr_assert(ws && oq_tensor_numel(ws) == 4, "weight scale: not per channel");
    /* the Pad reads and writes c's quantized values */
    cr_assert(has_qdq(m, "p"));
    cr_assert_eq(scale_of(m, "p"), scale_of(m, "c"));
    cr_assert_eq(tp_stat(&r, "depthwise_quantized_for_ort"), 1);
    oq_model_free(m);

    /* a Pad with another value is not folded by onnxruntime: the depthwise Conv stays float */
    m = pad_depthwise_model(1.0f);
    r = tp_run(m, "insert-qdq{placement=ort-cpu,op-types=\"Conv\",depthwise=false}");
    dw = tu_find_node(m, "dw");
    cr_assert(!dw->inputs[1]->producer || strcmp(dw->inputs[1]->producer->op_type, "DequantizeLinear"));
    cr_assert_eq(tp_stat(&r, "depthwise_quantized_for_ort"), 0);
    oq_model_free(m);
}

/* min-intensity (placement=ort-cpu): a Conv stays float when it does fewer multiply-adds
 * per output pixel (Cout x Cin/group x kernel) than T times the elements per output pixel
 * that leaving it float keeps from crossing between float and 8 bits: its input (Cin x
 * stride) counts +1 when a float op or the graph input feeds it, -1 when an op on quantized
 * data does; its output (Cout) +1 when only float ops read it, -1 when only quantized ones
 * do, 0 when both. Here:
 *   x -> stem (3 -> 64, 3x3) -> a -> HardSwish -> h -> conv_a (1x1, 64 -> 64) -> b -> Relu
 *     -> r -> conv_b (1x1, 64 -> 64) -> c -> HardSwish -> y
 * stem: 64 x 27 = 1728 multiply-adds against 3 (graph input) + 64 (HardSwish), 25.8 per
 * element; conv_a: +64 (HardSwish) - 64 (conv_b, quantized) = 0; conv_b: -64 + 64 = 0. */
static oq_model *intensity_model(void)
{
    oq_model *m = tp_model(14);
    int64_t xd[4] = {1, 3, 8, 8};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 4);
    int64_t wd[4] = {64, 3, 3, 3};
    float w[64 * 27];
    for (int i = 0; i < 64 * 27; i++)
        w[i] = 0.1f * (float)(i % 7 - 3);
    tp_init_f(m, "stem_w", wd, 4, w);
    oq_node *st = tp_node(m, "Conv", "stem", "x,stem_w", "a");
    int64_t pads[4] = {1, 1, 1, 1};
    oq_node_set_attr_ints(st, "pads", pads, 4);
    tp_node(m, "HardSwish", "hs1", "a", "h");
    conv1x1(m, "conv_a", "h", "b", 64, 64, 0.05f);
    tp_node(m, "Relu", "relu", "b", "r");
    conv1x1(m, "conv_b", "r", "c", 64, 64, 0.05f);
    tp_node(m, "HardSwish", "hs2", "c", "y");
    tp_output(m, "y");
    static const char *const names[] = {"x", "a", "h", "b", "r", "c", "y"};
    static const float ranges[][2] = {{-1, 1}, {-8, 8}, {-0.4f, 8}, {-5, 5}, {0, 5}, {-4, 4}, {-0.4f, 4}};
    tp_set_calib_table(m, names, ranges, 7);
    return m;
}

/* x -> c1 (1x1, 8 -> 8) -> b1 -> HardSwish -> y1, and b1 -> Relu -> r -> c2 (1x1, 8 -> 8)
 * -> b2 -> HardSwish -> y2. c1: 64 multiply-adds against 8 (graph input) + 0 (read by a
 * float op and a quantized one); c2: -8 (c1 quantized) + 8 = 0, but once c1 is float,
 * 8 + 8 = 16. */
static oq_model *cascade_model(void)
{
    oq_model *m = tp_model(14);
    int64_t xd[4] = {1, 8, 4, 4};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 4);
    conv1x1(m, "c1", "x", "b1", 8, 8, 0.25f);
    tp_node(m, "HardSwish", "hs1", "b1", "y1");
    tp_node(m, "Relu", "relu", "b1", "r");
    conv1x1(m, "c2", "r", "b2", 8, 8, 0.25f);
    tp_node(m, "HardSwish", "hs2", "b2", "y2");
    tp_output(m, "y1");
    tp_output(m, "y2");
    static const char *const names[] = {"x", "b1", "y1", "r", "b2", "y2"};
    static const float ranges[][2] = {{-1, 1}, {-4, 4}, {-0.4f, 4}, {0, 4}, {-4, 4}, {-0.4f, 4}};
    tp_set_calib_table(m, names, ranges, 6);
    return m;
}

static bool weight_quantized(oq_model *m, const char *conv)
{
    const oq_node *n = tu_find_node(m, conv);
    cr_assert(n, "no node %s", conv);
    return n->inputs[1]->producer && !strcmp(n->inputs[1]->producer->op_type, "DequantizeLinear");
}

Test(placement, min_intensity_leaves_convs_with_few_multiply_adds_per_crossing_element_float)
{
    /* off (the default of the pass): all three quantized */
    oq_model *m = intensity_model();
    oq_pass_result r = tp_run(m, "insert-qdq{placement=ort-cpu,op-types=\"Conv\"}");
    cr_assert(weight_quantized(m, "stem") && weight_quantized(m, "conv_a") && weight_quantized(m, "conv_b"));
    cr_assert(has_qdq(m, "x"));
    cr_assert_eq(tp_stat(&r, "convs_float_low_intensity"), 0);
    oq_model_free(m);

    /* 25 and 26 on either side of the stem's 25.8: float at 26, with no Q/DQ on the graph
     * input it alone reads; conv_a and conv_b stay quantized at any threshold (0 elements
     * spared: a float one would move the conversion from one side to the other) */
    static const char *const opt[] = {"insert-qdq{placement=ort-cpu,op-types=\"Conv\",min-intensity=25}",
                                      "insert-qdq{placement=ort-cpu,op-types=\"Conv\",min-intensity=26}",
                                      "insert-qdq{placement=ort-cpu,op-types=\"Conv\",min-intensity=1e6}"};
    for (int k = 0; k < 3; k++) {
        m = intensity_model();
        r = tp_run(m, opt[k]);
        cr_assert_eq(weight_quantized(m, "stem"), k == 0, "%s", opt[k]);
        cr_assert_eq(has_qdq(m, "x"), k == 0, "%s", opt[k]);
        cr_assert(weight_quantized(m, "conv_a") && weight_quantized(m, "conv_b"), "%s", opt[k]);
        cr_assert(has_qdq(m, "h") && has_qdq(m, "r"));
        cr_assert_eq(tp_stat(&r, "convs_float_low_intensity"), k > 0, "%s", opt[k]);
        oq_model_free(m);
    }

    /* plain placement: not applied */
    m = intensity_model();
    r = tp_run(m, "insert-qdq{op-types=\"Conv\",min-intensity=1e6}");
    cr_assert(weight_quantized(m, "stem") && weight_quantized(m, "conv_a") && weight_quantized(m, "conv_b"));
    oq_model_free(m);
}

Test(placement, min_intensity_repeats_until_nothing_changes)
{
    /* 8: c1 at 64 / 8 = 8 is not below; c2 spares nothing while c1 is quantized */
    oq_model *m = cascade_model();
    oq_pass_result r = tp_run(m, "insert-qdq{placement=ort-cpu,op-types=\"Conv\",min-intensity=8}");
    cr_assert(weight_quantized(m, "c1") && weight_quantized(m, "c2"));
    cr_assert_eq(tp_stat(&r, "convs_float_low_intensity"), 0);
    oq_model_free(m);
    /* 9: c1 float; then c2 reads a float Relu: 64 / 16 = 4 < 9, float too */
    m = cascade_model();
    r = tp_run(m, "insert-qdq{placement=ort-cpu,op-types=\"Conv\",min-intensity=9}");
    cr_assert_not(weight_quantized(m, "c1") || weight_quantized(m, "c2"));
    cr_assert_not(has_qdq(m, "x") || has_qdq(m, "r"));
    cr_assert_eq(tp_stat(&r, "convs_float_low_intensity"), 2);
    oq_model_free(m);
}
