/* upgrade-opset: each conversion on a one-node graph, refusals, and the opset/IR
 * version bookkeeping. */
#include "test_pass_util.h"

static oq_model *one_input(int64_t opset, const int64_t *dims, size_t rank)
{
    oq_model *m = tp_model(opset);
    tp_input(m, "x", OQ_DTYPE_FLOAT, dims, rank);
    return m;
}

static int64_t ints_of(oq_node *n, size_t input, int64_t *out)
{
    cr_assert(input < n->n_inputs && n->inputs[input], "input %zu missing", input);
    return tp_ints(n->inputs[input], out, 16);
}

Test(upgrade_opset, bookkeeping_and_range)
{
    oq_model *m = one_input(9, (int64_t[]){2}, 1);
    tp_node(m, "Relu", "r", "x", "y");
    tp_output(m, "y");
    oq_pass_result r = tp_run(m, "upgrade-opset{to=21}");
    cr_assert(r.changed);
    cr_assert_eq(oq_model_opset(m, ""), 21);
    cr_assert_eq(m->ir_version, 10);
    char msg[512];
    cr_assert_eq(tp_run_fail(m, "upgrade-opset{to=13}", msg, sizeof msg), OQ_ERR_UNSUPPORTED);
    cr_assert(strstr(msg, "downgrading to 13 is not supported"), "%s", msg);
    cr_assert_eq(tp_run_fail(m, "upgrade-opset{to=22}", msg, sizeof msg), OQ_ERR_USAGE);
    cr_assert(strstr(msg, "outside 7..21"), "%s", msg);
    /* same opset: nothing to do */
    r = tp_run(m, "upgrade-opset{to=21}");
    cr_assert(!r.changed);
    oq_model_free(m);

    m = one_input(6, (int64_t[]){2}, 1);
    cr_assert_eq(tp_run_fail(m, "upgrade-opset{to=13}", msg, sizeof msg), OQ_ERR_UNSUPPORTED);
    cr_assert(strstr(msg, "below opset 7"), "%s", msg);
    oq_model_free(m);
}

Test(upgrade_opset, softmax_last_axis_keeps_one_node)
{
    oq_model *m = one_input(11, (int64_t[]){2, 3}, 2);
    oq_node *n = tp_node(m, "Softmax", "sm", "x", "y");
    oq_node_set_attr_int(n, "axis", -1);
    tp_output(m, "y");
    oq_pass_result r = tp_run(m, "upgrade-opset{to=13}");
    cr_assert_eq(tp_stat(&r, "softmax_axis_kept"), 1);
    cr_assert_eq(m->graph->n_nodes, 1);
    cr_assert_eq(oq_node_attr_int(m->graph->first, "axis", 99), 1);
    oq_model_free(m);

    /* default axis (1) on a 2-D input is the last axis too */
    m = one_input(11, (int64_t[]){2, 3}, 2);
    tp_node(m, "LogSoftmax", "lsm", "x", "y");
    tp_output(m, "y");
    tp_run(m, "upgrade-opset{to=13}");
    cr_assert_eq(m->graph->n_nodes, 1);
    cr_assert_eq(oq_node_attr_int(m->graph->first, "axis", 99), 1);
    oq_model_free(m);
}

