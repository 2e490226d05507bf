/* calibrate + insert-qdq inside If / Loop bodies, outer-scope weights, and the fixed
 * output ranges of Sigmoid. Graphs are built with the IR API; expected scales and
 * ranges are computed here from the ONNX formulas and from the data the test chose. */
#include <math.h>

#include "ir/ir-impl.h"
#include "onnxq/calib.h"
#include "onnxq/tensor_io.h"
#include "test_pass_util.h"
#include "testutil.h"

static oq_node *body_node(oq_graph *g, const char *op, const char *name, oq_value **in, size_t nin,
                          oq_value *out)
{
    oq_node *n = oq_node_new(g, op, NULL, name, in, nin, &out, 1);
    cr_assert(n);
    oq_graph_append(g, n);
    return n;
}

static oq_node *find_node(oq_graph *g, const char *op, const oq_value *in0)
{
    for (oq_node *n = g->first; n; n = n->next)
        if (strcmp(n->op_type, op) == 0 && (!in0 || (n->n_inputs && n->inputs[0] == in0)))
            return n;
    return NULL;
}

static size_t count_op(oq_graph *g, const char *op)
{
    size_t k = 0;
    for (oq_node *n = g->first; n; n = n->next)
        k += strcmp(n->op_type, op) == 0;
    return k;
}

static int64_t stat_of(const oq_pass_result *r, const char *name)
{
    for (size_t i = 0; i < r->n_stats; i++)
        if (strcmp(r->stats[i].name, name) == 0)
            return r->stats[i].value;
    return -1;
}

static oq_calib_table table_of(oq_model *m)
{
    oq_calib_table t;
    for (size_t i = 0; i < m->metadata.count; i++)
        if (strcmp(m->metadata.items[i].key, OQ_CALIB_METADATA_KEY) == 0) {
            cr_assert_eq(oq_calib_table_from_json(m->metadata.items[i].value, &t, NULL), OQ_OK);
            return t;
        }
    cr_assert_fail("no calibration table in the model");
    return t;
}

/* 4x3 weights w[i][j] = (i - 1.5) * (j + 1) / 4: per output column j (MatMul's channel
 * axis is the last one) max |w| = 1.5 (j + 1) / 4, so the int8 symmetric scale is
 * 1.5 (j + 1) / 4 / 127 and row 0 quantizes to -127 in every column. */
static void weights43(float *w)
{
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            w[i * 3 + j] = ((float)i - 1.5f) * (float)(j + 1) / 4.0f;
}

static void check_weights43(oq_graph *g, const char *base)
{
    char n[64];
    snprintf(n, sizeof n, "%s_scale", base);
    oq_value *s = oq_graph_find_value(g, n);
    cr_assert(s, "no %s", n);
    const float *sd = tp_floats(s);
    for (int j = 0; j < 3; j++)
        cr_assert_float_eq(sd[j], 1.5f * (float)(j + 1) / 4.0f / 127.0f, 1e-9f, "%s[%d]", n, j);
    snprintf(n, sizeof n, "%s_quantized", base);
    oq_tensor *q = oq_value_const_tensor(oq_graph_find_value(g, n));
    cr_assert(q && q->dtype == OQ_DTYPE_INT8, "no int8 %s", n);
    const int8_t *qd = oq_tensor_data(q, NULL);
    /* row 1: -0.5/1.5 * 127 = -42.33 -> -42; row 3: 127 */
    for (int j = 0; j < 3; j++) {
        cr_assert_eq(qd[0 * 3 + j], -127);
        cr_assert_eq(qd[1 * 3 + j], -42);
        cr_assert_eq(qd[3 * 3 + j], 127);
    }
}

/* x[1,4] -> cond = ReduceSum(x) > 0 -> If: then MatMul(x, Wt) / else MatMul(x, We) and
 * optionally both reading the outer weight W instead. Random calibration data lies in
 * [0, 1), so the sum is positive: only the then-branch ever runs. */
typedef struct if_model {
    oq_model *m;
    oq_node *iff;
    oq_graph *then_g, *else_g;
} if_model;

