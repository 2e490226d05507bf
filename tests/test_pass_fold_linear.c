/* fold-linear: structure (which nodes remain, which constants they hold) and numbers.
 *
 * Numbers: every rewritten graph is run through onnxq's executor next to the graph as
 * built (a copy taken before the pass) on the same deterministic input, and some are
 * also checked against the formula evaluated by hand in double. The rewrite is exact
 * in real arithmetic but not in float: the original rounds after the Conv and after each
 * Mul/Add, the folded graph rounds the new weights once and accumulates W'x in one
 * sum. With the small, well-scaled weights and inputs used here (|terms| <= ~10, at most
 * 36 terms per sum) the difference stays within a few float ulps of the largest term:
 * the tolerance is 1e-5 relative plus 1e-5 absolute (1e-5 absolute ~ 80 ulps at 1.0,
 * because a sum that nearly cancels has a tiny result but an error set by its terms). */
#include "test_pass_prep_util.h"

static void assert_agree(const float *want, const float *got, int64_t n, const char *what)
{
    double max_abs;
    double w = pp_worst(want, got, n, 1e-5, 1e-5, &max_abs);
    cr_assert(w <= 1.0, "%s: differs beyond float rounding (max abs diff %g)", what, max_abs);
}

/* Run before (the copy) and m on the same input and compare. */
static void assert_same_outputs(oq_model *before, oq_model *m, const int64_t *dims, size_t rank,
                                const char *what)
{
    int64_t n = oq_dims_numel(dims, rank);
    float *x = malloc((size_t)n * sizeof(float)), *a, *b;
    pp_fill(x, n, 2.0f, 7);
    int64_t na = pp_run(before, x, dims, rank, &a), nb = pp_run(m, x, dims, rank, &b);
    cr_assert_eq(na, nb, "%s: output size changed", what);
    assert_agree(a, b, na, what);
    free(x);
    free(a);
    free(b);
}

static const float w6[6] = {1.0f, -2.0f, 0.5f, 0.25f, -1.5f, 3.0f};

/* x[1,2,2,2] -> 1x1 Conv(W[3,2,1,1], B?) -> z */
static oq_model *conv_model(bool bias)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 2, 2, 2}, 4);
    tp_init_f(m, "W", (int64_t[]){3, 2, 1, 1}, 4, w6);
    if (bias)
        tp_init_f(m, "B", (int64_t[]){3}, 1, (const float[]){0.1f, -0.2f, 0.3f});
    tp_node(m, "Conv", "conv", bias ? "x,W,B" : "x,W", "z");
    return m;
}

Test(fold_linear, conv_mul_add_mul_folds_to_a_fixed_point)
{
    oq_model *m = conv_model(true);
    const float s1[3] = {2.0f, -0.5f, 1.5f};
    tp_init_f(m, "s1", (int64_t[]){3, 1, 1}, 3, s1);  /* per channel */
    tp_init_f(m, "t", (int64_t[]){1}, 1, (const float[]){0.75f}); /* scalar */
    tp_init_f(m, "s2", (int64_t[]){}, 0, (const float[]){-3.0f}); /* rank 0, first operand */
    tp_node(m, "Mul", "mul1", "z,s1", "a");
    tp_node(m, "Add", "add", "a,t", "b");
    tp_node(m, "Mul", "mul2", "s2,b", "y");
    tp_output(m, "y");
    oq_model *before = pp_clone(m);
    oq_pass_result r = tp_run(m, "fold-linear");
    cr_assert_eq(tp_stat(&r, "folded_after"), 3);
    cr_assert_eq(m->graph->n_nodes, 1, "Conv -> Mul -> Add -> Mul is one Conv");
    oq_node *conv = m->graph->first;
    cr_assert_str_eq(conv->op_type, "Conv");
    cr_assert_str_eq(conv->outputs[0]->name, "y", "the Conv writes the graph output");
    cr_assert_eq(m->graph->n_initializers, 2, "old weights and the Mul/Add constants are gone");
    /* by hand: y[c] = -3 * ((W x + B)[c] * s1[c] + 0.75) */
    const float *nw = tp_floats(conv->inputs[1]), *nb = tp_floats(conv->inputs[2]);
    const float B[3] = {0.1f, -0.2f, 0.3f};
    for (int c = 0; c < 3; c++) {
        cr_assert_float_eq(nw[c * 2], (float)(-3.0 * s1[c] * w6[c * 2]), 1e-6);
        double want_b = -3.0 * ((double)B[c] * s1[c] + 0.75);
        cr_assert(fabs(nb[c] - want_b) <= 1e-6, "bias[%d] %g, want %g", c, nb[c], want_b);
    }
    assert_same_outputs(before, m, (int64_t[]){1, 2, 2, 2}, 4, "conv chain");
    oq_model_free(before);
    oq_model_free(m);
}

