/* calibrate + insert-qdq on small graphs built with the IR API.
 * References are computed here by hand: ONNX scale/zero-point formulas, the ACIQ optimum
 * for MSE clipping of Laplace data (Banner et al. 2019: alpha = 9.89 b at 8 bits), and
 * the exact extremes / quantiles of data this test writes. */
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnxq/calib.h"
#include "onnxq/tensor_io.h"
#include "io/json.h"
#include "test_pass_util.h"
#include "testutil.h"

/* ------------------------------------------------------------ helpers */

static oq_value *find(oq_model *m, const char *name)
{
    return oq_graph_find_value(m->graph, name);
}

static float scalar_f(oq_model *m, const char *name)
{
    oq_value *v = find(m, name);
    cr_assert(v, "no value %s", name);
    return tp_floats(v)[0];
}

static int32_t zp_of(oq_model *m, const char *name, int32_t *dtype)
{
    oq_value *v = find(m, name);
    cr_assert(v, "no value %s", name);
    oq_tensor *t = oq_value_const_tensor(v);
    cr_assert(t);
    *dtype = t->dtype;
    return oq_unpack_int(t->dtype, oq_tensor_data(t, NULL), 0);
}

/* uint8 asymmetric per ONNX / the spec in quant.h, computed here independently */
static void ref_u8(float lo, float hi, float *s, int *zp)
{
    if (lo > 0)
        lo = 0;
    if (hi < 0)
        hi = 0;
    *s = (hi - lo) / 255.0f;
    *zp = (int)lrintf(0 - lo / *s);
}

/* x -> Conv(w1,b1) -> c1 -> Relu -> r1 -> MaxPool -> p1 -> Reshape -> f -> Gemm(w2,b2) -> g
 *   -> Softmax -> probs */
static oq_model *cnn(int64_t opset)
{
    oq_model *m = tp_model(opset);
    int64_t xd[4] = {1, 2, 4, 4};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 4);
    float w1[3 * 2 * 3 * 3], b1[3] = {0.5f, -0.25f, 0.125f};
    for (int i = 0; i < 54; i++)
        w1[i] = (float)((i * 7) % 11 - 5) * (i < 18 ? 0.1f : i < 36 ? 0.02f : 0.3f);
    int64_t wd[4] = {3, 2, 3, 3}, bd[1] = {3};
    tp_init_f(m, "w1", wd, 4, w1);
    tp_init_f(m, "b1", bd, 1, b1);
    oq_node *c = tp_node(m, "Conv", "conv1", "x,w1,b1", "c1");
    int64_t pads[4] = {1, 1, 1, 1};
    oq_node_set_attr_ints(c, "pads", pads, 4);
    tp_node(m, "Relu", "relu1", "c1", "r1");
    oq_node *mp = tp_node(m, "MaxPool", "pool1", "r1", "p1");
    int64_t k[2] = {2, 2};
    oq_node_set_attr_ints(mp, "kernel_shape", k, 2);
    oq_node_set_attr_ints(mp, "strides", k, 2);
    int64_t shp[2] = {1, 12}, sd[1] = {2};
    tp_init(m, "shape", OQ_DTYPE_INT64, sd, 1, shp);
    tp_node(m, "Reshape", "flatten", "p1,shape", "f");
    float w2[12 * 5], b2[5] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
    for (int i = 0; i < 60; i++)
        w2[i] = (float)((i * 5) % 13 - 6) * (i % 5 == 0 ? 0.5f : 0.05f);
    int64_t w2d[2] = {12, 5}, b2d[1] = {5};
    tp_init_f(m, "w2", w2d, 2, w2);
    tp_init_f(m, "b2", b2d, 1, b2);
    tp_node(m, "Gemm", "fc", "f,w2,b2", "g");
    oq_node *sm = tp_node(m, "Softmax", "softmax", "g", "probs");
    oq_node_set_attr_int(sm, "axis", 1);
    int64_t od[2] = {1, 5};
    tp_output_typed(m, "probs", OQ_DTYPE_FLOAT, od, 2);
    static const char *const names[] = {"x", "c1", "r1", "p1", "f", "g", "probs"};
    static const float ranges[][2] = {{-1, 1}, {-3, 4}, {0, 4}, {0, 3.5f}, {0, 3.5f}, {-6, 9}, {0, 0.9f}};
    tp_set_calib_table(m, names, ranges, 7);
    return m;
}

static void assert_qdq_pair(oq_model *m, const char *t)
{
    char q[128], dq[128], pre[128];
    snprintf(q, sizeof q, "%s_QuantizeLinear", t);
    snprintf(dq, sizeof dq, "%s_DequantizeLinear", t);
    snprintf(pre, sizeof pre, "%s_prequant", t);
    oq_node *qn = tu_find_node(m, q), *dn = tu_find_node(m, dq);
    cr_assert(qn && dn, "no Q/DQ pair for %s", t);
    cr_assert_str_eq(dn->outputs[0]->name, t);
    cr_assert_str_eq(qn->inputs[0]->name, pre);
}

/* ------------------------------------------------------------ placement */

Test(insert_qdq, placement_rules_and_names)
{
    oq_model *m = cnn(13);
    oq_pass_result r = tp_run(m, "insert-qdq{quantize-bias=true}");
    cr_assert_eq(tp_stat(&r, "weights_quantized"), 2);
    /* graph input: Q reads x, consumers read x_dequant */
    oq_node *conv = tu_find_node(m, "conv1");
    cr_assert_str_eq(conv->inputs[0]->name, "x_dequant");
    cr_assert(tu_find_node(m, "x_QuantizeLinear"));
    /* Conv -> Relu fused: nothing on c1, QDQ after the Relu with r1's range */
    cr_assert_null(find(m, "c1_prequant"));
    cr_assert_null(tu_find_node(m, "c1_QuantizeLinear"));
    assert_qdq_pair(m, "r1");
    float s;
    int zp;
    int32_t dt;
    ref_u8(0, 4, &s, &zp);
    cr_assert_float_eq(scalar_f(m, "r1_scale"), s, 1e-7f);
    cr_assert_eq(zp_of(m, "r1_zero_point", &dt), zp);
    cr_assert_eq(dt, OQ_DTYPE_UINT8);
    /* MaxPool and Reshape reuse their input's parameters (not their own 3.5 range) */
    assert_qdq_pair(m, "p1");
    assert_qdq_pair(m, "f");
    cr_assert_eq(scalar_f(m, "p1_scale"), scalar_f(m, "r1_scale"));
    cr_assert_eq(scalar_f(m, "f_scale"), scalar_f(m, "r1_scale"));
    /* Gemm output: its own range; Softmax output: fixed [0, 1] */
    ref_u8(-6, 9, &s, &zp);
    cr_assert_float_eq(scalar_f(m, "g_scale"), s, 1e-7f);
    cr_assert_eq(zp_of(m, "g_zero_point", &dt), zp);
    cr_assert_float_eq(scalar_f(m, "probs_scale"), 1.0f / 255.0f, 1e-9f);
    cr_assert_eq(zp_of(m, "probs_zero_point", &dt), 0);
    /* graph output keeps its name and is the DQ output */
    cr_assert_str_eq(m->graph->outputs[0]->value->name, "probs");
    cr_assert_str_eq(m->graph->outputs[0]->value->producer->op_type, "DequantizeLinear");
    /* weights: int8 symmetric per channel, Conv axis 0, Gemm (transB=0) axis 1 */
    oq_node *wdq = tu_find_node(m, "w1_DequantizeLinear");
    cr_assert(wdq);
    cr_assert_str_eq(wdq->outputs[0]->name, "w1");
    cr_assert_eq(oq_node_attr_int(wdq, "axis", -99), 0);
    oq_tensor *wq = oq_value_const_tensor(find(m, "w1_quantized"));
    cr_assert_eq(wq->dtype, OQ_DTYPE_INT8);
    oq_tensor *ws = oq_value_const_tensor(find(m, "w1_scale"));
    cr_assert_eq(ws->rank, 1);
    cr_assert_eq(ws->dims[0], 3);
    /* channel 2 holds values up to |5 * 0.3| = 1.5: symmetric scale 1.5 / 127 */
    cr_assert_float_eq(((const float *)oq_tensor_data(ws, NULL))[2], 1.5f / 127.0f, 1e-7f);
    cr_assert_null(find(m, "w1")->initializer, "float weight kept");
    oq_node *w2dq = tu_find_node(m, "w2_DequantizeLinear");
    cr_assert_eq(oq_node_attr_int(w2dq, "axis", -99), 1);
    cr_assert_eq(oq_value_const_tensor(find(m, "w2_scale"))->dims[0], 5);
    /* bias int32, scale = s_x * s_w per channel */
    oq_tensor *bq = oq_value_const_tensor(find(m, "b1_quantized"));
    cr_assert_eq(bq->dtype, OQ_DTYPE_INT32);
    const float *bs = tp_floats(find(m, "b1_scale"));
    const float *wsc = oq_tensor_data(ws, NULL);
    for (int c = 0; c < 3; c++)
        cr_assert_eq(bs[c], scalar_f(m, "x_scale") * wsc[c]);
    cr_assert_null(find(m, "onnxq.calibration"));
    for (size_t i = 0; i < m->metadata.count; i++)
        cr_assert_str_neq(m->metadata.items[i].key, OQ_CALIB_METADATA_KEY, "table left in metadata");
    oq_model_free(m);
}

