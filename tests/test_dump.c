/* Tests for the JSON writer (src/io/json_writer.c), the statistics library (src/ir/stats.c)
 * and `onnxq dump` on models built through the IR API. Expected values are computed
 * by hand in the comments. The numpy cross-check over the backend data is tests/dump.sh. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir-impl.h" /* oq_graph_new_in: a subgraph built by hand */
#include "onnxq/onnxq.h"
#include "onnxq/stats.h"
#include "testutil.h"

#include "io/json_writer.h" /* the writer (part of the library: the quantize job writes its summary) */

/* ---------------------------------------------------------------- JSON writer ---- */

typedef struct mem {
    char *buf;
    size_t len;
    FILE *f;
} mem;

static void mem_open(mem *m)
{
    m->buf = NULL;
    m->len = 0;
    m->f = open_memstream(&m->buf, &m->len);
    cr_assert_not_null(m->f);
}

static void mem_close(mem *m) { fclose(m->f); }

Test(json, compact_document)
{
    mem m;
    mem_open(&m);
    json_writer w;
    json_init(&w, m.f, 0);
    json_begin_object(&w);
    json_kv_string(&w, "a", "x\"y\\z\n\t\x01");
    json_key(&w, "b");
    json_begin_array(&w);
    json_int(&w, INT64_MIN);
    json_uint(&w, UINT64_MAX);
    json_bool(&w, true);
    json_null(&w);
    json_string(&w, NULL);
    json_end_array(&w);
    json_kv_double(&w, "c", (double)0.1f); /* %.9g: 0.100000001 */
    json_end_object(&w);
    cr_assert_eq(json_finish(&w), 0);
    mem_close(&m);
    cr_assert_str_eq(m.buf, "{\"a\":\"x\\\"y\\\\z\\n\\t\\u0001\",\"b\":[-9223372036854775808,"
                            "18446744073709551615,true,null,null],\"c\":0.100000001}\n");
    free(m.buf);
}

Test(json, indented_with_inline_arrays)
{
    mem m;
    mem_open(&m);
    json_writer w;
    json_init(&w, m.f, 2);
    json_begin_object(&w);
    json_key(&w, "dims");
    json_begin_array_inline(&w);
    json_int(&w, 1);
    json_int(&w, 3);
    json_end_array(&w);
    json_key(&w, "empty");
    json_begin_array(&w);
    json_end_array(&w);
    json_key(&w, "o");
    json_begin_object_inline(&w);
    json_kv_int(&w, "k", 5);
    json_key(&w, "l");
    json_begin_array_inline(&w);
    json_end_array(&w);
    json_end_object(&w);
    json_end_object(&w);
    cr_assert_eq(json_finish(&w), 0);
    mem_close(&m);
    cr_assert_str_eq(m.buf, "{\n  \"dims\": [1, 3],\n  \"empty\": [],\n"
                            "  \"o\": {\"k\": 5, \"l\": []}\n}\n");
    free(m.buf);
}

Test(json, numbers_nonfinite_and_floats)
{
    mem m;
    mem_open(&m);
    json_writer w;
    json_init(&w, m.f, 0);
    json_begin_array(&w);
    json_double(&w, NAN);
    json_double(&w, INFINITY);
    json_double(&w, -INFINITY);
    w.nonfinite_null = true;
    json_double(&w, NAN);
    json_float(&w, -INFINITY);
    w.nonfinite_null = false;
    json_float(&w, 0.1f);          /* shortest form reading back to the same float */
    json_float(&w, 16777216.0f);
    json_float(&w, 1e-45f);        /* smallest subnormal */
    json_double(&w, 1.0 / 3.0);    /* %.9g */
    json_double(&w, -0.0);
    json_end_array(&w);
    cr_assert_eq(json_finish(&w), 0);
    mem_close(&m);
    cr_assert_str_eq(m.buf, "[\"NaN\",\"Infinity\",\"-Infinity\",null,null,0.1,16777216,"
                            "1e-45,0.333333333,-0]\n");
    free(m.buf);
}

