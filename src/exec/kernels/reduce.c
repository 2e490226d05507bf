/* Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare (axes as
 * attribute or, from opset 13 for ReduceSum and 18 for the others, as input), ArgMax
 * ArgMin. Accumulation in double. */
#include <math.h>
#include <string.h>

#include "exec/kernel.h"

typedef enum red_kind { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_LOGSUM, R_LOGSUMEXP,
                        R_SUMSQ, R_ARGMAX, R_ARGMIN } red_kind;

static red_kind kind_of(const char *op)
{
    static const char *const names[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
                                        "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
                                        "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin"};
    for (int i = 0; i < 12; i++)
        if (strcmp(op, names[i]) == 0)
            return (red_kind)i;
    return R_SUM;
}

/* which axes are reduced; false + *need when the axes input has no data yet */
static oq_status red_axes(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, bool *red,
                          bool *need)
{
    size_t r = in[0]->rank;
    red_kind kd = kind_of(k->node->op_type);
    *need = false;
    for (size_t i = 0; i < r; i++)
        red[i] = false;
    if (kd == R_ARGMAX || kd == R_ARGMIN) {
        int64_t a = oq_k_axis(oq_node_attr_int(k->node, "axis", 0), r);
        if (a < 0)
            return oq_k_error(k, OQ_ERR_INVALID, "axis out of range");
        red[a] = true;
        return OQ_OK;
    }
    bool input_axes = kd == R_SUM ? k->opset >= 13 : k->opset >= 18;
    int64_t axes[OQ_RT_MAX_RANK], n = -1;
    if (input_axes) {
        if (n_in > 1 && in[1]) {
            if (!in[1]->data && oq_rt_tensor_numel(in[1]) != 0) {
                *need = true;
                return OQ_OK;
            }
            n = oq_rt_tensor_numel(in[1]);
            if (n > OQ_RT_MAX_RANK)
                return oq_k_error(k, OQ_ERR_INVALID, "too many axes");
            for (int64_t i = 0; i < n; i++)
                axes[i] = oq_k_get_int(in[1], i);
        }
    } else {
        const int64_t *v;
        n = oq_node_attr_ints(k->node, "axes", &v);
        if (n > OQ_RT_MAX_RANK)
            return oq_k_error(k, OQ_ERR_INVALID, "too many axes");
        if (n > 0)
            memcpy(axes, v, (size_t)n * 8);
    }
    if (n <= 0) {
        if (input_axes && oq_node_attr_int(k->node, "noop_with_empty_axes", 0))
            return OQ_OK;
        for (size_t i = 0; i < r; i++)
            red[i] = true;
        return OQ_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t a = oq_k_axis(axes[i], r);
        if (a < 0)
            return oq_k_error(k, OQ_ERR_INVALID, "axis %lld out of range", (long long)axes[i]);
        red[a] = true;
    }
    return OQ_OK;
}