Test(insert_qdq, weights_dequantize_within_half_a_step)
{
    oq_model *m = cnn(13);
    float w1[54];
    memcpy(w1, oq_tensor_data(find(m, "w1")->initializer, NULL), sizeof w1);
    tp_run(m, "insert-qdq");
    const int8_t *q = oq_tensor_data(oq_value_const_tensor(find(m, "w1_quantized")), NULL);
    const float *s = tp_floats(find(m, "w1_scale"));
    for (int i = 0; i < 54; i++) {
        float deq = (float)q[i] * s[i / 18];
        cr_assert(fabsf(deq - w1[i]) <= s[i / 18] * 0.5f + 1e-7f, "w1[%d] %g vs %g", i, w1[i], deq);
    }
    /* bias left in float for fold-bias by default */
    cr_assert(find(m, "b1")->initializer);
    oq_model_free(m);
}

Test(insert_qdq, one_qdq_per_tensor_shared_by_consumers)
{
    oq_model *m = tp_model(13);
    int64_t xd[2] = {2, 3}, wd[2] = {3, 3};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 2);
    float w[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    tp_init_f(m, "wa", wd, 2, w);
    tp_init_f(m, "wb", wd, 2, w);
    tp_node(m, "MatMul", "mm_a", "x,wa", "a");
    tp_node(m, "MatMul", "mm_b", "x,wb", "b");
    tp_node(m, "MatMul", "mm_c", "a,b", "c"); /* two activations: both quantized */
    tp_output(m, "c");
    static const char *const names[] = {"x", "a", "b", "c"};
    static const float ranges[][2] = {{-1, 1}, {-2, 2}, {-3, 3}, {-9, 9}};
    tp_set_calib_table(m, names, ranges, 4);
    tp_run(m, "insert-qdq");
    cr_assert_eq(tp_count_op(m, "QuantizeLinear"), 4);
    /* weights of MatMul: per channel along the last axis, 3 scales */
    cr_assert_eq(oq_node_attr_int(tu_find_node(m, "wa_DequantizeLinear"), "axis", -99), 1);
    cr_assert_eq(oq_value_const_tensor(find(m, "wa_scale"))->dims[0], 3);
    cr_assert_str_eq(tu_find_node(m, "mm_a")->inputs[0]->name, "x_dequant");
    cr_assert_str_eq(tu_find_node(m, "mm_b")->inputs[0]->name, "x_dequant");
    cr_assert_str_eq(tu_find_node(m, "mm_c")->inputs[1]->name, "b");
    cr_assert_str_eq(tu_find_node(m, "mm_c")->inputs[1]->producer->op_type, "DequantizeLinear");
    oq_model_free(m);
}

Test(insert_qdq, concat_inputs_share_one_set)
{
    oq_model *m = tp_model(13);
    int64_t xd[2] = {1, 2}, wd[2] = {2, 2};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 2);
    float w[4] = {1, 0, 0, 1};
    tp_init_f(m, "wa", wd, 2, w);
    tp_init_f(m, "wb", wd, 2, w);
    tp_node(m, "MatMul", "mm_a", "x,wa", "a");
    tp_node(m, "MatMul", "mm_b", "x,wb", "b");
    oq_node *cc = tp_node(m, "Concat", "cat", "a,b", "c");
    oq_node_set_attr_int(cc, "axis", 1);
    tp_output(m, "c");
    static const char *const names[] = {"x", "a", "b", "c"};
    static const float ranges[][2] = {{-1, 1}, {-1, 2}, {-4, 0.5f}, {-4, 2}};
    tp_set_calib_table(m, names, ranges, 4);
    tp_run(m, "insert-qdq");
    float s;
    int zp;
    int32_t dt;
    ref_u8(-4, 2, &s, &zp);
    for (int i = 0; i < 3; i++) {
        const char *t = (const char *[]){"a", "b", "c"}[i];
        char sn[32], zn[32];
        snprintf(sn, sizeof sn, "%s_scale", t);
        snprintf(zn, sizeof zn, "%s_zero_point", t);
        cr_assert_float_eq(scalar_f(m, sn), s, 1e-7f, "%s", t);
        cr_assert_eq(zp_of(m, zn, &dt), zp, "%s", t);
    }
    oq_model_free(m);
}

Test(insert_qdq, conv_transpose_axis_1_gemm_transb)
{
    oq_model *m = tp_model(13);
    int64_t xd[4] = {1, 2, 2, 2};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 4);
    float w[2 * 3 * 2 * 2];
    for (int i = 0; i < 24; i++)
        w[i] = (float)(i % 5) - 2.0f + (float)(i / 4 % 3);
    int64_t wd[4] = {2, 3, 2, 2};
    tp_init_f(m, "wt", wd, 4, w);
    tp_node(m, "ConvTranspose", "ct", "x,wt", "y");
    int64_t shp[2] = {1, 48}, sd[1] = {2};
    tp_init(m, "shape", OQ_DTYPE_INT64, sd, 1, shp);
    tp_node(m, "Reshape", "r", "y,shape", "yf");
    float wg[4 * 48];
    for (int i = 0; i < 192; i++)
        wg[i] = (float)((i * 3) % 7) * 0.1f;
    int64_t gd[2] = {4, 48};
    tp_init_f(m, "wg", gd, 2, wg);
    oq_node *g = tp_node(m, "Gemm", "gemm", "yf,wg", "z");
    oq_node_set_attr_int(g, "transB", 1);
    tp_output(m, "z");
    static const char *const names[] = {"x", "y", "yf", "z"};
    static const float ranges[][2] = {{-1, 1}, {-5, 5}, {-5, 5}, {-2, 2}};
    tp_set_calib_table(m, names, ranges, 4);
    tp_run(m, "insert-qdq");
    cr_assert_eq(oq_node_attr_int(tu_find_node(m, "wt_DequantizeLinear"), "axis", -99), 1);
    cr_assert_eq(oq_value_const_tensor(find(m, "wt_scale"))->dims[0], 3);
    cr_assert_eq(oq_node_attr_int(tu_find_node(m, "wg_DequantizeLinear"), "axis", -99), 0);
    cr_assert_eq(oq_value_const_tensor(find(m, "wg_scale"))->dims[0], 4);
    oq_model_free(m);
}

/* ------------------------------------------------------------ dtypes and options */

Test(insert_qdq, int16_activations_int4_weights_opset21)
{
    oq_model *m = cnn(21);
    tp_run(m, "insert-qdq{act-dtype=int16,act-symmetric=true,weight-dtype=int4}");
    int32_t dt;
    cr_assert_eq(zp_of(m, "r1_zero_point", &dt), 0);
    cr_assert_eq(dt, OQ_DTYPE_INT16);
    cr_assert_float_eq(scalar_f(m, "r1_scale"), 4.0f / 32767.0f, 1e-9f);
    oq_tensor *wq = oq_value_const_tensor(find(m, "w1_quantized"));
    cr_assert_eq(wq->dtype, OQ_DTYPE_INT4);
    const float *s = tp_floats(find(m, "w1_scale"));
    cr_assert_float_eq(s[2], 1.5f / 7.0f, 1e-7f);
    for (int i = 0; i < 54; i++) {
        int32_t q = oq_unpack_int(OQ_DTYPE_INT4, oq_tensor_data(wq, NULL), i);
        cr_assert(q >= -7 && q <= 7, "symmetric int4 weight %d out of [-7,7]", (int)q);
    }
    oq_model_free(m);
}

Test(insert_qdq, uint16_activations)
{
    oq_model *m = cnn(21);
    tp_run(m, "insert-qdq{act-dtype=uint16}");
    int32_t dt;
    int32_t zp = zp_of(m, "g_zero_point", &dt);
    cr_assert_eq(dt, OQ_DTYPE_UINT16);
    float s = 15.0f / 65535.0f;
    cr_assert_float_eq(scalar_f(m, "g_scale"), s, 1e-9f);
    cr_assert_eq(zp, (int32_t)lrintf(6.0f / s));
    oq_model_free(m);
}

Test(insert_qdq, sixteen_bit_needs_opset21)
{
    oq_model *m = cnn(13);
    char msg[512];
    cr_assert_eq(tp_run_fail(m, "insert-qdq{act-dtype=int16}", msg, sizeof msg), OQ_ERR_UNSUPPORTED);
    cr_assert(strstr(msg, "opset 21"), "%s", msg);
    oq_model_free(m);
}

Test(insert_qdq, blocked_weights)
{
    oq_model *m = cnn(21);
    tp_run(m, "insert-qdq{weight-block-size=4}");
    /* Gemm w2 [12, 5], transB=0: blocks along axis 0 (the reduction axis) */
    oq_node *dq = tu_find_node(m, "w2_DequantizeLinear");
    cr_assert_eq(oq_node_attr_int(dq, "block_size", 0), 4);
    cr_assert_eq(oq_node_attr_int(dq, "axis", -99), 0);
    oq_tensor *s = oq_value_const_tensor(find(m, "w2_scale"));
    cr_assert_eq(s->rank, 2);
    cr_assert_eq(s->dims[0], 3);
    cr_assert_eq(s->dims[1], 5);
    /* Conv w1 [3, 2, 3, 3]: along axis 1, ceil(2 / 4) = 1 block */
    oq_tensor *s1 = oq_value_const_tensor(find(m, "w1_scale"));
    cr_assert_eq(s1->rank, 4);
    cr_assert_eq(s1->dims[0], 3);
    cr_assert_eq(s1->dims[1], 1);
    oq_model_free(m);
}

