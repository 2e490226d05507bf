/* Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare (axes as
 * attribute or, from opset 13 for ReduceSum and 18 for the others, as input), ArgMax
 * ArgMin; and Resize / Upsample (nearest and linear). Accumulation in double. */
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

/* ------------------------------------------------------------------ Resize ------- */

typedef struct rs_params {
    double scale[OQ_RT_MAX_RANK];
    int64_t out[OQ_RT_MAX_RANK];
    double roi[2 * OQ_RT_MAX_RANK];
    bool has_roi;
} rs_params;

static oq_status resize_params(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                               rs_params *p, bool *need)
{
    size_t r = in[0]->rank;
    bool upsample = strcmp(k->node->op_type, "Upsample") == 0;
    const oq_rt_tensor *sc = NULL, *sz = NULL, *roi = NULL;
    *need = false;
    memset(p, 0, sizeof *p);
    if (upsample && k->opset < 9) {
        oq_attr *a = oq_node_attr(k->node, "scales");
        if (!a || a->n_floats != r)
            return oq_k_error(k, OQ_ERR_INVALID, "scales attribute must have %zu entries", r);
        for (size_t i = 0; i < r; i++)
            p->scale[i] = a->floats[i];
    } else if (upsample || k->opset < 11) {
        sc = n_in > 1 ? in[1] : NULL;
    } else {
        roi = n_in > 1 ? in[1] : NULL;
        sc = n_in > 2 ? in[2] : NULL;
        sz = n_in > 3 ? in[3] : NULL;
        if (sc && oq_rt_tensor_numel(sc) == 0)
            sc = NULL;
        if (roi && oq_rt_tensor_numel(roi) == 0)
            roi = NULL;
    }
    if (!(upsample && k->opset < 9) && !sc && !sz)
        return oq_k_error(k, OQ_ERR_INVALID, "scales or sizes is required");
    if ((sc && !sc->data) || (sz && !sz->data) || (roi && !roi->data)) {
        *need = true;
        return OQ_OK;
    }
    if (oq_node_attr(k->node, "axes"))
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "the axes attribute is not supported");
    if (sz) {
        if (oq_rt_tensor_numel(sz) != (int64_t)r)
            return oq_k_error(k, OQ_ERR_INVALID, "sizes must have %zu entries", r);
        const char *kar = oq_node_attr_string(k->node, "keep_aspect_ratio_policy", "stretch");
        if (strcmp(kar, "stretch") != 0)
            return oq_k_error(k, OQ_ERR_UNSUPPORTED, "keep_aspect_ratio_policy %s", kar);
        for (size_t i = 0; i < r; i++) {
            p->out[i] = oq_k_get_int(sz, (int64_t)i);
            p->scale[i] = in[0]->dims[i] ? (double)p->out[i] / (double)in[0]->dims[i] : 1.0;
        }
    } else {
        if (sc) {
            if (oq_rt_tensor_numel(sc) != (int64_t)r)
                return oq_k_error(k, OQ_ERR_INVALID, "scales must have %zu entries", r);
            for (size_t i = 0; i < r; i++)
                p->scale[i] = oq_k_get_f64(sc, (int64_t)i);
        }
        for (size_t i = 0; i < r; i++) {
            if (p->scale[i] <= 0)
                return oq_k_error(k, OQ_ERR_INVALID, "scales must be positive");
            p->out[i] = (int64_t)floor((double)in[0]->dims[i] * (float)p->scale[i]);
        }
    }
    if (roi) {
        if (oq_rt_tensor_numel(roi) != 2 * (int64_t)r)
            return oq_k_error(k, OQ_ERR_INVALID, "roi must have %zu entries", 2 * r);
        for (size_t i = 0; i < 2 * r; i++)
            p->roi[i] = oq_k_get_f64(roi, (int64_t)i);
        p->has_roi = true;
    }
    return OQ_OK;
}

static oq_status infer_resize(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                              oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    rs_params p;
    bool need;
    oq_status st = resize_params(k, in, n_in, &p, &need);
    if (st)
        return st;
    if (need)
        return oq_k_defer(k, out, n_out);
    return oq_k_set_out(k, &out[0], in[0]->dtype, p.out, in[0]->rank);
}

/* input coordinate of output coordinate o along an axis */
/* Input coordinate of output coordinate o along an axis, computed in float32 as the
 * ONNX reference (NumPy float32 scales) and onnxruntime do: 3 / 0.6f is 5 in float32
 * but 4.9999998 in double, which changes nearest-neighbour picks. */
