/* constant-to-initializer, eliminate-dead, eliminate-identity, dedupe-initializers on
 * small graphs built through the IR API. */
#include "test_pass_util.h"
#include "testutil.h"

/* ------------------------------------------------------------ constant-to-initializer */

static oq_attr *raw_attr(oq_node *n, const char *name, int32_t type)
{
    oq_attr *a = oq_model_alloc(n->graph->model, sizeof(*a));
    a->name = oq_model_strdup(n->graph->model, name);
    a->has_type = true;
    a->type = type;
    n->attrs = oq_model_alloc(n->graph->model, sizeof(oq_attr *));
    n->attrs[0] = a;
    n->n_attrs = 1;
    return a;
}

Test(constant_to_initializer, converts_every_value_form)
{
    oq_model *m = tp_model(13);
    float tv[4] = {1, 2, 3, 4};
    oq_node *n = tp_node(m, "Constant", "c_tensor", "", "t");
    oq_node_set_attr_tensor(n, "value", oq_tensor_new(m, "ignored", OQ_DTYPE_FLOAT, (int64_t[]){2, 2}, 2, tv, 16));
    n = tp_node(m, "Constant", "c_float", "", "f");
    oq_node_set_attr_float(n, "value_float", 2.5f);
    n = tp_node(m, "Constant", "c_floats", "", "fs");
    oq_node_set_attr_floats(n, "value_floats", (float[]){-1.5f, 0.25f, 8}, 3);
    n = tp_node(m, "Constant", "c_int", "", "i");
    oq_node_set_attr_int(n, "value_int", -7);
    n = tp_node(m, "Constant", "c_ints", "", "is");
    oq_node_set_attr_ints(n, "value_ints", (int64_t[]){5, 6}, 2);
    n = tp_node(m, "Constant", "c_string", "", "s");
    oq_node_set_attr_string(n, "value_string", "hello");
    n = tp_node(m, "Constant", "c_strings", "", "ss");
    oq_attr *a = raw_attr(n, "value_strings", OQ_ATTR_STRINGS);
    a->n_strings = 2;
    a->strings = oq_model_alloc(m, 2 * sizeof(oq_bytes));
    a->strings[0].data = (uint8_t *)oq_model_strdup(m, "ab");
    a->strings[0].len = 2;
    a->strings[1].data = (uint8_t *)oq_model_strdup(m, "");
    a->strings[1].len = 0;
    const char *outs[] = {"t", "f", "fs", "i", "is", "s", "ss"};
    for (size_t k = 0; k < 7; k++)
        tp_output(m, outs[k]);

    oq_pass_result r = tp_run(m, "constant-to-initializer");
    cr_assert(r.changed);
    cr_assert_eq(tp_stat(&r, "constants_converted"), 7);
    cr_assert_eq(m->graph->n_nodes, 0);
    cr_assert_eq(m->graph->n_initializers, 7);

    oq_tensor *t = oq_graph_find_value(m->graph, "t")->initializer;
    cr_assert_str_eq(t->name, "t");
    cr_assert_eq(t->rank, 2);
    cr_assert_eq(t->dims[0], 2);
    cr_assert_eq(((const float *)oq_tensor_data(t, NULL))[3], 4.0f);

    t = oq_graph_find_value(m->graph, "f")->initializer;
    cr_assert_eq(t->dtype, OQ_DTYPE_FLOAT);
    cr_assert_eq(t->rank, 0);
    cr_assert_eq(*(const float *)oq_tensor_data(t, NULL), 2.5f);

    t = oq_graph_find_value(m->graph, "fs")->initializer;
    cr_assert_eq(t->rank, 1);
    cr_assert_eq(t->dims[0], 3);
    cr_assert_eq(((const float *)oq_tensor_data(t, NULL))[0], -1.5f);
    cr_assert_eq(((const float *)oq_tensor_data(t, NULL))[2], 8.0f);

    t = oq_graph_find_value(m->graph, "i")->initializer;
    cr_assert_eq(t->dtype, OQ_DTYPE_INT64);
    cr_assert_eq(t->rank, 0);
    cr_assert_eq(*(const int64_t *)oq_tensor_data(t, NULL), -7);

    t = oq_graph_find_value(m->graph, "is")->initializer;
    cr_assert_eq(t->dims[0], 2);
    cr_assert_eq(((const int64_t *)oq_tensor_data(t, NULL))[1], 6);

    t = oq_graph_find_value(m->graph, "s")->initializer;
    cr_assert_eq(t->dtype, OQ_DTYPE_STRING);
    cr_assert_eq(t->rank, 0);
    cr_assert_eq(t->n_string_data, 1);
    cr_assert_eq(t->string_data[0].len, 5);
    cr_assert(memcmp(t->string_data[0].data, "hello", 5) == 0);

    t = oq_graph_find_value(m->graph, "ss")->initializer;
    cr_assert_eq(t->rank, 1);
    cr_assert_eq(t->dims[0], 2);
    cr_assert_eq(t->string_data[0].len, 2);
    cr_assert_eq(t->string_data[1].len, 0);
    oq_model_free(m);
}