Test(upgrade_opset, softmax_inner_axis_is_flattened)
{
    /* opset < 13: softmax over the [2, 3*4] view; 13: only over axis 1 */
    oq_model *m = one_input(11, (int64_t[]){2, 3, 4}, 3);
    oq_node *n = tp_node(m, "Hardmax", "hm", "x", "y");
    oq_node_set_attr_int(n, "axis", 1);
    tp_output(m, "y");
    oq_pass_result r = tp_run(m, "upgrade-opset{to=13}");
    cr_assert_eq(tp_stat(&r, "softmax_flattened"), 1);
    cr_assert_eq(m->graph->n_nodes, 4);
    oq_node *shape = m->graph->first, *flat = shape->next, *hm = flat->next, *rs = hm->next;
    cr_assert_str_eq(shape->op_type, "Shape");
    cr_assert_str_eq(flat->op_type, "Flatten");
    cr_assert_str_eq(hm->op_type, "Hardmax");
    cr_assert_str_eq(rs->op_type, "Reshape");
    cr_assert_eq(oq_node_attr_int(flat, "axis", 99), 1);
    cr_assert_eq(oq_node_attr_int(hm, "axis", 99), 1);
    cr_assert_eq(hm->inputs[0], flat->outputs[0]);
    cr_assert_eq(rs->inputs[0], hm->outputs[0]);
    cr_assert_eq(rs->inputs[1], shape->outputs[0]);
    cr_assert_str_eq(rs->outputs[0]->name, "y");
    cr_assert_str_eq(flat->inputs[0]->name, "x");
    oq_model_free(m);

    /* unknown rank: the same exact rewrite */
    m = tp_model(9);
    tp_input(m, "x", OQ_DTYPE_FLOAT, NULL, 0);
    tp_node(m, "Softmax", "sm", "x", "y");
    tp_output(m, "y");
    r = tp_run(m, "upgrade-opset{to=17}");
    cr_assert_eq(tp_stat(&r, "softmax_flattened"), 1);
    cr_assert_eq(oq_node_attr_int(tp_find_op(m, "Flatten"), "axis", 99), 1);
    oq_model_free(m);
}

Test(upgrade_opset, clip_attributes_become_inputs)
{
    oq_model *m = one_input(9, (int64_t[]){4}, 1);
    oq_node *c = tp_node(m, "Clip", "both", "x", "a");
    oq_node_set_attr_float(c, "min", 0.0f);
    oq_node_set_attr_float(c, "max", 6.0f);
    c = tp_node(m, "Clip", "max_only", "a", "b");
    oq_node_set_attr_float(c, "max", 2.5f);
    tp_node(m, "Clip", "none", "b", "y");
    tp_output(m, "y");
    tp_run(m, "upgrade-opset{to=11}");
    oq_node *both = m->graph->first, *mx = both->next, *none = mx->next;
    cr_assert_eq(both->n_attrs, 0);
    cr_assert_eq(both->n_inputs, 3);
    cr_assert_eq(*tp_floats(both->inputs[1]), 0.0f);
    cr_assert_eq(*tp_floats(both->inputs[2]), 6.0f);
    cr_assert_eq(oq_value_const_tensor(both->inputs[1])->rank, 0, "min/max are scalars");
    cr_assert_eq(mx->n_inputs, 3);
    cr_assert_null(mx->inputs[1]);
    cr_assert_eq(*tp_floats(mx->inputs[2]), 2.5f);
    cr_assert_eq(none->n_inputs, 1);
    oq_model_free(m);
}

Test(upgrade_opset, axes_to_inputs_at_13_and_18)
{
    oq_model *m = one_input(11, (int64_t[]){1, 3, 1}, 3);
    oq_node *n = tp_node(m, "Squeeze", "sq", "x", "a");
    oq_node_set_attr_ints(n, "axes", (int64_t[]){0, 2}, 2);
    n = tp_node(m, "Unsqueeze", "usq", "a", "b");
    oq_node_set_attr_ints(n, "axes", (int64_t[]){1}, 1);
    n = tp_node(m, "ReduceSum", "rsum", "b", "c");
    oq_node_set_attr_ints(n, "axes", (int64_t[]){-1}, 1);
    n = tp_node(m, "ReduceMean", "rmean", "c", "y");
    oq_node_set_attr_ints(n, "axes", (int64_t[]){0}, 1);
    tp_output(m, "y");
    oq_pass_result r = tp_run(m, "upgrade-opset{to=13}");
    cr_assert_eq(tp_stat(&r, "attributes_to_inputs"), 3);
    int64_t v[16];
    oq_node *sq = m->graph->first, *usq = sq->next, *rsum = usq->next, *rmean = rsum->next;
    cr_assert_eq(ints_of(sq, 1, v), 2);
    cr_assert_eq(v[0], 0);
    cr_assert_eq(v[1], 2);
    cr_assert_eq(ints_of(usq, 1, v), 1);
    cr_assert_eq(v[0], 1);
    cr_assert_eq(ints_of(rsum, 1, v), 1);
    cr_assert_eq(v[0], -1);
    cr_assert(oq_node_attr(rmean, "axes"), "ReduceMean keeps its attribute until 18");
    r = tp_run(m, "upgrade-opset{to=18}");
    cr_assert_eq(tp_stat(&r, "attributes_to_inputs"), 1);
    cr_assert_null(oq_node_attr(rmean, "axes"));
    cr_assert_eq(ints_of(rmean, 1, v), 1);
    cr_assert_eq(v[0], 0);
    oq_model_free(m);
}