Test(fold_linear, sub_and_div_and_a_bias_created)
{
    oq_model *m = conv_model(false);
    tp_init_f(m, "k1", (int64_t[]){1, 3, 1, 1}, 4, (const float[]){1.0f, 2.0f, -1.0f});
    tp_init_f(m, "k2", (int64_t[]){1}, 1, (const float[]){0.5f});
    tp_init_f(m, "k3", (int64_t[]){3, 1, 1}, 3, (const float[]){4.0f, -2.0f, 0.25f});
    tp_node(m, "Sub", "sub1", "z,k1", "a");   /* z - k1 */
    tp_node(m, "Sub", "sub2", "k2,a", "b");   /* 0.5 - a */
    tp_node(m, "Div", "div", "b,k3", "y");    /* b / k3 */
    tp_output(m, "y");
    oq_model *before = pp_clone(m);
    oq_pass_result r = tp_run(m, "fold-linear");
    cr_assert_eq(tp_stat(&r, "folded_after"), 3);
    cr_assert_eq(m->graph->n_nodes, 1);
    oq_node *conv = m->graph->first;
    cr_assert_eq(conv->n_inputs, 3, "a bias was created");
    const float *nb = tp_floats(conv->inputs[2]);
    const double k1[3] = {1, 2, -1}, k3[3] = {4, -2, 0.25};
    for (int c = 0; c < 3; c++) /* (0.5 - (0 - k1)) / k3 at z = 0 */
        cr_assert(fabs(nb[c] - (0.5 + k1[c]) / k3[c]) <= 1e-6);
    assert_same_outputs(before, m, (int64_t[]){1, 2, 2, 2}, 4, "sub/div chain");
    oq_model_free(before);
    oq_model_free(m);
}

