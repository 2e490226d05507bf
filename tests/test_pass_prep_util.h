/* Running small hand-built graphs through onnxq's executor, for the graph preparation
 * passes' suites (tests/test_pass_fold_linear.c, tests/test_pass_fuse_activations.c). */
#ifndef ONNXQ_TEST_PASS_PREP_UTIL_H
#define ONNXQ_TEST_PASS_PREP_UTIL_H
#include <math.h>

#include "test_pass_util.h"

/* A copy of m (written and read back). */
static inline oq_model *pp_clone(oq_model *m)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_model_write_buffer(m, &buf, &len, &d), OQ_OK);
    oq_model *c = NULL;
    cr_assert_eq(oq_model_read_buffer(buf, len, "clone.onnx", NULL, &c, &d), OQ_OK);
    free(buf);
    oq_diag_free(&d);
    return c;
}

/* Run m on one float input x of dims[rank]; the first output's n values into out
 * (malloc'ed). Returns n. */
static inline int64_t pp_run(oq_model *m, const float *x, const int64_t *dims, size_t rank,
                             float **out)
{
    oq_diag d;
    oq_plan *p = tp_plan(m, &d);
    oq_rt_tensor in, o;
    cr_assert_eq(oq_rt_tensor_borrow(&in, OQ_DTYPE_FLOAT, dims, rank, (void *)x), OQ_OK);
    memset(&o, 0, sizeof o);
    oq_status st = oq_plan_run(p, &in, 1, &o, 1, &d);
    tp_print_diag(&d);
    cr_assert_eq(st, OQ_OK, "plan does not run");
    cr_assert_eq(o.dtype, OQ_DTYPE_FLOAT);
    int64_t n = oq_rt_tensor_numel(&o);
    *out = malloc((size_t)n * sizeof(float));
    cr_assert(*out);
    memcpy(*out, o.data, (size_t)n * sizeof(float));
    oq_rt_tensor_release(&o);
    oq_plan_free(p);
    oq_diag_free(&d);
    return n;
}

/* Deterministic inputs in [-r, r). */
static inline void pp_fill(float *x, int64_t n, float r, uint32_t seed)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = r * ((float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f);
    }
}

/* Largest |a - b| / (rel |a| + abs) over n values (<= 1 means within tolerance). */
static inline double pp_worst(const float *a, const float *b, int64_t n, double rel, double abs_tol,
                              double *max_abs)
{
    double w = 0;
    *max_abs = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > *max_abs)
            *max_abs = d;
        double q = d / (rel * fabs((double)a[i]) + abs_tol);
        if (q > w)
            w = q;
    }
    return w;
}
#endif
