/* Scale / zero point, ONNX QuantizeLinear arithmetic, integer packing, weight and bias
 * quantization. See include/onnxq/quant.h and docs/calibration.md. */
#include "onnxq/quant.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

oq_status oq_qrange(int32_t dtype, bool reduce_range, int32_t *qmin, int32_t *qmax)
{
    int bits;
    bool sgn;
    switch (dtype) {
    case OQ_DTYPE_INT8: bits = 8; sgn = true; break;
    case OQ_DTYPE_UINT8: bits = 8; sgn = false; break;
    case OQ_DTYPE_INT16: bits = 16; sgn = true; break;
    case OQ_DTYPE_UINT16: bits = 16; sgn = false; break;
    case OQ_DTYPE_INT4: bits = 4; sgn = true; break;
    case OQ_DTYPE_UINT4: bits = 4; sgn = false; break;
    case OQ_DTYPE_INT32:
        *qmin = INT32_MIN;
        *qmax = INT32_MAX;
        return OQ_OK;
    default:
        *qmin = *qmax = 0;
        return OQ_ERR_UNSUPPORTED;
    }
    if (reduce_range)
        bits--;
    if (sgn) {
        *qmin = -(int32_t)(1 << (bits - 1));
        *qmax = (int32_t)(1 << (bits - 1)) - 1;
    } else {
        *qmin = 0;
        *qmax = (int32_t)(1 << bits) - 1;
    }
    return OQ_OK;
}

static float valid_scale(float s, bool zero_range)
{
    if (zero_range || !(s > 0.0f))
        return 1.0f;
    if (s < FLT_MIN)
        return FLT_MIN;
    if (!isfinite(s))
        return FLT_MAX;
    return s;
}

oq_status oq_qparams_compute(float rmin, float rmax, int32_t dtype, bool symmetric,
                             bool reduce_range, float *scale, int32_t *zero_point, oq_diag *d)
{
    int32_t qmin, qmax;
    *scale = 1.0f;
    *zero_point = 0;
    if (oq_qrange(dtype, reduce_range, &qmin, &qmax) != OQ_OK)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "cannot compute parameters for type %s",
                             oq_dtype_name(dtype));
    if (!isfinite(rmin) || !isfinite(rmax))
        return oq_diag_error(d, OQ_ERR_NUMERIC, "range [%g, %g] is not finite", (double)rmin,
                             (double)rmax);
    if (rmin > rmax)
        return oq_diag_error(d, OQ_ERR_USAGE, "range [%g, %g] is empty", (double)rmin,
                             (double)rmax);
    /* zero must be representable: widen the range to include it */
    double lo = rmin < 0.0f ? rmin : 0.0, hi = rmax > 0.0f ? rmax : 0.0;
    if (symmetric) {
        double t = fabs(lo) > hi ? fabs(lo) : hi;
        int64_t zp = qmin < 0 ? 0 : ((int64_t)qmin + qmax + 1) / 2;
        double q = (double)qmax - (double)zp;
        *scale = valid_scale((float)(t / q), t == 0.0);
        *zero_point = (int32_t)zp;
        return OQ_OK;
    }
    double s = (hi - lo) / ((double)qmax - (double)qmin);
    float fs = valid_scale((float)s, hi == lo);
    double zp = (double)qmin - nearbyint(lo / (double)fs);
    if (zp < qmin)
        zp = qmin;
    if (zp > qmax)
        zp = qmax;
    *scale = fs;
    *zero_point = (int32_t)zp;
    return OQ_OK;
}