Test(fold_linear, conv_transpose_groups_and_gemm_and_matmul)
{
    /* ConvTranspose group 2: W[Cin=4, 2, 2, 2] -> 4 output channels */
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 4, 2, 2}, 4);
    float w[32];
    pp_fill(w, 32, 1.0f, 3);
    tp_init_f(m, "W", (int64_t[]){4, 2, 2, 2}, 4, w);
    tp_init_f(m, "B", (int64_t[]){4}, 1, (const float[]){0.5f, -0.5f, 1.0f, 0.0f});
    oq_node *ct = tp_node(m, "ConvTranspose", "ct", "x,W,B", "z");
    oq_node_set_attr_int(ct, "group", 2);
    oq_node_set_attr_ints(ct, "strides", (const int64_t[]){2, 2}, 2);
    tp_init_f(m, "s", (int64_t[]){4, 1, 1}, 3, (const float[]){1.0f, -2.0f, 0.5f, 3.0f});
    tp_init_f(m, "t", (int64_t[]){4, 1, 1}, 3, (const float[]){0.25f, 0.5f, -1.0f, 2.0f});
    tp_node(m, "Mul", "mul", "z,s", "a");
    tp_node(m, "Add", "add", "a,t", "y");
    tp_output(m, "y");
    oq_model *before = pp_clone(m);
    oq_pass_result r = tp_run(m, "fold-linear");
    cr_assert_eq(tp_stat(&r, "folded_after"), 2);
    cr_assert_eq(m->graph->n_nodes, 1);
    assert_same_outputs(before, m, (int64_t[]){1, 4, 2, 2}, 4, "convtranspose");
    oq_model_free(before);
    oq_model_free(m);

    /* Gemm transB=1, beta=0.5, C[1, 3]; Mul [3] then Add [1, 3] */
    for (int transB = 0; transB < 2; transB++) {
        m = tp_model(13);
        tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){2, 2}, 2);
        tp_init_f(m, "Bm", transB ? (int64_t[]){3, 2} : (int64_t[]){2, 3}, 2, w6);
        tp_init_f(m, "C", (int64_t[]){1, 3}, 2, (const float[]){0.5f, 1.0f, -0.25f});
        oq_node *g = tp_node(m, "Gemm", "gemm", "x,Bm,C", "z");
        oq_node_set_attr_int(g, "transB", transB);
        oq_node_set_attr_float(g, "beta", 0.5f);
        oq_node_set_attr_float(g, "alpha", 2.0f);
        tp_init_f(m, "s", (int64_t[]){3}, 1, (const float[]){2.0f, -1.0f, 0.5f});
        tp_init_f(m, "t", (int64_t[]){1, 3}, 2, (const float[]){1.0f, 2.0f, 3.0f});
        tp_node(m, "Mul", "mul", "z,s", "a");
        tp_node(m, "Add", "add", "t,a", "y");
        tp_output(m, "y");
        before = pp_clone(m);
        r = tp_run(m, "fold-linear");
        cr_assert_eq(tp_stat(&r, "folded_after"), 2, "gemm transB=%d", transB);
        cr_assert_eq(m->graph->n_nodes, 1);
        assert_same_outputs(before, m, (int64_t[]){2, 2}, 2, "gemm");
        oq_model_free(before);
        oq_model_free(m);
    }

    /* MatMul: a per-column Mul folds into W; the Add after it has nowhere to go */
    m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){2, 2}, 2);
    tp_init_f(m, "W", (int64_t[]){2, 3}, 2, w6);
    tp_node(m, "MatMul", "mm", "x,W", "z");
    tp_init_f(m, "s", (int64_t[]){3}, 1, (const float[]){2.0f, -1.0f, 0.5f});
    tp_init_f(m, "t", (int64_t[]){1}, 1, (const float[]){1.0f});
    tp_node(m, "Div", "div", "z,s", "a");
    tp_node(m, "Add", "add", "a,t", "y");
    tp_output(m, "y");
    before = pp_clone(m);
    r = tp_run(m, "fold-linear");
    cr_assert_eq(tp_stat(&r, "folded_after"), 1);
    cr_assert_eq(tp_stat(&r, "skipped_matmul_shift"), 1);
    cr_assert_eq(tp_count_op(m, "MatMul"), 1);
    cr_assert_eq(tp_count_op(m, "Add"), 1);
    cr_assert_eq(tp_count_op(m, "Div"), 0);
    const float *nw = tp_floats(tp_find_op(m, "MatMul")->inputs[1]);
    cr_assert_float_eq(nw[0], 0.5f, 0, "column 0 divided by 2");
    cr_assert_float_eq(nw[1], 2.0f, 0, "column 1 divided by -1");
    assert_same_outputs(before, m, (int64_t[]){2, 2}, 2, "matmul");
    oq_model_free(before);
    oq_model_free(m);
}