Test(upgrade_opset, split_sizes_and_num_outputs)
{
    oq_model *m = one_input(11, (int64_t[]){6}, 1);
    oq_node *n = tp_node(m, "Split", "s1", "x", "a,b");
    oq_node_set_attr_ints(n, "split", (int64_t[]){2, 4}, 2);
    tp_node(m, "Split", "s2", "b", "c,d");
    tp_output(m, "a");
    tp_output(m, "c");
    tp_output(m, "d");
    tp_run(m, "upgrade-opset{to=18}");
    int64_t v[16];
    oq_node *s1 = m->graph->first, *s2 = s1->next;
    cr_assert_eq(ints_of(s1, 1, v), 2);
    cr_assert_eq(v[1], 4);
    cr_assert_null(oq_node_attr(s1, "num_outputs"));
    cr_assert_eq(oq_node_attr_int(s2, "num_outputs", 0), 2);
    oq_model_free(m);
}

Test(upgrade_opset, slice_and_pad_and_topk_at_10_11)
{
    oq_model *m = one_input(9, (int64_t[]){4, 4}, 2);
    oq_node *n = tp_node(m, "Slice", "sl", "x", "a");
    oq_node_set_attr_ints(n, "starts", (int64_t[]){1}, 1);
    oq_node_set_attr_ints(n, "ends", (int64_t[]){3}, 1);
    oq_node_set_attr_ints(n, "axes", (int64_t[]){1}, 1);
    n = tp_node(m, "Pad", "pad", "a", "b");
    oq_node_set_attr_ints(n, "pads", (int64_t[]){0, 1, 0, 1}, 4);
    oq_node_set_attr_float(n, "value", 1.5f);
    oq_node_set_attr_string(n, "mode", "constant");
    n = tp_node(m, "TopK", "topk", "b", "vals,idx");
    oq_node_set_attr_int(n, "k", 2);
    tp_output(m, "vals");
    tp_output(m, "idx");
    tp_run(m, "upgrade-opset{to=11}");
    int64_t v[16];
    oq_node *sl = m->graph->first, *pad = sl->next, *topk = pad->next;
    cr_assert_eq(sl->n_attrs, 0);
    cr_assert_eq(ints_of(sl, 1, v), 1);
    cr_assert_eq(v[0], 1);
    cr_assert_eq(ints_of(sl, 2, v), 1);
    cr_assert_eq(v[0], 3);
    cr_assert_eq(ints_of(sl, 3, v), 1);
    cr_assert_eq(v[0], 1);
    cr_assert_eq(ints_of(pad, 1, v), 4);
    cr_assert_eq(v[1], 1);
    cr_assert_eq(*tp_floats(pad->inputs[2]), 1.5f);
    cr_assert_str_eq(oq_node_attr_string(pad, "mode", ""), "constant");
    cr_assert_null(oq_node_attr(pad, "value"));
    cr_assert_eq(ints_of(topk, 1, v), 1);
    cr_assert_eq(v[0], 2);
    oq_model_free(m);
}