Test(json, utf8_kept_and_invalid_bytes_escaped)
{
    mem m;
    mem_open(&m);
    json_writer w;
    json_init(&w, m.f, 0);
    /* valid: é (c3 a9), € (e2 82 ac), 😀 (f0 9f 98 80); invalid: lone ff, overlong
     * c0 af, surrogate ed a0 80, truncated e2 82 */
    static const char s[] = "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\xff|\xc0\xaf|\xed\xa0\x80|\xe2\x82";
    json_string_n(&w, s, sizeof s - 1);
    cr_assert_eq(json_finish(&w), 0);
    mem_close(&m);
    cr_assert_str_eq(m.buf, "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\\u00ff|\\u00c0\\u00af|"
                            "\\u00ed\\u00a0\\u0080|\\u00e2\\u0082\"\n");
    free(m.buf);
}

Test(json, misuse_is_reported)
{
    mem m;
    mem_open(&m);
    json_writer w;
    json_init(&w, m.f, 0);
    json_begin_object(&w);
    json_int(&w, 1); /* value without key */
    json_end_object(&w);
    cr_assert_eq(json_finish(&w), -1);

    json_init(&w, m.f, 0);
    json_begin_array(&w);
    json_end_object(&w); /* wrong closer */
    cr_assert_eq(json_finish(&w), -1);

    json_init(&w, m.f, 0);
    json_begin_array(&w); /* never closed */
    cr_assert_eq(json_finish(&w), -1);
    mem_close(&m);
    free(m.buf);
}

/* ---------------------------------------------------------------- statistics ----- */

Test(stats, float32_by_hand)
{
    /* finite values 1, -2, 0, 4, 0: n 5, sum 3, mean 0.6,
     * squared deviations 0.16 + 6.76 + 0.36 + 11.56 + 0.36 = 19.2, var 3.84 */
    float x[] = {1.0f, -2.0f, 0.0f, NAN, 4.0f, INFINITY, -0.0f, -INFINITY, -INFINITY};
    oq_stats s;
    cr_assert_eq(oq_stats_compute(x, OQ_DTYPE_FLOAT, 9, &s), OQ_OK);
    cr_assert_eq(s.count, 9);
    cr_assert_eq(s.finite, 5);
    cr_assert_eq(s.zeros, 2);
    cr_assert_eq(s.nans, 1);
    cr_assert_eq(s.pos_infs, 1);
    cr_assert_eq(s.neg_infs, 2);
    cr_assert_eq(s.min, -2.0);
    cr_assert_eq(s.max, 4.0);
    cr_assert_float_eq(s.mean, 0.6, 1e-15);
    cr_assert_float_eq(s.std, sqrt(3.84), 1e-15);
}

Test(stats, no_finite_values_and_empty)
{
    float x[] = {NAN, INFINITY};
    oq_stats s;
    cr_assert_eq(oq_stats_compute(x, OQ_DTYPE_FLOAT, 2, &s), OQ_OK);
    cr_assert_eq(s.finite, 0);
    cr_assert(isnan(s.min) && isnan(s.max) && isnan(s.mean) && isnan(s.std));
    cr_assert_eq(oq_stats_compute(x, OQ_DTYPE_FLOAT, 0, &s), OQ_OK);
    cr_assert_eq(s.count, 0);
    cr_assert(isnan(s.mean));
    cr_assert_eq(oq_stats_compute(x, OQ_DTYPE_STRING, 2, &s), OQ_ERR_UNSUPPORTED);
    cr_assert_eq(oq_stats_compute(x, OQ_DTYPE_COMPLEX64, 1, &s), OQ_ERR_UNSUPPORTED);
}