static if_model build_if(bool outer_weight)
{
    if_model r;
    oq_model *m = r.m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 4}, 2);
    float zero = 0;
    tp_init_f(m, "zero", (int64_t[]){1}, 0, &zero);
    oq_node *rs = tp_node(m, "ReduceSum", "sum", "x", "s");
    oq_node_set_attr_int(rs, "keepdims", 0);
    tp_node(m, "Greater", "gt", "s,zero", "cond");
    float w[12];
    weights43(w);
    if (outer_weight)
        tp_init_f(m, "W", (int64_t[]){4, 3}, 2, w);
    oq_value *c = tp_value(m, "cond"), *y = tp_value(m, "y");
    r.iff = oq_node_new(m->graph, "If", NULL, "if", &c, 1, &y, 1);
    r.then_g = tu_add_subgraph(r.iff, "then_branch");
    r.else_g = tu_add_subgraph(r.iff, "else_branch");
    oq_value *x = tp_value(m, "x");
    oq_value *wt = outer_weight ? tp_value(m, "W")
                                : oq_graph_add_initializer(r.then_g, "Wt", OQ_DTYPE_FLOAT, (int64_t[]){4, 3}, 2, w, 48);
    oq_value *we = outer_weight ? tp_value(m, "W")
                                : oq_graph_add_initializer(r.else_g, "We", OQ_DTYPE_FLOAT, (int64_t[]){4, 3}, 2, w, 48);
    oq_value *yt = oq_graph_new_value(r.then_g, "yt"), *ye = oq_graph_new_value(r.else_g, "ye");
    oq_value *ti[2] = {x, wt}, *ei[2] = {x, we};
    body_node(r.then_g, "MatMul", "mm_then", ti, 2, yt);
    body_node(r.else_g, "MatMul", "mm_else", ei, 2, ye);
    oq_graph_add_output(r.then_g, yt, NULL);
    oq_graph_add_output(r.else_g, ye, NULL);
    oq_graph_append(m->graph, r.iff);
    tp_output(m, "y");
    tp_assert_valid(m);
    return r;
}

/* run model on x, return y[0..3) */
static void run3(oq_model *m, const float *x, float *y)
{
    oq_plan *p = NULL;
    oq_diag d;
    oq_diag_init(&d);
    oq_plan_options o = oq_plan_options_default();
    o.threads = 1;
    oq_status st = oq_plan_compile(m, &o, &p, &d);
    tp_print_diag(&d);
    cr_assert_eq(st, OQ_OK);
    oq_rt_tensor in, out;
    oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, (int64_t[]){1, 4}, 2, (void *)x);
    cr_assert_eq(oq_plan_run(p, &in, 1, &out, 1, &d), OQ_OK);
    cr_assert_eq(oq_rt_tensor_numel(&out), 3);
    memcpy(y, out.data, 3 * sizeof(float));
    oq_rt_tensor_release(&out);
    oq_plan_free(p);
    oq_diag_free(&d);
}

Test(quant_subgraphs, if_taken_branch_quantized_other_named_and_float)
{
    if_model r = build_if(false);
    oq_diag d;
    oq_pass_result res;
    oq_status st = tp_run_diag(r.m, "calibrate{random=6,seed=5,method=minmax},insert-qdq{keep-calibration=true}",
                               &res, &d);
    tp_print_diag(&d);
    cr_assert_eq(st, OQ_OK);
    tp_assert_valid(r.m);
    /* the table names body tensors by their scope; the else-branch never ran */
    oq_calib_table t = table_of(r.m);
    const oq_calib_entry *ey = oq_calib_table_find(&t, "if.then_branch/yt");
    cr_assert(ey, "no range for the then-branch's MatMul output");
    cr_assert_null(oq_calib_table_find(&t, "if.else_branch/ye"));
    cr_assert_null(oq_calib_table_find(&t, "yt"));
    /* yt = x W: with x in [0, 1) and column 0 of W = (-0.375, -0.125, 0.125, 0.375),
     * |yt_0| <= 0.75: the observed extremes are inside that */
    cr_assert(ey->min >= -0.75f && ey->max <= 0.75f * 3);
    /* then-branch: weight DQ + activation QDQ inside the branch */
    cr_assert_eq(count_op(r.then_g, "DequantizeLinear"), 2, "weight DQ and yt's DQ");
    cr_assert_eq(count_op(r.then_g, "QuantizeLinear"), 1);
    oq_node *mm = find_node(r.then_g, "MatMul", NULL);
    cr_assert(mm->inputs[1]->producer && strcmp(mm->inputs[1]->producer->op_type, "DequantizeLinear") == 0);
    check_weights43(r.then_g, "Wt");
    /* x (main graph input, read by the branch) got its QDQ in the main graph */
    cr_assert(find_node(r.m->graph, "QuantizeLinear", tp_value(r.m, "x")));
    /* else-branch untouched, and named in a warning and in the statistics */
    cr_assert_eq(count_op(r.else_g, "QuantizeLinear") + count_op(r.else_g, "DequantizeLinear"), 0);
    oq_node *me = find_node(r.else_g, "MatMul", NULL);
    cr_assert_eq(me->inputs[1]->kind, OQ_VALUE_INITIALIZER);
    cr_assert_str_eq(me->inputs[1]->name, "We");
    cr_assert_eq(stat_of(&res, "subgraphs_not_calibrated"), 1);
    cr_assert_eq(stat_of(&res, "nodes_not_calibrated"), 1);
    cr_assert_eq(stat_of(&res, "nodes_selected"), 1);
    bool warned = false;
    for (size_t i = 0; i < d.count; i++)
        warned = warned || (d.entries[i].severity == OQ_SEV_WARNING &&
                            strstr(d.entries[i].message, "else_branch of node \"if\"") &&
                            strstr(d.entries[i].message, "never executed"));
    cr_assert(warned, "no warning naming the else_branch");
    oq_calib_table_free(&t);
    oq_diag_free(&d);
    oq_model_free(r.m);
}