Test(insert_qdq, reduce_range_and_per_tensor)
{
    oq_model *m = cnn(13);
    tp_run(m, "insert-qdq{reduce-range=true,per-channel=false}");
    oq_tensor *s = oq_value_const_tensor(find(m, "w1_scale"));
    cr_assert_eq(s->rank, 0);
    cr_assert_float_eq(((const float *)oq_tensor_data(s, NULL))[0], 1.5f / 63.0f, 1e-7f);
    const int8_t *q = oq_tensor_data(oq_value_const_tensor(find(m, "w1_quantized")), NULL);
    for (int i = 0; i < 54; i++)
        cr_assert(q[i] >= -64 && q[i] <= 63);
    /* reduce-range is onnxruntime's: 7-bit weights only, activations keep 8 bits */
    float sr = scalar_f(m, "r1_scale");
    cr_assert_float_eq(sr, 4.0f / 255.0f, 1e-7f);
    cr_assert_null(oq_node_attr(tu_find_node(m, "w1_DequantizeLinear"), "axis"));
    oq_model_free(m);
}

Test(insert_qdq, asymmetric_uint8_weights_symmetric_activations)
{
    oq_model *m = cnn(13);
    tp_run(m, "insert-qdq{weight-dtype=uint8,weight-symmetric=false,act-symmetric=true}");
    int32_t dt;
    /* symmetric uint8: zero point 128, scale max|x| / 127 */
    cr_assert_eq(zp_of(m, "g_zero_point", &dt), 128);
    cr_assert_float_eq(scalar_f(m, "g_scale"), 9.0f / 127.0f, 1e-7f);
    oq_tensor *z = oq_value_const_tensor(find(m, "w1_zero_point"));
    cr_assert_eq(z->dtype, OQ_DTYPE_UINT8);
    oq_model_free(m);
}

/* x -> Conv(wa) -> a -> Conv(wb) -> b; Add(a, b) -> s -> Resize(nearest, x2) -> r
 *   -> ConvTranspose(wt, stride 2) -> t -> Conv(wc) -> y; and Add(t, 1.0) -> u (a constant
 * operand). Ranges are hand-picked. */
static oq_model *residual(void)
{
    oq_model *m = tp_model(13);
    int64_t xd[4] = {1, 2, 4, 4}, wd[4] = {2, 2, 1, 1}, td[4] = {2, 2, 2, 2};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 4);
    float wa[4] = {0.5f, -0.25f, 0.75f, 1.0f}, wb[4] = {-1.0f, 0.5f, 0.25f, 0.5f}, wc[4] = {1, 2, -1, 0.5f};
    float wt[16];
    for (int i = 0; i < 16; i++)
        wt[i] = (float)(i % 5 - 2) * 0.25f;
    tp_init_f(m, "wa", wd, 4, wa);
    tp_init_f(m, "wb", wd, 4, wb);
    tp_init_f(m, "wc", wd, 4, wc);
    tp_init_f(m, "wt", td, 4, wt);
    int64_t sd[1] = {4}, one[1] = {1};
    float sc[4] = {1, 1, 2, 2}, c1[1] = {1.0f};
    tp_init_f(m, "scales", sd, 1, sc);
    tp_init_f(m, "one", one, 1, c1);
    tp_node(m, "Conv", "conv_a", "x,wa", "a");
    tp_node(m, "Conv", "conv_b", "a,wb", "b");
    tp_node(m, "Add", "add", "a,b", "s");
    tp_node(m, "Resize", "up", "s,,scales", "r");
    oq_node *ct = tp_node(m, "ConvTranspose", "deconv", "r,wt", "t");
    int64_t st[2] = {2, 2};
    oq_node_set_attr_ints(ct, "strides", st, 2);
    tp_node(m, "Conv", "conv_c", "t,wc", "y");
    tp_node(m, "Add", "add_const", "t,one", "u");
    tp_output(m, "y");
    tp_output(m, "u");
    static const char *const names[] = {"x", "a", "b", "s", "r", "t", "y", "u"};
    static const float ranges[][2] = {{-1, 1}, {-2, 2}, {-3, 1}, {-4, 2}, {-4, 2}, {-5, 5}, {-8, 8}, {-4, 6}};
    tp_set_calib_table(m, names, ranges, 8);
    return m;
}

Test(insert_qdq, ort_cpu_placement)
{
    oq_model *m = residual();
    /* placement by value (by-value=true, the default) drops s's pair: the Resize after it
     * runs in float (tests/test_placement.c); here the marking rules alone */
    tp_run(m, "insert-qdq{placement=ort-cpu,op-types=\"Conv,Gemm,MatMul\",weight-dtype=uint8,by-value=false}");
    /* both inputs of the residual Add are quantized, so its output is too: onnxruntime
     * turns DQ, DQ -> Add -> Q into QLinearAdd */
    assert_qdq_pair(m, "s");
    float sc;
    int zp, z;
    int32_t dt;
    ref_u8(-4, 2, &sc, &zp);
    cr_assert_float_eq(scalar_f(m, "s_scale"), sc, 1e-7f);
    cr_assert_eq(zp_of(m, "s_zero_point", &dt), zp);
    /* Resize keeps float: no Q/DQ on its output (the plain rules would link it to s) */
    cr_assert_null(tu_find_node(m, "r_QuantizeLinear"));
    /* no integer ConvTranspose in onnxruntime's CPU provider: its weight stays float */
    oq_node *ct = tu_find_node(m, "deconv");
    cr_assert_eq(ct->inputs[1]->kind, OQ_VALUE_INITIALIZER);
    cr_assert_str_eq(ct->inputs[1]->name, "wt");
    /* the ConvTranspose output feeds a Conv: quantized there, with its own range */
    assert_qdq_pair(m, "t");
    ref_u8(-5, 5, &sc, &z);
    cr_assert_float_eq(scalar_f(m, "t_scale"), sc, 1e-7f);
    /* an Add with a constant operand is left in float */
    cr_assert_null(tu_find_node(m, "u_QuantizeLinear"));
    /* uint8 symmetric weights: zero point 128, scale max|w| / 127 */
    cr_assert_eq(zp_of(m, "wa_zero_point", &dt), 128);
    cr_assert_eq(dt, OQ_DTYPE_UINT8);
    oq_model_free(m);

    /* by value: no integer kernel reads s (Resize and ConvTranspose run in float) */
    m = residual();
    tp_run(m, "insert-qdq{placement=ort-cpu,op-types=\"Conv,Gemm,MatMul\",weight-dtype=uint8}");
    cr_assert_null(tu_find_node(m, "s_QuantizeLinear"));
    assert_qdq_pair(m, "t");
    oq_model_free(m);

    /* the plain rules on the same graph: the Add is not touched, Resize's output shares
     * its input's parameters when the input is quantized (here it is not) */
    m = residual();
    tp_run(m, "insert-qdq{op-types=\"Conv,ConvTranspose,Gemm,MatMul\"}");
    cr_assert_null(tu_find_node(m, "s_QuantizeLinear"));
    assert_qdq_pair(m, "r"); /* ConvTranspose input */
    cr_assert_neq(tu_find_node(m, "deconv")->inputs[1]->kind, OQ_VALUE_INITIALIZER);
    oq_model_free(m);
}

Test(insert_qdq, unknown_placement_refused)
{
    oq_model *m = residual();
    char msg[512];
    cr_assert_eq(tp_run_fail(m, "insert-qdq{placement=tensorrt}", msg, sizeof msg), OQ_ERR_USAGE);
    cr_assert(strstr(msg, "placement"), "%s", msg);
    oq_model_free(m);
}

/* x[1,2] -> MatMul(W[2,2]) -> y, W columns (1.27, 1.00) same sign and (1.27, -1.00) */
static oq_model *pair_model(void)
{
    oq_model *m = tp_model(13);
    int64_t xd[2] = {1, 2}, wd[2] = {2, 2};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 2);
    float w[4] = {1.27f, 1.27f, 1.00f, -1.00f}; /* row-major [K=2, N=2] */
    tp_init_f(m, "W", wd, 2, w);
    tp_node(m, "MatMul", "mm", "x,W", "y");
    tp_output(m, "y");
    static const char *const names[] = {"x", "y"};
    static const float ranges[][2] = {{0, 1}, {-3, 3}};
    tp_set_calib_table(m, names, ranges, 2);
    return m;
}