Test(stats, accurate_for_large_offset_values)
{
    /* 2,000,000 doubles 1e9 +- 1 alternating: mean exactly 1e9, std exactly 1. A
     * single-pass E[x^2]-E[x]^2 in double loses every digit here. */
    int64_t n = 2000000;
    double *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = 1e9 + ((i & 1) ? 1.0 : -1.0);
    oq_stats s;
    cr_assert_eq(oq_stats_compute(x, OQ_DTYPE_DOUBLE, n, &s), OQ_OK);
    cr_assert_float_eq(s.mean, 1e9, 1e-6);
    cr_assert_float_eq(s.std, 1.0, 1e-9);
    cr_assert_eq(s.min, 1e9 - 1);
    cr_assert_eq(s.max, 1e9 + 1);
    free(x);

    /* 3,000,001 float32 values 0.1f: mean 0.1f as double, std 0 */
    n = 3000001;
    float *f = malloc((size_t)n * sizeof *f);
    for (int64_t i = 0; i < n; i++)
        f[i] = 0.1f;
    cr_assert_eq(oq_stats_compute(f, OQ_DTYPE_FLOAT, n, &s), OQ_OK);
    cr_assert_float_eq(s.mean, (double)0.1f, 1e-15);
    cr_assert_float_eq(s.std, 0.0, 1e-12);
    free(f);
}

Test(stats, decodes_every_numeric_type)
{
    double out[8];
    /* float16: 0x3c00 = 1, 0xc000 = -2, 0x7bff = 65504, 0x0001 = 2^-24 */
    uint16_t h[] = {0x3c00, 0xc000, 0x7bff, 0x0001};
    cr_assert(oq_elems_to_double(h, OQ_DTYPE_FLOAT16, 0, 4, out));
    cr_assert_eq(out[0], 1.0);
    cr_assert_eq(out[1], -2.0);
    cr_assert_eq(out[2], 65504.0);
    cr_assert_eq(out[3], ldexp(1.0, -24));
    /* bfloat16: 0x3f80 = 1, 0xc2f7 = -123.5 */
    uint16_t bf[] = {0x3f80, 0xc2f7};
    cr_assert(oq_elems_to_double(bf, OQ_DTYPE_BFLOAT16, 0, 2, out));
    cr_assert_eq(out[0], 1.0);
    cr_assert_eq(out[1], -123.5);
    /* int4 packed low nibble first: byte 0x8f = elements 0xf (-1), 0x8 (-8);
     * byte 0x07 = 7, 0 */
    uint8_t i4[] = {0x8f, 0x07};
    cr_assert(oq_elems_to_double(i4, OQ_DTYPE_INT4, 0, 4, out));
    cr_assert_eq(out[0], -1.0);
    cr_assert_eq(out[1], -8.0);
    cr_assert_eq(out[2], 7.0);
    cr_assert_eq(out[3], 0.0);
    cr_assert(oq_elems_to_double(i4, OQ_DTYPE_UINT4, 1, 2, out));
    cr_assert_eq(out[0], 8.0);
    cr_assert_eq(out[1], 7.0);
    /* float8 e4m3fn: 0x7e = 448 (max), 0x7f NaN, 0x01 = 2^-9, 0xb8 = -1 */
    uint8_t f8[] = {0x7e, 0x7f, 0x01, 0xb8};
    cr_assert(oq_elems_to_double(f8, OQ_DTYPE_FLOAT8E4M3FN, 0, 4, out));
    cr_assert_eq(out[0], 448.0);
    cr_assert(isnan(out[1]));
    cr_assert_eq(out[2], ldexp(1.0, -9));
    cr_assert_eq(out[3], -1.0);
    /* e4m3fnuz: 0x7f = 240, 0x80 NaN, 0x40 = 1 */
    uint8_t f8u[] = {0x7f, 0x80, 0x40};
    cr_assert(oq_elems_to_double(f8u, OQ_DTYPE_FLOAT8E4M3FNUZ, 0, 3, out));
    cr_assert_eq(out[0], 240.0);
    cr_assert(isnan(out[1]));
    cr_assert_eq(out[2], 1.0);
    /* e5m2: 0x7b = 57344, 0x7c = inf, 0xfc = -inf, 0x7d NaN, 0x3c = 1 */
    uint8_t e5[] = {0x7b, 0x7c, 0xfc, 0x7d, 0x3c};
    cr_assert(oq_elems_to_double(e5, OQ_DTYPE_FLOAT8E5M2, 0, 5, out));
    cr_assert_eq(out[0], 57344.0);
    cr_assert(isinf(out[1]) && out[1] > 0);
    cr_assert(isinf(out[2]) && out[2] < 0);
    cr_assert(isnan(out[3]));
    cr_assert_eq(out[4], 1.0);
    /* e5m2fnuz: 0x7f = 57344, 0x80 NaN, 0x40 = 1 */
    uint8_t e5u[] = {0x7f, 0x80, 0x40};
    cr_assert(oq_elems_to_double(e5u, OQ_DTYPE_FLOAT8E5M2FNUZ, 0, 3, out));
    cr_assert_eq(out[0], 57344.0);
    cr_assert(isnan(out[1]));
    cr_assert_eq(out[2], 1.0);
    /* ints, unaligned start inside a byte buffer */
    uint8_t raw[1 + 8];
    int64_t v = -5;
    memcpy(raw + 1, &v, 8);
    cr_assert(oq_elems_to_double(raw + 1, OQ_DTYPE_INT64, 0, 1, out));
    cr_assert_eq(out[0], -5.0);
    uint16_t u16 = 65535;
    cr_assert(oq_elems_to_double(&u16, OQ_DTYPE_UINT16, 0, 1, out));
    cr_assert_eq(out[0], 65535.0);
    uint8_t b[] = {0, 1, 2};
    cr_assert(oq_elems_to_double(b, OQ_DTYPE_BOOL, 0, 3, out));
    cr_assert(out[0] == 0.0 && out[1] == 1.0 && out[2] == 1.0);
    cr_assert_not(oq_elems_to_double(b, OQ_DTYPE_STRING, 0, 1, out));
}