/* Conv -> Mul(s) -> y with a twist given by `variant`; the Mul must stay. */
static void assert_not_folded(int variant, const char *why)
{
    oq_model *m = conv_model(true);
    const float s3[3] = {2.0f, -0.5f, 1.5f};
    switch (variant) {
    case 0: /* z has two consumers */
        tp_init_f(m, "s", (int64_t[]){1}, 1, s3);
        tp_node(m, "Mul", "mul", "z,s", "y");
        tp_node(m, "Relu", "relu", "z", "y2");
        tp_output(m, "y");
        tp_output(m, "y2");
        break;
    case 1: /* z is a graph output */
        tp_init_f(m, "s", (int64_t[]){1}, 1, s3);
        tp_node(m, "Mul", "mul", "z,s", "y");
        tp_output(m, "y");
        tp_output(m, "z");
        break;
    case 2: /* the other operand is not a constant */
        tp_input(m, "s", OQ_DTYPE_FLOAT, (int64_t[]){1}, 1);
        tp_node(m, "Mul", "mul", "z,s", "y");
        tp_output(m, "y");
        break;
    case 3: /* [2] broadcasts over the last axis (width), not the channels */
        tp_init_f(m, "s", (int64_t[]){2}, 1, s3);
        tp_node(m, "Mul", "mul", "z,s", "y");
        tp_output(m, "y");
        break;
    case 4: /* [1, 1, 1, 1, 1] would make the output rank 5 */
        tp_init_f(m, "s", (int64_t[]){1, 1, 1, 1, 1}, 5, s3);
        tp_node(m, "Mul", "mul", "z,s", "y");
        tp_output(m, "y");
        break;
    case 5: /* k / z is not affine in z */
        tp_init_f(m, "s", (int64_t[]){1}, 1, s3);
        tp_node(m, "Div", "mul", "s,z", "y");
        tp_output(m, "y");
        break;
    default:
        cr_assert_fail();
    }
    oq_pass_result r = tp_run(m, "fold-linear");
    cr_assert_eq(tp_stat(&r, "folded_after"), 0, "%s", why);
    cr_assert_eq(tp_stat(&r, "folded_before"), 0, "%s", why);
    cr_assert(!r.changed, "%s", why);
    cr_assert_eq(m->graph->n_nodes, variant == 0 ? 3 : 2, "%s", why);
    cr_assert_eq(tp_floats(m->graph->first->inputs[1])[0], 1.0f, "%s: weights untouched", why);
    oq_model_free(m);
}

Test(fold_linear, must_not_fold)
{
    assert_not_folded(0, "two consumers");
    assert_not_folded(1, "graph output");
    assert_not_folded(2, "non-constant operand");
    assert_not_folded(3, "wrong broadcast axis");
    assert_not_folded(4, "rank-growing constant");
    assert_not_folded(5, "constant divided by the output");
}

Test(fold_linear, wrong_axis_even_when_the_sizes_match)
{
    /* output [1, 3, 3, 3]: a [3] constant has the channel count but sits on the width */
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 2, 3, 3}, 4);
    tp_init_f(m, "W", (int64_t[]){3, 2, 1, 1}, 4, w6);
    tp_node(m, "Conv", "conv", "x,W", "z");
    tp_init_f(m, "s", (int64_t[]){3}, 1, (const float[]){2.0f, -0.5f, 1.5f});
    tp_node(m, "Mul", "mul", "z,s", "y");
    tp_output(m, "y");
    oq_pass_result r = tp_run(m, "fold-linear");
    cr_assert_eq(tp_stat(&r, "skipped_broadcast"), 1);
    cr_assert_eq(m->graph->n_nodes, 2);
    oq_model_free(m);
}

/* x[1,4,5,5] -> op(k) -> y -> Conv(W[3 or 4, cpg, k, k], pads) ... */
static oq_model *before_model(const char *op, const int64_t *kd, size_t kr, const float *k,
                              int64_t ksize, int64_t pad, int64_t group, bool with_mul)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 4, 5, 5}, 4);
    const char *in = "x";
    if (with_mul) {
        tp_init_f(m, "s0", (int64_t[]){1}, 1, (const float[]){-1.5f});
        tp_node(m, "Mul", "mul0", "x,s0", "h");
        in = "h";
    }
    tp_init_f(m, "k", kd, kr, k);
    char ins[64];
    snprintf(ins, sizeof ins, "%s,k", in);
    tp_node(m, op, "pre", ins, "y");
    int64_t M = group == 1 ? 3 : 4, cpg = 4 / group, n = M * cpg * ksize * ksize;
    float *w = malloc((size_t)n * sizeof(float));
    pp_fill(w, n, 1.0f, 11);
    tp_init_f(m, "W", (int64_t[]){M, cpg, ksize, ksize}, 4, w);
    free(w);
    float b[4] = {0.5f, -0.25f, 1.0f, 2.0f};
    tp_init_f(m, "B", (int64_t[]){M}, 1, b);
    oq_node *conv = tp_node(m, "Conv", "conv", "y,W,B", "out");
    oq_node_set_attr_int(conv, "group", group);
    oq_node_set_attr_ints(conv, "pads", (const int64_t[]){pad, pad, pad, pad}, 4);
    tp_output(m, "out");
    return m;
}