Test(insert_qdq, pair_limit_keeps_u8s8_pairs_within_int16)
{
    /* without the limit: scale max|w| / 127 per column, the same-sign column's pair is
     * 127 + 100 = 227 steps: x = 255 in both rows gives 255 * 227 > 32767 in vpmaddubsw */
    oq_model *m = pair_model();
    tp_run(m, "insert-qdq{weight-dtype=int8}");
    const float *sc = tp_floats(find(m, "W_scale"));
    const int8_t *q = oq_tensor_data(oq_value_const_tensor(find(m, "W_quantized")), NULL);
    cr_assert_float_eq(sc[0], 1.27f / 127.0f, 1e-8f);
    cr_assert_eq(q[0], 127);
    cr_assert_eq(q[2], 100);
    oq_model_free(m);

    m = pair_model();
    oq_pass_result r = tp_run(m, "insert-qdq{weight-dtype=int8,pair-limit=true}");
    sc = tp_floats(find(m, "W_scale"));
    q = oq_tensor_data(oq_value_const_tensor(find(m, "W_quantized")), NULL);
    /* column 0: scale raised to (1.27 + 1.00) / 128, q = round(71.6), round(56.4) */
    cr_assert_float_eq(sc[0], (1.27f + 1.00f) / 128.0f, 1e-7f);
    cr_assert_eq(q[0], 72);
    cr_assert_eq(q[2], 56);
    cr_assert_leq(q[0] + q[2], 128);
    /* column 1 has opposite signs: its pair cannot saturate, its scale stays */
    cr_assert_float_eq(sc[1], 1.27f / 127.0f, 1e-8f);
    cr_assert_eq(q[1], 127);
    cr_assert_eq(q[3], -100);
    cr_assert_eq(tp_stat(&r, "pair_limit_channels_raised"), 1);
    oq_model_free(m);
}

/* One pair two steps over the limit in a column of 64 weights that are exact multiples of
 * the scale (the others 10 to 126 steps, spread): clipping that pair onto |a| + |b| = 128
 * costs 2 steps^2 (127, 3 -> 126, 2); each larger candidate scale costs more (computed
 * independently in numpy: 2.09, 2.87, 4.33, ... 5.12 steps^2 for the 16 candidates up to
 * the scale at which the pair fits, which puts the other weights off their grid), so the
 * scale stays max|w| / 127. */
Test(insert_qdq, pair_limit_clips_a_pair_when_that_costs_less_than_a_bigger_scale)
{
    oq_model *m = tp_model(13);
    int64_t xd[2] = {1, 64}, wd[2] = {64, 1};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 2);
    float w[64];
    w[0] = 1.27f;
    w[1] = 0.03f;
    for (int k = 2; k < 64; k++) /* opposite signs within each pair (2j, 2j+1) */
        w[k] = (float)((k % 2 ? -1 : 1) * ((37 * k * k + 11 * k) % 117 + 10)) * 0.01f;
    tp_init_f(m, "W", wd, 2, w);
    tp_node(m, "MatMul", "mm", "x,W", "y");
    tp_output(m, "y");
    static const char *const names[] = {"x", "y"};
    static const float ranges[][2] = {{0, 1}, {-3, 3}};
    tp_set_calib_table(m, names, ranges, 2);
    oq_pass_result r = tp_run(m, "insert-qdq{weight-dtype=int8,pair-limit=true}");
    const float *sc = tp_floats(find(m, "W_scale"));
    const int8_t *q = oq_tensor_data(oq_value_const_tensor(find(m, "W_quantized")), NULL);
    cr_assert_float_eq(sc[0], 1.27f / 127.0f, 1e-9f, "scale %.9g", (double)sc[0]);
    cr_assert_eq(q[0], 126);
    cr_assert_eq(q[1], 2);
    for (int k = 2; k < 64; k++)
        cr_assert_eq(q[k], (k % 2 ? -1 : 1) * ((37 * k * k + 11 * k) % 117 + 10), "q[%d] = %d", k, q[k]);
    cr_assert_eq(tp_stat(&r, "pair_limit_channels_raised"), 0);
    cr_assert_eq(tp_stat(&r, "pair_limit_steps_removed"), 1);
    oq_model_free(m);
}

/* x [1, 2, 4, 4] -> Conv dw (group 2, W [2, 1, 3, 3]) -> d -> Conv pw (W [3, 2, 1, 1]) -> y */
static oq_model *dw_model(void)
{
    oq_model *m = tp_model(13);
    int64_t xd[4] = {1, 2, 4, 4};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 4);
    float wdw[18], wpw[6] = {0.5f, -0.25f, 0.125f, 1.0f, -1.0f, 0.75f};
    for (int i = 0; i < 18; i++)
        wdw[i] = (float)(i % 7 - 3) * 0.1f;
    int64_t dwd[4] = {2, 1, 3, 3}, pwd[4] = {3, 2, 1, 1};
    tp_init_f(m, "wdw", dwd, 4, wdw);
    tp_init_f(m, "wpw", pwd, 4, wpw);
    oq_node *dw = tp_node(m, "Conv", "dw", "x,wdw", "d");
    oq_node_set_attr_int(dw, "group", 2);
    int64_t pads[4] = {1, 1, 1, 1};
    oq_node_set_attr_ints(dw, "pads", pads, 4);
    tp_node(m, "Conv", "pw", "d,wpw", "y");
    tp_output(m, "y");
    static const char *const names[] = {"x", "d", "y"};
    static const float ranges[][2] = {{0, 1}, {-2, 2}, {-3, 3}};
    tp_set_calib_table(m, names, ranges, 3);
    return m;
}

Test(insert_qdq, depthwise_false_leaves_depthwise_convs_in_float)
{
    oq_model *m = dw_model();
    tp_run(m, "insert-qdq");
    cr_assert(find(m, "wdw_quantized") && find(m, "wpw_quantized"), "both convs quantized by default");
    oq_model_free(m);

    m = dw_model();
    tp_run(m, "insert-qdq{depthwise=false}");
    cr_assert_null(find(m, "wdw_quantized"));
    cr_assert(find(m, "wdw")->initializer, "the depthwise weight stays float");
    cr_assert(find(m, "wpw_quantized"));
    /* the depthwise Conv reads x as it came: no Q/DQ on x (nothing quantized reads it) */
    oq_node *dw = NULL;
    for (oq_node *n = m->graph->first; n; n = n->next)
        if (n->name && strcmp(n->name, "dw") == 0)
            dw = n;
    cr_assert(dw);
    cr_assert_str_eq(dw->inputs[0]->name, "x");
    oq_model_free(m);
}

/* x -> Conv pw0 -> a -> Conv dw -> d -> Relu -> r -> Conv pw -> y: with depthwise=false the
 * depthwise Conv sits between a DequantizeLinear (a is quantized for pw0's group) and a
 * QuantizeLinear (r is quantized for pw), which onnxruntime's WeightBiasQuantization would
 * turn into a per-tensor int8 Conv; placement=ort-cpu quantizes it per channel instead, the
 * plain rules leave it float */
static oq_model *dw_between_model(void)
{
    oq_model *m = tp_model(13);
    int64_t xd[4] = {1, 2, 4, 4};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 4);
    float wdw[18], wpw[6] = {0.5f, -0.25f, 0.125f, 1.0f, -1.0f, 0.75f}, wp0[4] = {1.0f, 0.5f, -0.5f, 0.25f};
    for (int i = 0; i < 18; i++)
        wdw[i] = (float)(i % 7 - 3) * 0.1f;
    int64_t dwd[4] = {2, 1, 3, 3}, pwd[4] = {3, 2, 1, 1}, p0d[4] = {2, 2, 1, 1};
    tp_init_f(m, "wdw", dwd, 4, wdw);
    tp_init_f(m, "wpw", pwd, 4, wpw);
    tp_init_f(m, "wp0", p0d, 4, wp0);
    tp_node(m, "Conv", "pw0", "x,wp0", "a");
    oq_node *dw = tp_node(m, "Conv", "dw", "a,wdw", "d");
    oq_node_set_attr_int(dw, "group", 2);
    int64_t pads[4] = {1, 1, 1, 1};
    oq_node_set_attr_ints(dw, "pads", pads, 4);
    tp_node(m, "Relu", "relu", "d", "r");
    tp_node(m, "Conv", "pw", "r,wpw", "y");
    tp_output(m, "y");
    static const char *const names[] = {"x", "a", "d", "r", "y"};
    static const float ranges[][2] = {{0, 1}, {-2, 2}, {-2, 2}, {0, 2}, {-3, 3}};
    tp_set_calib_table(m, names, ranges, 5);
    return m;
}

Test(insert_qdq, depthwise_false_quantizes_what_onnxruntime_would)
{
    oq_model *m = dw_between_model();
    oq_pass_result r = tp_run(m, "insert-qdq{depthwise=false,placement=ort-cpu}");
    cr_assert(find(m, "wdw_quantized"), "the depthwise Conv between a DQ and a Q is quantized");
    const oq_tensor *sc = oq_value_const_tensor(find(m, "wdw_scale"));
    cr_assert(sc && oq_tensor_numel(sc) == 2, "per channel");
    cr_assert_eq(tp_stat(&r, "depthwise_quantized_for_ort"), 1);
    oq_model_free(m);

    m = dw_between_model();
    r = tp_run(m, "insert-qdq{depthwise=false}");
    cr_assert_null(find(m, "wdw_quantized"), "the plain rules leave it float");
    cr_assert_eq(tp_stat(&r, "depthwise_quantized_for_ort"), 0);
    oq_model_free(m);

    /* excluded by name: left float as asked, with a warning naming it (onnxruntime would
     * quantize it per tensor) */
    m = dw_between_model();
    oq_diag d;
    r = (oq_pass_result){0};
    cr_assert_eq(tp_run_diag(m, "insert-qdq{placement=ort-cpu,exclude-nodes=\"^dw$\"}", &r, &d), OQ_OK);
    cr_assert_null(find(m, "wdw_quantized"));
    cr_assert_eq(tp_stat(&r, "float_between_qdq"), 1);
    bool warned = false;
    for (size_t i = 0; i < d.count; i++)
        warned |= d.entries[i].severity == OQ_SEV_WARNING && d.entries[i].node && !strcmp(d.entries[i].node, "dw") &&
                   strstr(d.entries[i].message, "WeightBiasQuantization") != NULL;
    cr_assert(warned, "a warning names dw");
    oq_diag_free(&d);
    oq_model_free(m);

    /* first in the graph: its input is not quantized, onnxruntime leaves it float too */
    m = dw_model();
    r = tp_run(m, "insert-qdq{depthwise=false,placement=ort-cpu}");
    cr_assert_null(find(m, "wdw_quantized"));
    cr_assert_eq(tp_stat(&r, "depthwise_quantized_for_ort"), 0);
    oq_model_free(m);
}