Test(constant_to_initializer, feeds_consumers_and_leaves_sparse_values_with_a_warning)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){2}, 1);
    oq_node *c = tp_node(m, "Constant", "k", "", "kv");
    oq_node_set_attr_floats(c, "value_floats", (float[]){1, 2}, 2);
    tp_node(m, "Add", "add", "x,kv", "y");
    oq_node *sp = tp_node(m, "Constant", "sparse", "", "sv");
    oq_attr *a = raw_attr(sp, "sparse_value", OQ_ATTR_SPARSE_TENSOR);
    a->sparse_tensor = oq_model_alloc(m, sizeof(oq_sparse_tensor));
    a->sparse_tensor->values = oq_tensor_new(m, "vals", OQ_DTYPE_FLOAT, (int64_t[]){1}, 1, (float[]){9}, 4);
    a->sparse_tensor->indices = oq_tensor_new(m, "idx", OQ_DTYPE_INT64, (int64_t[]){1}, 1, (int64_t[]){1}, 8);
    a->sparse_tensor->rank = 1;
    a->sparse_tensor->dims = oq_model_alloc(m, sizeof(int64_t));
    a->sparse_tensor->dims[0] = 2;
    tp_node(m, "Add", "add2", "y,sv", "z");
    tp_output(m, "z");

    oq_diag d;
    oq_pass_result r;
    cr_assert_eq(tp_run_diag(m, "constant-to-initializer", &r, &d), OQ_OK);
    cr_assert_eq(d.warnings, 1);
    cr_assert(strstr(d.entries[0].message, "sparse_value"), "%s", d.entries[0].message);
    cr_assert_str_eq(d.entries[0].node, "sparse");
    cr_assert_eq(tp_stat(&r, "constants_converted"), 1);
    cr_assert_eq(tp_stat(&r, "constants_skipped"), 1);
    oq_value *kv = oq_graph_find_value(m->graph, "kv");
    cr_assert_eq(kv->kind, OQ_VALUE_INITIALIZER);
    cr_assert_eq(kv->n_uses, 1);
    cr_assert_str_eq(kv->uses[0].node->name, "add");
    cr_assert_eq(tp_count_op(m, "Constant"), 1);
    oq_diag_free(&d);
    tp_assert_valid(m);
    oq_model_free(m);
}

/* ------------------------------------------------------------ eliminate-dead */