Test(fold_linear, before_a_conv)
{
    const float kc[4] = {2.0f, -1.0f, 0.5f, 3.0f};
    const int64_t d411[3] = {4, 1, 1}, d1[1] = {1};
    const int64_t dims[4] = {1, 4, 5, 5};
    /* a per-channel scale folds into a padded 3x3 Conv and a depthwise one */
    for (int64_t group = 1; group <= 4; group *= 4) {
        oq_model *m = before_model("Mul", d411, 3, kc, 3, 1, group, false);
        oq_model *before = pp_clone(m);
        oq_pass_result r = tp_run(m, "fold-linear");
        cr_assert_eq(tp_stat(&r, "folded_before"), 1, "group %d", (int)group);
        cr_assert_eq(m->graph->n_nodes, 1);
        cr_assert_str_eq(m->graph->first->inputs[0]->name, "x");
        assert_same_outputs(before, m, dims, 4, "scale before conv");
        oq_model_free(before);
        oq_model_free(m);
    }
    /* a shift folds into an unpadded Conv (3x3, pads 0), into the bias */
    oq_model *m = before_model("Add", d411, 3, kc, 3, 0, 1, false);
    oq_model *before = pp_clone(m);
    oq_pass_result r = tp_run(m, "fold-linear");
    cr_assert_eq(tp_stat(&r, "folded_before"), 1);
    cr_assert_eq(m->graph->n_nodes, 1);
    assert_same_outputs(before, m, dims, 4, "shift before unpadded conv");
    oq_model_free(before);
    oq_model_free(m);
    /* ... but not into a padded one (the border would see k instead of 0) */
    m = before_model("Sub", d1, 1, kc, 3, 1, 1, false);
    r = tp_run(m, "fold-linear");
    cr_assert_eq(tp_stat(&r, "folded_before"), 0);
    cr_assert_eq(tp_stat(&r, "skipped_padding"), 1);
    cr_assert_eq(m->graph->n_nodes, 2);
    oq_model_free(m);
    /* Mul(-1.5) -> Add(k) -> padded Conv: rewritten as Add(k / -1.5) -> Mul(-1.5), and
     * the Mul folds: Add -> Conv */
    m = before_model("Add", d411, 3, kc, 3, 1, 1, true);
    before = pp_clone(m);
    r = tp_run(m, "fold-linear");
    cr_assert_eq(tp_stat(&r, "swapped_scale_shift"), 1);
    cr_assert_eq(tp_stat(&r, "folded_before"), 1);
    cr_assert_eq(m->graph->n_nodes, 2);
    oq_node *add = m->graph->first;
    cr_assert_str_eq(add->op_type, "Add");
    cr_assert_str_eq(add->inputs[0]->name, "x");
    const float *sh = tp_floats(add->inputs[1]);
    for (int c = 0; c < 4; c++)
        cr_assert_float_eq(sh[c], (float)(kc[c] / -1.5), 1e-7);
    cr_assert_str_eq(add->next->op_type, "Conv");
    /* the Add's output holds x + k / -1.5, not the old Mul output: a new name, so that
     * tools matching tensors by name (verify, fallback) do not compare the two */
    oq_value *old_mid = oq_graph_find_local(before->graph, add->outputs[0]->name);
    cr_assert_null(old_mid, "swapped value kept the name \"%s\" of a tensor of the original", add->outputs[0]->name);
    cr_assert(strstr(add->outputs[0]->name, "_shifted"), "%s", add->outputs[0]->name);
    assert_same_outputs(before, m, dims, 4, "swapped shift before padded conv");
    oq_model_free(before);
    oq_model_free(m);
    /* before-conv=false leaves them all */
    m = before_model("Mul", d411, 3, kc, 3, 1, 1, false);
    r = tp_run(m, "fold-linear{before-conv=false}");
    cr_assert(!r.changed);
    oq_model_free(m);
}

