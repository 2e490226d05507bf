/* Statistics over tensor data: see include/onnxq/stats.h. */
#include "onnxq/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 1024

bool oq_stats_dtype_supported(int32_t dtype)
{
    switch (dtype) {
    case OQ_DTYPE_FLOAT: case OQ_DTYPE_DOUBLE: case OQ_DTYPE_FLOAT16: case OQ_DTYPE_BFLOAT16:
    case OQ_DTYPE_FLOAT8E4M3FN: case OQ_DTYPE_FLOAT8E4M3FNUZ: case OQ_DTYPE_FLOAT8E5M2:
    case OQ_DTYPE_FLOAT8E5M2FNUZ:
    case OQ_DTYPE_INT8: case OQ_DTYPE_UINT8: case OQ_DTYPE_INT16: case OQ_DTYPE_UINT16:
    case OQ_DTYPE_INT32: case OQ_DTYPE_UINT32: case OQ_DTYPE_INT64: case OQ_DTYPE_UINT64:
    case OQ_DTYPE_INT4: case OQ_DTYPE_UINT4: case OQ_DTYPE_BOOL:
        return true;
    default:
        return false;
    }
}

/* The four float8 formats of ONNX (opset 19). */
static double f8_to_double(uint8_t b, int32_t dtype)
{
    int neg = b >> 7;
    double v;
    switch (dtype) {
    case OQ_DTYPE_FLOAT8E4M3FN: {
        int e = (b >> 3) & 0xf, m = b & 7;
        if (e == 15 && m == 7)
            return NAN;
        v = e == 0 ? ldexp(m / 8.0, -6) : ldexp(1.0 + m / 8.0, e - 7);
        break;
    }
    case OQ_DTYPE_FLOAT8E4M3FNUZ: {
        int e = (b >> 3) & 0xf, m = b & 7;
        if (b == 0x80)
            return NAN;
        v = e == 0 ? ldexp(m / 8.0, -7) : ldexp(1.0 + m / 8.0, e - 8);
        break;
    }
    case OQ_DTYPE_FLOAT8E5M2: {
        int e = (b >> 2) & 0x1f, m = b & 3;
        if (e == 31)
            return m ? NAN : (neg ? -INFINITY : INFINITY);
        v = e == 0 ? ldexp(m / 4.0, -14) : ldexp(1.0 + m / 4.0, e - 15);
        break;
    }
    default: { /* E5M2FNUZ */
        int e = (b >> 2) & 0x1f, m = b & 3;
        if (b == 0x80)
            return NAN;
        v = e == 0 ? ldexp(m / 4.0, -15) : ldexp(1.0 + m / 4.0, e - 16);
        break;
    }
    }
    return neg ? -v : v;
}

bool oq_elems_to_double(const void *data, int32_t dtype, int64_t start, int64_t count,
                        double *out)
{
    const uint8_t *p = data;
    int64_t i;
#define LOAD(T)                                                   \
    for (i = 0; i < count; i++) {                                 \
        T x;                                                      \
        memcpy(&x, p + (size_t)(start + i) * sizeof(T), sizeof x); \
        out[i] = (double)x;                                       \
    }                                                             \
    return true
    switch (dtype) {
    case OQ_DTYPE_FLOAT: LOAD(float);
    case OQ_DTYPE_DOUBLE: LOAD(double);
    case OQ_DTYPE_INT8: LOAD(int8_t);
    case OQ_DTYPE_UINT8: LOAD(uint8_t);
    case OQ_DTYPE_INT16: LOAD(int16_t);
    case OQ_DTYPE_UINT16: LOAD(uint16_t);
    case OQ_DTYPE_INT32: LOAD(int32_t);
    case OQ_DTYPE_UINT32: LOAD(uint32_t);
    case OQ_DTYPE_INT64: LOAD(int64_t);
    case OQ_DTYPE_UINT64: LOAD(uint64_t);
    case OQ_DTYPE_BOOL:
        for (i = 0; i < count; i++)
            out[i] = p[start + i] ? 1.0 : 0.0;
        return true;
    case OQ_DTYPE_FLOAT16:
    case OQ_DTYPE_BFLOAT16:
        for (i = 0; i < count; i++) {
            uint16_t h;
            memcpy(&h, p + (size_t)(start + i) * 2, 2);
            out[i] = dtype == OQ_DTYPE_FLOAT16 ? (double)oq_half_to_float(h)
                                               : (double)oq_bfloat16_to_float(h);
        }
        return true;
    case OQ_DTYPE_FLOAT8E4M3FN: case OQ_DTYPE_FLOAT8E4M3FNUZ:
    case OQ_DTYPE_FLOAT8E5M2: case OQ_DTYPE_FLOAT8E5M2FNUZ:
        for (i = 0; i < count; i++)
            out[i] = f8_to_double(p[start + i], dtype);
        return true;
    case OQ_DTYPE_INT4:
    case OQ_DTYPE_UINT4:
        for (i = 0; i < count; i++) {
            int64_t k = start + i;
            int nib = (p[k / 2] >> ((k & 1) * 4)) & 0xf;
            if (dtype == OQ_DTYPE_INT4 && nib >= 8)
                nib -= 16;
            out[i] = (double)nib;
        }
        return true;
    default:
        return false;
    }
#undef LOAD
}

