/* fold-constants on small graphs built through the IR API: folded values checked
 * against hand-computed results; Shape/Size of static shapes; the size cap; what must
 * never fold (Random*, overridable graph-input defaults, shapes with symbolic dims). */
#include "test_pass_util.h"

static const int64_t *ints_of(oq_value *v)
{
    oq_tensor *t = oq_value_const_tensor(v);
    cr_assert(t, "%s not folded", v->name);
    cr_assert_eq(t->dtype, OQ_DTYPE_INT64);
    return oq_tensor_data(t, NULL);
}

Test(fold_constants, folds_a_chain_to_hand_computed_values)
{
    oq_model *m = tp_model(13);
    int64_t d22[2] = {2, 2}, d2[1] = {2};
    tp_input(m, "x", OQ_DTYPE_FLOAT, d22, 2);
    tp_init_f(m, "a", d22, 2, (float[]){1, 2, 3, 4});
    tp_init_f(m, "b", d2, 1, (float[]){10, 20});
    tp_init_f(m, "half", NULL, 0, (float[]){0.5f});
    tp_node(m, "Add", "add", "a,b", "c");            /* [[11,22],[13,24]] */
    tp_node(m, "Mul", "mul", "c,half", "d");         /* [[5.5,11],[6.5,12]] */
    tp_node(m, "Transpose", "tr", "d", "e");         /* [[5.5,6.5],[11,12]] */
    tp_node(m, "Add", "use", "x,e", "y");
    tp_output(m, "y");
    oq_pass_result r = tp_run(m, "fold-constants");
    cr_assert(r.changed);
    cr_assert_eq(tp_stat(&r, "nodes_folded"), 3);
    cr_assert_eq(m->graph->n_nodes, 1);
    const float *e = tp_floats(oq_graph_find_value(m->graph, "e"));
    const float want[4] = {5.5f, 6.5f, 11, 12};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(e[i], want[i], "e[%d] = %g", i, e[i]);
    oq_tensor *t = oq_value_const_tensor(oq_graph_find_value(m->graph, "e"));
    cr_assert_eq(t->rank, 2);
    cr_assert_eq(t->dims[0], 2);
    oq_model_free(m);
}

Test(fold_constants, folds_integer_and_cast_nodes_and_constant_nodes)
{
    oq_model *m = tp_model(13);
    int64_t d3[1] = {3};
    oq_node *c = tp_node(m, "Constant", "k", "", "k");
    oq_node_set_attr_tensor(c, "value", oq_tensor_new(m, NULL, OQ_DTYPE_INT64, d3, 1,
                                                       (int64_t[]){7, -2, 5}, 24));
    tp_init(m, "two", OQ_DTYPE_INT64, NULL, 0, (int64_t[]){2});
    tp_node(m, "Mul", "mul", "k,two", "k2");            /* [14, -4, 10] */
    oq_node *cast = tp_node(m, "Cast", "cast", "k2", "f"); /* float [14, -4, 10] */
    oq_node_set_attr_int(cast, "to", OQ_DTYPE_FLOAT);
    tp_output(m, "f");
    tp_output(m, "k2");
    oq_pass_result r = tp_run(m, "fold-constants");
    cr_assert_eq(tp_stat(&r, "nodes_folded"), 2);
    const int64_t *k2 = ints_of(oq_graph_find_value(m->graph, "k2"));
    cr_assert(k2[0] == 14 && k2[1] == -4 && k2[2] == 10);
    const float *f = tp_floats(oq_graph_find_value(m->graph, "f"));
    cr_assert(f[0] == 14.0f && f[1] == -4.0f && f[2] == 10.0f);
    cr_assert_eq(tp_count_op(m, "Cast"), 0);
    oq_model_free(m);
}

Test(fold_constants, folds_shape_and_size_of_static_shapes_to_a_fixed_point)
{
    oq_model *m = tp_model(15);
    int64_t dx[3] = {2, 3, 4};
    tp_input(m, "x", OQ_DTYPE_FLOAT, dx, 3);
    tp_node(m, "Relu", "relu", "x", "r");
    tp_node(m, "Shape", "shape", "r", "s");                      /* [2, 3, 4] */
    oq_node *s1 = tp_node(m, "Shape", "shape_tail", "x", "st");  /* [3, 4] */
    oq_node_set_attr_int(s1, "start", 1);
    tp_node(m, "Size", "size", "x", "n");                        /* 24 */
    tp_init(m, "zero", OQ_DTYPE_INT64, NULL, 0, (int64_t[]){0});
    tp_node(m, "Gather", "g", "s,zero", "b");                    /* 2 */
    tp_init(m, "minus1", OQ_DTYPE_INT64, (int64_t[]){1}, 1, (int64_t[]){-1});
    tp_node(m, "Unsqueeze", "unsq", "b,zero", "b1");             /* [2] */
    oq_node *cc = tp_node(m, "Concat", "cat", "b1,minus1", "shp"); /* [2, -1] */
    oq_node_set_attr_int(cc, "axis", 0);
    tp_node(m, "Reshape", "reshape", "r,shp", "y");
    tp_output(m, "y");
    tp_output(m, "st");
    tp_output(m, "n");
    oq_pass_result r = tp_run(m, "fold-constants");
    cr_assert_eq(tp_stat(&r, "shapes_folded"), 3);
    cr_assert_eq(tp_stat(&r, "nodes_folded"), 3); /* Gather, Unsqueeze, Concat */
    const int64_t *st = ints_of(oq_graph_find_value(m->graph, "st"));
    cr_assert(st[0] == 3 && st[1] == 4);
    cr_assert_eq(ints_of(oq_graph_find_value(m->graph, "n"))[0], 24);
    const int64_t *shp = ints_of(oq_graph_find_value(m->graph, "shp"));
    cr_assert(shp[0] == 2 && shp[1] == -1);
    /* Relu and Reshape read the graph input: they stay */
    cr_assert_eq(m->graph->n_nodes, 2);
    oq_model_free(m);
}