Test(upgrade_opset, upsample_becomes_resize)
{
    /* Upsample-9: scales input; to 13: Resize(X, "", scales), asymmetric, floor */
    oq_model *m = one_input(9, (int64_t[]){1, 1, 2, 2}, 4);
    tp_init_f(m, "scales", (int64_t[]){4}, 1, (float[]){1, 1, 2, 2});
    tp_node(m, "Upsample", "up", "x,scales", "y");
    tp_output(m, "y");
    oq_pass_result r = tp_run(m, "upgrade-opset{to=13}");
    cr_assert_eq(tp_stat(&r, "upsample_to_resize"), 1);
    oq_node *n = m->graph->first;
    cr_assert_str_eq(n->op_type, "Resize");
    cr_assert_eq(n->n_inputs, 3);
    cr_assert_null(n->inputs[1]);
    cr_assert_str_eq(n->inputs[2]->name, "scales");
    cr_assert_str_eq(oq_node_attr_string(n, "coordinate_transformation_mode", ""), "asymmetric");
    cr_assert_str_eq(oq_node_attr_string(n, "nearest_mode", ""), "floor");
    cr_assert_str_eq(oq_node_attr_string(n, "mode", ""), "nearest");
    oq_model_free(m);

    /* Upsample-7: scales attribute; to 11: roi is an empty tensor (required in 11/12) */
    m = one_input(7, (int64_t[]){1, 1, 2, 2}, 4);
    oq_node *u = tp_node(m, "Upsample", "up", "x", "y");
    oq_node_set_attr_floats(u, "scales", (float[]){1, 1, 2, 3}, 4);
    oq_node_set_attr_string(u, "mode", "linear");
    tp_output(m, "y");
    tp_run(m, "upgrade-opset{to=11}");
    n = m->graph->first;
    cr_assert_str_eq(n->op_type, "Resize");
    oq_tensor *roi = oq_value_const_tensor(n->inputs[1]);
    cr_assert(roi);
    cr_assert_eq(oq_tensor_numel(roi), 0);
    cr_assert_eq(tp_floats(n->inputs[2])[3], 3.0f);
    cr_assert_str_eq(oq_node_attr_string(n, "mode", ""), "linear");
    cr_assert_null(oq_node_attr(n, "nearest_mode"));
    cr_assert_null(oq_node_attr(n, "scales"));
    oq_model_free(m);
}

Test(upgrade_opset, resize10_rounding_depends_on_scales)
{
    oq_model *m = one_input(10, (int64_t[]){1, 1, 4, 4}, 4);
    tp_init_f(m, "down", (int64_t[]){4}, 1, (float[]){1, 1, 0.5f, 0.5f});
    tp_node(m, "Resize", "rz", "x,down", "y");
    tp_output(m, "y");
    tp_run(m, "upgrade-opset{to=13}");
    cr_assert_str_eq(oq_node_attr_string(m->graph->first, "nearest_mode", ""), "ceil");
    oq_model_free(m);

    m = one_input(10, (int64_t[]){1, 1, 4, 4}, 4);
    tp_init_f(m, "mixed", (int64_t[]){4}, 1, (float[]){1, 1, 0.5f, 2});
    tp_node(m, "Resize", "rz", "x,mixed", "y");
    tp_output(m, "y");
    char msg[512];
    cr_assert_eq(tp_run_fail(m, "upgrade-opset{to=13}", msg, sizeof msg), OQ_ERR_UNSUPPORTED);
    cr_assert(strstr(msg, "node \"rz\" (Resize)"), "%s", msg);
    cr_assert_eq(oq_model_opset(m, ""), 10, "nothing changes when a node is refused");
    cr_assert_eq(m->graph->first->n_inputs, 2);
    oq_model_free(m);
}