Test(stats, channel_minmax_axis_1)
{
    /* dims [2, 3, 2]: x[o][c][i] = 100*o + 10*c + i, except one NaN at [1][2][0].
     * channel c over o, i: min 10c (o=0,i=0), max 100 + 10c + 1; channel 2 ignores
     * its NaN: max still 121. */
    float x[12];
    for (int o = 0; o < 2; o++)
        for (int c = 0; c < 3; c++)
            for (int i = 0; i < 2; i++)
                x[o * 6 + c * 2 + i] = (float)(100 * o + 10 * c + i);
    x[1 * 6 + 2 * 2 + 0] = NAN;
    int64_t dims[] = {2, 3, 2};
    double mn[3], mx[3];
    cr_assert_eq(oq_stats_channel_minmax(x, OQ_DTYPE_FLOAT, dims, 3, 1, mn, mx), OQ_OK);
    for (int c = 0; c < 3; c++) {
        cr_assert_eq(mn[c], 10.0 * c);
        cr_assert_eq(mx[c], 101.0 + 10.0 * c);
    }
    /* a channel with only NaN gives NaN */
    float y[] = {NAN, 1.0f};
    int64_t d2[] = {2};
    cr_assert_eq(oq_stats_channel_minmax(y, OQ_DTYPE_FLOAT, d2, 1, 0, mn, mx), OQ_OK);
    cr_assert(isnan(mn[0]) && isnan(mx[0]));
    cr_assert_eq(mn[1], 1.0);
    cr_assert_eq(oq_stats_channel_minmax(y, OQ_DTYPE_FLOAT, d2, 1, 1, mn, mx), OQ_ERR_USAGE);
}

