/* fuse-activations: which chains become HardSwish / HardSigmoid, which must not, and
 * the numbers through onnxq's executor (the rewritten graph against a copy of the
 * graph as built, and against the formula evaluated by hand in double).
 *
 * Not bit-identical: the chain x * clip(x + 3, 0, 6) / 6 rounds x + 3, the product and
 * the quotient; the HardSwish kernel (as onnxruntime's) rounds x * (1/6), + 0.5 and the
 * product. Each rounding is within half an ulp of its exact value, so the two results
 * differ by a few ulps of the largest intermediate (about |x|): the tolerance is
 * 1e-6 * max(1, |x|) (~ 16 ulps at |x| = 1). Measured on the grid below and on
 * PaddleOCR det's first HardSwish (docs/passes/fuse-activations.md). */
#include "test_pass_prep_util.h"

static const int64_t DIMS[4] = {1, 2, 4, 25};
#define N 200

static double hswish(double x)
{
    return x * fmin(fmax(x + 3.0, 0.0), 6.0) / 6.0;
}

static double hsig(double x, double a, double b)
{
    return fmin(fmax(a * x + b, 0.0), 1.0);
}

/* x covers [-8, 8) (both clip bounds and the linear part) */
static void inputs(float *x)
{
    for (int i = 0; i < N; i++)
        x[i] = -8.0f + 16.0f * (float)i / N + 0.013f;
}

static void check_numbers(oq_model *before, oq_model *m, double (*ref)(double), const char *what)
{
    float x[N], *a, *b;
    inputs(x);
    cr_assert_eq(pp_run(before, x, DIMS, 4, &a), N);
    cr_assert_eq(pp_run(m, x, DIMS, 4, &b), N);
    for (int i = 0; i < N; i++) {
        double tol = 1e-6 * fmax(1.0, fabs(x[i]));
        cr_assert(fabs((double)a[i] - b[i]) <= tol, "%s: x=%g: chain %.9g, fused %.9g", what, x[i],
                  a[i], b[i]);
        cr_assert(fabs(ref(x[i]) - b[i]) <= tol, "%s: x=%g: fused %.9g, formula %.9g", what, x[i],
                  b[i], ref(x[i]));
    }
    free(a);
    free(b);
}

static oq_model *model(int64_t opset)
{
    oq_model *m = tp_model(opset);
    tp_input(m, "x", OQ_DTYPE_FLOAT, DIMS, 4);
    tp_init_f(m, "three", (int64_t[]){}, 0, (const float[]){3.0f});
    tp_init_f(m, "zero", (int64_t[]){}, 0, (const float[]){0.0f});
    tp_init_f(m, "six", (int64_t[]){1}, 1, (const float[]){6.0f});
    tp_init_f(m, "one", (int64_t[]){}, 0, (const float[]){1.0f});
    tp_init_f(m, "half", (int64_t[]){}, 0, (const float[]){0.5f});
    tp_init_f(m, "sixth", (int64_t[]){}, 0, (const float[]){1.0f / 6.0f});
    return m;
}

/* HardSwish written in 7 ways; each must become one HardSwish(x) -> y. */
static void hardswish_form(int form)
{
    oq_model *m = model(14);
    switch (form) {
    case 0: /* x * clip(x + 3, 0, 6) / 6: PaddleOCR's chain */
        tp_node(m, "Add", "a", "x,three", "t");
        tp_node(m, "Clip", "c", "t,zero,six", "r");
        tp_node(m, "Mul", "m", "x,r", "p");
        tp_node(m, "Div", "d", "p,six", "y");
        break;
    case 1: /* operands swapped, Mul by 1/6 */
        tp_node(m, "Add", "a", "three,x", "t");
        tp_node(m, "Clip", "c", "t,zero,six", "r");
        tp_node(m, "Mul", "m", "r,x", "p");
        tp_node(m, "Mul", "d", "sixth,p", "y");
        break;
    case 2: /* x * (relu6(x + 3) / 6) */
        tp_node(m, "Add", "a", "x,three", "t");
        tp_node(m, "Clip", "c", "t,zero,six", "r");
        tp_node(m, "Div", "d", "r,six", "q");
        tp_node(m, "Mul", "m", "x,q", "y");
        break;
    case 3: /* the clip as Min(Max(., 0), 6) */
        tp_node(m, "Add", "a", "x,three", "t");
        tp_node(m, "Max", "mx", "t,zero", "u");
        tp_node(m, "Min", "mn", "six,u", "r");
        tp_node(m, "Mul", "m", "x,r", "p");
        tp_node(m, "Div", "d", "p,six", "y");
        break;
    case 4: /* the clip as Max(Min(., 6), 0) and the scale inside */
        tp_node(m, "Add", "a", "x,three", "t");
        tp_node(m, "Min", "mn", "t,six", "u");
        tp_node(m, "Max", "mx", "u,zero", "r");
        tp_node(m, "Mul", "d", "r,sixth", "q");
        tp_node(m, "Mul", "m", "q,x", "y");
        break;
    case 5: /* Relu then Min */
        tp_node(m, "Add", "a", "x,three", "t");
        tp_node(m, "Relu", "rl", "t", "u");
        tp_node(m, "Min", "mn", "u,six", "r");
        tp_node(m, "Mul", "m", "x,r", "p");
        tp_node(m, "Div", "d", "p,six", "y");
        break;
    case 6: { /* HardSigmoid(alpha=1/6, beta=0.5) times x */
        oq_node *h = tp_node(m, "HardSigmoid", "hs", "x", "q");
        oq_node_set_attr_float(h, "alpha", 1.0f / 6.0f);
        oq_node_set_attr_float(h, "beta", 0.5f);
        tp_node(m, "Mul", "m", "q,x", "y");
        break;
    }
    default:
        cr_assert_fail();
    }
    tp_output(m, "y");
    static const char *const chain_consts[] = {"three", "zero", "six", "sixth"};
    bool used[4];
    for (int i = 0; i < 4; i++)
        used[i] = oq_graph_find_value(m->graph, chain_consts[i])->n_uses > 0;
    oq_model *before = pp_clone(m);
    oq_pass_result r = tp_run(m, "fuse-activations");
    cr_assert_eq(tp_stat(&r, "hardswish"), 1, "form %d", form);
    cr_assert_eq(m->graph->n_nodes, 1, "form %d: one node left", form);
    oq_node *n = m->graph->first;
    cr_assert_str_eq(n->op_type, "HardSwish", "form %d", form);
    cr_assert_str_eq(n->inputs[0]->name, "x");
    cr_assert_str_eq(n->outputs[0]->name, "y");
    for (int i = 0; i < 4; i++) {
        oq_value *v = oq_graph_find_value(m->graph, chain_consts[i]);
        cr_assert(!used[i] || !v || v->kind != OQ_VALUE_INITIALIZER, "form %d: %s left behind", form,
                  chain_consts[i]);
    }
    check_numbers(before, m, hswish, "hardswish");
    oq_model_free(before);
    oq_model_free(m);
}