Test(eliminate_dead, removes_dead_chains_and_unused_initializers)
{
    oq_model *m = tp_model(13);
    int64_t d2[1] = {2};
    tp_input(m, "x", OQ_DTYPE_FLOAT, d2, 1);
    tp_input(m, "unused_input", OQ_DTYPE_FLOAT, d2, 1);
    tp_init_f(m, "w", d2, 1, (float[]){1, 2});
    tp_init_f(m, "w_unused", d2, 1, (float[]){3, 4});
    tp_node(m, "Add", "live", "x,w", "y");
    tp_node(m, "Sigmoid", "dead1", "x", "a");
    tp_node(m, "Exp", "dead2", "a", "b");
    tp_node(m, "Split", "half_dead", "y", "s0,s1");
    tp_node(m, "Relu", "uses_s0", "s0", "out");
    tp_output(m, "out");
    oq_graph_add_value_info(m->graph, tp_value(m, "b"), oq_type_tensor(m, OQ_DTYPE_FLOAT, d2, NULL, 1));
    oq_graph_add_value_info(m->graph, tp_value(m, "y"), oq_type_tensor(m, OQ_DTYPE_FLOAT, d2, NULL, 1));

    oq_pass_result r = tp_run(m, "eliminate-dead{keep-initializers=true}");
    cr_assert_eq(tp_stat(&r, "nodes_removed"), 2);
    cr_assert_eq(tp_stat(&r, "initializers_removed"), 0);
    cr_assert_eq(m->graph->n_initializers, 2);
    cr_assert_eq(m->graph->n_nodes, 3); /* Split stays: one of its outputs is used */
    cr_assert_eq(m->graph->n_value_info, 1);
    cr_assert_str_eq(m->graph->value_info[0]->value->name, "y");

    r = tp_run(m, "eliminate-dead");
    cr_assert_eq(tp_stat(&r, "nodes_removed"), 0);
    cr_assert_eq(tp_stat(&r, "initializers_removed"), 1);
    cr_assert_eq(m->graph->n_initializers, 1);
    cr_assert_str_eq(m->graph->initializers[0]->name, "w");
    cr_assert_eq(m->graph->n_inputs, 2); /* the interface is kept */

    r = tp_run(m, "eliminate-dead");
    cr_assert(!r.changed);
    oq_model_free(m);
}

/* ------------------------------------------------------------ eliminate-identity */

Test(eliminate_identity, bypasses_identity_and_keeps_output_names)
{
    oq_model *m = tp_model(13);
    int64_t d2[1] = {2};
    tp_input(m, "x", OQ_DTYPE_FLOAT, d2, 1);
    tp_node(m, "Identity", "id1", "x", "a");
    tp_node(m, "Relu", "relu", "a", "r");
    tp_node(m, "Identity", "id2", "r", "out");      /* output through Identity: rename */
    tp_node(m, "Identity", "id3", "x", "out_x");    /* graph input -> output: must stay */
    tp_node(m, "Identity", "id4", "r", "r_copy");
    tp_node(m, "Neg", "neg", "r_copy", "out2");
    tp_output(m, "out");
    tp_output(m, "out_x");
    tp_output(m, "out2");

    oq_pass_result r = tp_run(m, "eliminate-identity");
    cr_assert_eq(tp_stat(&r, "nodes_removed"), 3);
    cr_assert_eq(tp_stat(&r, "kept_for_graph_output"), 1);
    cr_assert_eq(tp_count_op(m, "Identity"), 1);
    oq_node *relu = tp_find_op(m, "Relu");
    cr_assert_str_eq(relu->inputs[0]->name, "x");
    cr_assert_str_eq(relu->outputs[0]->name, "out", "Relu now produces the graph output name");
    cr_assert_str_eq(tp_find_op(m, "Neg")->inputs[0]->name, "out");
    cr_assert_str_eq(m->graph->outputs[0]->value->name, "out");
    cr_assert_str_eq(m->graph->outputs[1]->value->name, "out_x");
    oq_model_free(m);
}

Test(eliminate_identity, constants_only_keeps_the_activations_copies)
{
    oq_model *m = tp_model(13);
    int64_t d2[2] = {2, 2};
    tp_input(m, "x", OQ_DTYPE_FLOAT, d2, 2);
    tp_init(m, "W", OQ_DTYPE_FLOAT, d2, 2, (float[]){1, 2, 3, 4});
    tp_node(m, "Identity", "shared", "W", "W1");   /* a weight shared by the exporter */
    tp_node(m, "Identity", "act", "x", "a");       /* an activation's copy: stays */
    tp_node(m, "MatMul", "mm", "a,W1", "out");
    tp_output(m, "out");

    oq_pass_result r = tp_run(m, "eliminate-identity{constants-only=true}");
    cr_assert_eq(tp_stat(&r, "nodes_removed"), 1);
    cr_assert_eq(tp_count_op(m, "Identity"), 1);
    oq_node *mm = tp_find_op(m, "MatMul");
    cr_assert_str_eq(mm->inputs[1]->name, "W", "the MatMul reads the initializer itself");
    cr_assert_not_null(oq_value_const_tensor(mm->inputs[1]));
    cr_assert_str_eq(mm->inputs[0]->name, "a", "the activation's Identity stays");
    oq_model_free(m);
}