Test(insert_qdq, selection_regex_and_op_types)
{
    oq_model *m = cnn(13);
    tp_run(m, "insert-qdq{exclude-nodes=\"^fc$\"}");
    cr_assert(find(m, "w1_quantized"));
    cr_assert_null(find(m, "w2_quantized"));
    cr_assert(find(m, "w2")->initializer);
    oq_model_free(m);
    m = cnn(13);
    tp_run(m, "insert-qdq{include-nodes=\"f.\"}");
    cr_assert_null(find(m, "w1_quantized"));
    cr_assert(find(m, "w2_quantized"));
    oq_model_free(m);
    m = cnn(13);
    tp_run(m, "insert-qdq{op-types=Gemm}");
    cr_assert_null(find(m, "w1_quantized"));
    cr_assert(find(m, "w2_quantized"));
    oq_model_free(m);
    m = cnn(13);
    char msg[512];
    cr_assert_eq(tp_run_fail(m, "insert-qdq{include-nodes=\"(\"}", msg, sizeof msg), OQ_ERR_USAGE);
    oq_model_free(m);
}

Test(insert_qdq, overrides_file)
{
    char *dir = tu_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/over.json", dir);
    const char *j = "{\"g\": {\"scale\": 0.25, \"zero_point\": 17},\n"
                    " \"r1\": {\"min\": 0, \"max\": 8},\n"
                    " \"x\": {\"scale\": 0.5, \"zero_point\": -3, \"dtype\": \"int8\"}}";
    cr_assert_eq(tu_write_file(path, j, strlen(j)), 0);
    oq_model *m = cnn(13);
    char pl[700];
    snprintf(pl, sizeof pl, "insert-qdq{overrides=\"%s\"}", path);
    tp_run(m, pl);
    int32_t dt;
    cr_assert_eq(scalar_f(m, "g_scale"), 0.25f);
    cr_assert_eq(zp_of(m, "g_zero_point", &dt), 17);
    cr_assert_float_eq(scalar_f(m, "r1_scale"), 8.0f / 255.0f, 1e-7f);
    cr_assert_eq(zp_of(m, "x_zero_point", &dt), -3);
    cr_assert_eq(dt, OQ_DTYPE_INT8);
    /* p1 follows r1 (MaxPool reuses its input's parameters) */
    cr_assert_eq(scalar_f(m, "p1_scale"), scalar_f(m, "r1_scale"));
    oq_model_free(m);
    free(dir);
}

Test(insert_qdq, no_table_is_an_error_naming_the_tensor)
{
    oq_model *m = cnn(13);
    m->metadata.count = 0;
    char msg[512];
    cr_assert_eq(tp_run_fail(m, "insert-qdq", msg, sizeof msg), OQ_ERR_USAGE);
    cr_assert(strstr(msg, "calibrate"), "%s", msg);
    oq_model_free(m);
}

Test(insert_qdq, constant_zero_tensor_gets_a_valid_scale)
{
    oq_model *m = cnn(13);
    static const char *const names[] = {"x", "c1", "r1", "p1", "f", "g", "probs"};
    static const float ranges[][2] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}};
    tp_set_calib_table(m, names, ranges, 7);
    tp_run(m, "insert-qdq");
    float s = scalar_f(m, "r1_scale");
    cr_assert(isfinite(s) && s > 0, "scale %g", (double)s);
    oq_model_free(m);
}

Test(insert_qdq, opset_below_13_refused)
{
    oq_model *m = cnn(11);
    char msg[512];
    cr_assert_eq(tp_run_fail(m, "insert-qdq", msg, sizeof msg), OQ_ERR_UNSUPPORTED);
    cr_assert(strstr(msg, "upgrade-opset"), "%s", msg);
    oq_model_free(m);
}

/* ------------------------------------------------------------ calibration */

/* x [1, n] -> Relu -> y; samples written as a flat folder of .npy files */
static oq_model *relu_model(int64_t n)
{
    oq_model *m = tp_model(13);
    int64_t xd[2] = {1, n};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 2);
    tp_node(m, "Neg", "neg", "x", "nx");
    tp_node(m, "Relu", "relu", "nx", "y");
    tp_output(m, "y");
    return m;
}

static uint64_t rng = 88172645463325252ull;
static double uni(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}

static void write_samples(const char *dir, int n_samples, int64_t n, float (*gen)(int64_t, int), float poison)
{
    mkdir(dir, 0755);
    float *buf = malloc((size_t)n * sizeof(float));
    for (int s = 0; s < n_samples; s++) {
        for (int64_t i = 0; i < n; i++)
            buf[i] = gen(i, s);
        if (s == 1 && poison != 0)
            buf[7] = poison;
        oq_rt_tensor t;
        int64_t dims[2] = {1, n};
        oq_rt_tensor_borrow(&t, OQ_DTYPE_FLOAT, dims, 2, buf);
        char p[600];
        snprintf(p, sizeof p, "%s/s%02d.npy", dir, s);
        oq_diag d;
        oq_diag_init(&d);
        cr_assert_eq(oq_tensor_file_write_npy(p, &t, &d), OQ_OK);
        oq_diag_free(&d);
    }
    free(buf);
}

/* x = -(k / n) for sample s: the negation is k / n in [0, 1) plus, in sample 0, one
 * outlier at 50 */
static float gen_ramp(int64_t i, int s)
{
    if (s == 0 && i == 0)
        return -50.0f;
    return -(float)i / 4096.0f;
}

static float gen_laplace(int64_t i, int s)
{
    (void)i;
    (void)s;
    double u = uni() - 0.5;
    double v = -(u < 0 ? -1.0 : 1.0) * log(1.0 - 2.0 * fabs(u)); /* Laplace(b = 1) */
    return (float)v;
}

static oq_calib_entry calib_one_n(const char *dir, oq_model *m, const char *method, const char *extra,
                                  const char *tensor, uint64_t samples)
{
    char pl[1024];
    snprintf(pl, sizeof pl, "calibrate{data=\"%s\",method=%s%s,threads=1}", dir, method, extra);
    tp_run(m, pl);
    const char *j = NULL;
    for (size_t i = 0; i < m->metadata.count; i++)
        if (strcmp(m->metadata.items[i].key, OQ_CALIB_METADATA_KEY) == 0)
            j = m->metadata.items[i].value;
    cr_assert(j, "no table in metadata");
    oq_calib_table t;
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_calib_table_from_json(j, &t, &d), OQ_OK);
    const oq_calib_entry *e = oq_calib_table_find(&t, tensor);
    cr_assert(e, "no entry for %s", tensor);
    oq_calib_entry r = *e;
    r.name = NULL;
    cr_assert_eq(t.samples, samples);
    oq_calib_table_free(&t);
    oq_diag_free(&d);
    return r;
}

static oq_calib_entry calib_one(const char *dir, oq_model *m, const char *method, const char *extra,
                                const char *tensor)
{
    return calib_one_n(dir, m, method, extra, tensor, 4);
}

Test(calibrate, minmax_and_percentile_on_a_ramp_with_an_outlier)
{
    char *dir = tu_tmpdir();
    char sd[512];
    snprintf(sd, sizeof sd, "%s/ramp", dir);
    write_samples(sd, 4, 4096, gen_ramp, 0);
    oq_model *m = relu_model(4096);
    oq_calib_entry e = calib_one(sd, m, "minmax", "", "y");
    cr_assert_eq(e.min, 0.0f);
    cr_assert_eq(e.max, 50.0f);
    cr_assert_eq(e.hi, 50.0f);
    cr_assert_eq(e.lo, 0.0f);
    oq_model_free(m);
    /* the outlier is 1 value in 16384: the 99.9th percentile is near 4095/4096 */
    m = relu_model(4096);
    e = calib_one(sd, m, "percentile", ",percentile=99.9", "y");
    cr_assert_eq(e.max, 50.0f);
    /* tolerance: one bin of the 2048-bin histogram over [0, 50] (0.0244) */
    cr_assert(e.hi > 0.99f && e.hi < 1.0f + 50.0f / 2048.0f, "percentile hi %g", (double)e.hi);
    /* the graph input holds -ramp: two-sided percentile gives the low side */
    oq_model_free(m);
    m = relu_model(4096);
    e = calib_one(sd, m, "percentile", ",percentile=99.9", "x");
    cr_assert(e.lo < -0.99f && e.lo > -1.0f - 50.0f / 2048.0f, "percentile lo %g", (double)e.lo);
    cr_assert_eq(e.min, -50.0f);
    oq_model_free(m);
    free(dir);
}