Test(upgrade_opset, batchnorm_and_dropout)
{
    oq_model *m = one_input(7, (int64_t[]){1, 2, 2, 2}, 4);
    int64_t d2[1] = {2};
    const float one[2] = {1, 1}, zero[2] = {0, 0};
    tp_init_f(m, "s", d2, 1, one);
    tp_init_f(m, "b", d2, 1, zero);
    tp_init_f(m, "mn", d2, 1, zero);
    tp_init_f(m, "v", d2, 1, one);
    oq_node *bn = tp_node(m, "BatchNormalization", "bn", "x,s,b,mn,v", "a,rm,rv,sm,sv");
    oq_node_set_attr_int(bn, "spatial", 1);
    oq_node *d = tp_node(m, "Dropout", "drop", "a", "y");
    oq_node_set_attr_float(d, "ratio", 0.25f);
    tp_output(m, "y");
    tp_run(m, "upgrade-opset{to=15}");
    bn = m->graph->first;
    d = bn->next;
    cr_assert_null(oq_node_attr(bn, "spatial"));
    cr_assert_eq(bn->n_outputs, 1, "unused training outputs are dropped at 14");
    cr_assert_eq(*tp_floats(d->inputs[1]), 0.25f);
    cr_assert_null(oq_node_attr(d, "ratio"));
    oq_model_free(m);

    /* refusals: spatial=0, used training outputs, used dropout mask */
    m = one_input(7, (int64_t[]){1, 2, 2, 2}, 4);
    tp_init_f(m, "s", d2, 1, one);
    tp_init_f(m, "b", d2, 1, zero);
    tp_init_f(m, "mn", d2, 1, zero);
    tp_init_f(m, "v", d2, 1, one);
    bn = tp_node(m, "BatchNormalization", "bn0", "x,s,b,mn,v", "a");
    oq_node_set_attr_int(bn, "spatial", 0);
    tp_node(m, "BatchNormalization", "bn1", "a,s,b,mn,v", "c,rm");
    tp_node(m, "Dropout", "drop", "c", "y,mask");
    tp_output(m, "y");
    tp_output(m, "rm");
    tp_output(m, "mask");
    oq_registry *reg = NULL;
    oq_diag dg;
    oq_diag_init(&dg);
    cr_assert_eq(oq_registry_new(&reg, NULL), OQ_OK);
    cr_assert_eq(oq_pass_run_simple(reg, "upgrade-opset{to=14}", m, NULL, &dg), OQ_ERR_UNSUPPORTED);
    cr_assert_geq(dg.errors, 3);
    cr_assert_str_eq(dg.entries[0].node, "bn0");
    cr_assert(strstr(dg.entries[0].message, "spatial=0"));
    cr_assert_str_eq(dg.entries[1].node, "bn1");
    cr_assert_str_eq(dg.entries[2].node, "drop");
    cr_assert(strstr(dg.entries[2].message, "mask"));
    oq_diag_free(&dg);
    oq_registry_free(reg);
    oq_model_free(m);
}

Test(upgrade_opset, scatter_and_removed_ops)
{
    oq_model *m = one_input(9, (int64_t[]){2, 2}, 2);
    tp_init(m, "idx", OQ_DTYPE_INT64, (int64_t[]){2, 2}, 2, (int64_t[]){0, 1, 1, 0});
    tp_init_f(m, "upd", (int64_t[]){2, 2}, 2, (float[]){1, 2, 3, 4});
    tp_node(m, "Scatter", "sc", "x,idx,upd", "y");
    tp_output(m, "y");
    oq_pass_result r = tp_run(m, "upgrade-opset{to=11}");
    cr_assert_eq(tp_stat(&r, "scatter_to_scatter_elements"), 1);
    cr_assert_str_eq(m->graph->first->op_type, "ScatterElements");
    oq_model_free(m);

    m = one_input(9, (int64_t[]){1, 3, 2, 2}, 4);
    tp_node(m, "ImageScaler", "is", "x", "y");
    tp_output(m, "y");
    char msg[512];
    cr_assert_eq(tp_run_fail(m, "upgrade-opset{to=10}", msg, sizeof msg), OQ_ERR_UNSUPPORTED);
    cr_assert(strstr(msg, "experimental operator ImageScaler was removed in opset 10"), "%s", msg);
    oq_model_free(m);
}