Test(quant_subgraphs, outer_weight_gets_its_dq_in_the_body_that_reads_it)
{
    if_model r = build_if(true);
    /* calibration: two samples, the first one is the input checked below */
    float x[4] = {0.1f, 0.7f, 0.35f, 0.9f}, x2[4] = {0.8f, 0.05f, 0.6f, 0.3f}, yf[3], yq[3];
    char *dir = tu_tmpdir(), pipe[700];
    for (int k = 0; k < 2; k++) {
        char f[600];
        snprintf(f, sizeof f, "%s/s%d.npy", dir, k);
        oq_rt_tensor tt;
        oq_rt_tensor_borrow(&tt, OQ_DTYPE_FLOAT, (int64_t[]){1, 4}, 2, k ? x2 : x);
        cr_assert_eq(oq_tensor_file_write_npy(f, &tt, NULL), OQ_OK);
    }
    snprintf(pipe, sizeof pipe, "calibrate{data=%s,method=minmax},insert-qdq", dir);
    oq_pass_result res = tp_run(r.m, pipe);
    free(dir);
    /* int8 data where the weight was (main graph), the DQ inside the then-branch */
    check_weights43(r.m->graph, "W");
    cr_assert_null(oq_graph_find_local(r.then_g, "W_quantized"));
    oq_node *mm = find_node(r.then_g, "MatMul", NULL);
    oq_node *dq = mm->inputs[1]->producer;
    cr_assert(dq && strcmp(dq->op_type, "DequantizeLinear") == 0);
    cr_assert_eq(dq->graph, r.then_g);
    cr_assert_str_eq(mm->inputs[1]->name, "W_dequantized");
    cr_assert_eq(dq->inputs[0]->graph, r.m->graph);
    /* the never-executed else-branch still reads the float W, which therefore stays */
    oq_node *me = find_node(r.else_g, "MatMul", NULL);
    cr_assert_str_eq(me->inputs[1]->name, "W");
    cr_assert_eq(me->inputs[1]->kind, OQ_VALUE_INITIALIZER);
    cr_assert_eq(stat_of(&res, "outer_weights_quantized"), 1);
    /* the quantized model computes x W within the quantization error: x's step is
     * 0.9/255, the weights' at most 1.125/127, yt's at most 2 * 1.5/255 (half of each
     * from rounding): |err| <= 4 * 0.9/255/2 * 1.125 + 0.9 * 4 * 1.125/127/2 + 1.5/255
     * < 0.03 */
    oq_model *f = build_if(true).m;
    run3(f, x, yf);
    run3(r.m, x, yq);
    for (int j = 0; j < 3; j++) {
        float ref = 0;
        for (int i = 0; i < 4; i++)
            ref += x[i] * ((float)i - 1.5f) * (float)(j + 1) / 4.0f;
        cr_assert_float_eq(yf[j], ref, 1e-6f);
        cr_assert(fabsf(yq[j] - ref) < 0.03f, "y[%d] = %g, float %g", j, (double)yq[j], (double)ref);
    }
    oq_model_free(f);
    oq_model_free(r.m);
}