Test(calibrate, mse_and_entropy_clip_laplace_tails)
{
    char *dir = tu_tmpdir();
    char sd[512];
    snprintf(sd, sizeof sd, "%s/lap", dir);
    rng = 88172645463325252ull;
    write_samples(sd, 4, 1 << 16, gen_laplace, 0);
    /* mse, symmetric int8 on the input x (Laplace b = 1): ACIQ optimum 9.89 b for 8 bits */
    oq_model *m = relu_model(1 << 16);
    oq_calib_entry e = calib_one(sd, m, "mse", ",dtype=int8,symmetric=true", "x");
    double T = fmax(fabs((double)e.lo), fabs((double)e.hi));
    cr_assert(T > 9.89 * 0.85 && T < 9.89 * 1.15, "mse threshold %g, ACIQ 9.89", T);
    cr_assert(T < fmax(-(double)e.min, (double)e.max), "mse did not clip");
    oq_model_free(m);
    /* entropy: a real search, clipping well inside the extremes (max |x| ~ 12.5 for
     * 262144 samples) but keeping the bulk */
    m = relu_model(1 << 16);
    e = calib_one(sd, m, "entropy", ",dtype=int8,symmetric=true", "x");
    T = fmax(fabs((double)e.lo), fabs((double)e.hi));
    double mx = fmax(-(double)e.min, (double)e.max);
    cr_assert(T < 0.95 * mx && T > 4.0, "entropy threshold %g of max %g", T, mx);
    oq_model_free(m);
    free(dir);
}

Test(calibrate, nan_stops_with_tensor_node_and_sample)
{
    char *dir = tu_tmpdir();
    char sd[512];
    snprintf(sd, sizeof sd, "%s/nan", dir);
    write_samples(sd, 4, 64, gen_ramp, NAN);
    oq_model *m = relu_model(64);
    char pl[700], msg[1024];
    snprintf(pl, sizeof pl, "calibrate{data=\"%s\",method=minmax}", sd);
    cr_assert_eq(tp_run_fail(m, pl, msg, sizeof msg), OQ_ERR_NUMERIC);
    cr_assert(strstr(msg, "\"x\""), "%s", msg);
    cr_assert(strstr(msg, "s01.npy"), "%s", msg);
    cr_assert(strstr(msg, "NaN"), "%s", msg);
    oq_model_free(m);
    /* ignore: excluded and counted (x: 1 NaN, its negation nx: 1 NaN; Relu(NaN) = NaN) */
    m = relu_model(64);
    snprintf(pl, sizeof pl, "calibrate{data=\"%s\",method=minmax,nan-policy=ignore}", sd);
    oq_pass_result r = tp_run(m, pl);
    cr_assert_geq(tp_stat(&r, "nan_excluded"), 2);
    oq_model_free(m);
    /* Inf names the node that produced it */
    snprintf(sd, sizeof sd, "%s/inf", dir);
    write_samples(sd, 4, 64, gen_ramp, -INFINITY);
    m = relu_model(64);
    snprintf(pl, sizeof pl, "calibrate{data=\"%s\",method=minmax}", sd);
    cr_assert_eq(tp_run_fail(m, pl, msg, sizeof msg), OQ_ERR_NUMERIC);
    cr_assert(strstr(msg, "Inf"), "%s", msg);
    oq_model_free(m);
    free(dir);
}

Test(calibrate, random_source_and_sample_limit)
{
    oq_model *m = relu_model(256);
    oq_pass_result r = tp_run(m, "calibrate{random=3,method=minmax}");
    cr_assert_eq(tp_stat(&r, "samples"), 3);
    oq_model_free(m);
    char *dir = tu_tmpdir();
    char sd[512];
    snprintf(sd, sizeof sd, "%s/lim", dir);
    write_samples(sd, 4, 16, gen_ramp, 0);
    m = relu_model(16);
    char pl[700];
    snprintf(pl, sizeof pl, "calibrate{data=\"%s\",max-samples=2}", sd);
    r = tp_run(m, pl);
    cr_assert_eq(tp_stat(&r, "samples"), 2);
    oq_model_free(m);
    free(dir);
}

/* the ramp of gen_ramp without its outlier, and one at -80 in sample 3 (held out) */
static float gen_ramp_held_outlier(int64_t i, int s)
{
    if (s == 3 && i == 5)
        return -80.0f;
    return -(float)i / 4096.0f;
}

static const char *meta_of(const oq_model *m, const char *key)
{
    for (size_t i = 0; i < m->metadata.count; i++)
        if (strcmp(m->metadata.items[i].key, key) == 0)
            return m->metadata.items[i].value;
    return NULL;
}

static oq_calib_entry table_entry(const char *json, const char *tensor)
{
    cr_assert(json, "no table");
    oq_calib_table t;
    cr_assert_eq(oq_calib_table_from_json(json, &t, NULL), OQ_OK);
    const oq_calib_entry *e = oq_calib_table_find(&t, tensor);
    cr_assert(e, "no entry for %s", tensor);
    oq_calib_entry r = *e;
    r.name = NULL;
    r.first_nonfinite = NULL;
    oq_calib_table_free(&t);
    return r;
}

/* method=select keeps each candidate's ranges twice: from the samples not held out (the
 * fit share: samples 0, 1, 2, 4, 5, 6 of 8) and from all of them. The held-out outlier
 * (-80 in sample 3) is in every "all" table's min/max and in the fit share's nowhere; the
 * percentile tables equal plain calibration on a folder of just those samples. */
Test(calibrate, select_keeps_fit_and_all_tables_per_candidate)
{
    char *dir = tu_tmpdir();
    char sd[512], fd[512];
    snprintf(sd, sizeof sd, "%s/all", dir);
    snprintf(fd, sizeof fd, "%s/fit", dir);
    write_samples(sd, 8, 4096, gen_ramp_held_outlier, 0);
    mkdir(fd, 0755);
    for (int k = 0; k < 8; k++) {
        if (k % 4 == 3)
            continue;
        char a[600], b[600];
        snprintf(a, sizeof a, "%s/s%02d.npy", sd, k);
        snprintf(b, sizeof b, "%s/s%02d.npy", fd, k);
        cr_assert_eq(symlink(a, b), 0);
    }
    oq_model *m = relu_model(4096);
    char pl[1200];
    snprintf(pl, sizeof pl, "calibrate{data=\"%s\",method=select,candidates=\"p99.9,minmax,mse\",threads=1}", sd);
    tp_run(m, pl);
    cr_assert_str_eq(meta_of(m, OQ_CALIB_SELECT_KEY), "p99.9,minmax,mse");
    oq_calib_entry all_mm = table_entry(meta_of(m, OQ_CALIB_SELECT_ALL_PREFIX "minmax"), "x");
    oq_calib_entry fit_mm = table_entry(meta_of(m, OQ_CALIB_SELECT_FIT_PREFIX "minmax"), "x");
    cr_assert_eq(all_mm.lo, -80.0f);
    cr_assert_eq(all_mm.min, -80.0f);
    cr_assert_eq(fit_mm.lo, -4095.0f / 4096.0f, "fit minmax lo %.9g", (double)fit_mm.lo);
    cr_assert_eq(fit_mm.min, -80.0f, "min/max are over every sample in both tables");
    /* the table insert-qdq reads: the first candidate over every sample */
    oq_calib_entry first = table_entry(meta_of(m, OQ_CALIB_METADATA_KEY), "x");
    oq_calib_entry all_p = table_entry(meta_of(m, OQ_CALIB_SELECT_ALL_PREFIX "p99.9"), "x");
    cr_assert_eq(first.lo, all_p.lo);
    cr_assert_eq(first.hi, all_p.hi);
    oq_calib_entry fit_p = table_entry(meta_of(m, OQ_CALIB_SELECT_FIT_PREFIX "p99.9"), "x");
    oq_calib_entry fit_mse = table_entry(meta_of(m, OQ_CALIB_SELECT_FIT_PREFIX "mse"), "x");
    cr_assert(fit_mse.lo > -1.01f && fit_mse.lo < -0.5f, "mse lo %g", (double)fit_mse.lo);
    oq_model_free(m);
    /* plain percentile calibration on the fit samples alone: the same range */
    m = relu_model(4096);
    oq_calib_entry ref = calib_one_n(fd, m, "percentile", ",percentile=99.9", "x", 6);
    cr_assert_eq(fit_p.lo, ref.lo, "fit share %.9g, calibrated alone %.9g", (double)fit_p.lo, (double)ref.lo);
    cr_assert_eq(fit_p.hi, ref.hi);
    oq_model_free(m);
    /* insert-qdq drops the candidates with the table */
    m = relu_model(4096);
    tp_run(m, pl);
    tp_run(m, "insert-qdq");
    cr_assert_null(meta_of(m, OQ_CALIB_SELECT_KEY));
    cr_assert_null(meta_of(m, OQ_CALIB_SELECT_FIT_PREFIX "mse"));
    cr_assert_null(meta_of(m, OQ_CALIB_METADATA_KEY));
    oq_model_free(m);
    free(dir);
}