static double src_coord(const char *ctm, double o_, double scale_, int64_t in_, double out_,
                        const rs_params *p, size_t axis, size_t rank)
{
    float o = (float)o_, scale = (float)scale_, in = (float)in_, out = (float)out_;
    float r;
    if (strcmp(ctm, "asymmetric") == 0)
        r = o / scale;
    else if (strcmp(ctm, "tf_half_pixel_for_nn") == 0)
        r = (o + 0.5f) / scale;
    else if (strcmp(ctm, "align_corners") == 0)
        r = out == 1 ? 0 : o * (in - 1) / (out - 1);
    else if (strcmp(ctm, "pytorch_half_pixel") == 0)
        r = out > 1 ? (o + 0.5f) / scale - 0.5f : 0;
    else if (strcmp(ctm, "tf_crop_and_resize") == 0) {
        float s = p->has_roi ? (float)p->roi[axis] : 0, e = p->has_roi ? (float)p->roi[axis + rank] : 1;
        r = out > 1 ? s * (in - 1) + o * (e - s) * (in - 1) / (out - 1) : 0.5f * (s + e) * (in - 1);
    } else if (strcmp(ctm, "half_pixel_symmetric") == 0) {
        float adj = out / (scale * in);
        float c = in / 2.0f, off = c * (1 - adj);
        r = off + (o + 0.5f) / scale - 0.5f;
    } else {
        r = (o + 0.5f) / scale - 0.5f; /* half_pixel */
    }
    return r;
}

/* Keys cubic convolution kernel with parameter A at distance |d| <= 2 */
static double cubic_w(double d, double A)
{
    d = fabs(d);
    if (d <= 1)
        return ((A + 2) * d - (A + 3)) * d * d + 1;
    if (d < 2)
        return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
    return 0;
}

static int64_t nearest(const char *nm, double x)
{
    if (strcmp(nm, "floor") == 0)
        return (int64_t)floor(x);
    if (strcmp(nm, "ceil") == 0)
        return (int64_t)ceil(x);
    if (strcmp(nm, "round_prefer_ceil") == 0)
        return (int64_t)floor(x + 0.5);
    /* round_prefer_floor (default) */
    return x == floor(x) + 0.5 ? (int64_t)floor(x) : (int64_t)floor(x + 0.5);
}