/* Loop(3 iterations) carrying v: v <- v M with M = 2 I. The body's input v_in takes the
 * values x, 2x, 4x and its output 2x, 4x, 8x: the calibrated extremes are exact
 * multiples of the input's. */
Test(quant_subgraphs, loop_body_inputs_and_outputs_observed_every_iteration)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 4}, 2);
    int64_t three = 3;
    uint8_t yes = 1;
    tp_init(m, "M", OQ_DTYPE_INT64, (int64_t[]){1}, 0, &three);
    tp_init(m, "c0", OQ_DTYPE_BOOL, (int64_t[]){1}, 0, &yes);
    oq_value *li[3] = {tp_value(m, "M"), tp_value(m, "c0"), tp_value(m, "x")}, *y = tp_value(m, "y");
    oq_node *loop = oq_node_new(m->graph, "Loop", NULL, "loop", li, 3, &y, 1);
    oq_graph *b = tu_add_subgraph(loop, "body");
    oq_value *it = oq_graph_new_value(b, "it"), *ci = oq_graph_new_value(b, "c_in"), *vi = oq_graph_new_value(b, "v_in");
    oq_graph_add_input(b, it, oq_type_tensor(m, OQ_DTYPE_INT64, NULL, NULL, 0));
    oq_graph_add_input(b, ci, oq_type_tensor(m, OQ_DTYPE_BOOL, NULL, NULL, 0));
    oq_graph_add_input(b, vi, oq_type_tensor(m, OQ_DTYPE_FLOAT, (int64_t[]){1, 4}, NULL, 2));
    float w[16] = {0};
    for (int i = 0; i < 4; i++)
        w[i * 5] = 2.0f;
    oq_value *wv = oq_graph_add_initializer(b, "Wl", OQ_DTYPE_FLOAT, (int64_t[]){4, 4}, 2, w, 64);
    oq_value *co = oq_graph_new_value(b, "c_out"), *vo = oq_graph_new_value(b, "v_out");
    body_node(b, "Identity", "keep", &ci, 1, co);
    oq_value *mi[2] = {vi, wv};
    body_node(b, "MatMul", "double", mi, 2, vo);
    oq_graph_add_output(b, co, NULL);
    oq_graph_add_output(b, vo, NULL);
    oq_graph_append(m->graph, loop);
    tp_output(m, "y");
    tp_assert_valid(m);

    tp_run(m, "calibrate{random=5,seed=9,method=minmax},insert-qdq{keep-calibration=true}");
    oq_calib_table t = table_of(m);
    const oq_calib_entry *ex = oq_calib_table_find(&t, "x");
    const oq_calib_entry *ei = oq_calib_table_find(&t, "loop.body/v_in");
    const oq_calib_entry *eo = oq_calib_table_find(&t, "loop.body/v_out");
    cr_assert(ex && ei && eo, "missing ranges: x %p v_in %p v_out %p", (void *)ex, (void *)ei, (void *)eo);
    cr_assert_eq(ei->min, ex->min);      /* first iteration: x itself */
    cr_assert_eq(ei->max, 4.0f * ex->max); /* third: 4x */
    cr_assert_eq(eo->min, 2.0f * ex->min);
    cr_assert_eq(eo->max, 8.0f * ex->max);
    /* QDQ on the body input, inside the body; the weight's DQ too */
    oq_node *q = find_node(b, "QuantizeLinear", vi);
    cr_assert(q, "no QuantizeLinear on the body input");
    float s = tp_floats(q->inputs[1])[0];
    cr_assert_float_eq(s, 4.0f * ex->max / 255.0f, 1e-7f, "uint8 scale of [0, 4 max x]");
    oq_node *mm = find_node(b, "MatMul", NULL);
    cr_assert_str_eq(mm->inputs[1]->producer->op_type, "DequantizeLinear");
    oq_calib_table_free(&t);
    oq_model_free(m);
}

/* Sigmoid outputs: a graph output whose observed range [0.0006, 0.003] is far narrower
 * than [0, 1] gets that range (uint8: scale 0.003/255 = 1.176e-5, zero point 0) instead
 * of [0, 1] (scale 1/255 = 3.9e-3, more than the whole observed range); an inner one too
 * (its observed extremes, not its clipped percentile range lo/hi); a wide one keeps
 * [0, 1]. */