oq_status oq_observer_qparams(const oq_observer *o, const oq_range_request *r, float *scale,
                              int32_t *zero_point, oq_range_info *info, const char *what,
                              oq_diag *d)
{
    float lo, hi;
    *scale = 1.0f;
    *zero_point = 0;
    oq_status st = oq_observer_range(o, r, &lo, &hi, info, what, d);
    if (st != OQ_OK)
        return st;
    st = oq_qparams_compute(lo, hi, r->dtype, r->symmetric, r->reduce_range, scale, zero_point,
                            d);
    if (st != OQ_OK && what)
        oq_diag_add(d, OQ_SEV_NOTE, st, NULL, NULL, NULL, "while computing parameters of %s",
                    what);
    return st;
}

int32_t oq_quantize_value(float x, float scale, int32_t zero_point, int32_t qmin,
                          int32_t qmax)
{
    return oq_quantize_value_inline(x, scale, zero_point, qmin, qmax);
}

float oq_dequantize_value(int32_t q, float scale, int32_t zero_point)
{
    return oq_dequantize_value_inline(q, scale, zero_point);
}

oq_status oq_pack_ints(int32_t dtype, const int32_t *v, int64_t n, void *out, oq_diag *d)
{
    uint8_t *o8 = out;
    switch (dtype) {
    case OQ_DTYPE_INT8:
        for (int64_t i = 0; i < n; i++)
            ((int8_t *)out)[i] = (int8_t)v[i];
        return OQ_OK;
    case OQ_DTYPE_UINT8:
        for (int64_t i = 0; i < n; i++)
            o8[i] = (uint8_t)v[i];
        return OQ_OK;
    case OQ_DTYPE_INT16:
        for (int64_t i = 0; i < n; i++) {
            int16_t t = (int16_t)v[i];
            memcpy(o8 + 2 * i, &t, 2);
        }
        return OQ_OK;
    case OQ_DTYPE_UINT16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t t = (uint16_t)v[i];
            memcpy(o8 + 2 * i, &t, 2);
        }
        return OQ_OK;
    case OQ_DTYPE_INT32:
        memcpy(out, v, (size_t)n * sizeof(int32_t));
        return OQ_OK;
    case OQ_DTYPE_INT4:
    case OQ_DTYPE_UINT4:
        for (int64_t i = 0; i < n; i += 2) {
            uint8_t lo = (uint8_t)((uint32_t)v[i] & 0xFu);
            uint8_t hi = (i + 1 < n) ? (uint8_t)((uint32_t)v[i + 1] & 0xFu) : 0;
            o8[i / 2] = (uint8_t)(lo | (uint8_t)(hi << 4));
        }
        return OQ_OK;
    default:
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "cannot pack integers as %s",
                             oq_dtype_name(dtype));
    }
}

int32_t oq_unpack_int(int32_t dtype, const void *buf, int64_t i)
{
    const uint8_t *b = buf;
    switch (dtype) {
    case OQ_DTYPE_INT8: return ((const int8_t *)buf)[i];
    case OQ_DTYPE_UINT8: return b[i];
    case OQ_DTYPE_INT16: {
        int16_t t;
        memcpy(&t, b + 2 * i, 2);
        return t;
    }
    case OQ_DTYPE_UINT16: {
        uint16_t t;
        memcpy(&t, b + 2 * i, 2);
        return t;
    }
    case OQ_DTYPE_INT32: {
        int32_t t;
        memcpy(&t, b + 4 * i, 4);
        return t;
    }
    case OQ_DTYPE_INT4:
    case OQ_DTYPE_UINT4: {
        uint32_t nib = (i % 2 == 0) ? (b[i / 2] & 0xFu) : (uint32_t)(b[i / 2] >> 4);
        if (dtype == OQ_DTYPE_INT4 && nib >= 8)
            return (int32_t)nib - 16;
        return (int32_t)nib;
    }
    default:
        return 0;
    }
}

/* ------------------------------------------------------------------ weights ---- */

void oq_weight_spec_default(oq_weight_spec *s)
{
    memset(s, 0, sizeof(*s));
    s->dtype = OQ_DTYPE_INT8;
    s->symmetric = true;
    s->per_channel = true;
    s->axis = 0;
}

