/* The integer arithmetic targets of the executor (oq_plan_options.arith, docs/run.md
 * "Arithmetic targets") on a hand-computed case: x = [255, 255] (uint8, scale 1),
 * w = [127, 127] (int8, scale 1), y = Q(x @ w, scale 256).
 *   avx2:      255*127 + 255*127 = 64770 saturates to 32767 in int16 -> 128 -> 32768
 *   exact:     64770 / 256 = 253.008 -> 253 -> 64768
 *   reference: the same in float -> 64768
 * tests/qlinear_ort.sh checks many more groups against onnxruntime. */
#include <criterion/criterion.h>
#include <string.h>

#include "onnxq/onnxq.h"
#include "testutil.h"

static oq_model *hand_model(void)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    oq_value *x = tu_input_1xc(m, "x", 2);
    const int8_t wq[2] = {127, 127};
    int64_t d[2] = {2, 1};
    oq_value *w = tu_weight_dq_i8(m, "w", wq, d, 1.0f);
    oq_value *xd = tu_qdq_u8(m, x, "x", "x_dequant", 1.0f, 0);
    oq_value *p = tu_node(m, "MatMul", "mm", xd, w, NULL, "y_prequant");
    oq_value *y = tu_qdq_u8(m, p, "y", "y", 256.0f, 0);
    oq_graph_add_output(m->graph, y, NULL);
    return m;
}

typedef struct seen {
    bool prequant, quantized;
} seen;

static void observe(const oq_node *n, size_t o, const oq_rt_tensor *t, void *user)
{
    (void)t;
    seen *s = user;
    const char *name = n->outputs[o] ? n->outputs[o]->name : "";
    if (strcmp(name, "y_prequant") == 0)
        s->prequant = true;
    if (strcmp(name, "y_quantized") == 0)
        s->quantized = true;
}

static float run_hand(oq_arith arith, int threads, seen *sn)
{
    oq_model *m = hand_model();
    oq_diag dg, *d = &dg;
    oq_diag_init(d);
    oq_plan_options o = oq_plan_options_default();
    o.arith = arith;
    o.threads = threads;
    o.on_tensor = observe;
    o.user = sn;
    oq_plan *p = NULL;
    cr_assert_eq(oq_plan_compile(m, &o, &p, d), OQ_OK);
    float xv[2] = {255.0f, 255.0f};
    int64_t dims[2] = {1, 2};
    oq_rt_tensor in, out;
    cr_assert_eq(oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, dims, 2, xv), OQ_OK);
    cr_assert_eq(oq_plan_run(p, &in, 1, &out, 1, d), OQ_OK);
    cr_assert_eq(out.dtype, OQ_DTYPE_FLOAT);
    cr_assert_eq(oq_rt_tensor_numel(&out), 1);
    float y = ((float *)out.data)[0];
    oq_rt_tensor_release(&out);
    oq_plan_free(p);
    oq_diag_free(d);
    oq_model_free(m);
    return y;
}

Test(qlinear, avx2_saturates_the_pair_exact_does_not)
{
    for (int th = 1; th <= 2; th++) {
        seen s1 = {0}, s2 = {0}, s3 = {0};
        cr_expect_eq(run_hand(OQ_ARITH_AVX2, th, &s1), 32768.0f);
        cr_expect_eq(run_hand(OQ_ARITH_EXACT, th, &s2), 64768.0f);
        cr_expect_eq(run_hand(OQ_ARITH_REFERENCE, th, &s3), 64768.0f);
        /* a fused group does not produce its float intermediate; the Q output is seen */
        cr_expect(!s1.prequant && s1.quantized);
        cr_expect(!s2.prequant && s2.quantized);
        cr_expect(s3.prequant && s3.quantized);
    }
}