oq_status oq_stats_compute(const void *data, int32_t dtype, int64_t n, oq_stats *out)
{
    memset(out, 0, sizeof *out);
    out->min = out->max = out->mean = out->std = NAN;
    if (!oq_stats_dtype_supported(dtype))
        return OQ_ERR_UNSUPPORTED;
    if (n < 0)
        return OQ_ERR_USAGE;
    out->count = n;
    double buf[CHUNK];
    /* pass 1: counts, min, max, compensated (Neumaier) sum of the finite values */
    double sum = 0.0, comp = 0.0, mn = INFINITY, mx = -INFINITY;
    int64_t finite = 0;
    for (int64_t s = 0; s < n; s += CHUNK) {
        int64_t c = n - s < CHUNK ? n - s : CHUNK;
        oq_elems_to_double(data, dtype, s, c, buf);
        for (int64_t i = 0; i < c; i++) {
            double x = buf[i];
            if (isnan(x)) {
                out->nans++;
                continue;
            }
            if (isinf(x)) {
                if (x > 0)
                    out->pos_infs++;
                else
                    out->neg_infs++;
                continue;
            }
            if (x == 0.0)
                out->zeros++;
            finite++;
            if (x < mn)
                mn = x;
            if (x > mx)
                mx = x;
            double t = sum + x;
            if (fabs(sum) >= fabs(x))
                comp += (sum - t) + x;
            else
                comp += (x - t) + sum;
            sum = t;
        }
    }
    out->finite = finite;
    if (finite == 0)
        return OQ_OK;
    double mean = (sum + comp) / (double)finite;
    /* pass 2: sum of squared deviations around the mean */
    double ss = 0.0, sd = 0.0;
    for (int64_t s = 0; s < n; s += CHUNK) {
        int64_t c = n - s < CHUNK ? n - s : CHUNK;
        oq_elems_to_double(data, dtype, s, c, buf);
        for (int64_t i = 0; i < c; i++) {
            double x = buf[i];
            if (!isfinite(x))
                continue;
            double dx = x - mean;
            ss += dx * dx;
            sd += dx;
        }
    }
    /* corrected two-pass formula (Chan, Golub, LeVeque): removes the rounding error of
     * the mean from the sum of squares */
    double var = (ss - sd * sd / (double)finite) / (double)finite;
    out->min = mn;
    out->max = mx;
    out->mean = mean;
    out->std = var > 0.0 ? sqrt(var) : 0.0;
    return OQ_OK;
}

