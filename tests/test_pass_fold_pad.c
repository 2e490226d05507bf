/* fold-pad: which Pads fold into the Convs after them (structure, the Conv's new pads) and
 * that the folded graph computes what the Pad + Conv did (onnxq's executor on both, the
 * same input: a Conv pads with zeros, so only the order of additions may differ). */
#include "test_pass_prep_util.h"

static void assert_same_outputs(oq_model *before, oq_model *m, const int64_t *dims, size_t rank, const char *what)
{
    int64_t n = oq_dims_numel(dims, rank);
    float *x = malloc((size_t)n * sizeof(float)), *a, *b;
    pp_fill(x, n, 2.0f, 11);
    int64_t na = pp_run(before, x, dims, rank, &a), nb = pp_run(m, x, dims, rank, &b);
    cr_assert_eq(na, nb, "%s: output size changed", what);
    double max_abs;
    cr_assert(pp_worst(a, b, na, 1e-6, 1e-6, &max_abs) <= 1.0, "%s: max abs diff %g", what, max_abs);
    free(x);
    free(a);
    free(b);
}

static oq_value *ints(oq_model *m, const char *name, const int64_t *v, int64_t n)
{
    return tp_init(m, name, OQ_DTYPE_INT64, (int64_t[]){n}, 1, v);
}

/* x[1,4,6,5], the depthwise Conv's weights; the caller adds what comes before the Conv */
static oq_model *begin(int64_t opset)
{
    oq_model *m = tp_model(opset);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 4, 6, 5}, 4);
    float w[36];
    pp_fill(w, 36, 1.0f, 5);
    tp_init_f(m, "W", (int64_t[]){4, 1, 3, 3}, 4, w);
    tp_init_f(m, "B", (int64_t[]){4}, 1, (const float[]){0.5f, -1.0f, 0.25f, 2.0f});
    return m;
}

