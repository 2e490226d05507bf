/* infer-shapes on small graphs built through the IR API: static shapes, symbolic
 * dims carried through elementwise/conv/flatten, unknown derived dims, dtypes, graph
 * outputs typed, and existing more specific value_info kept. */
#include "test_pass_util.h"

static const oq_type *vi_type(oq_model *m, const char *name)
{
    oq_graph *g = m->graph;
    for (size_t i = 0; i < g->n_value_info; i++)
        if (strcmp(g->value_info[i]->value->name, name) == 0)
            return g->value_info[i]->type;
    for (size_t i = 0; i < g->n_outputs; i++)
        if (strcmp(g->outputs[i]->value->name, name) == 0)
            return g->outputs[i]->type;
    return NULL;
}

/* "N,4,8,?" */
static const char *shape_str(const oq_type *t, char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = 0;
    if (!t || !t->shape)
        return "(no shape)";
    for (size_t j = 0; j < t->shape->rank && o < size; j++) {
        const oq_dim *d = &t->shape->dims[j];
        if (d->kind == OQ_DIM_VALUE)
            o += (size_t)snprintf(buf + o, size - o, "%s%lld", j ? "," : "", (long long)d->value);
        else if (d->kind == OQ_DIM_PARAM)
            o += (size_t)snprintf(buf + o, size - o, "%s%s", j ? "," : "", d->param);
        else
            o += (size_t)snprintf(buf + o, size - o, "%s?", j ? "," : "");
    }
    return buf;
}

#define ASSERT_SHAPE(m, name, dtype, want)                                                   \
    do {                                                                                     \
        char b_[128];                                                                        \
        const oq_type *t_ = vi_type((m), (name));                                            \
        cr_assert(t_, "no type for %s", (name));                                             \
        cr_assert_eq(t_->elem_type, (dtype), "%s: dtype %d", (name), t_->elem_type);         \
        cr_assert_str_eq(shape_str(t_, b_, sizeof b_), (want), "%s", (name));                \
    } while (0)

static oq_model *conv_model(const char *h, const char *w)
{
    oq_model *m = tp_model(13);
    const char *names[4] = {"N", NULL, h, w};
    oq_value *x = tp_value(m, "x");
    cr_assert(oq_graph_add_input(m->graph, x, oq_type_tensor(m, OQ_DTYPE_FLOAT,
                                                             (int64_t[]){-1, 3, 8, 8}, names, 4)));
    static float wt[4 * 3 * 3 * 3], bias[3] = {1, 2, 3};
    tp_init_f(m, "wt", (int64_t[]){4, 3, 3, 3}, 4, wt);
    tp_init_f(m, "bias", (int64_t[]){3, 1, 1}, 3, bias);
    tp_node(m, "Relu", "relu", "x", "r");
    tp_node(m, "Add", "add", "r,bias", "a");
    oq_node *c = tp_node(m, "Conv", "conv", "a,wt", "c");
    oq_node_set_attr_ints(c, "pads", (int64_t[]){1, 1, 1, 1}, 4);
    oq_node *c2 = tp_node(m, "Conv", "conv_s2", "a,wt", "c2");
    oq_node_set_attr_ints(c2, "strides", (int64_t[]){2, 2}, 2);
    tp_node(m, "Flatten", "flat", "c", "f");
    oq_node *cast = tp_node(m, "Cast", "cast", "f", "i");
    oq_node_set_attr_int(cast, "to", OQ_DTYPE_INT64);
    tp_output(m, "i");
    tp_output(m, "c2");
    return m;
}

Test(infer_shapes, static_and_symbolic_dims)
{
    oq_model *m = conv_model(NULL, NULL); /* x: [N,3,8,8] */
    oq_pass_result r = tp_run(m, "infer-shapes");
    cr_assert(r.changed);
    ASSERT_SHAPE(m, "r", OQ_DTYPE_FLOAT, "N,3,8,8");
    ASSERT_SHAPE(m, "a", OQ_DTYPE_FLOAT, "N,3,8,8");
    ASSERT_SHAPE(m, "c", OQ_DTYPE_FLOAT, "N,4,8,8");
    ASSERT_SHAPE(m, "c2", OQ_DTYPE_FLOAT, "N,4,3,3"); /* (8 - 3) / 2 + 1 */
    ASSERT_SHAPE(m, "f", OQ_DTYPE_FLOAT, "N,256");
    ASSERT_SHAPE(m, "i", OQ_DTYPE_INT64, "N,256");
    cr_assert_eq(tp_stat(&r, "value_info_added"), 4);
    cr_assert_eq(tp_stat(&r, "outputs_typed"), 2);
    /* a second run has nothing to add */
    r = tp_run(m, "infer-shapes");
    cr_assert_not(r.changed);
    oq_model_free(m);
}

Test(infer_shapes, derived_dims_are_unknown_named_dims_carry)
{
    oq_model *m = conv_model("H", "W"); /* x: [N,3,H,W] */
    tp_run(m, "infer-shapes");
    ASSERT_SHAPE(m, "a", OQ_DTYPE_FLOAT, "N,3,H,W");
    ASSERT_SHAPE(m, "c", OQ_DTYPE_FLOAT, "N,4,H,W");   /* 3x3, pads 1: same size */
    ASSERT_SHAPE(m, "c2", OQ_DTYPE_FLOAT, "N,4,?,?");  /* (H - 3) / 2 + 1 */
    ASSERT_SHAPE(m, "f", OQ_DTYPE_FLOAT, "N,?");       /* 4 * H * W */
    oq_model_free(m);
}

Test(infer_shapes, keeps_more_specific_existing_info)
{
    oq_model *m = conv_model(NULL, NULL);
    /* existing: r has batch 2 (more specific than N); c only its rank */
    cr_assert(oq_graph_add_value_info(m->graph, oq_graph_find_value(m->graph, "r"),
                                      oq_type_tensor(m, OQ_DTYPE_FLOAT, (int64_t[]){2, 3, 8, 8}, NULL, 4)));
    cr_assert(oq_graph_add_value_info(m->graph, oq_graph_find_value(m->graph, "c"),
                                      oq_type_tensor(m, OQ_DTYPE_FLOAT, (int64_t[]){-1, -1, -1, -1}, NULL, 4)));
    oq_pass_result r = tp_run(m, "infer-shapes");
    ASSERT_SHAPE(m, "r", OQ_DTYPE_FLOAT, "2,3,8,8");
    ASSERT_SHAPE(m, "c", OQ_DTYPE_FLOAT, "N,4,8,8");
    cr_assert_eq(tp_stat(&r, "value_info_refined"), 1);
    size_t n_r = 0;
    for (size_t i = 0; i < m->graph->n_value_info; i++)
        n_r += strcmp(m->graph->value_info[i]->value->name, "r") == 0;
    cr_assert_eq(n_r, 1);
    oq_model_free(m);
}

Test(infer_shapes, works_around_nodes_without_a_kernel)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){2, 5}, 2);
    tp_node(m, "RandomUniformLike", "noise", "x", "r"); /* no kernel: no shape */
    tp_node(m, "Add", "add", "x,r", "s");               /* depends on it: no shape */
    tp_node(m, "Relu", "relu", "x", "y");
    tp_output(m, "s");
    tp_output(m, "y");
    tp_run(m, "infer-shapes");
    ASSERT_SHAPE(m, "y", OQ_DTYPE_FLOAT, "2,5");
    const oq_type *t = vi_type(m, "s");
    cr_assert(!t || !t->has_elem_type, "s got a type");
    cr_assert_null(vi_type(m, "r"));
    oq_model_free(m);
}