static oq_status run_resize(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    rs_params p;
    bool need;
    oq_status st = resize_params(k, in, n_in, &p, &need);
    if (st)
        return st;
    const oq_rt_tensor *x = in[0];
    size_t r = x->rank;
    bool old = strcmp(k->node->op_type, "Upsample") == 0 || k->opset < 11;
    const char *mode = oq_node_attr_string(k->node, "mode", "nearest");
    const char *ctm = old ? "asymmetric"
                          : oq_node_attr_string(k->node, "coordinate_transformation_mode",
                                                "half_pixel");
    const char *nm = old ? "floor" : oq_node_attr_string(k->node, "nearest_mode",
                                                         "round_prefer_floor");
    bool linear = strcmp(mode, "linear") == 0 || strcmp(mode, "bilinear") == 0;
    bool cubic = strcmp(mode, "cubic") == 0 || strcmp(mode, "bicubic") == 0;
    if (!linear && !cubic && strcmp(mode, "nearest") != 0)
        return oq_k_error(k, OQ_ERR_INVALID, "unknown mode %s", mode);
    if (!oq_dtype_is_float(x->dtype) && (linear || cubic))
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "%s resize of %s", mode, oq_dtype_name(x->dtype));
    bool excl = oq_node_attr_int(k->node, "exclude_outside", 0) != 0;
    if (linear && excl)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "exclude_outside with linear mode");
    double cubic_a = oq_node_attr_float(k->node, "cubic_coeff_a", -0.75f);
    double extrap = oq_node_attr_float(k->node, "extrapolation_value", 0.0f);
    bool crop = strcmp(ctm, "tf_crop_and_resize") == 0;
    int64_t cs[OQ_RT_MAX_RANK], s = 1;
    for (size_t i = r; i-- > 0;) {
        cs[i] = s;
        s *= x->dims[i];
    }
    /* per-axis tables: up to 4 taps (source index, weight) per output coordinate */
    int ntap = cubic ? 4 : linear ? 2 : 1;
    int64_t total = 0;
    for (size_t a = 0; a < r; a++)
        total += out[0].dims[a];
    size_t per = (size_t)ntap * (sizeof(int64_t) + sizeof(double)) + 1;
    int64_t *tidx = oq_k_scratch(k, (size_t)total * per);
    if (!tidx)
        return OQ_ERR_NOMEM;
    double *twt = (double *)(void *)(tidx + total * ntap);
    unsigned char *outside = (unsigned char *)(twt + total * ntap);
    int64_t base[OQ_RT_MAX_RANK];
    int64_t pos = 0;
    for (size_t a = 0; a < r; a++) {
        base[a] = pos;
        int64_t id = x->dims[a];
        for (int64_t o = 0; o < out[0].dims[a]; o++, pos++) {
            /* the length the reference uses: in * scale, not rounded */
            double olen = (double)id * p.scale[a];
            double c = src_coord(ctm, (double)o, p.scale[a], id, olen, &p, a, r);
            int64_t *ti = tidx + pos * ntap;
            double *tw = twt + pos * ntap;
            outside[pos] = crop && (c < 0 || c > (double)(id - 1));
            for (int t = 0; t < ntap; t++) {
                ti[t] = 0;
                tw[t] = 0;
            }
            if (cubic) {
                if (c == floor(c)) {
                    int64_t n = (int64_t)c;
                    ti[0] = n < 0 ? 0 : n >= id ? id - 1 : n;
                    tw[0] = 1;
                    continue;
                }
                double f = floor(c), t0 = c - f;
                double cf[4] = {cubic_w(t0 + 1, cubic_a), cubic_w(t0, cubic_a),
                                cubic_w(1 - t0, cubic_a), cubic_w(2 - t0, cubic_a)};
                double sum = 0;
                for (int t = 0; t < 4; t++) {
                    int64_t src = (int64_t)f - 1 + t;
                    if (excl && (src < 0 || src >= id))
                        cf[t] = 0;
                    sum += cf[t];
                    ti[t] = src < 0 ? 0 : src >= id ? id - 1 : src; /* edge padding */
                }
                for (int t = 0; t < 4; t++)
                    tw[t] = excl && sum != 0 ? cf[t] / sum : cf[t];
            } else if (linear) {
                double cc = c < 0 ? 0 : c > (double)(id - 1) ? (double)(id - 1) : c;
                int64_t f = (int64_t)floor(cc);
                ti[0] = f;
                ti[1] = f + 1 < id ? f + 1 : f;
                tw[1] = cc - (double)f;
                tw[0] = 1 - tw[1];
            } else {
                int64_t n = nearest(nm, c);
                ti[0] = n < 0 ? 0 : n >= id ? id - 1 : n;
                tw[0] = 1;
            }
        }
    }
    int64_t n = oq_rt_tensor_numel(&out[0]);
    int64_t idx[OQ_RT_MAX_RANK] = {0};
    size_t es = oq_k_elsize(x->dtype);
    int64_t combos = 1;
    for (size_t a = 0; a < r; a++)
        combos *= ntap;
    for (int64_t o = 0; o < n; o++) {
        bool out_side = false;
        for (size_t a = 0; a < r; a++)
            out_side |= outside[base[a] + idx[a]] != 0;
        if (out_side) {
            oq_k_set_f64(&out[0], o, extrap);
        } else if (ntap == 1) {
            int64_t off = 0;
            for (size_t a = 0; a < r; a++)
                off += tidx[base[a] + idx[a]] * cs[a];
            memcpy((char *)out[0].data + (size_t)o * es, (const char *)x->data + (size_t)off * es,
                   es);
        } else {
            double acc = 0;
            for (int64_t cmb = 0; cmb < combos; cmb++) {
                double w = 1;
                int64_t off = 0, rest = cmb;
                for (size_t a = 0; a < r && w != 0; a++) {
                    int t = (int)(rest % ntap);
                    rest /= ntap;
                    int64_t q = (base[a] + idx[a]) * ntap + t;
                    w *= twt[q];
                    off += tidx[q] * cs[a];
                }
                if (w != 0)
                    acc += w * oq_k_get_f64(x, off);
            }
            oq_k_set_f64(&out[0], o, acc);
        }
        for (size_t a = r; a-- > 0;) {
            if (++idx[a] < out[0].dims[a])
                break;
            idx[a] = 0;
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
    {"", "Resize", 10, 0, 0, OQ_T_ALL, NULL, NULL, infer_resize, run_resize, NULL, 1},
    {"", "Upsample", 7, 9, 0, OQ_T_ALL, NULL, NULL, infer_resize, run_resize, NULL, 1},
};
OQ_KERNEL_TABLE_END(reduce);