/* The decomposition of a weight into outer x channels x inner, and the parameter
 * grouping: param index = (o * groups + c / block) * inner + i for blocks, c per
 * channel, 0 per tensor. */
typedef struct wlayout {
    int64_t outer, ch, inner, block, groups, nparams;
    int mode; /* 0 tensor, 1 channel, 2 block */
} wlayout;

static oq_status layout_of(const int64_t *dims, size_t rank, bool per_channel, int axis,
                           int64_t block, wlayout *L, oq_diag *d)
{
    memset(L, 0, sizeof(*L));
    int64_t numel = oq_dims_numel(dims, rank);
    if (numel < 0)
        return oq_diag_error(d, OQ_ERR_INVALID, "weight shape has a negative or too large dim");
    if (!per_channel && block <= 0) {
        L->outer = 1;
        L->ch = 1;
        L->inner = numel;
        L->block = 1;
        L->groups = 1;
        L->nparams = 1;
        return OQ_OK;
    }
    if (rank == 0 || axis < -(int)rank || axis >= (int)rank)
        return oq_diag_error(d, OQ_ERR_USAGE, "axis %d is out of range for rank %zu", axis,
                             rank);
    if (axis < 0)
        axis += (int)rank;
    L->outer = oq_dims_numel(dims, (size_t)axis);
    L->ch = dims[axis];
    L->inner = oq_dims_numel(dims + axis + 1, rank - (size_t)axis - 1);
    if (block > 0) {
        L->mode = 2;
        L->block = block;
        L->groups = L->ch / block + (L->ch % block != 0);
        L->nparams = L->outer * L->groups * L->inner;
    } else {
        L->mode = 1;
        L->block = 1;
        L->groups = L->ch;
        L->nparams = L->ch;
    }
    return OQ_OK;
}

static inline int64_t param_index(const wlayout *L, int64_t o, int64_t c, int64_t i)
{
    if (L->mode == 0)
        return 0;
    if (L->mode == 1)
        return c;
    return (o * L->groups + c / L->block) * L->inner + i;
}

int64_t oq_weight_param_shape(const int64_t *dims, size_t rank, const oq_weight_spec *s,
                              int64_t *pdims, size_t *prank, oq_diag *d)
{
    wlayout L;
    if (layout_of(dims, rank, s->per_channel, s->axis, s->block_size, &L, d) != OQ_OK)
        return -1;
    int axis = s->axis < 0 ? s->axis + (int)rank : s->axis;
    if (L.mode == 0) {
        *prank = 0;
    } else if (L.mode == 1) {
        *prank = 1;
        pdims[0] = L.ch;
    } else {
        *prank = rank;
        for (size_t k = 0; k < rank; k++)
            pdims[k] = dims[k];
        pdims[axis] = L.groups;
    }
    return L.nparams;
}

