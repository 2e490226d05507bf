/* fold-batchnorm: structure, and numbers checked against the unfolded formula
 *   y = scale * (z - mean) / sqrt(var + eps) + B
 * evaluated by hand (in double) in the test. */
#include <math.h>

#include "test_pass_util.h"

static const float scale[3] = {4.0f, 0.5f, -1.25f};
static const float bnb[3] = {0.25f, -1.0f, 2.0f};
static const float mean[3] = {1.0f, -0.5f, 0.125f};
static const float var[3] = {3.0f, 0.75f, 2.5f};
static const float eps = 1e-3f;

static double bn_ref(double z, int c)
{
    return (double)scale[c] * (z - (double)mean[c]) / sqrt((double)var[c] + (double)eps) + (double)bnb[c];
}

static void add_bn(oq_model *m, const char *in, const char *out)
{
    int64_t d3[1] = {3};
    tp_init_f(m, "bn_scale", d3, 1, scale);
    tp_init_f(m, "bn_b", d3, 1, bnb);
    tp_init_f(m, "bn_mean", d3, 1, mean);
    tp_init_f(m, "bn_var", d3, 1, var);
    char ins[256];
    snprintf(ins, sizeof ins, "%s,bn_scale,bn_b,bn_mean,bn_var", in);
    oq_node *bn = tp_node(m, "BatchNormalization", "bn", ins, out);
    oq_node_set_attr_float(bn, "epsilon", eps);
}

static void assert_close(double got, double want, const char *what, int i)
{
    cr_assert(fabs(got - want) <= 1e-5 * fabs(want) + 1e-6, "%s[%d]: got %.9g, want %.9g", what,
              i, got, want);
}

static const float xs[8] = {0.5f, -1.0f, 2.0f, 0.25f, -0.75f, 1.5f, 3.0f, -2.0f};

Test(fold_batchnorm, conv_weights_and_bias)
{
    oq_model *m = tp_model(13);
    /* x: [1, 2, 2, 2]; 1x1 Conv 2 -> 3 channels with bias */
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 2, 2, 2}, 4);
    const float w[6] = {1.0f, -2.0f, 0.5f, 0.25f, -1.5f, 3.0f};
    const float bias[3] = {0.1f, -0.2f, 0.3f};
    tp_init_f(m, "W", (int64_t[]){3, 2, 1, 1}, 4, w);
    tp_init_f(m, "Bc", (int64_t[]){3}, 1, bias);
    tp_node(m, "Conv", "conv", "x,W,Bc", "z");
    add_bn(m, "z", "y");
    tp_output(m, "y");

    oq_pass_result r = tp_run(m, "fold-batchnorm");
    cr_assert_eq(tp_stat(&r, "folded"), 1);
    cr_assert_eq(m->graph->n_nodes, 1);
    oq_node *conv = m->graph->first;
    cr_assert_str_eq(conv->op_type, "Conv");
    cr_assert_str_eq(conv->outputs[0]->name, "y");
    cr_assert_eq(conv->n_inputs, 3);
    cr_assert_eq(m->graph->n_initializers, 2, "BN parameters and the old weights are gone");
    const float *nw = tp_floats(conv->inputs[1]), *nb = tp_floats(conv->inputs[2]);
    /* hand formula for every output element */
    for (int c = 0; c < 3; c++)
        for (int p = 0; p < 4; p++) {
            double z = (double)w[c * 2] * xs[p] + (double)w[c * 2 + 1] * xs[4 + p] + bias[c];
            double want = bn_ref(z, c);
            double got = (double)nw[c * 2] * xs[p] + (double)nw[c * 2 + 1] * xs[4 + p] + nb[c];
            assert_close(got, want, "conv output", c * 4 + p);
        }
    /* and one coefficient written out: a0 = 4 / sqrt(3.001) */
    assert_close(nw[0], 1.0 * 4.0 / sqrt(3.0 + (double)1e-3f), "W'", 0);
    oq_model_free(m);
}

Test(fold_batchnorm, conv_without_bias_and_constant_node_weights)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 2, 2, 2}, 4);
    const float w[6] = {1.0f, -2.0f, 0.5f, 0.25f, -1.5f, 3.0f};
    oq_node *c = tp_node(m, "Constant", "wconst", "", "W");
    oq_node_set_attr_tensor(c, "value", oq_tensor_new(m, "W", OQ_DTYPE_FLOAT, (int64_t[]){3, 2, 1, 1}, 4, w, 24));
    tp_node(m, "Conv", "conv", "x,W", "z");
    add_bn(m, "z", "y");
    tp_output(m, "y");
    oq_pass_result r = tp_run(m, "fold-batchnorm");
    cr_assert_eq(tp_stat(&r, "folded"), 1);
    cr_assert_eq(m->graph->n_nodes, 1, "the unused Constant is removed too");
    oq_node *conv = m->graph->first;
    const float *nb = tp_floats(conv->inputs[2]);
    for (int k = 0; k < 3; k++)
        assert_close(nb[k], bn_ref(0.0, k), "bias", k);
    oq_model_free(m);
}

