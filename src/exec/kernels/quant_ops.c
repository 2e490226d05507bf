/* QuantizeLinear and DequantizeLinear: per tensor, per axis (opset 13+) and blocked
 * (opset 21); int8 uint8 int16 uint16 int4 uint4 (and int32 for DequantizeLinear).
 *
 * QuantizeLinear is exactly saturate(round_half_to_even(x / scale) + zero_point) with
 * x / scale a real division in the input precision (not a multiplication by a
 * reciprocal). Defined here for what the spec leaves open: NaN -> the zero point,
 * +Inf / -Inf -> the upper / lower saturation bound. */
#include <math.h>
#include <string.h>

#include "exec/kernel.h"

static void qrange(int32_t dt, double *lo, double *hi)
{
    switch (dt) {
    case OQ_DTYPE_INT8: *lo = -128; *hi = 127; break;
    case OQ_DTYPE_UINT8: *lo = 0; *hi = 255; break;
    case OQ_DTYPE_INT16: *lo = -32768; *hi = 32767; break;
    case OQ_DTYPE_UINT16: *lo = 0; *hi = 65535; break;
    case OQ_DTYPE_INT4: *lo = -8; *hi = 7; break;
    case OQ_DTYPE_UINT4: *lo = 0; *hi = 15; break;
    case OQ_DTYPE_INT32: *lo = -2147483648.0; *hi = 2147483647.0; break;
    default: *lo = 0; *hi = 0; break;
    }
}

/* integer element i of a quantized tensor (4-bit: two per byte, low nibble first) */
static int64_t qget(const oq_rt_tensor *t, int64_t i)
{
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case OQ_DTYPE_INT4: {
        int v = (p[i / 2] >> ((i & 1) * 4)) & 15;
        return v >= 8 ? v - 16 : v;
    }
    case OQ_DTYPE_UINT4: return (p[i / 2] >> ((i & 1) * 4)) & 15;
    default: return oq_k_get_int(t, i);
    }
}

static int64_t qget_any(const oq_rt_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case OQ_DTYPE_INT4: case OQ_DTYPE_UINT4: return qget(t, i);
    case OQ_DTYPE_INT8: return ((const int8_t *)t->data)[i];
    case OQ_DTYPE_UINT8: return ((const uint8_t *)t->data)[i];
    case OQ_DTYPE_INT16: return ((const int16_t *)t->data)[i];
    case OQ_DTYPE_UINT16: return ((const uint16_t *)t->data)[i];
    case OQ_DTYPE_INT32: return ((const int32_t *)t->data)[i];
    default: return 0;
    }
}

static void qset(oq_rt_tensor *t, int64_t i, int64_t v)
{
    uint8_t *p = t->data;
    switch (t->dtype) {
    case OQ_DTYPE_INT4: case OQ_DTYPE_UINT4: {
        int sh = (int)(i & 1) * 4;
        p[i / 2] = (uint8_t)((p[i / 2] & ~(15 << sh)) | ((v & 15) << sh));
        break;
    }
    case OQ_DTYPE_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case OQ_DTYPE_UINT8: p[i] = (uint8_t)v; break;
    case OQ_DTYPE_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
    case OQ_DTYPE_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case OQ_DTYPE_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    default: break;
    }
}

/* How scale/zero point index an element: per tensor, per axis or blocked. */
typedef struct qmap {
    int64_t axis_dim, inner, block;   /* block 0: per axis; axis_dim 0: per tensor */
    int64_t n_scale;
} qmap;