Test(fold_linear, before_needs_every_use_to_be_a_conv)
{
    const float kc[1] = {2.0f};
    oq_model *m = before_model("Mul", (const int64_t[]){1}, 1, kc, 1, 0, 1, false);
    tp_node(m, "Relu", "relu", "y", "r");
    tp_output(m, "r");
    oq_pass_result r = tp_run(m, "fold-linear");
    cr_assert(!r.changed);
    cr_assert_eq(tp_count_op(m, "Mul"), 1);
    oq_model_free(m);
    /* two Convs: both take the scale */
    m = before_model("Mul", (const int64_t[]){1}, 1, kc, 1, 0, 1, false);
    tp_init_f(m, "W2", (int64_t[]){1, 4, 1, 1}, 4, (const float[]){1.0f, 2.0f, 3.0f, 4.0f});
    tp_node(m, "Conv", "conv2", "y,W2", "out2");
    tp_output(m, "out2");
    oq_model *before = pp_clone(m);
    r = tp_run(m, "fold-linear");
    cr_assert_eq(tp_stat(&r, "folded_before"), 1);
    cr_assert_eq(tp_count_op(m, "Mul"), 0);
    oq_node *c2 = m->graph->first;
    while (c2 && strcmp(c2->name, "conv2") != 0)
        c2 = c2->next;
    cr_assert(c2);
    const float *w2 = tp_floats(c2->inputs[1]);
    cr_assert_float_eq(w2[3], 8.0f, 0);
    assert_same_outputs(before, m, (int64_t[]){1, 4, 5, 5}, 4, "two convs");
    oq_model_free(before);
    oq_model_free(m);
}

/* scalar-only: one-element constants fold (after the Conv and before the next one), a
 * per-channel constant stays where it is, counted as skipped_per_channel. */
Test(fold_linear, scalar_only_leaves_per_channel_constants)
{
    oq_model *m = conv_model(true);
    tp_init_f(m, "s", (int64_t[]){1}, 1, (const float[]){1.5f});
    tp_init_f(m, "t", (int64_t[]){3, 1, 1}, 3, (const float[]){0.25f, -1.0f, 2.0f});
    tp_node(m, "Mul", "mul", "z,s", "a");
    tp_node(m, "Add", "add", "a,t", "y");
    tp_output(m, "y");
    oq_model *before = pp_clone(m);
    oq_pass_result r = tp_run(m, "fold-linear{scalar-only=true}");
    cr_assert_eq(tp_stat(&r, "folded_after"), 1, "the scalar Mul folds");
    cr_assert_eq(tp_stat(&r, "skipped_per_channel"), 1, "the per-channel Add stays");
    cr_assert_eq(m->graph->n_nodes, 2);
    cr_assert_eq(tp_count_op(m, "Mul"), 0);
    cr_assert_eq(tp_count_op(m, "Add"), 1);
    assert_same_outputs(before, m, (int64_t[]){1, 2, 2, 2}, 4, "scalar-only after");
    oq_model_free(before);
    oq_model_free(m);
    /* without the option both fold */
    m = conv_model(true);
    tp_init_f(m, "s", (int64_t[]){1}, 1, (const float[]){1.5f});
    tp_init_f(m, "t", (int64_t[]){3, 1, 1}, 3, (const float[]){0.25f, -1.0f, 2.0f});
    tp_node(m, "Mul", "mul", "z,s", "a");
    tp_node(m, "Add", "add", "a,t", "y");
    tp_output(m, "y");
    r = tp_run(m, "fold-linear");
    cr_assert_eq(tp_stat(&r, "folded_after"), 2);
    cr_assert_eq(m->graph->n_nodes, 1);
    oq_model_free(m);
    /* before a Conv: a per-channel scale stays, a scalar one folds */
    const float kc[4] = {2.0f, -1.0f, 0.5f, 3.0f};
    m = before_model("Mul", (const int64_t[]){4, 1, 1}, 3, kc, 3, 1, 1, false);
    r = tp_run(m, "fold-linear{scalar-only=true}");
    cr_assert(!r.changed);
    cr_assert_eq(tp_stat(&r, "skipped_per_channel"), 1);
    oq_model_free(m);
    m = before_model("Mul", (const int64_t[]){1}, 1, kc, 3, 1, 1, false);
    before = pp_clone(m);
    r = tp_run(m, "fold-linear{scalar-only=true}");
    cr_assert_eq(tp_stat(&r, "folded_before"), 1);
    cr_assert_eq(m->graph->n_nodes, 1);
    assert_same_outputs(before, m, (int64_t[]){1, 4, 5, 5}, 4, "scalar-only before");
    oq_model_free(before);
    oq_model_free(m);
}

