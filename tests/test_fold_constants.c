/* fold-constants on small graphs built through the IR API: folded values checked
 * against hand-computed results; Shape/Size of static shapes; the size cap; what must
 * never fold (Random*, overridable graph-input defaults, shapes with symbolic dims). */
#include "test_pass_util.h"
#include "testutil.h"

#include "onnxq/exec.h"

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

/* An If whose then-branch adds an outer initializer and its own Constant (folds) and
 * whose else-branch adds the outer graph input (must not fold). The model is written
 * with python-onnx (no IR API builds subgraphs); skipped without it. */
static const char *if_py =
    "import sys, onnx, numpy as np\n"
    "from onnx import helper as h, TensorProto as T, numpy_helper as nh\n"
    "N = h.make_node\n"
    "k = nh.from_array(np.array([10, 20], np.float32))\n"
    "then_g = h.make_graph([N('Constant', [], ['k'], value=k), N('Add', ['c1', 'k'], ['t_out'], name='inner_const_add')],\n"
    "                      'then', [], [h.make_tensor_value_info('t_out', T.FLOAT, [2])])\n"
    "else_g = h.make_graph([N('Add', ['x', 'c1'], ['e_out'], name='inner_outer_add')], 'else', [],\n"
    "                      [h.make_tensor_value_info('e_out', T.FLOAT, [2])])\n"
    "g = h.make_graph([N('If', ['cond'], ['y'], name='if', then_branch=then_g, else_branch=else_g)], 'ifg',\n"
    "                 [h.make_tensor_value_info('cond', T.BOOL, []), h.make_tensor_value_info('x', T.FLOAT, [2])],\n"
    "                 [h.make_tensor_value_info('y', T.FLOAT, [2])],\n"
    "                 initializer=[nh.from_array(np.array([1, 2], np.float32), 'c1')])\n"
    "onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), sys.argv[1])\n";

static void run_if(oq_model *m, bool cond, float *y)
{
    oq_plan *p = NULL;
    cr_assert_eq(oq_plan_compile(m, NULL, &p, NULL), OQ_OK);
    uint8_t c = cond;
    float x[2] = {5, 6};
    int64_t d2 = 2;
    oq_rt_tensor in[2], out[1];
    oq_rt_tensor_borrow(&in[0], OQ_DTYPE_BOOL, NULL, 0, &c);
    oq_rt_tensor_borrow(&in[1], OQ_DTYPE_FLOAT, &d2, 1, x);
    cr_assert_eq(oq_plan_run(p, in, 2, out, 1, NULL), OQ_OK);
    memcpy(y, out[0].data, 2 * sizeof(float));
    oq_rt_tensor_release(&out[0]);
    oq_plan_free(p);
}

Test(fold_constants, folds_inside_subgraphs_only_what_reads_constants)
{
    if (tu_run("/usr/bin/python3 -c 'import onnx' 2>/dev/null", NULL) != 0) {
        cr_log_warn("python3-onnx not available: skipped");
        return;
    }
    char *dir = tu_tmpdir();
    char py[600], model[600], cmd[1400];
    snprintf(py, sizeof py, "%s/if.py", dir);
    snprintf(model, sizeof model, "%s/if.onnx", dir);
    cr_assert_eq(tu_write_file(py, if_py, strlen(if_py)), 0);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s'", py, model);
    char *log = NULL;
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    oq_model *m = NULL;
    cr_assert_eq(oq_model_read(model, NULL, &m, NULL), OQ_OK);
    oq_pass_result r = tp_run(m, "fold-constants");
    cr_assert_eq(tp_stat(&r, "nodes_folded"), 1);
    oq_node *iff = tp_find_op(m, "If");
    cr_assert(iff);
    oq_graph *subs[2];
    cr_assert_eq(oq_node_subgraphs(iff, subs, 2), 2);
    for (int i = 0; i < 2; i++) {
        oq_graph *g = subs[i];
        bool then = strcmp(g->name, "then") == 0;
        size_t adds = 0;
        for (oq_node *n = g->first; n; n = n->next)
            adds += strcmp(n->op_type, "Add") == 0;
        cr_assert_eq(adds, then ? 0 : 1, "graph %s", g->name);
        if (then) {
            const float *t = tp_floats(oq_graph_find_value(g, "t_out"));
            cr_assert(t[0] == 11 && t[1] == 22);
        }
    }
    /* the executor agrees with the hand-computed branches */
    float y[2];
    run_if(m, true, y);
    cr_assert(y[0] == 11 && y[1] == 22);
    run_if(m, false, y);
    cr_assert(y[0] == 6 && y[1] == 8);
    oq_model_free(m);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    tu_run(cmd, NULL);
    free(dir);
}

/* weights-only: a chain of constant nodes that ends as a MatMul's B folds (to the
 * hand-computed transpose of the scaled table); the same kind of chain that ends in an Add's
 * input, and a node whose output is read both as a weight and by an Add, stay */
Test(fold_constants, weights_only_folds_what_ends_as_a_weight)
{
    oq_model *m = tp_model(13);
    int64_t d23[2] = {2, 3}, d32[2] = {3, 2}, d1[2] = {1, 2};
    tp_input(m, "x", OQ_DTYPE_FLOAT, d1, 2);
    tp_init_f(m, "E", d23, 2, (float[]){1, 2, 3, 4, 5, 6});
    tp_init_f(m, "two", NULL, 0, (float[]){2});
    tp_init_f(m, "F", d32, 2, (float[]){1, 1, 1, 1, 1, 1});
    tp_node(m, "Mul", "scale", "E,two", "E2");       /* [[2,4,6],[8,10,12]] */
    oq_node *tr = tp_node(m, "Transpose", "tie", "E2", "Et"); /* [[2,8],[4,10],[6,12]] */
    (void)tr;
    tp_node(m, "MatMul", "head", "x,E2", "h");       /* E2 is a weight here ... */
    tp_node(m, "Neg", "neg", "F", "nF");             /* ... a chain into an Add: stays */
    tp_node(m, "Add", "bias", "h,two", "hb");
    tp_node(m, "Transpose", "tf", "nF", "nFt");
    tp_node(m, "MatMul", "mm", "nFt,Et", "z");       /* A input (not a weight): nFt stays */
    tp_output(m, "hb");
    tp_output(m, "z");
    oq_pass_result r = tp_run(m, "fold-constants{weights-only=true}");
    /* E2 is read by head (weight) and tie, whose output Et is mm's B: both fold */
    cr_assert_eq(tp_stat(&r, "nodes_folded"), 2, "folded %lld", (long long)tp_stat(&r, "nodes_folded"));
    const float *et = tp_floats(oq_graph_find_value(m->graph, "Et"));
    const float want[6] = {2, 8, 4, 10, 6, 12};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(et[i], want[i], "Et[%d] = %g", i, et[i]);
    cr_assert_eq(tp_count_op(m, "Neg"), 1);
    cr_assert_eq(tp_count_op(m, "Transpose"), 1); /* tf stays: nFt is an A input */
    oq_model_free(m);
}