Test(stats, tensor_wrappers_and_weight_axis)
{
    oq_model *m = oq_model_new();
    oq_graph *g = m->graph;
    oq_model_set_opset(m, "", 13);
    /* float16 weight [2, 2] = {1, -2, 0.5, 4}: mean 0.875, var = (0.015625 + 8.265625 +
     * 0.140625 + 9.765625) / 4 = 4.546875 */
    uint16_t w[] = {0x3c00, 0xc000, 0x3800, 0x4400};
    int64_t dims[] = {2, 2};
    oq_value *wv = oq_graph_add_initializer(g, "W", OQ_DTYPE_FLOAT16, dims, 2, w, sizeof w);
    cr_assert_not_null(wv);
    oq_stats s;
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_tensor_stats(wv->initializer, &s, &d), OQ_OK);
    cr_assert_float_eq(s.mean, 0.875, 1e-15);
    cr_assert_float_eq(s.std, sqrt(4.546875), 1e-15);
    double mn[2], mx[2];
    /* axis 1 (Gemm transB = 0): columns {1, 0.5} and {-2, 4} */
    cr_assert_eq(oq_tensor_channel_minmax(wv->initializer, 1, mn, mx, &d), OQ_OK);
    cr_assert(mn[0] == 0.5 && mx[0] == 1.0 && mn[1] == -2.0 && mx[1] == 4.0);
    cr_assert_neq(oq_tensor_channel_minmax(wv->initializer, 2, mn, mx, &d), OQ_OK);
    cr_assert_eq(d.errors, 1);

    oq_value *x = oq_graph_new_value(g, "x");
    oq_value *y = oq_graph_new_value(g, "y");
    oq_value *in[] = {x, wv};
    oq_node *gemm = oq_node_new(g, "Gemm", "", "gemm", in, 2, &y, 1);
    cr_assert_eq(oq_weight_channel_axis(gemm, 1, 2), 1);
    oq_node_set_attr_int(gemm, "transB", 1);
    cr_assert_eq(oq_weight_channel_axis(gemm, 1, 2), 0);
    cr_assert_eq(oq_weight_channel_axis(gemm, 0, 2), -1);
    oq_node *mm = oq_node_new(g, "MatMul", NULL, "mm", in, 2, &y, 1);
    cr_assert_eq(oq_weight_channel_axis(mm, 1, 3), 2);
    cr_assert_eq(oq_weight_channel_axis(mm, 1, 1), -1);
    oq_node *conv = oq_node_new(g, "Conv", "", "c", in, 2, &y, 1);
    cr_assert_eq(oq_weight_channel_axis(conv, 1, 4), 0);
    oq_node *ct = oq_node_new(g, "ConvTranspose", "", "ct", in, 2, &y, 1);
    cr_assert_eq(oq_weight_channel_axis(ct, 1, 4), 1);
    oq_node *other = oq_node_new(g, "Conv", "com.example", "o", in, 2, &y, 1);
    cr_assert_eq(oq_weight_channel_axis(other, 1, 4), -1);
    oq_diag_free(&d);
    oq_model_free(m);
}

/* ---------------------------------------------------------------- inspection ----- */

/* x: float32[N, 3] -> Gemm(x, W, transB=1) -> y, W = {{1, -2, 3}, {4, 5, -6}}; an If
 * "cond_if" whose then_branch holds a Constant c = {0.5, 0} and a Relu. Values by hand
 * in the comments. */