Test(quant_subgraphs, fixed_range_narrowed_to_the_observed_range)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 4}, 2);
    float w[16];
    for (int i = 0; i < 16; i++)
        w[i] = (float)(i % 5) / 8.0f - 0.25f;
    tp_init_f(m, "W", (int64_t[]){4, 4}, 2, w);
    tp_node(m, "MatMul", "mm", "x,W", "s");
    tp_node(m, "Sigmoid", "sig_out", "s", "p");       /* graph output, narrow */
    tp_node(m, "Sigmoid", "sig_in", "s", "q");        /* inner, narrow lo/hi, wide min/max */
    tp_node(m, "MatMul", "mm_q", "q,W", "z");
    tp_node(m, "Sigmoid", "sig_wide", "s", "r");      /* inner, wide */
    tp_node(m, "MatMul", "mm_r", "r,W", "u");
    tp_output(m, "p");
    tp_output(m, "z");
    tp_output(m, "u");
    static const char *names[] = {"x", "s", "p", "q", "r", "z", "u"};
    /* {min, max, lo, hi} */
    static const float rg[][4] = {{-1, 1, -1, 1}, {-8, -5.8f, -8, -5.8f}, {0.0006f, 0.003f, 0.0007f, 0.0025f},
                                  {0.0f, 0.3f, 0.01f, 0.2f}, {0.3f, 0.99f, 0.3f, 0.99f}, {-2, 2, -2, 2}, {-2, 2, -2, 2}};
    oq_calib_table t;
    memset(&t, 0, sizeof t);
    t.items = calloc(7, sizeof(oq_calib_entry));
    for (size_t i = 0; i < 7; i++) {
        t.items[i].name = strdup(names[i]);
        t.items[i].min = rg[i][0];
        t.items[i].max = rg[i][1];
        t.items[i].lo = rg[i][2];
        t.items[i].hi = rg[i][3];
    }
    t.count = 7;
    char *j = oq_calib_table_to_json(&t);
    oq_model_set_metadata(m, OQ_CALIB_METADATA_KEY, j);
    free(j);
    oq_calib_table_free(&t);
    oq_pass_result res = tp_run(m, "insert-qdq");
    /* graph output p: observed extremes (not the clipped lo/hi), 0 joins the range */
    cr_assert_float_eq(tp_floats(tp_value(m, "p_scale"))[0], 0.003f / 255.0f, 1e-10f);
    cr_assert_eq(((const uint8_t *)oq_tensor_data(oq_value_const_tensor(tp_value(m, "p_zero_point")), NULL))[0], 0);
    /* inner q: its observed [0, 0.3] (not the clipped [0.01, 0.2]) -> scale 0.3/255 */
    cr_assert_float_eq(tp_floats(tp_value(m, "q_scale"))[0], 0.3f / 255.0f, 1e-9f);
    /* r: [0, 0.99] gives a step 0.99 of [0, 1]'s, not half: stays [0, 1] */
    cr_assert_float_eq(tp_floats(tp_value(m, "r_scale"))[0], 1.0f / 255.0f, 1e-9f);
    cr_assert_eq(stat_of(&res, "fixed_ranges_narrowed"), 2);
    oq_model_free(m);
}

/* An overrides file names a body's tensor by its scoped name, as the table does. */
Test(quant_subgraphs, overrides_use_the_scoped_name)
{
    if_model r = build_if(false);
    char *dir = tu_tmpdir(), f[600], pipe[800];
    snprintf(f, sizeof f, "%s/ov.json", dir);
    const char *js = "{\"if.then_branch/yt\": {\"scale\": 0.01, \"zero_point\": 100}}";
    cr_assert_eq(tu_write_file(f, js, strlen(js)), 0);
    snprintf(pipe, sizeof pipe, "calibrate{random=3,method=minmax},insert-qdq{overrides=%s}", f);
    oq_diag d;
    oq_pass_result res;
    cr_assert_eq(tp_run_diag(r.m, pipe, &res, &d), OQ_OK);
    for (size_t i = 0; i < d.count; i++)
        cr_assert_null(strstr(d.entries[i].message, "not in the model"), "%s", d.entries[i].message);
    cr_assert_float_eq(tp_floats(oq_graph_find_value(r.then_g, "yt_scale"))[0], 0.01f, 0);
    const uint8_t *zp = oq_tensor_data(oq_value_const_tensor(oq_graph_find_value(r.then_g, "yt_zero_point")), NULL);
    cr_assert_eq(zp[0], 100);
    oq_diag_free(&d);
    oq_model_free(r.m);
    free(dir);
}

