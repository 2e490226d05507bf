/* Signal processing: HannWindow HammingWindow BlackmanWindow. */
#include <math.h>
#include <string.h>

#include "exec/kernel.h"

static oq_status infer_window(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                              oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = (int32_t)oq_node_attr_int(k->node, "output_datatype", OQ_DTYPE_FLOAT);
    if (!in[0]->data)
        return oq_k_defer(k, out, n_out);
    int64_t n = oq_k_get_int(in[0], 0);
    if (n < 0)
        return oq_k_error(k, OQ_ERR_INVALID, "negative size");
    return oq_k_set_out(k, &out[0], out[0].dtype, &n, 1);
}

static oq_status run_window(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    int64_t N = out[0].dims[0];
    bool periodic = oq_node_attr_int(k->node, "periodic", 1) != 0;
    double D = periodic ? (double)N : (double)(N - 1);
    const char *op = k->node->op_type;
    const double pi = 3.14159265358979323846;
    for (int64_t n = 0; n < N; n++) {
        double x = D > 0 ? 2 * pi * (double)n / D : 0, v;
        if (strcmp(op, "HannWindow") == 0)
            v = 0.5 - 0.5 * cos(x);
        else if (strcmp(op, "HammingWindow") == 0)
            v = 25.0 / 46.0 - (1 - 25.0 / 46.0) * cos(x);
        else
            v = 0.42 - 0.5 * cos(x) + 0.08 * cos(2 * x);
        oq_k_set_f64(&out[0], n, v);
    }
    return OQ_OK;
}

#define I OQ_T(INT32) | OQ_T(INT64)
const oq_kernel oq_kernels_signal[] = {
    {"", "HannWindow", 17, 0, 0, I, NULL, NULL, infer_window, run_window, NULL, 1},
    {"", "HammingWindow", 17, 0, 0, I, NULL, NULL, infer_window, run_window, NULL, 1},
    {"", "BlackmanWindow", 17, 0, 0, I, NULL, NULL, infer_window, run_window, NULL, 1},
};
OQ_KERNEL_TABLE_END(signal);