oq_status oq_quantize_with_params(const float *w, const int64_t *dims, size_t rank,
                                  int32_t dtype, int axis, int64_t block_size,
                                  const float *scales, const int32_t *zero_points,
                                  int64_t nparams, void *out, int64_t *n_saturated,
                                  oq_diag *d)
{
    int32_t qmin, qmax;
    wlayout L;
    oq_status st;
    if (oq_qrange(dtype, false, &qmin, &qmax) != OQ_OK)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "cannot quantize to %s",
                             oq_dtype_name(dtype));
    st = layout_of(dims, rank, nparams != 1 || block_size > 0, axis, block_size, &L, d);
    if (st != OQ_OK)
        return st;
    if (L.nparams != nparams)
        return oq_diag_error(d, OQ_ERR_USAGE,
                             "%" PRId64 " scale(s) given, the layout needs %" PRId64, nparams,
                             L.nparams);
    for (int64_t p = 0; p < nparams; p++)
        if (!(scales[p] > 0.0f) || !isfinite(scales[p]))
            return oq_diag_error(d, OQ_ERR_NUMERIC, "scale %" PRId64 " is %g (must be > 0)",
                                 p, (double)scales[p]);
    int64_t sat = 0;
    bool four = dtype == OQ_DTYPE_INT4 || dtype == OQ_DTYPE_UINT4;
    uint8_t *o8 = out;
    if (four) {
        int64_t nb = oq_dtype_nbytes(dtype, L.outer * L.ch * L.inner);
        memset(out, 0, (size_t)(nb > 0 ? nb : 0));
    }
    for (int64_t o = 0; o < L.outer; o++)
        for (int64_t c = 0; c < L.ch; c++)
            for (int64_t i = 0; i < L.inner; i++) {
                int64_t e = (o * L.ch + c) * L.inner + i;
                int64_t p = param_index(&L, o, c, i);
                float x = w[e];
                int32_t zp = zero_points ? zero_points[p] : 0;
                int32_t q = oq_quantize_value(x, scales[p], zp, qmin, qmax);
                if (!isnan(x)) {
                    float v = x / scales[p];
                    double r = nearbyint((double)v) + zp;
                    if (r < qmin || r > qmax)
                        sat++;
                }
                switch (dtype) {
                case OQ_DTYPE_INT8: ((int8_t *)out)[e] = (int8_t)q; break;
                case OQ_DTYPE_UINT8: o8[e] = (uint8_t)q; break;
                case OQ_DTYPE_INT4:
                case OQ_DTYPE_UINT4:
                    o8[e / 2] |= (uint8_t)(((uint32_t)q & 0xFu) << (4 * (e % 2)));
                    break;
                default: oq_pack_ints(dtype, &q, 1, o8 + e * (oq_dtype_bits(dtype) / 8), NULL);
                }
            }
    if (n_saturated)
        *n_saturated = sat;
    return OQ_OK;
}

oq_status oq_quantize_weight(const float *w, const int64_t *dims, size_t rank,
                             const oq_weight_spec *s, float *scales, int32_t *zero_points,
                             void *out, const char *what, oq_diag *d)
{
    const char *wn = what ? what : "weight";
    wlayout L;
    oq_status st = layout_of(dims, rank, s->per_channel, s->axis, s->block_size, &L, d);
    if (st != OQ_OK)
        return st;
    if (s->dtype == OQ_DTYPE_INT32)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "%s: int32 is for biases", wn);
    /* per-group exact min/max: scales[] temporarily holds min, a second pass max */
    for (int64_t p = 0; p < L.nparams; p++) {
        scales[p] = FLT_MAX;
        zero_points[p] = 0;
    }
    /* First pass: min into scales (as float), max kept by re-scan per group below. */
    for (int64_t o = 0; o < L.outer; o++)
        for (int64_t c = 0; c < L.ch; c++)
            for (int64_t i = 0; i < L.inner; i++) {
                int64_t e = (o * L.ch + c) * L.inner + i;
                float x = w[e];
                if (!isfinite(x))
                    return oq_diag_error(d, OQ_ERR_NUMERIC, "%s: %s at element %" PRId64, wn,
                                         isnan(x) ? "NaN" : "Inf", e);
                int64_t p = param_index(&L, o, c, i);
                if (x < scales[p])
                    scales[p] = x;
            }
    /* zero_points[] holds the max as raw float bits during the second pass */
    for (int64_t p = 0; p < L.nparams; p++) {
        float m = -FLT_MAX;
        memcpy(&zero_points[p], &m, sizeof(m));
    }
    for (int64_t o = 0; o < L.outer; o++)
        for (int64_t c = 0; c < L.ch; c++)
            for (int64_t i = 0; i < L.inner; i++) {
                int64_t e = (o * L.ch + c) * L.inner + i;
                int64_t p = param_index(&L, o, c, i);
                float m;
                memcpy(&m, &zero_points[p], sizeof(m));
                if (w[e] > m)
                    memcpy(&zero_points[p], &w[e], sizeof(m));
            }
    for (int64_t p = 0; p < L.nparams; p++) {
        float mn = scales[p], mx;
        memcpy(&mx, &zero_points[p], sizeof(mx));
        if (mn > mx) /* empty group (zero-size tensor) */
            mn = mx = 0.0f;
        st = oq_qparams_compute(mn, mx, s->dtype, s->symmetric, s->reduce_range, &scales[p],
                                &zero_points[p], d);
        if (st != OQ_OK)
            return st;
    }
    return oq_quantize_with_params(w, dims, rank, s->dtype, s->axis, s->block_size, scales,
                                   zero_points, L.nparams, out, NULL, d);
}