Test(fold_constants, leaves_shapes_with_symbolic_dims)
{
    oq_model *m = tp_model(13);
    const char *names[2] = {"N", NULL};
    oq_value *x = tp_value(m, "x");
    cr_assert(oq_graph_add_input(m->graph, x, oq_type_tensor(m, OQ_DTYPE_FLOAT, (int64_t[]){-1, 3},
                                                             names, 2)));
    tp_node(m, "Shape", "shape", "x", "s");
    tp_node(m, "Size", "size", "x", "n");
    tp_output(m, "s");
    tp_output(m, "n");
    oq_pass_result r = tp_run(m, "fold-constants");
    cr_assert_not(r.changed);
    cr_assert_eq(m->graph->n_nodes, 2);
    oq_model_free(m);
}

Test(fold_constants, respects_the_size_cap)
{
    for (int pass = 0; pass < 2; pass++) {
        oq_model *m = tp_model(13);
        tp_init_f(m, "v", NULL, 0, (float[]){1.5f});
        /* 512 x 1024 floats = 2 MiB, over the 1 MiB default */
        tp_init(m, "shape", OQ_DTYPE_INT64, (int64_t[]){2}, 1, (int64_t[]){512, 1024});
        tp_node(m, "Expand", "big", "v,shape", "y");
        tp_output(m, "y");
        oq_pass_result r = tp_run(m, pass ? "fold-constants{max-bytes=2097152}" : "fold-constants");
        if (pass == 0) {
            cr_assert_not(r.changed);
            cr_assert_eq(tp_stat(&r, "nodes_over_cap"), 1);
            cr_assert_eq(tp_count_op(m, "Expand"), 1);
        } else {
            cr_assert(r.changed);
            oq_tensor *t = oq_value_const_tensor(oq_graph_find_value(m->graph, "y"));
            cr_assert(t);
            cr_assert_eq(oq_tensor_numel(t), 512 * 1024);
            cr_assert_eq(((const float *)oq_tensor_data(t, NULL))[512 * 1024 - 1], 1.5f);
        }
        oq_model_free(m);
    }
}

Test(fold_constants, never_folds_random_ops_or_overridable_inputs)
{
    oq_model *m = tp_model(13);
    int64_t d2[1] = {2};
    tp_init_f(m, "c", d2, 1, (float[]){1, 2});
    tp_node(m, "RandomUniformLike", "rul", "c", "r1");
    oq_node *rn = tp_node(m, "RandomNormal", "rn", "", "r2");
    oq_node_set_attr_ints(rn, "shape", d2, 1);
    /* an initializer that is also a graph input is a default the caller may replace */
    oq_value *w = tp_init_f(m, "w", d2, 1, (float[]){3, 4});
    cr_assert(oq_graph_add_input(m->graph, w, oq_type_tensor(m, OQ_DTYPE_FLOAT, d2, NULL, 1)));
    tp_node(m, "Neg", "neg", "w", "nw");
    tp_node(m, "Add", "add", "r1,r2", "s");
    tp_node(m, "Add", "add2", "s,nw", "y");
    tp_output(m, "y");
    oq_pass_result r = tp_run(m, "fold-constants");
    cr_assert_not(r.changed);
    cr_assert_eq(m->graph->n_nodes, 5);
    oq_model_free(m);
}

Test(fold_constants, folds_shapes_even_when_another_node_has_no_kernel)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){2, 5}, 2);
    tp_node(m, "RandomUniformLike", "noise", "x", "r"); /* the executor has no kernel */
    tp_node(m, "Shape", "shape", "x", "s");
    tp_output(m, "r");
    tp_output(m, "s");
    oq_pass_result r = tp_run(m, "fold-constants");
    cr_assert_eq(tp_stat(&r, "shapes_folded"), 1);
    const int64_t *s = ints_of(oq_graph_find_value(m->graph, "s"));
    cr_assert(s[0] == 2 && s[1] == 5);
    cr_assert_eq(tp_count_op(m, "RandomUniformLike"), 1);
    oq_model_free(m);
}
