/* Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (reductions none, sum,
 * mean; class weights; ignore_index). Accumulation in double. */
#include <math.h>
#include <string.h>

#include "exec/kernel.h"

typedef enum lred { LR_NONE, LR_SUM, LR_MEAN } lred;

static oq_status get_red(const oq_kctx *k, lred *r)
{
    const char *s = oq_node_attr_string(k->node, "reduction", "mean");
    if (strcmp(s, "none") == 0) *r = LR_NONE;
    else if (strcmp(s, "sum") == 0) *r = LR_SUM;
    else if (strcmp(s, "mean") == 0) *r = LR_MEAN;
    else return oq_k_error(k, OQ_ERR_INVALID, "reduction must be none, sum or mean");
    return OQ_OK;
}

static oq_status infer_loss(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    for (size_t i = 0; i < n_out; i++)
        out[i].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, n_in))
        return oq_k_defer(k, out, n_out);
    lred r = LR_MEAN;
    oq_status st = get_red(k, &r);
    if (st)
        return st;
    const oq_rt_tensor *x = in[0], *t = in[1];
    if (x->rank < 2 || t->rank != x->rank - 1 || t->dims[0] != x->dims[0])
        return oq_k_error(k, OQ_ERR_INVALID, "input must be [N,C,...] and target [N,...]");
    for (size_t i = 1; i < t->rank; i++)
        if (t->dims[i] != x->dims[i + 1])
            return oq_k_error(k, OQ_ERR_INVALID, "target dims do not match the input");
    st = r == LR_NONE ? oq_k_set_out(k, &out[0], x->dtype, t->dims, t->rank)
                      : oq_k_set_out(k, &out[0], x->dtype, NULL, 0);
    if (st == OQ_OK && n_out > 1)
        st = oq_k_set_out(k, &out[1], x->dtype, x->dims, x->rank);
    return st;
}

/* loss from log-probabilities lp [N,C,D] (flattened spatial D) */
static oq_status nll(oq_kctx *k, const oq_rt_tensor *lp_t, const double *lp, const oq_rt_tensor *t,
                     const oq_rt_tensor *w, oq_rt_tensor *out)
{
    lred r = LR_MEAN;
    oq_status st = get_red(k, &r);
    if (st)
        return st;
    int64_t N = lp_t->dims[0], C = lp_t->dims[1], D = 1;
    for (size_t i = 2; i < lp_t->rank; i++)
        D *= lp_t->dims[i];
    oq_attr *ia = oq_node_attr(k->node, "ignore_index");
    int64_t ignore = ia ? ia->i : 0;
    double sum = 0, wsum = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t d = 0; d < D; d++) {
            int64_t c = oq_k_get_int(t, n * D + d);
            double l = 0, wt = 0;
            if (!(ia && c == ignore)) {
                if (c < 0 || c >= C)
                    return oq_k_error(k, OQ_ERR_INVALID, "target %lld out of range [0, %lld)",
                                      (long long)c, (long long)C);
                wt = w ? oq_k_get_f64(w, c) : 1.0;
                l = -lp[(n * C + c) * D + d] * wt;
            }
            if (r == LR_NONE)
                oq_k_set_f64(out, n * D + d, l);
            sum += l;
            wsum += wt;
        }
    if (r == LR_SUM)
        oq_k_set_f64(out, 0, sum);
    else if (r == LR_MEAN)
        oq_k_set_f64(out, 0, wsum != 0 ? sum / wsum : 0.0);
    return OQ_OK;
}

static oq_status run_nll(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    int64_t n = oq_rt_tensor_numel(in[0]);
    double *lp = oq_k_scratch(k, (size_t)(n ? n : 1) * sizeof(double));
    if (!lp)
        return OQ_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++)
        lp[i] = oq_k_get_f64(in[0], i);
    return nll(k, in[0], lp, in[1], n_in > 2 ? in[2] : NULL, &out[0]);
}

static oq_status run_sce(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    int64_t n = oq_rt_tensor_numel(x), N = x->dims[0], C = x->dims[1], D = 1;
    for (size_t i = 2; i < x->rank; i++)
        D *= x->dims[i];
    double *lp = oq_k_scratch(k, (size_t)(n ? n : 1) * sizeof(double));
    if (!lp)
        return OQ_ERR_NOMEM;
    bool is_f32 = x->dtype == OQ_DTYPE_FLOAT;
    for (int64_t b = 0; b < N; b++)
        for (int64_t d = 0; d < D; d++) {
            double m = -INFINITY, s = 0;
            for (int64_t c = 0; c < C; c++) {
                double v = oq_k_get_f64(x, (b * C + c) * D + d);
                m = v > m ? v : m;
            }
            for (int64_t c = 0; c < C; c++)
                s += exp(oq_k_get_f64(x, (b * C + c) * D + d) - m);
            double ls = log(s);
            for (int64_t c = 0; c < C; c++) {
                int64_t i = (b * C + c) * D + d;
                double v = oq_k_get_f64(x, i) - m - ls;
                lp[i] = is_f32 ? (double)(float)v : v;
            }
        }
    if (n_out > 1 && k->node->outputs[1])
        for (int64_t i = 0; i < n; i++)
            oq_k_set_f64(&out[1], i, lp[i]);
    return nll(k, x, lp, in[1], n_in > 2 ? in[2] : NULL, &out[0]);
}

#define FL OQ_T_FLOATS
const oq_kernel oq_kernels_loss[] = {
    {"", "NegativeLogLikelihoodLoss", 12, 0, 0, FL, NULL, NULL, infer_loss, run_nll, NULL, 2},
    {"", "SoftmaxCrossEntropyLoss", 12, 0, 0, FL, NULL, NULL, infer_loss, run_sce, NULL, 2},
};
OQ_KERNEL_TABLE_END(loss);