Test(calibrate, select_candidates_are_checked)
{
    const char *bad[] = {"p0", "p101", "median", "minmax,minmax", "p99.9,,minmax"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        oq_model *m = relu_model(8);
        char pl[256];
        snprintf(pl, sizeof pl, "calibrate{random=4,method=select,candidates=\"%s\"}", bad[i]);
        oq_diag d;
        oq_pass_result r;
        cr_assert_eq(tp_run_diag(m, pl, &r, &d), OQ_ERR_USAGE, "candidates \"%s\" accepted", bad[i]);
        const oq_diag_entry *e = oq_diag_first_error(&d);
        cr_assert(e && strstr(e->message, "candidate"), "message: %s", e ? e->message : "(none)");
        oq_diag_free(&d);
        oq_model_free(m);
    }
}

Test(calibrate, table_json_roundtrip_is_exact)
{
    oq_calib_table t;
    memset(&t, 0, sizeof t);
    t.count = 2;
    t.items = calloc(2, sizeof(oq_calib_entry));
    t.items[0].name = strdup("a\"b\\c");
    t.items[0].lo = 0.1f;
    t.items[0].hi = 3.4028235e38f;
    t.items[1].name = strdup("x");
    t.items[1].lo = -1.17549435e-38f;
    t.items[1].hi = 1.0f / 3.0f;
    char *j = oq_calib_table_to_json(&t);
    oq_calib_table b;
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_calib_table_from_json(j, &b, &d), OQ_OK);
    cr_assert_eq(b.count, 2);
    cr_assert_str_eq(b.items[0].name, "a\"b\\c");
    cr_assert_eq(b.items[0].lo, t.items[0].lo);
    cr_assert_eq(b.items[0].hi, t.items[0].hi);
    cr_assert_eq(b.items[1].lo, t.items[1].lo);
    cr_assert_eq(b.items[1].hi, t.items[1].hi);
    free(j);
    oq_calib_table_free(&t);
    oq_calib_table_free(&b);
    oq_diag_free(&d);
}

Test(json, parse_and_errors)
{
    cJSON *j = NULL;
    oq_diag d;
    oq_diag_init(&d);
    const char *s = "{\"a\": [1, -2.5e3, true, null], \"b\": \"\\u00e9\\n\", \"c\": {}, \"b\": \"\\u00e9\\n\"}";
    cr_assert_eq(oq_json_parse(s, strlen(s), "t", &j, &d), OQ_OK);
    const cJSON *a = oq_json_get(j, "a");
    cr_assert_eq(cJSON_GetArraySize(a), 4);
    cr_assert_eq(cJSON_GetArrayItem(a, 1)->valuedouble, -2500.0);
    cr_assert(cJSON_IsTrue(cJSON_GetArrayItem(a, 2)));
    cr_assert(cJSON_IsNull(cJSON_GetArrayItem(a, 3)));
    cr_assert_str_eq(oq_json_get(j, "b")->valuestring, "\xc3\xa9\n");
    cJSON_Delete(j);
    /* duplicate keys: the last one counts */
    const char *dup = "{\"k\": 1, \"k\": 2}";
    cr_assert_eq(oq_json_parse(dup, strlen(dup), "t", &j, &d), OQ_OK);
    cr_assert_eq(oq_json_get(j, "k")->valuedouble, 2.0);
    cJSON_Delete(j);
    /* errors name the document, line and column */
    const char *bad = "{\"a\": 1,\n \"b\" 2}";
    cr_assert_eq(oq_json_parse(bad, strlen(bad), "cfg.json", &j, &d), OQ_ERR_PARSE);
    cr_assert_null(j);
    cr_assert(strstr(d.entries[0].message, "cfg.json: line 2, column 6"), "%s", d.entries[0].message);
    /* trailing bytes, a NUL byte, an empty document */
    const char *trail = "[1]\n[2]";
    cr_assert_eq(oq_json_parse(trail, strlen(trail), "t.json", &j, &d), OQ_ERR_PARSE);
    cr_assert(strstr(d.entries[1].message, "t.json: line 2, column 1: trailing"), "%s", d.entries[1].message);
    const char nul[] = "[\"a\0b\"]";
    cr_assert_eq(oq_json_parse(nul, sizeof nul - 1, "n.json", &j, &d), OQ_ERR_PARSE);
    cr_assert(strstr(d.entries[2].message, "n.json: line 1, column 4: NUL byte"), "%s", d.entries[2].message);
    char *ws = malloc(2); /* not NUL-terminated: the sanitizer build sees an over-read */
    cr_assert_not_null(ws);
    memcpy(ws, " \n", 2);
    cr_assert_eq(oq_json_parse(ws, 2, "e.json", &j, &d), OQ_ERR_PARSE);
    free(ws);
    cr_assert(strstr(d.entries[3].message, "e.json: line 2, column 1: no JSON document"), "%s", d.entries[3].message);
    oq_diag_free(&d);
}

/* Found by fuzz_json: 1e3081 parsed as infinity, and the calibration table written from
 * it ("inf") did not read back. Numbers beyond double range are a parse error; table
 * values beyond float range (1e39) and sample counts that are not counts are refused. */
Test(json, out_of_range_numbers_are_refused)
{
    cJSON *j = NULL;
    oq_diag d;
    oq_diag_init(&d);
    /* beyond double range: infinity, the spelling onnxq's writers use for it (fallback
     * steps); readers that need finite values refuse it (the calibration table, below) */
    const char *huge = "[1, 1e3081, -1e999]";
    cr_assert_eq(oq_json_parse(huge, strlen(huge), "big.json", &j, &d), OQ_OK);
    cr_assert(isinf(cJSON_GetArrayItem(j, 1)->valuedouble) && cJSON_GetArrayItem(j, 1)->valuedouble > 0);
    cr_assert(isinf(cJSON_GetArrayItem(j, 2)->valuedouble) && cJSON_GetArrayItem(j, 2)->valuedouble < 0);
    cJSON_Delete(j);
    j = NULL;
    /* tiny numbers round to zero or a subnormal and are kept */
    const char *tiny = "[1e-400, -4.9e-324]";
    oq_diag_clear(&d);
    cr_assert_eq(oq_json_parse(tiny, strlen(tiny), "t", &j, &d), OQ_OK);
    cr_assert_eq(cJSON_GetArrayItem(j, 0)->valuedouble, 0.0);
    cr_assert_lt(cJSON_GetArrayItem(j, 1)->valuedouble, 0.0);
    cJSON_Delete(j);
    oq_calib_table t;
    const char *bad[] = {
        "{\"samples\":8,\"tensors\":{\"input\":[-1,1,-1,1e3081]}}",
        "{\"samples\":8,\"tensors\":{\"input\":[-1,1,-1e39,1]}}",
        "{\"samples\":-1,\"tensors\":{}}",
        "{\"samples\":1e30,\"tensors\":{}}",
        "{\"samples\":2.5,\"tensors\":{}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        oq_diag_clear(&d);
        cr_assert_neq(oq_calib_table_from_json(bad[i], &t, &d), OQ_OK, "%s", bad[i]);
        cr_assert_eq(t.count, 0);
        cr_assert_geq(d.errors, 1);
    }
    /* the largest float still reads */
    oq_diag_clear(&d);
    const char *max = "{\"samples\":3,\"tensors\":{\"x\":[-3.40282347e38,0,0,3.40282347e38]}}";
    cr_assert_eq(oq_calib_table_from_json(max, &t, &d), OQ_OK);
    cr_assert_eq(t.samples, 3);
    cr_assert_eq(t.items[0].min, -3.40282347e38f);
    cr_assert_eq(t.items[0].hi, 3.40282347e38f);
    oq_calib_table_free(&t);
    oq_diag_free(&d);
}

/* x -> MatMul(w) -> m -> Clip -> k -> Transpose -> t -> Flatten -> f -> Unsqueeze -> u
 *   -> Squeeze -> s -> Slice -> sl -> Gather -> ga -> Resize(nearest) -> rn
 *   -> Resize(linear) -> rl -> Sigmoid -> sg ; rn also -> MatMul(w2) -> y */