Test(inspect, summary_stats_types_dot)
{
    oq_model *m = oq_model_new();
    oq_graph *g = m->graph;
    oq_model_set_opset(m, "", 13);
    int64_t xd[] = {-1, 3};
    const char *xn[] = {"N", NULL};
    oq_value *x = oq_graph_new_value(g, "x");
    oq_graph_add_input(g, x, oq_type_tensor(m, OQ_DTYPE_FLOAT, xd, xn, 2));
    float wv[] = {1, -2, 3, 4, 5, -6};
    int64_t wd[] = {2, 3};
    oq_value *w = oq_graph_add_initializer(g, "W", OQ_DTYPE_FLOAT, wd, 2, wv, sizeof wv);
    oq_value *y = oq_graph_new_value(g, "y"), *gin[] = {x, w};
    oq_node *gemm = oq_node_new(g, "Gemm", "", "gemm", gin, 2, &y, 1);
    oq_node_set_attr_int(gemm, "transB", 1);
    oq_graph_append(g, gemm);
    oq_value *cond = oq_graph_new_value(g, "cond"), *z = oq_graph_new_value(g, "z");
    oq_node *iff = oq_node_new(g, "If", "", "cond_if", &cond, 1, &z, 1);
    oq_graph_append(g, iff);
    oq_graph *sub = oq_graph_new_in(m, g, iff);
    oq_attr *a = oq_model_alloc(m, sizeof *a);
    cr_assert(sub && a);
    a->name = oq_model_strdup(m, "then_branch");
    a->has_type = true;
    a->type = OQ_ATTR_GRAPH;
    a->g = sub;
    iff->attrs = oq_model_alloc(m, sizeof *iff->attrs);
    iff->attrs[0] = a;
    iff->n_attrs = 1;
    oq_value *c = oq_graph_new_value(sub, "c"), *r = oq_graph_new_value(sub, "r");
    oq_node *cn = oq_node_new(sub, "Constant", "", "k", NULL, 0, &c, 1);
    float cv[] = {0.5f, 0};
    int64_t cd[] = {2};
    oq_node_set_attr_tensor(cn, "value", oq_tensor_new(m, "", OQ_DTYPE_FLOAT, cd, 1, cv, sizeof cv));
    oq_graph_append(sub, cn);
    oq_graph_append(sub, oq_node_new(sub, "Relu", "", "relu", &c, 1, &r, 1));
    oq_graph_add_output(g, y, NULL);

    oq_diag d;
    oq_diag_init(&d);
    oq_inspect in;
    cr_assert_eq(oq_inspect_model(m, &in, &d), OQ_OK);
    /* four nodes in two graphs, one of each op: by name */
    cr_assert_eq(in.n_nodes, 4);
    cr_assert_eq(in.n_ops, 4);
    const char *order[] = {"Constant", "Gemm", "If", "Relu"};
    for (size_t i = 0; i < 4; i++) {
        cr_assert_str_eq(in.ops[i].op_type, order[i]);
        cr_assert_str_eq(in.ops[i].domain, "");
        cr_assert_eq(in.ops[i].count, 1);
    }
    /* W in the main graph, then c in the If's branch */
    cr_assert_eq(in.n_tensors, 2);
    cr_assert_str_eq(in.tensors[0].name, "W");
    cr_assert(!in.tensors[0].constant);
    cr_assert_str_eq(in.tensors[0].scope, "");
    cr_assert_eq(in.tensors[0].bytes, 24);
    cr_assert_str_eq(in.tensors[1].name, "c");
    cr_assert(in.tensors[1].constant);
    cr_assert_str_eq(in.tensors[1].scope, "cond_if.then_branch");
    /* float32: 6 elements (24 bytes) in an initializer, 2 (8 bytes) in a Constant */
    const oq_inspect_params *p = &in.params[OQ_DTYPE_FLOAT];
    cr_assert(p->tensors[0] == 1 && p->elements[0] == 6 && p->bytes[0] == 24);
    cr_assert(p->tensors[1] == 1 && p->elements[1] == 2 && p->bytes[1] == 8);

    /* W: min -6, max 5, mean 5/6; Gemm transB=1: output channels along axis 0, rows
     * {1, -2, 3} -> [-2, 3] and {4, 5, -6} -> [-6, 5] */
    oq_inspect_stats st;
    cr_assert_eq(oq_inspect_tensor_stats(&in.tensors[0], &st, &d), OQ_OK);
    cr_assert_null(st.skipped);
    cr_assert(st.s.min == -6 && st.s.max == 5 && fabs(st.s.mean - 5.0 / 6.0) < 1e-12);
    cr_assert_eq(st.axis, 0);
    cr_assert_eq(st.consumer, gemm);
    cr_assert_eq(st.channels, 2);
    cr_assert(st.mins[0] == -2 && st.maxs[0] == 3 && st.mins[1] == -6 && st.maxs[1] == 5);
    oq_inspect_stats_free(&st);
    /* c = {0.5, 0}: one zero, no consumer with a channel axis */
    cr_assert_eq(oq_inspect_tensor_stats(&in.tensors[1], &st, &d), OQ_OK);
    cr_assert(st.s.zeros == 1 && st.s.max == 0.5 && st.axis == -1 && !st.mins);
    oq_inspect_stats_free(&st);
    /* a complex tensor has no statistics: skipped, named by its dtype */
    oq_inspect_tensor cx = in.tensors[0];
    float xv[2] = {1, 2};
    int64_t one = 1;
    cx.tensor = oq_tensor_new(m, "X", OQ_DTYPE_COMPLEX64, &one, 1, xv, sizeof xv);
    cr_assert_not_null(cx.tensor);
    cr_assert_eq(oq_inspect_tensor_stats(&cx, &st, &d), OQ_OK);
    cr_assert_str_eq(st.skipped, "complex64");
    oq_inspect_stats_free(&st);
    cr_assert_eq(oq_inspect_tensor_bytes(cx.tensor), 8);
    oq_inspect_free(&in);
    cr_assert_eq(d.errors, 0);

    /* types: declared, from the initializer, unknown */
    char *t = oq_value_type_text(x);
    cr_assert_str_eq(t, "float32[N, 3]");
    free(t);
    t = oq_value_type_text(w);
    cr_assert_str_eq(t, "float32[2, 3]");
    free(t);
    cr_assert_null(oq_value_type_text(z));
    t = oq_type_text(NULL);
    cr_assert_str_eq(t, "?");
    free(t);

    /* Graphviz: the title, the Gemm box, the branch as a cluster tied to its If */
    mem dm;
    mem_open(&dm);
    cr_assert_eq(oq_inspect_write_dot(m, "t.onnx", dm.f, &d), OQ_OK);
    mem_close(&dm);
    cr_assert(strstr(dm.buf, "digraph onnx {\n  graph [rankdir=TB, fontname=\"Helvetica\", label=\"t.onnx\"];"), "%s", dm.buf);
    cr_assert(strstr(dm.buf, "[label=\"Gemm\\ngemm\"];"), "%s", dm.buf);
    cr_assert(strstr(dm.buf, "subgraph cluster_0 {\n    label=\"If cond_if: then_branch\"; style=dashed;"), "%s", dm.buf);
    cr_assert(strstr(dm.buf, "[style=dotted, arrowhead=none];"), "%s", dm.buf);
    free(dm.buf);
    oq_diag_free(&d);
    oq_model_free(m);
}