/* ---------------------------------------------------------------------- bias ---- */

oq_status oq_quantize_bias(const float *bias, int64_t n, float input_scale,
                           const float *weight_scales, int64_t n_wscales, int32_t *out,
                           float *out_scales, int64_t *n_overflow, int64_t *first_overflow,
                           const char *what, oq_diag *d)
{
    const char *wn = what ? what : "bias";
    int64_t nov = 0, first = -1;
    if (n_wscales != 1 && n_wscales != n)
        return oq_diag_error(d, OQ_ERR_USAGE,
                             "%s: %" PRId64 " weight scales for %" PRId64 " bias values", wn,
                             n_wscales, n);
    if (!(input_scale > 0.0f) || !isfinite(input_scale))
        return oq_diag_error(d, OQ_ERR_NUMERIC, "%s: input scale %g is not positive", wn,
                             (double)input_scale);
    for (int64_t c = 0; c < n; c++) {
        float ws = weight_scales[n_wscales == 1 ? 0 : c];
        float s = input_scale * ws;
        if (!(s > 0.0f) || !isfinite(s))
            return oq_diag_error(d, OQ_ERR_NUMERIC,
                                 "%s: bias scale %g x %g = %g for channel %" PRId64
                                 " is not a positive finite number",
                                 wn, (double)input_scale, (double)ws, (double)s, c);
        if (out_scales && (n_wscales == n || c == 0))
            out_scales[c] = s;
        float x = bias[c];
        if (!isfinite(x))
            return oq_diag_error(d, OQ_ERR_NUMERIC, "%s: %s at element %" PRId64, wn,
                                 isnan(x) ? "NaN" : "Inf", c);
        double r = nearbyint((double)(x / s));
        if (r > (double)INT32_MAX || r < (double)INT32_MIN) {
            nov++;
            if (first < 0)
                first = c;
        }
        out[c] = oq_quantize_value(x, s, 0, INT32_MIN, INT32_MAX);
    }
    if (n_overflow)
        *n_overflow = nov;
    if (first_overflow)
        *first_overflow = first;
    return OQ_OK;
}

float oq_bias_min_weight_scale_limit(float bias, float input_scale, double limit)
{
    /* |b| / (s_in * s_w) must round to at most limit: s_w >= |b| / (s_in * (limit + 0.5));
     * start a few float32 steps below that (s_in * s_w is rounded too) and step up until the
     * float32 computation really fits. */
    if (!(limit >= 1.0) || limit > 2147483520.0)
        limit = 2147483520.0;
    double need = fabs((double)bias) / ((double)input_scale * (limit + 0.5)) * (1.0 - 5e-7);
    float s = (float)need;
    if (!(s > 0.0f))
        return 0.0f;
    for (int k = 0; k < 64; k++) {
        float bs = input_scale * s;
        if (bs > 0.0f && fabs(nearbyint((double)(fabsf(bias) / bs))) <= limit)
            break;
        s = nextafterf(s, FLT_MAX);
    }
    return s;
}

float oq_bias_min_weight_scale(float bias, float input_scale)
{
    return oq_bias_min_weight_scale_limit(bias, input_scale, 2147483520.0);
}