static oq_model *chain(int64_t opset)
{
    oq_model *m = tp_model(opset);
    int64_t xd[2] = {4, 4}, wd[2] = {4, 4}, one[1] = {1}, ax0[1] = {0};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 2);
    float w[16];
    for (int i = 0; i < 16; i++)
        w[i] = (float)(i % 7) * 0.25f - 0.5f;
    tp_init_f(m, "w", wd, 2, w);
    tp_init_f(m, "w2", wd, 2, w);
    tp_node(m, "MatMul", "mm", "x,w", "m");
    float lo = 0, hi = 6;
    tp_init_f(m, "clo", one, 0, &lo);
    tp_init_f(m, "chi", one, 0, &hi);
    tp_node(m, "Clip", "clip", "m,clo,chi", "k");
    tp_node(m, "Transpose", "tr", "k", "t");
    tp_node(m, "Flatten", "fl", "t", "f");
    int64_t axes0[1] = {0};
    tp_init(m, "axes0", OQ_DTYPE_INT64, one, 1, axes0);
    tp_node(m, "Unsqueeze", "unsq", "f,axes0", "u");
    tp_node(m, "Squeeze", "sq", "u,axes0", "s");
    int64_t st[1] = {0}, en[1] = {4};
    tp_init(m, "starts", OQ_DTYPE_INT64, one, 1, st);
    tp_init(m, "ends", OQ_DTYPE_INT64, one, 1, en);
    tp_node(m, "Slice", "slice", "s,starts,ends", "sl");
    int64_t idx[4] = {3, 2, 1, 0}, id4[1] = {4};
    tp_init(m, "idx", OQ_DTYPE_INT64, id4, 1, idx);
    tp_node(m, "Gather", "gather", "sl,idx", "ga");
    float scales[2] = {1, 1};
    int64_t s2[1] = {2};
    tp_init_f(m, "rscales", s2, 1, scales);
    tp_node(m, "Resize", "rsz_n", "ga,,rscales", "rn");
    oq_node *rl = tp_node(m, "Resize", "rsz_l", "rn,,rscales", "rl");
    oq_node_set_attr_string(rl, "mode", "linear");
    tp_node(m, "Sigmoid", "sig", "rl", "sg");
    tp_node(m, "MatMul", "mm2", "rn,w2", "y");
    tp_node(m, "MatMul", "mm3", "sg,w2", "z");
    tp_output(m, "y");
    tp_output(m, "z");
    (void)ax0;
    static const char *const names[] = {"x", "m", "k", "t", "f", "u", "s", "sl", "ga", "rn", "rl", "sg", "y", "z"};
    static const float ranges[][2] = {{-1, 1}, {-3, 8}, {0, 6}, {0, 5}, {0, 5}, {0, 5}, {0, 5},
                                      {0, 5}, {0, 5}, {0, 5}, {0, 5}, {0.5f, 0.99f}, {-4, 4}, {-2, 2}};
    tp_set_calib_table(m, names, ranges, 14);
    return m;
}

Test(insert_qdq, clip_fusion_value_preserving_chain_sigmoid)
{
    oq_model *m = chain(13);
    tp_run(m, "insert-qdq{act-dtype=int8}");
    /* no QDQ between MatMul and Clip; Clip output with its own range [0, 6] (int8) */
    cr_assert_null(find(m, "m_prequant"));
    float s = 6.0f / 255.0f;
    cr_assert_float_eq(scalar_f(m, "k_scale"), s, 1e-7f);
    int32_t dt;
    cr_assert_eq(zp_of(m, "k_zero_point", &dt), -128);
    cr_assert_eq(dt, OQ_DTYPE_INT8);
    /* every value-preserving op in the chain reuses k's parameters */
    const char *vp[] = {"t", "f", "u", "s", "sl", "ga", "rn"};
    for (size_t i = 0; i < sizeof vp / sizeof vp[0]; i++) {
        char sn[32], zn[32];
        snprintf(sn, sizeof sn, "%s_scale", vp[i]);
        snprintf(zn, sizeof zn, "%s_zero_point", vp[i]);
        cr_assert(find(m, sn), "%s not quantized", vp[i]);
        cr_assert_eq(scalar_f(m, sn), scalar_f(m, "k_scale"), "%s", vp[i]);
        cr_assert_eq(zp_of(m, zn, &dt), -128, "%s", vp[i]);
    }
    /* Resize linear changes values: not propagated (rl has no QDQ of its own here) */
    cr_assert_null(find(m, "rl_scale"));
    /* Sigmoid output feeds a MatMul: fixed range [0, 1], not its calibrated [0.5, 0.99] */
    cr_assert_float_eq(scalar_f(m, "sg_scale"), 1.0f / 255.0f, 1e-9f);
    cr_assert_eq(zp_of(m, "sg_zero_point", &dt), -128);
    oq_model_free(m);
}

Test(insert_qdq, uint4_and_int16_weights)
{
    oq_model *m = chain(21);
    tp_run(m, "insert-qdq{weight-dtype=uint4,weight-symmetric=false}");
    oq_tensor *q = oq_value_const_tensor(find(m, "w_quantized"));
    cr_assert_eq(q->dtype, OQ_DTYPE_UINT4);
    cr_assert_eq(oq_value_const_tensor(find(m, "w_zero_point"))->dtype, OQ_DTYPE_UINT4);
    /* MatMul per channel along the last axis: column j holds w[i*4+j] = ((i*4+j) % 7) / 4 - 0.5 */
    const float *s = tp_floats(find(m, "w_scale"));
    for (int j = 0; j < 4; j++) {
        float mn = 0, mx = 0; /* ranges include 0 */
        for (int i = 0; i < 4; i++) {
            float v = (float)((i * 4 + j) % 7) * 0.25f - 0.5f;
            mn = v < mn ? v : mn;
            mx = v > mx ? v : mx;
        }
        cr_assert_float_eq(s[j], (mx - mn) / 15.0f, 1e-6f, "column %d", j);
    }
    oq_model_free(m);
    m = chain(21);
    tp_run(m, "insert-qdq{weight-dtype=int16}");
    cr_assert_eq(oq_value_const_tensor(find(m, "w_quantized"))->dtype, OQ_DTYPE_INT16);
    /* column 0: -0.5, 0.5, -0.25, 0.75 -> 0.75 / 32767 */
    cr_assert_float_eq(tp_floats(find(m, "w_scale"))[0], 0.75f / 32767.0f, 1e-10f);
    oq_model_free(m);
}

Test(insert_qdq, second_run_changes_nothing)
{
    oq_model *m = cnn(13);
    tp_run(m, "insert-qdq");
    size_t nq = tp_count_op(m, "QuantizeLinear"), ndq = tp_count_op(m, "DequantizeLinear");
    size_t nn = m->graph->n_nodes, ni = m->graph->n_initializers;
    cr_assert_eq(nq, 6); /* x, r1, p1, f, g, probs */
    tp_run(m, "insert-qdq");
    cr_assert_eq(tp_count_op(m, "QuantizeLinear"), nq);
    cr_assert_eq(tp_count_op(m, "DequantizeLinear"), ndq);
    cr_assert_eq(m->graph->n_nodes, nn);
    cr_assert_eq(m->graph->n_initializers, ni);
    oq_model_free(m);
}

Test(insert_qdq, weight_in_constant_node)
{
    oq_model *m = tp_model(13);
    int64_t xd[2] = {1, 2}, wd[2] = {2, 2};
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 2);
    float w[4] = {1, -2, 0.5f, 4};
    oq_tensor *t = oq_tensor_new(m, NULL, OQ_DTYPE_FLOAT, wd, 2, w, 16);
    oq_node *k = tp_node(m, "Constant", "wconst", "", "w");
    oq_node_set_attr_tensor(k, "value", t);
    tp_node(m, "MatMul", "mm", "x,w", "y");
    tp_output(m, "y");
    static const char *const names[] = {"x", "y"};
    static const float ranges[][2] = {{-1, 1}, {-4, 4}};
    tp_set_calib_table(m, names, ranges, 2);
    /* alone: left in float with a warning */
    oq_pass_result r = tp_run(m, "insert-qdq{keep-calibration=true}");
    cr_assert_eq(tp_stat(&r, "weights_quantized"), 0);
    oq_model_free(m);
    m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, xd, 2);
    t = oq_tensor_new(m, NULL, OQ_DTYPE_FLOAT, wd, 2, w, 16);
    k = tp_node(m, "Constant", "wconst", "", "w");
    oq_node_set_attr_tensor(k, "value", t);
    tp_node(m, "MatMul", "mm", "x,w", "y");
    tp_output(m, "y");
    tp_set_calib_table(m, names, ranges, 2);
    /* after constant-to-initializer (what onnxq quantize runs first): quantized */
    r = tp_run(m, "constant-to-initializer,insert-qdq");
    cr_assert(find(m, "w_quantized"));
    cr_assert_null(find(m, "w")->initializer);
    const float *s = tp_floats(find(m, "w_scale"));
    cr_assert_float_eq(s[0], 1.0f / 127.0f, 1e-8f);  /* column 0: 1, 0.5 */
    cr_assert_float_eq(s[1], 4.0f / 127.0f, 1e-8f);  /* column 1: -2, 4 */
    oq_model_free(m);
}

/* A folder in the ONNX test-data layout (input_0.npy, output_0.npy) is one sample: the
 * output file is not calibrated on. Here the output holds -100, which minmax would see. */
Test(calibrate, test_data_set_folder_is_one_sample)
{
    char *dir = tu_tmpdir();
    float in[8], outv[8];
    for (int i = 0; i < 8; i++) {
        in[i] = -(float)i / 8.0f;
        outv[i] = -100.0f;
    }
    int64_t dims[2] = {1, 8};
    const char *names[2] = {"input_0.npy", "output_0.npy"};
    float *data[2] = {in, outv};
    for (int k = 0; k < 2; k++) {
        oq_rt_tensor t;
        oq_rt_tensor_borrow(&t, OQ_DTYPE_FLOAT, dims, 2, data[k]);
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, names[k]);
        oq_diag d;
        oq_diag_init(&d);
        cr_assert_eq(oq_tensor_file_write_npy(p, &t, &d), OQ_OK);
        oq_diag_free(&d);
    }
    oq_calib_source *src = NULL;
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_calib_source_dir(dir, &src, &d), OQ_OK);
    cr_assert_eq(oq_calib_source_count(src), 1);
    oq_calib_source_free(src);
    oq_diag_free(&d);
    oq_model *m = relu_model(8);
    oq_calib_entry e = calib_one_n(dir, m, "minmax", "", "x", 1);
    cr_assert_eq(e.min, -7.0f / 8.0f);
    cr_assert_eq(e.max, 0.0f);
    oq_model_free(m);
    free(dir);
}