Test(fold_batchnorm, conv_transpose_scales_output_channels)
{
    oq_model *m = tp_model(13);
    /* W: [Cin=2, Cout=3, 1, 1]; output channel j uses W[:, j] */
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 2, 2, 2}, 4);
    const float w[6] = {1.0f, -2.0f, 0.5f, 0.25f, -1.5f, 3.0f};
    tp_init_f(m, "W", (int64_t[]){2, 3, 1, 1}, 4, w);
    tp_node(m, "ConvTranspose", "convt", "x,W", "z");
    add_bn(m, "z", "y");
    tp_output(m, "y");
    oq_pass_result r = tp_run(m, "fold-batchnorm");
    cr_assert_eq(tp_stat(&r, "folded"), 1);
    oq_node *ct = m->graph->first;
    const float *nw = tp_floats(ct->inputs[1]), *nb = tp_floats(ct->inputs[2]);
    for (int j = 0; j < 3; j++)
        for (int p = 0; p < 4; p++) {
            double z = (double)w[j] * xs[p] + (double)w[3 + j] * xs[4 + p];
            double got = (double)nw[j] * xs[p] + (double)nw[3 + j] * xs[4 + p] + nb[j];
            assert_close(got, bn_ref(z, j), "convtranspose output", j * 4 + p);
        }
    oq_model_free(m);
}

static void gemm_case(int transB, float beta, bool with_c)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){2, 2}, 2);
    const float b_kn[6] = {1.0f, -2.0f, 0.5f, 0.25f, -1.5f, 3.0f}; /* [K=2, N=3] */
    float b[6];
    for (int k = 0; k < 2; k++)
        for (int n = 0; n < 3; n++)
            b[transB ? n * 2 + k : k * 3 + n] = b_kn[k * 3 + n];
    const float cvec[3] = {0.5f, 1.0f, -0.25f};
    tp_init_f(m, "B", transB ? (int64_t[]){3, 2} : (int64_t[]){2, 3}, 2, b);
    if (with_c)
        tp_init_f(m, "C", (int64_t[]){3}, 1, cvec);
    oq_node *g = tp_node(m, "Gemm", "gemm", with_c ? "x,B,C" : "x,B", "z");
    oq_node_set_attr_int(g, "transB", transB);
    oq_node_set_attr_float(g, "beta", beta);
    oq_node_set_attr_float(g, "alpha", 2.0f);
    add_bn(m, "z", "y");
    tp_output(m, "y");
    oq_pass_result r = tp_run(m, "fold-batchnorm");
    cr_assert_eq(tp_stat(&r, "folded"), 1);
    g = m->graph->first;
    cr_assert_str_eq(g->op_type, "Gemm");
    const float *nb = tp_floats(g->inputs[1]), *nc = tp_floats(g->inputs[2]);
    double nbeta = oq_node_attr_float(g, "beta", 1.0f);
    for (int i = 0; i < 2; i++)
        for (int n = 0; n < 3; n++) {
            double z = 0, got = 0;
            for (int k = 0; k < 2; k++) {
                z += (double)xs[i * 2 + k] * b_kn[k * 3 + n];
                got += (double)xs[i * 2 + k] * nb[transB ? n * 2 + k : k * 3 + n];
            }
            z = 2.0 * z + (with_c ? (double)beta * cvec[n] : 0.0);
            got = 2.0 * got + nbeta * nc[n];
            assert_close(got, bn_ref(z, n), "gemm output", i * 3 + n);
        }
    oq_model_free(m);
}

Test(fold_batchnorm, gemm_every_form)
{
    gemm_case(0, 0.5f, true);
    gemm_case(1, 0.5f, true);
    gemm_case(0, 1.0f, false);
    gemm_case(1, 0.0f, true);
}

Test(fold_batchnorm, matmul_2d_gets_an_add)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){2, 2}, 2);
    const float w[6] = {1.0f, -2.0f, 0.5f, 0.25f, -1.5f, 3.0f}; /* [2, 3] */
    tp_init_f(m, "W", (int64_t[]){2, 3}, 2, w);
    tp_node(m, "MatMul", "mm", "x,W", "z");
    add_bn(m, "z", "y");
    tp_output(m, "y");
    oq_pass_result r = tp_run(m, "fold-batchnorm");
    cr_assert_eq(tp_stat(&r, "folded"), 1);
    cr_assert_eq(m->graph->n_nodes, 2);
    oq_node *mm = m->graph->first, *add = mm->next;
    cr_assert_str_eq(mm->op_type, "MatMul");
    cr_assert_str_eq(add->op_type, "Add");
    cr_assert_eq(add->inputs[0], mm->outputs[0]);
    cr_assert_str_eq(add->outputs[0]->name, "y");
    const float *nw = tp_floats(mm->inputs[1]), *nb = tp_floats(add->inputs[1]);
    for (int i = 0; i < 2; i++)
        for (int n = 0; n < 3; n++) {
            double z = 0, got = nb[n];
            for (int k = 0; k < 2; k++) {
                z += (double)xs[i * 2 + k] * w[k * 3 + n];
                got += (double)xs[i * 2 + k] * nw[k * 3 + n];
            }
            assert_close(got, bn_ref(z, n), "matmul output", i * 3 + n);
        }
    oq_model_free(m);
}