Test(fuse_activations, hardswish_every_form)
{
    for (int f = 0; f <= 6; f++)
        hardswish_form(f);
}

Test(fuse_activations, relu6_as_clip_attributes_before_opset_11)
{
    /* opset 10: Clip has min/max attributes; HardSwish does not exist yet, so the chain
     * becomes x * HardSigmoid(x) */
    oq_model *m = model(10);
    tp_node(m, "Add", "a", "x,three", "t");
    oq_node *c = tp_node(m, "Clip", "c", "t", "r");
    oq_node_set_attr_float(c, "min", 0.0f);
    oq_node_set_attr_float(c, "max", 6.0f);
    tp_node(m, "Mul", "m", "x,r", "p");
    tp_node(m, "Div", "d", "p,six", "y");
    tp_output(m, "y");
    oq_model *before = pp_clone(m);
    oq_pass_result r = tp_run(m, "fuse-activations");
    cr_assert_eq(tp_stat(&r, "hardswish_as_mul"), 1);
    cr_assert_eq(tp_count_op(m, "HardSwish"), 0);
    cr_assert_eq(m->graph->n_nodes, 2);
    oq_node *hs = tp_find_op(m, "HardSigmoid"), *mul = tp_find_op(m, "Mul");
    cr_assert(hs && mul);
    cr_assert_float_eq(oq_node_attr_float(hs, "alpha", 0), 1.0f / 6.0f, 0);
    cr_assert_float_eq(oq_node_attr_float(hs, "beta", 0), 0.5f, 0);
    cr_assert_str_eq(mul->outputs[0]->name, "y");
    check_numbers(before, m, hswish, "x * hardsigmoid");
    oq_model_free(before);
    oq_model_free(m);
}

static double hsig6(double x)
{
    return hsig(x, 1.0 / 6.0, 0.5);
}

static double hsig_02(double x)
{
    return hsig(x, 0.2, 0.5);
}