Test(eliminate_identity, dropout_only_in_inference)
{
    oq_model *m = tp_model(13);
    int64_t d2[1] = {2};
    tp_input(m, "x", OQ_DTYPE_FLOAT, d2, 1);
    tp_init(m, "train", OQ_DTYPE_BOOL, d2, 0, (uint8_t[]){1});
    tp_init(m, "infer", OQ_DTYPE_BOOL, d2, 0, (uint8_t[]){0});
    tp_node(m, "Dropout", "d_plain", "x", "a");
    tp_node(m, "Dropout", "d_mask_used", "a", "b,mask");
    tp_node(m, "Dropout", "d_mask_unused", "b", "c,mask2");
    tp_node(m, "Dropout", "d_training", "c,,train", "e");
    tp_node(m, "Dropout", "d_inference", "e,,infer", "f");
    tp_node(m, "Relu", "r", "f", "out");
    tp_output(m, "out");
    tp_output(m, "mask");

    oq_pass_result r = tp_run(m, "eliminate-identity");
    cr_assert_eq(tp_stat(&r, "nodes_removed"), 3);
    cr_assert_eq(tp_count_op(m, "Dropout"), 2);
    cr_assert_str_eq(m->graph->first->name, "d_mask_used");
    cr_assert_str_eq(m->graph->first->inputs[0]->name, "x");
    cr_assert_str_eq(m->graph->first->next->name, "d_training");
    cr_assert_str_eq(m->graph->first->next->inputs[0]->name, "b");
    cr_assert_str_eq(tp_find_op(m, "Relu")->inputs[0]->name, "e");
    oq_model_free(m);
}

Test(eliminate_identity, noop_transpose_cast_reshape)
{
    oq_model *m = tp_model(13);
    int64_t d23[2] = {2, 3};
    tp_input(m, "x", OQ_DTYPE_FLOAT, d23, 2);
    tp_input(m, "dyn", OQ_DTYPE_FLOAT, NULL, 0); /* shape unknown */
    tp_init(m, "shape_same", OQ_DTYPE_INT64, (int64_t[]){2}, 1, (int64_t[]){2, 3});
    tp_init(m, "shape_copy", OQ_DTYPE_INT64, (int64_t[]){2}, 1, (int64_t[]){0, -1});
    tp_init(m, "shape_swap", OQ_DTYPE_INT64, (int64_t[]){2}, 1, (int64_t[]){3, 2});
    oq_node *t1 = tp_node(m, "Transpose", "t_id", "x", "t1");
    oq_node_set_attr_ints(t1, "perm", (int64_t[]){0, 1}, 2);
    oq_node *t2 = tp_node(m, "Transpose", "t_swap", "t1", "t2");
    oq_node_set_attr_ints(t2, "perm", (int64_t[]){1, 0}, 2);
    oq_node *c1 = tp_node(m, "Cast", "c_same", "x", "c1");
    oq_node_set_attr_int(c1, "to", OQ_DTYPE_FLOAT);
    oq_node *c2 = tp_node(m, "Cast", "c_int", "x", "c2");
    oq_node_set_attr_int(c2, "to", OQ_DTYPE_INT64);
    oq_node *c3 = tp_node(m, "Cast", "c_unknown", "dyn", "c3");
    oq_node_set_attr_int(c3, "to", OQ_DTYPE_FLOAT);
    tp_node(m, "Reshape", "r_same", "x,shape_same", "r1");
    tp_node(m, "Reshape", "r_copy", "x,shape_copy", "r2");
    tp_node(m, "Reshape", "r_swap", "x,shape_swap", "r3");
    tp_node(m, "Reshape", "r_dyn", "dyn,shape_same", "r4");
    tp_node(m, "Concat", "cat1", "t2,r3", "o1");
    oq_node_set_attr_int(m->graph->last, "axis", 0);
    tp_node(m, "Sum", "sum", "c1,r1,r2", "o2");
    tp_node(m, "Sum", "sum2", "c3,r4", "o3");
    tp_output(m, "o1");
    tp_output(m, "o2");
    tp_output(m, "c2");
    tp_output(m, "o3");

    oq_pass_result r = tp_run(m, "eliminate-identity");
    cr_assert_eq(tp_stat(&r, "nodes_removed"), 4, "t_id, c_same, r_same, r_copy");
    cr_assert_eq(tp_count_op(m, "Transpose"), 1);
    cr_assert_eq(tp_count_op(m, "Cast"), 2);
    cr_assert_eq(tp_count_op(m, "Reshape"), 2);
    oq_node *sum = tp_find_op(m, "Sum");
    for (int i = 0; i < 3; i++)
        cr_assert_str_eq(sum->inputs[i]->name, "x");
    cr_assert_str_eq(tp_find_op(m, "Transpose")->inputs[0]->name, "x");
    oq_model_free(m);
}