Test(fold_batchnorm, matmul_3d_is_not_folded_into_columns)
{
    /* [2,3,2] @ [2,3] -> [2,3,3]: BN's channel axis is 1 (size 3), which is not the
     * weight's column axis even though both are 3: it must become Mul+Add over axis 1 */
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){2, 3, 2}, 3);
    const float w[6] = {1, 2, 3, 4, 5, 6};
    tp_init_f(m, "W", (int64_t[]){2, 3}, 2, w);
    tp_node(m, "MatMul", "mm", "x,W", "z");
    add_bn(m, "z", "y");
    tp_output(m, "y");
    oq_pass_result r = tp_run(m, "fold-batchnorm");
    cr_assert_eq(tp_stat(&r, "folded"), 0);
    cr_assert_eq(tp_stat(&r, "to_mul_add"), 1);
    oq_node *mul = tp_find_op(m, "Mul");
    cr_assert(mul);
    oq_tensor *a = oq_value_const_tensor(mul->inputs[1]);
    cr_assert_eq(a->rank, 2);
    cr_assert_eq(a->dims[0], 3);
    cr_assert_eq(a->dims[1], 1);
    const float *w_after = tp_floats(tp_find_op(m, "MatMul")->inputs[1]);
    cr_assert_eq(w_after[5], 6.0f, "weights untouched");
    oq_model_free(m);
}

Test(fold_batchnorm, standalone_becomes_mul_add)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 3, 2, 2}, 4);
    add_bn(m, "x", "y");
    tp_output(m, "y");
    oq_pass_result r = tp_run(m, "fold-batchnorm");
    cr_assert_eq(tp_stat(&r, "to_mul_add"), 1);
    cr_assert_eq(m->graph->n_nodes, 2);
    oq_node *mul = m->graph->first, *add = mul->next;
    cr_assert_str_eq(mul->op_type, "Mul");
    cr_assert_str_eq(add->op_type, "Add");
    cr_assert_str_eq(add->outputs[0]->name, "y");
    oq_tensor *at = oq_value_const_tensor(mul->inputs[1]);
    cr_assert_eq(at->rank, 3);
    cr_assert_eq(at->dims[0], 3);
    cr_assert_eq(at->dims[1], 1);
    cr_assert_eq(at->dims[2], 1);
    const float *a = tp_floats(mul->inputs[1]), *b = tp_floats(add->inputs[1]);
    for (int c = 0; c < 3; c++)
        for (int p = 0; p < 4; p++) {
            double x = xs[p] * (c + 1);
            assert_close((double)a[c] * x + b[c], bn_ref(x, c), "standalone", c);
        }
    /* standalone=false leaves it */
    oq_model_free(m);
    m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 3, 2, 2}, 4);
    add_bn(m, "x", "y");
    tp_output(m, "y");
    r = tp_run(m, "fold-batchnorm{standalone=false}");
    cr_assert(!r.changed);
    cr_assert_eq(tp_count_op(m, "BatchNormalization"), 1);
    oq_model_free(m);
}

Test(fold_batchnorm, leaves_what_it_cannot_fold)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 3, 2, 2}, 4);
    tp_input(m, "live_mean", OQ_DTYPE_FLOAT, (int64_t[]){3}, 1);
    int64_t d3[1] = {3};
    tp_init_f(m, "s", d3, 1, scale);
    tp_init_f(m, "b", d3, 1, bnb);
    tp_init_f(m, "v", d3, 1, var);
    tp_node(m, "BatchNormalization", "bn_dyn", "x,s,b,live_mean,v", "y");
    /* conv output also used elsewhere: not folded into the conv */
    const float w[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    tp_init_f(m, "W", (int64_t[]){3, 3, 1, 1}, 4, w);
    tp_init_f(m, "mn", d3, 1, mean);
    tp_node(m, "Conv", "conv", "x,W", "z");
    tp_node(m, "BatchNormalization", "bn_shared", "z,s,b,mn,v", "y2");
    tp_node(m, "Relu", "relu", "z", "y3");
    tp_output(m, "y");
    tp_output(m, "y2");
    tp_output(m, "y3");
    oq_pass_result r = tp_run(m, "fold-batchnorm");
    cr_assert_eq(tp_stat(&r, "skipped_not_constant"), 1);
    cr_assert_eq(tp_stat(&r, "folded"), 0);
    cr_assert_eq(tp_stat(&r, "to_mul_add"), 1, "the shared-conv BN becomes Mul+Add (rank from W)");
    cr_assert_eq(tp_count_op(m, "BatchNormalization"), 1);
    cr_assert_eq(tp_floats(tp_find_op(m, "Conv")->inputs[1])[0], 1.0f);
    oq_model_free(m);
}