/* TensorFlow's Conv1D: Conv on [N, C, 1, W], Squeeze of the spatial axis 2, then Add of
 * a [1, C, 1] bias: the channels stay on axis 1, so the Add folds into the Conv's bias
 * and the Squeeze writes its output. A Squeeze of the batch axis (channels move to axis
 * 0) and one without axes (which might drop the batch axis) are left alone. */
Test(fold_linear, across_a_squeeze_of_spatial_axes)
{
    const float k[3] = {0.5f, -1.25f, 2.0f};
    for (int variant = 0; variant < 3; variant++) {
        oq_model *m = tp_model(13);
        tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 2, 1, 3}, 4);
        tp_init_f(m, "W", (int64_t[]){3, 2, 1, 1}, 4, w6);
        tp_node(m, "Conv", "conv", "x,W", "z");
        if (variant == 0)
            tp_init(m, "axes", OQ_DTYPE_INT64, (int64_t[]){1}, 1, (const int64_t[]){-2});
        else if (variant == 1)
            tp_init(m, "axes", OQ_DTYPE_INT64, (int64_t[]){1}, 1, (const int64_t[]){0});
        tp_node(m, "Squeeze", "sq", variant == 2 ? "z" : "z,axes", "s");
        tp_init_f(m, "k", variant == 1 ? (int64_t[]){3, 1, 1} : (int64_t[]){1, 3, 1}, 3, k);
        tp_node(m, "Add", "add", "s,k", "y");
        tp_output(m, "y");
        oq_model *before = pp_clone(m);
        oq_pass_result r = tp_run(m, "fold-linear");
        if (variant == 0) {
            cr_assert_eq(tp_stat(&r, "folded_after_squeeze"), 1);
            cr_assert_eq(m->graph->n_nodes, 2, "Conv -> Squeeze");
            oq_node *conv = m->graph->first;
            cr_assert_eq(conv->n_inputs, 3, "the Add became the Conv's bias");
            const float *nb = tp_floats(conv->inputs[2]);
            for (int c = 0; c < 3; c++)
                cr_assert_float_eq(nb[c], k[c], 0);
            cr_assert_str_eq(m->graph->last->outputs[0]->name, "y", "the Squeeze writes y");
            assert_same_outputs(before, m, (int64_t[]){1, 2, 1, 3}, 4, "conv1d bias");
        } else {
            cr_assert_eq(tp_stat(&r, "folded_after_squeeze"), 0, "variant %d", variant);
            cr_assert_eq(m->graph->n_nodes, 3, "variant %d", variant);
        }
        oq_model_free(before);
        oq_model_free(m);
    }
}