/* ------------------------------------------------------------ dedupe-initializers */

Test(dedupe_initializers, shares_identical_tensors)
{
    oq_model *m = tp_model(13);
    int64_t d4[1] = {4}, d22[2] = {2, 2};
    float v[4] = {1, 2, 3, 4}, v2[4] = {1, 2, 3, 5};
    int32_t iv[4];
    memcpy(iv, v, sizeof iv); /* same bytes, different dtype */
    tp_input(m, "x", OQ_DTYPE_FLOAT, d4, 1);
    tp_init_f(m, "w1", d4, 1, v);
    tp_init_f(m, "w2", d4, 1, v);        /* duplicate of w1 */
    tp_init_f(m, "w3", d22, 2, v);       /* same bytes, other dims */
    tp_init_f(m, "w4", d4, 1, v2);       /* other bytes */
    tp_init(m, "w5", OQ_DTYPE_INT32, d4, 1, iv);
    tp_init_f(m, "w6", d4, 1, v);        /* duplicate, but also a graph input */
    oq_graph_add_input(m->graph, tp_value(m, "w6"), oq_type_tensor(m, OQ_DTYPE_FLOAT, d4, NULL, 1));
    tp_init_f(m, "w7", d4, 1, v);        /* duplicate used twice */
    tp_node(m, "Add", "a1", "x,w1", "y1");
    tp_node(m, "Add", "a2", "x,w2", "y2");
    tp_node(m, "Add", "a3", "x,w3", "y3");
    tp_node(m, "Add", "a4", "x,w4", "y4");
    tp_node(m, "Cast", "c5", "w5", "y5");
    oq_node_set_attr_int(m->graph->last, "to", OQ_DTYPE_FLOAT);
    tp_node(m, "Add", "a6", "x,w6", "y6");
    tp_node(m, "Add", "a7", "w7,w7", "y7");
    const char *outs[] = {"y1", "y2", "y3", "y4", "y5", "y6", "y7"};
    for (int i = 0; i < 7; i++)
        tp_output(m, outs[i]);

    oq_pass_result r = tp_run(m, "dedupe-initializers");
    cr_assert_eq(tp_stat(&r, "initializers_removed"), 2);
    cr_assert_eq(tp_stat(&r, "bytes_saved"), 32);
    cr_assert_eq(m->graph->n_initializers, 5);
    oq_node *n = m->graph->first;
    cr_assert_str_eq(n->next->inputs[1]->name, "w1");               /* a2 */
    cr_assert_str_eq(n->next->next->inputs[1]->name, "w3");         /* a3 untouched */
    cr_assert_str_eq(n->next->next->next->inputs[1]->name, "w4");
    oq_node *a7 = m->graph->last;
    cr_assert_str_eq(a7->inputs[0]->name, "w1");
    cr_assert_str_eq(a7->inputs[1]->name, "w1");
    cr_assert_eq(oq_graph_find_value(m->graph, "w1")->n_uses, 4); /* a1, a2, a7 twice */
    cr_assert_str_eq(a7->prev->inputs[1]->name, "w6");              /* graph input kept */

    r = tp_run(m, "dedupe-initializers");
    cr_assert(!r.changed);
    oq_model_free(m);
}

/* ------------------------------------------------------------ subgraphs */

#include "ir/ir-impl.h"

static void iter_record(const oq_pass_event *ev, oq_model *m, void *user)
{
    *(int *)user = ev->iterations;
}