/* ---------------------------------------------------------------- the command ---- */

/* x: float32[N, 3, ?] -> Relu -> Relu -> Add(., B) -> y; B is a float32[3] initializer
 * {1, 2, 3} and K a Constant int64[2] {7, 8} */
static char *write_model(const char *dir)
{
    oq_model *m = oq_model_new();
    oq_graph *g = m->graph;
    m->producer_name = oq_model_strdup(m, "unit test");
    m->producer_version = oq_model_strdup(m, "1.2");
    m->has_ir_version = true;
    m->ir_version = 8;
    oq_model_set_opset(m, "", 13);
    g->name = oq_model_strdup(m, "g");
    int64_t xd[] = {-1, 3, -1};
    const char *xn[] = {"N", NULL, NULL};
    oq_value *x = oq_graph_new_value(g, "x");
    oq_graph_add_input(g, x, oq_type_tensor(m, OQ_DTYPE_FLOAT, xd, xn, 3));
    float bv[] = {1, 2, 3};
    int64_t bd[] = {3};
    oq_value *b = oq_graph_add_initializer(g, "B", OQ_DTYPE_FLOAT, bd, 1, bv, sizeof bv);
    oq_value *r1 = oq_graph_new_value(g, "r1"), *r2 = oq_graph_new_value(g, "r2");
    oq_value *y = oq_graph_new_value(g, "y"), *k = oq_graph_new_value(g, "k");
    oq_graph_append(g, oq_node_new(g, "Relu", "", "relu_a", &x, 1, &r1, 1));
    oq_graph_append(g, oq_node_new(g, "Relu", "", "relu_b", &r1, 1, &r2, 1));
    oq_value *ain[] = {r2, b};
    oq_graph_append(g, oq_node_new(g, "Add", "", "add", ain, 2, &y, 1));
    oq_node *cn = oq_node_new(g, "Constant", "", "const_k", NULL, 0, &k, 1);
    int64_t kv[] = {7, 8};
    int64_t kd[] = {2};
    oq_node_set_attr_tensor(cn, "value", oq_tensor_new(m, "", OQ_DTYPE_INT64, kd, 1, kv, sizeof kv));
    oq_graph_append(g, cn);
    oq_graph_add_output(g, y, oq_type_tensor(m, OQ_DTYPE_FLOAT, xd, xn, 3));
    oq_graph_add_output(g, k, NULL);
    char *path = malloc(strlen(dir) + 16);
    sprintf(path, "%s/m.onnx", dir);
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_model_write(m, path, NULL, &d), OQ_OK);
    oq_diag_free(&d);
    oq_model_free(m);
    return path;
}

static bool has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

