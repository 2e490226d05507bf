/* widen-float16: a float16 graph computed in float32 inside, its interface kept.
 *   x float16 [2, 3] -> MatMul(W float16 [3, 4]) -> Add(Constant c float16 [4]) ->
 *   Cast(to float16) -> y (graph output, float16)
 * After the pass: W and c are float32 (the same values: float32 holds every float16), the
 * inner Cast makes float32, a Cast to float32 reads x and a Cast to float16 writes y; the
 * graph runs in onnxq's executor (which has no float16 MatMul + Add chain of its own
 * here) and gives y = fp16(x W + c) with the sums in float32: checked against the formula
 * in double, within one float16 step. */
#include <math.h>

#include "test_pass_util.h"

static uint16_t h(float f) { return oq_float_to_half(f); }

Test(widen_float16, initializers_constants_casts_and_the_interface)
{
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT16, (int64_t[]){2, 3}, 2);
    uint16_t w[12], cv[4];
    float wf[12], cf[4];
    for (int i = 0; i < 12; i++) {
        w[i] = h(0.25f * (float)(i % 5) - 0.5f);
        wf[i] = oq_half_to_float(w[i]);
    }
    for (int i = 0; i < 4; i++) {
        cv[i] = h(0.1f * (float)i - 0.2f);
        cf[i] = oq_half_to_float(cv[i]);
    }
    tp_init(m, "W", OQ_DTYPE_FLOAT16, (int64_t[]){3, 4}, 2, w);
    tp_node(m, "MatMul", "mm", "x,W", "mmo");
    oq_node *cn = tp_node(m, "Constant", "c", "", "c");
    oq_node_set_attr_tensor(cn, "value", oq_tensor_new(m, "c", OQ_DTYPE_FLOAT16, (int64_t[]){4}, 1, cv, sizeof cv));
    tp_node(m, "Add", "add", "mmo,c", "a");
    oq_node *cast = tp_node(m, "Cast", "cast", "a", "y");
    oq_node_set_attr_int(cast, "to", OQ_DTYPE_FLOAT16);
    tp_output(m, "y");
    m->graph->outputs[0]->type = oq_type_tensor(m, OQ_DTYPE_FLOAT16, (int64_t[]){2, 4}, NULL, 2);
    oq_pass_result r = tp_run(m, "widen-float16");
    cr_assert_eq(tp_stat(&r, "initializers_widened"), 1);
    cr_assert_eq(tp_stat(&r, "constants_widened"), 1);
    cr_assert_eq(tp_stat(&r, "casts_to_float32"), 1);
    cr_assert_eq(tp_stat(&r, "inputs_cast"), 1);
    cr_assert_eq(tp_stat(&r, "outputs_cast"), 1);
    oq_value *W = oq_graph_find_value(m->graph, "W");
    cr_assert_eq(W->initializer->dtype, OQ_DTYPE_FLOAT);
    const float *w32 = tp_floats(W);
    for (int i = 0; i < 12; i++)
        cr_assert_eq(w32[i], wf[i]);
    cr_assert_eq(oq_node_attr(cn, "value")->t->dtype, OQ_DTYPE_FLOAT);
    cr_assert_eq(oq_node_attr_int(cast, "to", 0), OQ_DTYPE_FLOAT);
    cr_assert_eq(m->graph->inputs[0]->type->elem_type, OQ_DTYPE_FLOAT16, "the input stays float16");
    cr_assert_eq(m->graph->outputs[0]->type->elem_type, OQ_DTYPE_FLOAT16, "the output stays float16");
    oq_node *last = m->graph->outputs[0]->value->producer;
    cr_assert_str_eq(last->op_type, "Cast");
    cr_assert_eq(oq_node_attr_int(last, "to", 0), OQ_DTYPE_FLOAT16);
    /* run it */
    uint16_t x[6];
    float xf[6];
    for (int i = 0; i < 6; i++) {
        x[i] = h(0.3f * (float)i - 0.7f);
        xf[i] = oq_half_to_float(x[i]);
    }
    oq_diag d;
    oq_plan *p = tp_plan(m, &d);
    oq_rt_tensor in, out;
    cr_assert_eq(oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT16, (int64_t[]){2, 3}, 2, x), OQ_OK);
    memset(&out, 0, sizeof out);
    cr_assert_eq(oq_plan_run(p, &in, 1, &out, 1, &d), OQ_OK);
    cr_assert_eq(out.dtype, OQ_DTYPE_FLOAT16);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            double want = cf[j];
            for (int k = 0; k < 3; k++)
                want += (double)xf[i * 3 + k] * wf[k * 4 + j];
            float got = oq_half_to_float(((const uint16_t *)out.data)[i * 4 + j]);
            cr_assert(fabs(got - want) <= fmax(fabs(want), 0.25) / 1024.0, "y[%d][%d] %g, want %g", i, j, got, want);
        }
    oq_rt_tensor_release(&out);
    oq_plan_free(p);
    oq_diag_free(&d);
    oq_model_free(m);
}