static oq_status qmap_init(oq_kctx *k, const oq_rt_tensor *x, const oq_rt_tensor *scale,
                           const oq_rt_tensor *zp, qmap *m)
{
    memset(m, 0, sizeof *m);
    m->n_scale = oq_rt_tensor_numel(scale);
    if (zp && oq_rt_tensor_numel(zp) != m->n_scale)
        return oq_k_error(k, OQ_ERR_INVALID, "scale and zero point sizes differ");
    int64_t block = oq_node_attr_int(k->node, "block_size", 0);
    if (scale->rank == 0 || (m->n_scale == 1 && block == 0))
        return OQ_OK;
    if (k->opset < 13)
        return oq_k_error(k, OQ_ERR_INVALID, "scale must be a scalar before opset 13");
    int64_t axis = oq_k_axis(oq_node_attr_int(k->node, "axis", 1), x->rank);
    if (axis < 0)
        return oq_k_error(k, OQ_ERR_INVALID, "axis out of range");
    m->axis_dim = x->dims[axis];
    m->inner = 1;
    for (size_t i = (size_t)axis + 1; i < x->rank; i++)
        m->inner *= x->dims[i];
    if (block > 0) {
        if (scale->rank != x->rank)
            return oq_k_error(k, OQ_ERR_INVALID, "blocked scale must have the input's rank");
        for (size_t i = 0; i < x->rank; i++) {
            int64_t want = (int64_t)i == axis ? (x->dims[i] + block - 1) / block : x->dims[i];
            if (scale->dims[i] != want)
                return oq_k_error(k, OQ_ERR_INVALID, "blocked scale dim %zu is %lld, expected %lld",
                                  i, (long long)scale->dims[i], (long long)want);
        }
        m->block = block;
        return OQ_OK;
    }
    if (scale->rank != 1 || m->n_scale != m->axis_dim)
        return oq_k_error(k, OQ_ERR_INVALID, "per-axis scale must be 1-D of size %lld",
                          (long long)m->axis_dim);
    return OQ_OK;
}

static int64_t qmap_index(const qmap *m, int64_t i)
{
    if (!m->axis_dim)
        return 0;
    int64_t c = (i / m->inner) % m->axis_dim;
    if (!m->block)
        return c;
    int64_t outer = i / (m->inner * m->axis_dim), in = i % m->inner;
    int64_t nb = (m->axis_dim + m->block - 1) / m->block;
    return (outer * nb + c / m->block) * m->inner + in;
}

/* ------------------------------------------------------------------ Quantize ----- */

static int32_t q_out_type(const oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in)
{
    if (n_in > 2 && in[2])
        return in[2]->dtype;
    int64_t od = oq_node_attr_int(k->node, "output_dtype", 0);
    return od ? (int32_t)od : OQ_DTYPE_UINT8;
}

static bool q_types_ok(const oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in)
{
    int32_t ot = q_out_type(k, in, n_in);
    double lo, hi;
    qrange(ot, &lo, &hi);
    return ot != OQ_DTYPE_INT32 && hi > 0 && n_in >= 2 && in[1] &&
           (in[0]->dtype == OQ_DTYPE_FLOAT || in[0]->dtype == OQ_DTYPE_FLOAT16 ||
            in[0]->dtype == OQ_DTYPE_DOUBLE) &&
           in[1]->dtype == in[0]->dtype;
}