Test(cmd, text_json_stats)
{
    char *dir = tu_tmpdir();
    char *path = write_model(dir);
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s dump %s", ONNXQ_EXE, path);
    cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
    cr_assert(has_line(out, "producer: unit test 1.2"), "%s", out);
    cr_assert(has_line(out, "ir_version: 8"), "%s", out);
    cr_assert(has_line(out, "opset_import: ai.onnx 13"), "%s", out);
    cr_assert(has_line(out, "  x: float32[N, 3, ?]"), "%s", out);
    cr_assert(has_line(out, "  k: int64[2]"), "%s", out); /* type from the Constant */
    /* histogram: Relu (2) first, then the 1-count ops by name */
    const char *relu = strstr(out, "       2  Relu\n"), *add = strstr(out, "       1  Add\n");
    const char *cst = strstr(out, "       1  Constant\n");
    cr_assert(relu && add && cst && relu < add && add < cst, "%s", out);
    /* parameters: B 3 float32 (12 bytes) in an initializer, K 2 int64 (16 bytes) in a
     * Constant */
    cr_assert(has_line(out, "parameters (all graphs): 5 elements, 28 bytes"), "%s", out);
    cr_assert(has_line(out, "  held in initializers: 1 tensors, 3 elements, 12 bytes"), "%s", out);
    cr_assert(has_line(out, "  held in Constant nodes: 1 tensors, 2 elements, 16 bytes"), "%s", out);
    cr_assert(has_line(out, "      value = tensor int64[2] {7, 8}"), "%s", out);
    cr_assert(has_line(out, "  #2 Add add"), "%s", out);
    cr_assert(has_line(out, "      inputs:  r2, B"), "%s", out);
    free(out);

    snprintf(cmd, sizeof cmd, "%s dump --stats %s", ONNXQ_EXE, path);
    cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
    /* B = {1, 2, 3}: mean 2, std sqrt(2/3) = 0.816497 */
    cr_assert(has_line(out, "      min 1  max 3  mean 2  std 0.816497  zeros 0  nan 0  inf 0"),
              "%s", out);
    cr_assert(has_line(out, "      min 7  max 8  mean 7.5  std 0.5  zeros 0  nan 0  inf 0"),
              "%s", out);
    free(out);

    snprintf(cmd, sizeof cmd, "%s dump --json --stats %s", ONNXQ_EXE, path);
    cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
    cr_assert(strstr(out, "\"schema\": \"onnxq.dump/1\""), "%s", out);
    cr_assert(strstr(out, "{\"name\": \"x\", \"type\": {\"kind\": \"tensor\", \"elem_type\": "
                          "\"float32\", \"shape\": [\"N\", 3, null]}, \"initializer\": false}"),
              "%s", out);
    cr_assert(strstr(out, "{\"op\": \"Relu\", \"domain\": \"\", \"count\": 2}"), "%s", out);
    cr_assert(strstr(out, "\"mean\": 2,"), "%s", out);
    cr_assert(strstr(out, "\"std\": 0.816496581,"), "%s", out);
    free(out);

    snprintf(cmd, sizeof cmd, "%s dump --dot %s", ONNXQ_EXE, path);
    cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
    cr_assert(strstr(out, "digraph onnx {"), "%s", out);
    cr_assert(strstr(out, "[label=\"Relu\\nrelu_a\"]"), "%s", out);
    cr_assert(strstr(out, "[label=\"float32[N, 3, ?]\"]"), "%s", out);
    free(out);

    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    tu_run(cmd, NULL);
    free(path);
    free(dir);
}

Test(cmd, usage_errors)
{
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s dump", ONNXQ_EXE);
    cr_assert_eq(tu_run(cmd, &out), 2);
    free(out);
    snprintf(cmd, sizeof cmd, "%s dump --nope x.onnx", ONNXQ_EXE);
    cr_assert_eq(tu_run(cmd, &out), 2);
    cr_assert(strstr(out, "unknown option"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s dump /nonexistent/m.onnx", ONNXQ_EXE);
    cr_assert_eq(tu_run(cmd, &out), 2);
    cr_assert(strstr(out, "/nonexistent/m.onnx"), "%s", out);
    free(out);
}