static oq_status infer_reduce(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                              oq_rt_tensor *out, size_t n_out)
{
    red_kind kd = kind_of(k->node->op_type);
    out[0].dtype = (kd == R_ARGMAX || kd == R_ARGMIN) ? OQ_DTYPE_INT64 : in[0]->dtype;
    if (!oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    bool red[OQ_RT_MAX_RANK], need;
    oq_status st = red_axes(k, in, n_in, red, &need);
    if (st)
        return st;
    if (need)
        return oq_k_defer(k, out, n_out);
    bool keep = oq_node_attr_int(k->node, "keepdims", 1) != 0;
    int64_t d[OQ_RT_MAX_RANK];
    size_t r = 0;
    for (size_t i = 0; i < in[0]->rank; i++) {
        if (!red[i])
            d[r++] = in[0]->dims[i];
        else if (keep)
            d[r++] = 1;
    }
    return oq_k_set_out(k, &out[0], out[0].dtype, d, r);
}

/* float32 Sum / Mean / Max / Min over any axes (a ReduceMean over H and W of an NHWC
 * tensor, LayerNorm's over the last): x is read once in memory order into one double per
 * output, so each output meets its values row-major over the reduced axes, as run_reduce's
 * general loop visits them, without that loop's strided reads through a getter per element.
 * acc: nout doubles. */
static void reduce_f32_in_order(const oq_rt_tensor *x, const bool *red, red_kind kd, double *acc, int64_t nout)
{
    size_t r = x->rank;
    int64_t ostr[OQ_RT_MAX_RANK], os = 1;
    for (size_t i = r; i-- > 0;) {
        ostr[i] = red[i] ? 0 : os;
        os *= red[i] ? 1 : x->dims[i];
    }
    double init = kd == R_MAX ? -INFINITY : kd == R_MIN ? INFINITY : 0.0;
    for (int64_t o = 0; o < nout; o++)
        acc[o] = init;
    int64_t n = oq_rt_tensor_numel(x), len = r ? x->dims[r - 1] : 1, step = r ? ostr[r - 1] : 0;
    if (n <= 0 || len <= 0)
        return;
    const float *xf = x->data;
    int64_t idx[OQ_RT_MAX_RANK] = {0}, ob = 0;
    for (int64_t row = 0; row < n / len; row++, xf += len) {
        double *a = acc + ob;
        for (int64_t j = 0; j < len; j++) {
            double v = xf[j], *d = a + j * step;
            if (kd == R_MAX) {
                if (v > *d || v != v)
                    *d = v;
            } else if (kd == R_MIN) {
                if (v < *d || v != v)
                    *d = v;
            } else
                *d += v;
        }
        oq_k_index_next(idx, x->dims, ostr, r - 1, &ob); /* the next row's outputs */
    }
}

static oq_status run_reduce(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    red_kind kd = kind_of(k->node->op_type);
    bool red[OQ_RT_MAX_RANK], need;
    oq_status st = red_axes(k, in, n_in, red, &need);
    if (st)
        return st;
    size_t r = x->rank;
    int64_t cs[OQ_RT_MAX_RANK], s = 1;
    for (size_t i = r; i-- > 0;) {
        cs[i] = s;
        s *= x->dims[i];
    }
    /* kept dims (outer iteration) and reduced dims (inner iteration) */
    int64_t kd_dims[OQ_RT_MAX_RANK], kd_str[OQ_RT_MAX_RANK], rd_dims[OQ_RT_MAX_RANK],
        rd_str[OQ_RT_MAX_RANK];
    size_t nk = 0, nr = 0;
    int64_t rcount = 1;
    for (size_t i = 0; i < r; i++) {
        if (red[i]) {
            rd_dims[nr] = x->dims[i];
            rd_str[nr++] = cs[i];
            rcount *= x->dims[i];
        } else {
            kd_dims[nk] = x->dims[i];
            kd_str[nk++] = cs[i];
        }
    }
    bool last = oq_node_attr_int(k->node, "select_last_index", 0) != 0;
    int64_t nout = oq_rt_tensor_numel(&out[0]);
    int64_t kidx[OQ_RT_MAX_RANK] = {0};
    bool exact_int = x->dtype == OQ_DTYPE_INT64 || x->dtype == OQ_DTYPE_INT32;
    if (x->dtype == OQ_DTYPE_FLOAT && nr > 0 && (kd == R_SUM || kd == R_MEAN || kd == R_MAX || kd == R_MIN)) {
        double *acc = oq_k_scratch(k, (size_t)(nout > 0 ? nout : 1) * sizeof(double));
        if (!acc)
            return OQ_ERR_NOMEM;
        reduce_f32_in_order(x, red, kd, acc, nout);
        for (int64_t o = 0; o < nout; o++)
            oq_k_set_f64(&out[0], o, kd == R_MEAN ? acc[o] / (double)rcount : acc[o]);
        return OQ_OK;
    }
    for (int64_t o = 0; o < nout; o++) {
        int64_t base = 0;
        for (size_t i = 0; i < nk; i++)
            base += kidx[i] * kd_str[i];
        double acc = 0;
        int64_t iacc = 0;
        switch (kd) {
        case R_MAX: case R_ARGMAX: acc = -INFINITY; iacc = INT64_MIN; break;
        case R_MIN: case R_ARGMIN: acc = INFINITY; iacc = INT64_MAX; break;
        case R_PROD: acc = 1; iacc = 1; break;
        default: break;
        }
        int64_t best = 0;
        int64_t ridx[OQ_RT_MAX_RANK] = {0};
        for (int64_t t = 0; t < rcount; t++) {
            int64_t off = base;
            for (size_t i = 0; i < nr; i++)
                off += ridx[i] * rd_str[i];
            double v = oq_k_get_f64(x, off);
            int64_t iv = exact_int ? oq_k_get_int(x, off) : 0;
            switch (kd) {
            case R_SUM: case R_MEAN: acc += v; iacc += iv; break;
            case R_MAX: if (v > acc || v != v) acc = v; if (iv > iacc) iacc = iv; break;
            case R_MIN: if (v < acc || v != v) acc = v; if (iv < iacc) iacc = iv; break;
            case R_PROD: acc *= v; iacc *= iv; break;
            case R_L1: acc += fabs(v); iacc += iv < 0 ? -iv : iv; break;
            case R_L2: acc += v * v; break;
            case R_LOGSUM: acc += v; break;
            case R_LOGSUMEXP: acc += exp(v); break;
            case R_SUMSQ: acc += v * v; iacc += iv * iv; break;
            case R_ARGMAX:
                if (v > acc || (last && v == acc) || t == 0) { acc = v; best = t; }
                break;
            case R_ARGMIN:
                if (v < acc || (last && v == acc) || t == 0) { acc = v; best = t; }
                break;
            }
            for (size_t i = nr; i-- > 0;) {
                if (++ridx[i] < rd_dims[i])
                    break;
                ridx[i] = 0;
            }
        }
        if (kd == R_ARGMAX || kd == R_ARGMIN) {
            /* best is a flat index over the single reduced axis */
            ((int64_t *)out[0].data)[o] = best;
        } else {
            if (kd == R_MEAN) acc /= (double)rcount;
            if (kd == R_L2) acc = sqrt(acc);
            if (kd == R_LOGSUM) acc = log(acc);
            if (kd == R_LOGSUMEXP) acc = log(acc);
            if (rcount == 0 && (kd == R_MAX || kd == R_MIN))
                acc = kd == R_MAX ? -INFINITY : INFINITY;
            if (exact_int && kd != R_MEAN && kd != R_L2 && kd != R_LOGSUM && kd != R_LOGSUMEXP) {
                if (x->dtype == OQ_DTYPE_INT64)
                    ((int64_t *)out[0].data)[o] = iacc;
                else
                    ((int32_t *)out[0].data)[o] = (int32_t)iacc;
            } else {
                oq_k_set_f64(&out[0], o, acc);
            }
        }
        for (size_t i = nk; i-- > 0;) {
            if (++kidx[i] < kd_dims[i])
                break;
            kidx[i] = 0;
        }
    }
    return OQ_OK;
}

#define NUM OQ_T_NUMERIC
#define RR(op, since, mn) {"", op, since, 0, 0, NUM, NULL, NULL, infer_reduce, run_reduce, NULL, mn}
const oq_kernel oq_kernels_reduce[] = {
    RR("ReduceSum", 1, 1), RR("ReduceMean", 1, 1), RR("ReduceMax", 1, 1), RR("ReduceMin", 1, 1),
    RR("ReduceProd", 1, 1), RR("ReduceL1", 1, 1), RR("ReduceL2", 1, 1), RR("ReduceLogSum", 1, 1),
    RR("ReduceLogSumExp", 1, 1), RR("ReduceSumSquare", 1, 1), RR("ArgMax", 1, 1), RR("ArgMin", 1, 1),
};
OQ_KERNEL_TABLE_END(reduce);