static oq_status infer_q(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = q_out_type(k, in, n_in);
    if (!oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    return oq_k_set_out(k, &out[0], out[0].dtype, in[0]->dims, in[0]->rank);
}

/* The quantization of one value: v = x / scale already divided in the input precision. */
static int64_t quantize_one(double v, int64_t zp, double lo, double hi)
{
    if (isnan(v))
        return zp;
    if (isinf(v))
        return v > 0 ? (int64_t)hi : (int64_t)lo;
    double r = nearbyint(v) + (double)zp;   /* ties to even (default rounding mode) */
    if (r < lo)
        r = lo;
    if (r > hi)
        r = hi;
    return (int64_t)r;
}

static oq_status run_q(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                       oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0], *s = in[1], *z = n_in > 2 ? in[2] : NULL;
    qmap m;
    oq_status st = qmap_init(k, x, s, z, &m);
    if (st)
        return st;
    double lo, hi;
    qrange(out[0].dtype, &lo, &hi);
    int64_t n = oq_rt_tensor_numel(x);
    if (out[0].nbytes)
        memset(out[0].data, 0, (size_t)out[0].nbytes);
    for (int64_t i = 0; i < n; i++) {
        int64_t si = qmap_index(&m, i);
        int64_t zp = z ? qget_any(z, si) : 0;
        double v;
        if (x->dtype == OQ_DTYPE_FLOAT) {
            float q = ((const float *)x->data)[i] / ((const float *)s->data)[si];
            v = q;
        } else if (x->dtype == OQ_DTYPE_FLOAT16) {
            float q = oq_half_to_float(((const uint16_t *)x->data)[i]) /
                      oq_half_to_float(((const uint16_t *)s->data)[si]);
            v = q;
        } else {
            v = ((const double *)x->data)[i] / ((const double *)s->data)[si];
        }
        qset(&out[0], i, quantize_one(v, zp, lo, hi));
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ Dequantize --- */

static bool dq_types_ok(const oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in)
{
    double lo, hi;
    qrange(in[0]->dtype, &lo, &hi);
    return hi > 0 && n_in >= 2 && in[1] &&
           (in[1]->dtype == OQ_DTYPE_FLOAT || in[1]->dtype == OQ_DTYPE_FLOAT16 ||
            in[1]->dtype == OQ_DTYPE_DOUBLE) &&
           (n_in < 3 || !in[2] || in[2]->dtype == in[0]->dtype);
}

static oq_status infer_dq(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[1]->dtype;
    if (!oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    return oq_k_set_out(k, &out[0], out[0].dtype, in[0]->dims, in[0]->rank);
}

static oq_status run_dq(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                        oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0], *s = in[1], *z = n_in > 2 ? in[2] : NULL;
    qmap m;
    oq_status st = qmap_init(k, x, s, z, &m);
    if (st)
        return st;
    int64_t n = oq_rt_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        int64_t si = qmap_index(&m, i);
        int64_t d = qget_any(x, i) - (z ? qget_any(z, si) : 0);
        if (s->dtype == OQ_DTYPE_FLOAT)
            ((float *)out[0].data)[i] = (float)d * ((const float *)s->data)[si];
        else if (s->dtype == OQ_DTYPE_DOUBLE)
            ((double *)out[0].data)[i] = (double)d * ((const double *)s->data)[si];
        else
            ((uint16_t *)out[0].data)[i] = oq_float_to_half(
                (float)d * oq_half_to_float(((const uint16_t *)s->data)[si]));
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ Dynamic ------ */

static oq_status infer_dql(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = OQ_DTYPE_UINT8;
    out[1].dtype = OQ_DTYPE_FLOAT;
    out[2].dtype = OQ_DTYPE_UINT8;
    if (!oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    oq_status st = oq_k_set_out(k, &out[0], OQ_DTYPE_UINT8, in[0]->dims, in[0]->rank);
    if (!st)
        st = oq_k_set_out(k, &out[1], OQ_DTYPE_FLOAT, NULL, 0);
    if (!st)
        st = oq_k_set_out(k, &out[2], OQ_DTYPE_UINT8, NULL, 0);
    return st;
}

/* scale = (max(0, max x) - min(0, min x)) / 255, zp = saturate(round(-min / scale)),
 * y = saturate(round(x / scale) + zp) */
static oq_status run_dql(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    const float *x = in[0]->data;
    int64_t n = oq_rt_tensor_numel(in[0]);
    float mn = 0, mx = 0;
    for (int64_t i = 0; i < n; i++) {
        if (x[i] < mn) mn = x[i];
        if (x[i] > mx) mx = x[i];
    }
    float scale = (mx - mn) / 255.0f;
    int64_t zp = 0;
    if (scale != 0) {
        double z = nearbyint((double)(0.0f - mn / scale));
        zp = z < 0 ? 0 : z > 255 ? 255 : (int64_t)z;
    }
    *(float *)out[1].data = scale;
    *(uint8_t *)out[2].data = (uint8_t)zp;
    for (int64_t i = 0; i < n; i++) {
        int64_t q = scale != 0 ? quantize_one((double)(x[i] / scale), zp, 0, 255) : zp;
        ((uint8_t *)out[0].data)[i] = (uint8_t)q;
    }
    return OQ_OK;
}

const oq_kernel oq_kernels_quant_ops[] = {
    {"", "DynamicQuantizeLinear", 11, 0, 0, OQ_T(FLOAT), NULL, NULL, infer_dql, run_dql, NULL, 1},
    {"", "QuantizeLinear", 10, 0, 0, 0, q_types_ok, NULL, infer_q, run_q, NULL, 2},
    {"", "DequantizeLinear", 10, 0, 0, 0, dq_types_ok, NULL, infer_dq, run_dq, NULL, 2},
};
OQ_KERNEL_TABLE_END(quant_ops);