oq_status oq_stats_channel_minmax(const void *data, int32_t dtype, const int64_t *dims,
                                  size_t rank, size_t axis, double *mins, double *maxs)
{
    if (!oq_stats_dtype_supported(dtype))
        return OQ_ERR_UNSUPPORTED;
    if (axis >= rank)
        return OQ_ERR_USAGE;
    int64_t outer = 1, inner = 1, nch = dims[axis];
    for (size_t i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return OQ_ERR_USAGE;
        if (i == axis)
            continue;
        int64_t *acc = i < axis ? &outer : &inner;
        if (dims[i] != 0 && *acc > INT64_MAX / dims[i])
            return OQ_ERR_USAGE;
        *acc *= dims[i];
    }
    for (int64_t c = 0; c < nch; c++) {
        mins[c] = INFINITY;
        maxs[c] = -INFINITY;
    }
    double buf[CHUNK];
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t c = 0; c < nch; c++) {
            int64_t base = (o * nch + c) * inner;
            double mn = mins[c], mx = maxs[c];
            for (int64_t s = 0; s < inner; s += CHUNK) {
                int64_t cnt = inner - s < CHUNK ? inner - s : CHUNK;
                oq_elems_to_double(data, dtype, base + s, cnt, buf);
                for (int64_t i = 0; i < cnt; i++) {
                    double x = buf[i];
                    if (!isfinite(x))
                        continue;
                    if (x < mn)
                        mn = x;
                    if (x > mx)
                        mx = x;
                }
            }
            mins[c] = mn;
            maxs[c] = mx;
        }
    }
    for (int64_t c = 0; c < nch; c++)
        if (mins[c] > maxs[c]) /* no finite value in this channel */
            mins[c] = maxs[c] = NAN;
    return OQ_OK;
}

static const void *tensor_dense(oq_tensor *t, int64_t *numel, oq_diag *d)
{
    const char *nm = t->name ? t->name : "";
    *numel = oq_tensor_numel(t);
    if (*numel < 0) {
        oq_diag_error(d, OQ_ERR_INVALID, "tensor \"%s\": bad dims", nm);
        return NULL;
    }
    if (!oq_stats_dtype_supported(t->dtype)) {
        oq_diag_error(d, OQ_ERR_UNSUPPORTED, "tensor \"%s\": no statistics for %s", nm,
                      oq_dtype_name(t->dtype));
        return NULL;
    }
    const void *data = oq_tensor_data(t, d);
    if (!data)
        return NULL;
    int64_t need = oq_dtype_nbytes(t->dtype, *numel);
    if (need < 0 || t->view_nbytes < need) {
        oq_diag_error(d, OQ_ERR_INVALID, "tensor \"%s\": has %lld bytes of data, expected %lld",
                      nm, (long long)t->view_nbytes, (long long)need);
        return NULL;
    }
    return data;
}

oq_status oq_tensor_stats(oq_tensor *t, oq_stats *out, oq_diag *d)
{
    int64_t n;
    memset(out, 0, sizeof *out);
    out->min = out->max = out->mean = out->std = NAN;
    const void *data = tensor_dense(t, &n, d);
    if (!data)
        return d && d->count ? d->entries[d->count - 1].code : OQ_ERR_INVALID;
    return oq_stats_compute(data, t->dtype, n, out);
}

oq_status oq_tensor_channel_minmax(oq_tensor *t, size_t axis, double *mins, double *maxs,
                                   oq_diag *d)
{
    int64_t n;
    const char *nm = t->name ? t->name : "";
    if (axis >= t->rank)
        return oq_diag_error(d, OQ_ERR_USAGE, "tensor \"%s\": axis %zu out of range for rank %zu",
                             nm, axis, t->rank);
    const void *data = tensor_dense(t, &n, d);
    if (!data)
        return d && d->count ? d->entries[d->count - 1].code : OQ_ERR_INVALID;
    oq_status st = oq_stats_channel_minmax(data, t->dtype, t->dims, t->rank, axis, mins, maxs);
    if (st != OQ_OK)
        return oq_diag_error(d, st, "tensor \"%s\": cannot compute per-channel min/max", nm);
    return OQ_OK;
}

int oq_weight_channel_axis(const oq_node *n, size_t input_index, size_t rank)
{
    if (!n || !n->op_type || !oq_domain_is_default(n->domain) || input_index != 1)
        return -1;
    if (strcmp(n->op_type, "Conv") == 0)
        return rank >= 1 ? 0 : -1;
    if (strcmp(n->op_type, "ConvTranspose") == 0)
        return rank >= 2 ? 1 : -1;
    if (strcmp(n->op_type, "Gemm") == 0) {
        if (rank != 2)
            return -1;
        return oq_node_attr_int(n, "transB", 0) ? 0 : 1;
    }
    if (strcmp(n->op_type, "MatMul") == 0)
        return rank >= 2 ? (int)(rank - 1) : -1;
    return -1;
}
