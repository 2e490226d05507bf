/* ai.onnx.preview.training optimizers: Adagrad, Momentum, Adam (one update step over
 * n tensors: inputs R, T, X1..Xn, G1..Gn, then V/H per optimizer). */
#include <math.h>
#include <string.h>

#include "exec/kernel.h"

typedef enum opt { OPT_ADAGRAD, OPT_MOMENTUM, OPT_ADAM } opt;

static opt kind(const oq_kctx *k)
{
    const char *op = k->node->op_type;
    return strcmp(op, "Adagrad") == 0 ? OPT_ADAGRAD : strcmp(op, "Momentum") == 0 ? OPT_MOMENTUM
                                                                                   : OPT_ADAM;
}

/* number of state tensors per X (besides G) */
static size_t per_x(opt o) { return o == OPT_ADAM ? 3 : 2; }

static oq_status infer_opt(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    opt o = kind(k);
    size_t groups = 1 + per_x(o); /* X, G, and 1 or 2 states */
    if (n_in < 2 || (n_in - 2) % groups)
        return oq_k_error(k, OQ_ERR_INVALID, "bad input count %zu", n_in);
    size_t n = (n_in - 2) / groups;
    if (n_out != n * (groups - 1))
        return oq_k_error(k, OQ_ERR_INVALID, "expected %zu outputs", n * (groups - 1));
    for (size_t i = 0; i < n_out; i++) {
        const oq_rt_tensor *src = in[2 + (i / n == 0 ? 0 : n * (i / n + 1)) + i % n];
        out[i].dtype = src->dtype;
    }
    if (!oq_k_shapes_known(in, n_in))
        return oq_k_defer(k, out, n_out);
    for (size_t i = 0; i < n_out; i++) {
        const oq_rt_tensor *src = in[2 + i % n];
        oq_status st = oq_k_set_out(k, &out[i], src->dtype, src->dims, src->rank);
        if (st)
            return st;
    }
    return OQ_OK;
}

static oq_status run_opt(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    opt o = kind(k);
    size_t n = (n_in - 2) / (1 + per_x(o));
    double R = oq_k_get_f64(in[0], 0);
    double T = (double)oq_k_get_int(in[1], 0);
    const oq_node *nd = k->node;
    double normc = oq_node_attr_float(nd, "norm_coefficient", 0.0f);
    for (size_t t = 0; t < n; t++) {
        const oq_rt_tensor *X = in[2 + t], *G = in[2 + n + t], *V = in[2 + 2 * n + t];
        const oq_rt_tensor *Hh = o == OPT_ADAM ? in[2 + 3 * n + t] : NULL;
        int64_t cnt = oq_rt_tensor_numel(X);
        for (int64_t i = 0; i < cnt; i++) {
            double x = oq_k_get_f64(X, i), g = oq_k_get_f64(G, i), v = oq_k_get_f64(V, i);
            double gr = normc * x + g;
            if (o == OPT_ADAGRAD) {
                double decay = oq_node_attr_float(nd, "decay_factor", 0.0f);
                double eps = oq_node_attr_float(nd, "epsilon", 1e-6f);
                double r = R / (1 + T * decay);
                double h = v + gr * gr;
                oq_k_set_f64(&out[t], i, x - r * gr / (sqrt(h) + eps));
                oq_k_set_f64(&out[n + t], i, h);
            } else if (o == OPT_MOMENTUM) {
                double alpha = oq_node_attr_float(nd, "alpha", 0.0f);
                double beta = oq_node_attr_float(nd, "beta", 0.0f);
                bool nesterov = strcmp(oq_node_attr_string(nd, "mode", "standard"), "nesterov") == 0;
                double ba = T > 0 ? beta : 1;
                double vn = alpha * v + ba * gr;
                oq_k_set_f64(&out[t], i, nesterov ? x - R * (gr + alpha * vn) : x - R * vn);
                oq_k_set_f64(&out[n + t], i, vn);
            } else {
                double alpha = oq_node_attr_float(nd, "alpha", 0.9f);
                double beta = oq_node_attr_float(nd, "beta", 0.999f);
                double eps = oq_node_attr_float(nd, "epsilon", 1e-6f);
                double post = oq_node_attr_float(nd, "norm_coefficient_post", 0.0f);
                double h = oq_k_get_f64(Hh, i);
                double vn = alpha * v + (1 - alpha) * gr;
                double hn = beta * h + (1 - beta) * gr * gr;
                double ra = T > 0 ? R * sqrt(1 - pow(beta, T)) / (1 - pow(alpha, T)) : R;
                double xn = x - ra * (vn / (sqrt(hn) + eps));
                oq_k_set_f64(&out[t], i, (1 - post) * xn);
                oq_k_set_f64(&out[n + t], i, vn);
                oq_k_set_f64(&out[2 * n + t], i, hn);
            }
        }
    }
    return OQ_OK;
}

#define TR "ai.onnx.preview.training"
const oq_kernel oq_kernels_training[] = {
    {TR, "Adagrad", 1, 0, 0, OQ_T_FLOATS, NULL, NULL, infer_opt, run_opt, NULL, 2},
    {TR, "Momentum", 1, 0, 0, OQ_T_FLOATS, NULL, NULL, infer_opt, run_opt, NULL, 2},
    {TR, "Adam", 1, 0, 0, OQ_T_FLOATS, NULL, NULL, infer_opt, run_opt, NULL, 2},
};
OQ_KERNEL_TABLE_END(training);