Test(fuse_activations, hardsigmoid_forms)
{
    for (int form = 0; form < 4; form++) {
        oq_model *m = model(13);
        switch (form) {
        case 0: /* clip(x / 6 + 1/2, 0, 1) */
            tp_node(m, "Div", "d", "x,six", "u");
            tp_node(m, "Add", "a", "u,half", "t");
            tp_node(m, "Clip", "c", "t,zero,one", "y");
            break;
        case 1: /* clip(x * (1/6) + 0.5, 0, 1) as Max/Min */
            tp_node(m, "Mul", "d", "sixth,x", "u");
            tp_node(m, "Add", "a", "half,u", "t");
            tp_node(m, "Max", "mx", "t,zero", "v");
            tp_node(m, "Min", "c", "v,one", "y");
            break;
        case 2: /* Relu6(x + 3) / 6 */
            tp_node(m, "Add", "a", "x,three", "t");
            tp_node(m, "Clip", "c", "t,zero,six", "r");
            tp_node(m, "Div", "d", "r,six", "y");
            break;
        case 3: { /* any slope: clip(0.2 x + 0.5, 0, 1) */
            tp_init_f(m, "fifth", (int64_t[]){}, 0, (const float[]){0.2f});
            tp_node(m, "Mul", "d", "x,fifth", "u");
            tp_node(m, "Add", "a", "u,half", "t");
            tp_node(m, "Clip", "c", "t,zero,one", "y");
            break;
        }
        }
        tp_output(m, "y");
        oq_model *before = pp_clone(m);
        oq_pass_result r = tp_run(m, "fuse-activations");
        cr_assert_eq(tp_stat(&r, "hardsigmoid"), 1, "form %d", form);
        cr_assert_eq(m->graph->n_nodes, 1, "form %d", form);
        oq_node *n = m->graph->first;
        cr_assert_str_eq(n->op_type, "HardSigmoid");
        cr_assert_str_eq(n->inputs[0]->name, "x");
        double alpha = form == 3 ? 0.2 : 1.0 / 6.0;
        cr_assert_float_eq(oq_node_attr_float(n, "alpha", 0), (float)alpha, 1e-7, "form %d", form);
        cr_assert_float_eq(oq_node_attr_float(n, "beta", 0), 0.5f, 1e-7, "form %d", form);
        check_numbers(before, m, form == 3 ? hsig_02 : hsig6, "hardsigmoid");
        oq_model_free(before);
        oq_model_free(m);
    }
}

/* The long HardSwish chain with a twist: nothing may become HardSwish. */
static void assert_no_hardswish(int variant, const char *why)
{
    oq_model *m = model(variant == 0 ? 13 : 14);
    const char *add_in = "x,three", *mul_in = "x,r", *clip_in = "t,zero,six";
    if (variant == 2) {
        tp_init_f(m, "two", (int64_t[]){}, 0, (const float[]){2.0f});
        add_in = "x,two";
    }
    if (variant == 3) {
        tp_input(m, "x2", OQ_DTYPE_FLOAT, DIMS, 4);
        mul_in = "x2,r";
    }
    if (variant == 4) {
        tp_init_f(m, "five", (int64_t[]){}, 0, (const float[]){5.0f});
        clip_in = "t,zero,five";
    }
    if (variant == 5) {
        tp_input(m, "lim", OQ_DTYPE_FLOAT, (int64_t[]){1}, 1);
        clip_in = "t,zero,lim";
    }
    tp_node(m, "Add", "a", add_in, "t");
    tp_node(m, "Clip", "c", clip_in, "r");
    tp_node(m, "Mul", "m", mul_in, "p");
    tp_node(m, "Div", "d", "p,six", "y");
    tp_output(m, "y");
    if (variant == 1)
        tp_output(m, "r"); /* an intermediate is a graph output */
    oq_pass_result r = tp_run(m, "fuse-activations");
    cr_assert_eq(tp_count_op(m, "HardSwish"), 0, "%s", why);
    cr_assert_eq(tp_stat(&r, "hardswish"), 0, "%s", why);
    if (variant == 0) {
        /* opset 13: no HardSwish, but x * HardSigmoid(x) is (2 nodes instead of 4) */
        cr_assert_eq(tp_stat(&r, "hardswish_as_mul"), 1);
        cr_assert_eq(m->graph->n_nodes, 2);
    } else {
        cr_assert(!r.changed, "%s", why);
        cr_assert_eq(m->graph->n_nodes, 4, "%s", why);
    }
    oq_model_free(m);
}

Test(fuse_activations, must_not_fuse)
{
    assert_no_hardswish(0, "opset 13");
    assert_no_hardswish(1, "intermediate is a graph output");
    assert_no_hardswish(2, "x + 2 instead of x + 3");
    assert_no_hardswish(3, "clip of another tensor");
    assert_no_hardswish(4, "clip to 5");
    assert_no_hardswish(5, "non-constant clip bound");
}

Test(fuse_activations, intermediate_with_two_consumers_is_left)
{
    oq_model *m = model(14);
    tp_node(m, "Add", "a", "x,three", "t");
    tp_node(m, "Clip", "c", "t,zero,six", "r");
    tp_node(m, "Mul", "m", "x,r", "p");
    tp_node(m, "Div", "d", "p,six", "y");
    tp_node(m, "Relu", "other", "t", "y2"); /* x + 3 is used twice */
    tp_output(m, "y");
    tp_output(m, "y2");
    oq_pass_result r = tp_run(m, "fuse-activations");
    cr_assert(!r.changed);
    cr_assert_eq(m->graph->n_nodes, 5);
    oq_model_free(m);
}

Test(fuse_activations, options_turn_each_rewrite_off)
{
    oq_model *m = model(14);
    tp_node(m, "Add", "a", "x,three", "t");
    tp_node(m, "Clip", "c", "t,zero,six", "r");
    tp_node(m, "Div", "d", "r,six", "y");
    tp_output(m, "y");
    oq_pass_result r = tp_run(m, "fuse-activations{hardsigmoid=false}");
    cr_assert(!r.changed);
    r = tp_run(m, "fuse-activations{hardswish=false}");
    cr_assert_eq(tp_stat(&r, "hardsigmoid"), 1);
    oq_model_free(m);
}