Test(eliminate_dead, reruns_when_a_subgraph_frees_an_outer_value)
{
    /* r = Relu(x) is used only by a dead Exp inside the If's then-branch: the first
     * sweep keeps Relu (still used) and removes the Exp; the second removes Relu. */
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){2}, 1);
    tp_input(m, "cond", OQ_DTYPE_BOOL, (int64_t[]){1}, 0);
    tp_node(m, "Relu", "outer_relu", "x", "r");
    oq_value *c = tp_value(m, "cond"), *y = tp_value(m, "y");
    oq_node *iff = oq_node_new(m->graph, "If", NULL, "if", &c, 1, &y, 1);
    oq_graph *then_g = tu_add_subgraph(iff, "then_branch");
    oq_graph *else_g = tu_add_subgraph(iff, "else_branch");
    oq_value *r = tp_value(m, "r"), *x = tp_value(m, "x");
    oq_value *e = oq_graph_new_value(then_g, "e"), *t_out = oq_graph_new_value(then_g, "t_out");
    oq_graph_append(then_g, oq_node_new(then_g, "Exp", NULL, "dead_exp", &r, 1, &e, 1));
    oq_graph_append(then_g, oq_node_new(then_g, "Neg", NULL, "then_neg", &x, 1, &t_out, 1));
    oq_graph_add_output(then_g, t_out, NULL);
    oq_value *e_out = oq_graph_new_value(else_g, "e_out");
    oq_graph_append(else_g, oq_node_new(else_g, "Abs", NULL, "else_abs", &x, 1, &e_out, 1));
    oq_graph_add_output(else_g, e_out, NULL);
    oq_graph_append(m->graph, iff);
    tp_output(m, "y");
    tp_assert_valid(m);
    cr_assert_eq(r->n_uses, 1);

    oq_registry *reg = NULL;
    cr_assert_eq(oq_registry_new(&reg, NULL), OQ_OK);
    oq_pipeline *pl = NULL;
    cr_assert_eq(oq_pipeline_parse(reg, "eliminate-dead", &pl, NULL, NULL), OQ_OK);
    int iters = 0;
    oq_pipeline_run_options ro = {0};
    ro.verify_each = true;
    ro.after_pass = iter_record;
    ro.user = &iters;
    cr_assert_eq(oq_pipeline_run(pl, m, &ro, NULL), OQ_OK);
    cr_assert_eq(iters, 3, "two changing sweeps and one that finds nothing");
    cr_assert_eq(m->graph->n_nodes, 1);
    cr_assert_str_eq(m->graph->first->op_type, "If");
    cr_assert_eq(then_g->n_nodes, 1);
    cr_assert_str_eq(then_g->first->name, "then_neg");
    cr_assert_eq(else_g->n_nodes, 1);
    tp_assert_valid(m);
    oq_pipeline_free(pl);
    oq_registry_free(reg);
    oq_model_free(m);
}

Test(eliminate_identity, works_inside_subgraphs)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){2}, 1);
    tp_input(m, "cond", OQ_DTYPE_BOOL, (int64_t[]){1}, 0);
    oq_value *c = tp_value(m, "cond"), *y = tp_value(m, "y"), *x = tp_value(m, "x");
    oq_node *iff = oq_node_new(m->graph, "If", NULL, "if", &c, 1, &y, 1);
    oq_graph *then_g = tu_add_subgraph(iff, "then_branch");
    oq_graph *else_g = tu_add_subgraph(iff, "else_branch");
    oq_value *a = oq_graph_new_value(then_g, "a"), *t_out = oq_graph_new_value(then_g, "t_out");
    oq_graph_append(then_g, oq_node_new(then_g, "Neg", NULL, "neg", &x, 1, &a, 1));
    oq_graph_append(then_g, oq_node_new(then_g, "Identity", NULL, "id", &a, 1, &t_out, 1));
    oq_graph_add_output(then_g, t_out, NULL);
    oq_value *e_out = oq_graph_new_value(else_g, "e_out");
    oq_graph_append(else_g, oq_node_new(else_g, "Identity", NULL, "outer_copy", &x, 1, &e_out, 1));
    oq_graph_add_output(else_g, e_out, NULL);
    oq_graph_append(m->graph, iff);
    tp_output(m, "y");
    oq_pass_result r = tp_run(m, "eliminate-identity");
    cr_assert_eq(tp_stat(&r, "nodes_removed"), 1);
    cr_assert_eq(tp_stat(&r, "kept_for_graph_output"), 1, "x comes from the enclosing graph");
    cr_assert_eq(then_g->n_nodes, 1);
    cr_assert_str_eq(then_g->first->outputs[0]->name, "t_out", "subgraph output name kept");
    cr_assert_eq(else_g->n_nodes, 1);
    oq_model_free(m);
}