/* in -> depthwise 3x3 Conv (pads 1) -> y */
static oq_node *finish(oq_model *m, const char *in)
{
    char ins[64];
    snprintf(ins, sizeof ins, "%s,W,B", in);
    oq_node *c = tp_node(m, "Conv", "dw", ins, "y");
    oq_node_set_attr_int(c, "group", 4);
    oq_node_set_attr_ints(c, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    tp_output(m, "y");
    return c;
}

/* x -> Pad(pads) -> depthwise Conv -> y */
static oq_model *pad_dw(int64_t opset, const int64_t *pads8)
{
    oq_model *m = begin(opset);
    ints(m, "pads", pads8, 8);
    tp_node(m, "Pad", "pad", "x,pads", "xp");
    finish(m, "xp");
    return m;
}

Test(fold_pad, zero_pad_folds_into_the_convs_pads)
{
    /* top 1, left 2, bottom 2, right 1 (ONNX Pad: begins of N, C, H, W, then ends) */
    oq_model *m = pad_dw(13, (const int64_t[]){0, 0, 1, 2, 0, 0, 2, 1});
    oq_model *before = pp_clone(m);
    oq_pass_result r = tp_run(m, "fold-pad");
    cr_assert_eq(tp_stat(&r, "pads_folded"), 1);
    cr_assert_eq(tp_count_op(m, "Pad"), 0);
    oq_node *c = tp_find_op(m, "Conv");
    cr_assert_str_eq(c->inputs[0]->name, "x", "the Conv reads the Pad's input");
    const int64_t *p;
    cr_assert_eq(oq_node_attr_ints(c, "pads", &p), 4);
    int64_t want[4] = {2, 3, 3, 2}; /* its own 1 plus the Pad's: H begin, W begin, H end, W end */
    for (int i = 0; i < 4; i++)
        cr_assert_eq(p[i], want[i], "pads[%d] = %lld, want %lld", i, (long long)p[i], (long long)want[i]);
    cr_assert_eq(m->graph->n_initializers, 2, "the pads constant is dropped (W and B are left)");
    assert_same_outputs(before, m, (int64_t[]){1, 4, 6, 5}, 4, "pad + depthwise");
    oq_model_free(before);
    oq_model_free(m);
}

Test(fold_pad, two_convs_auto_pad_valid_attribute_form_and_axes)
{
    /* one Pad read by two Convs, one with auto_pad VALID (its pads become the Pad's) */
    oq_model *m = pad_dw(13, (const int64_t[]){0, 0, 1, 1, 0, 0, 1, 1});
    float w2[8];
    pp_fill(w2, 8, 1.0f, 9);
    tp_init_f(m, "W2", (int64_t[]){2, 4, 1, 1}, 4, w2);
    oq_node *c2 = tp_node(m, "Conv", "pw", "xp,W2", "y2");
    oq_node_set_attr_string(c2, "auto_pad", "VALID");
    oq_node_set_attr_ints(c2, "strides", (const int64_t[]){2, 2}, 2);
    tp_output(m, "y2");
    oq_model *before = pp_clone(m);
    oq_pass_result r = tp_run(m, "fold-pad");
    cr_assert_eq(tp_stat(&r, "pads_folded"), 1, "left %lld", (long long)tp_stat(&r, "pads_left"));
    cr_assert_eq(tp_count_op(m, "Pad"), 0);
    const int64_t *p;
    cr_assert_eq(oq_node_attr_ints(c2, "pads", &p), 4);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(p[i], 1);
    cr_assert_str_eq(oq_node_attr_string(c2, "auto_pad", ""), "NOTSET");
    assert_same_outputs(before, m, (int64_t[]){1, 4, 6, 5}, 4, "two convs");
    oq_model_free(before);
    oq_model_free(m);

    /* Pad-2: pads and value as attributes */
    m = begin(10);
    oq_node *pad = tp_node(m, "Pad", "pad", "x", "xp");
    oq_node_set_attr_ints(pad, "pads", (const int64_t[]){0, 0, 2, 0, 0, 0, 0, 2}, 8);
    oq_node *conv = finish(m, "xp");
    before = pp_clone(m);
    r = tp_run(m, "fold-pad");
    cr_assert_eq(tp_stat(&r, "pads_folded"), 1);
    cr_assert_eq(oq_node_attr_ints(conv, "pads", &p), 4);
    cr_assert(p[0] == 3 && p[1] == 1 && p[2] == 1 && p[3] == 3);
    assert_same_outputs(before, m, (int64_t[]){1, 4, 6, 5}, 4, "Pad-2");
    oq_model_free(before);
    oq_model_free(m);

    /* Pad-18 with axes [-1, 2]: W by 1 and 0, H by 2 and 1 */
    m = begin(18);
    ints(m, "pads", (const int64_t[]){1, 2, 0, 1}, 4);
    ints(m, "axes", (const int64_t[]){-1, 2}, 2);
    tp_init_f(m, "zero", (int64_t[]){}, 0, (const float[]){0.0f});
    tp_node(m, "Pad", "pad", "x,pads,zero,axes", "xp");
    conv = finish(m, "xp");
    before = pp_clone(m);
    r = tp_run(m, "fold-pad");
    cr_assert_eq(tp_stat(&r, "pads_folded"), 1);
    cr_assert_eq(oq_node_attr_ints(conv, "pads", &p), 4);
    cr_assert(p[0] == 3 && p[1] == 2 && p[2] == 2 && p[3] == 1, "%lld %lld %lld %lld", (long long)p[0],
              (long long)p[1], (long long)p[2], (long long)p[3]);
    assert_same_outputs(before, m, (int64_t[]){1, 4, 6, 5}, 4, "Pad-18 axes");
    oq_model_free(before);
    oq_model_free(m);
}

Test(fold_pad, pads_that_are_not_a_convs_zeros_stay)
{
    static const int64_t spatial[8] = {0, 0, 1, 1, 0, 0, 1, 1};
    for (int k = 0; k < 5; k++) {
        oq_model *m = pad_dw(13, k == 0 ? (const int64_t[]){0, 1, 1, 1, 0, 0, 1, 1}   /* channels */
                                 : k == 1 ? (const int64_t[]){0, 0, -1, 1, 0, 0, 1, 1} /* a crop */
                                          : spatial);
        oq_node *pad = tp_find_op(m, "Pad");
        if (k == 2) { /* reflect */
            oq_node_set_attr_string(pad, "mode", "reflect");
        } else if (k == 3) { /* constant 1 */
            tp_init_f(m, "one", (int64_t[]){}, 0, (const float[]){1.0f});
            oq_node_set_input(pad, 2, tp_value(m, "one"));
        } else if (k == 4) { /* also read by a Relu */
            tp_node(m, "Relu", "relu", "xp", "r");
            tp_output(m, "r");
        }
        oq_pass_result r = tp_run(m, "fold-pad");
        cr_assert_eq(tp_stat(&r, "pads_folded"), 0, "case %d", k);
        cr_assert_eq(tp_stat(&r, "pads_left"), 1, "case %d", k);
        cr_assert_eq(tp_count_op(m, "Pad"), 1, "case %d", k);
        oq_model_free(m);
    }
}

/* PyTorch's "same" padding: the pads computed from constants (here Constant int32 ->
 * Cast): fold-constants{weights-only} folds that chain, then fold-pad folds the Pad */
Test(fold_pad, computed_pads_fold_after_weights_only_constant_folding)
{
    oq_model *m = begin(13);
    tp_init(m, "p32", OQ_DTYPE_INT32, (int64_t[]){8}, 1, (const int32_t[]){0, 0, 1, 1, 0, 0, 1, 1});
    oq_node *cast = tp_node(m, "Cast", "cast", "p32", "pads");
    oq_node_set_attr_int(cast, "to", OQ_DTYPE_INT64);
    tp_node(m, "Pad", "pad", "x,pads", "xp");
    oq_node *conv = finish(m, "xp");
    oq_model *before = pp_clone(m);
    oq_pass_result r = tp_run(m, "fold-pad");
    cr_assert_eq(tp_stat(&r, "pads_left"), 1, "computed pads: not this pass's to compute");
    r = tp_run(m, "fold-constants{weights-only=true},fold-pad");
    cr_assert_eq(tp_count_op(m, "Pad"), 0);
    cr_assert_eq(tp_count_op(m, "Cast"), 0);
    const int64_t *p;
    cr_assert_eq(oq_node_attr_ints(conv, "pads", &p), 4);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(p[i], 2);
    assert_same_outputs(before, m, (int64_t[]){1, 4, 6, 5}, 4, "computed pads");
    oq_model_free(before);
    oq_model_free(m);
}