/* Scan over the rows of x [3, 4]: the body sees each row xi (a scanned input) and the
 * running sum acc_in (a state: 0, r0, r0 + r1), and computes yi = xi Wb. The table's
 * ranges for the body inputs are the extremes of exactly those values. */
Test(quant_subgraphs, scan_body_inputs_are_the_slices_and_the_states)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){3, 4}, 2);
    float zero4[4] = {0};
    tp_init_f(m, "acc0", (int64_t[]){4}, 1, zero4);
    oq_value *si[2] = {tp_value(m, "acc0"), tp_value(m, "x")}, *so[2] = {tp_value(m, "acc"), tp_value(m, "ys")};
    oq_node *scan = oq_node_new(m->graph, "Scan", NULL, "scan", si, 2, so, 2);
    oq_node_set_attr_int(scan, "num_scan_inputs", 1);
    oq_graph *b = tu_add_subgraph(scan, "body");
    oq_value *ai = oq_graph_new_value(b, "acc_in"), *xi = oq_graph_new_value(b, "xi");
    oq_graph_add_input(b, ai, oq_type_tensor(m, OQ_DTYPE_FLOAT, (int64_t[]){4}, NULL, 1));
    oq_graph_add_input(b, xi, oq_type_tensor(m, OQ_DTYPE_FLOAT, (int64_t[]){4}, NULL, 1));
    float w[8];
    for (int i = 0; i < 8; i++)
        w[i] = (float)(i % 3) - 1.0f;
    oq_value *wb = oq_graph_add_initializer(b, "Wb", OQ_DTYPE_FLOAT, (int64_t[]){4, 2}, 2, w, 32);
    oq_value *ao = oq_graph_new_value(b, "acc_out"), *yi = oq_graph_new_value(b, "yi");
    oq_value *add_in[2] = {ai, xi}, *mm_in[2] = {xi, wb};
    body_node(b, "Add", "sum", add_in, 2, ao);
    body_node(b, "MatMul", "proj", mm_in, 2, yi);
    oq_graph_add_output(b, ao, NULL);
    oq_graph_add_output(b, yi, NULL);
    oq_graph_append(m->graph, scan);
    tp_output(m, "acc");
    tp_output(m, "ys");
    tp_assert_valid(m);
    /* one sample: rows (1, 2, 3, 4), (-1, 0, 5, -2), (0.5, -3, 1, 2) */
    float x[12] = {1, 2, 3, 4, -1, 0, 5, -2, 0.5f, -3, 1, 2};
    char *dir = tu_tmpdir(), f[600], pipe[700];
    snprintf(f, sizeof f, "%s/s0.npy", dir);
    oq_rt_tensor tt;
    oq_rt_tensor_borrow(&tt, OQ_DTYPE_FLOAT, (int64_t[]){3, 4}, 2, x);
    cr_assert_eq(oq_tensor_file_write_npy(f, &tt, NULL), OQ_OK);
    snprintf(pipe, sizeof pipe, "calibrate{data=%s,method=minmax},insert-qdq{keep-calibration=true}", dir);
    tp_run(m, pipe);
    oq_calib_table t = table_of(m);
    const oq_calib_entry *ex = oq_calib_table_find(&t, "scan.body/xi");
    const oq_calib_entry *ea = oq_calib_table_find(&t, "scan.body/acc_in");
    cr_assert(ex && ea, "missing body input ranges");
    cr_assert_eq(ex->min, -3.0f);
    cr_assert_eq(ex->max, 5.0f);
    /* acc_in: 0 | (1,2,3,4) | (0,2,8,2) */
    cr_assert_eq(ea->min, 0.0f);
    cr_assert_eq(ea->max, 8.0f);
    /* the MatMul's input xi gets its QDQ inside the body: uint8 scale 8/255 */
    oq_node *q = find_node(b, "QuantizeLinear", xi);
    cr_assert(q, "no QuantizeLinear on the scanned input");
    cr_assert_float_eq(tp_floats(q->inputs[1])[0], 8.0f / 255.0f, 1e-7f);
    cr_assert_str_eq(find_node(b, "MatMul", NULL)->inputs[1]->producer->op_type, "DequantizeLinear");
    oq_calib_table_free(&t);
    oq_model_free(m);
    free(dir);
}
