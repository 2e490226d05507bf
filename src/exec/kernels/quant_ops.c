/* QuantizeLinear and DequantizeLinear: per tensor, per axis (opset 13+) and blocked
 * (opset 21); int8 uint8 int16 uint16 int4 uint4 (and int32 for DequantizeLinear).
 *
 * QuantizeLinear is exactly saturate(round_half_to_even(x / scale) + zero_point) with
 * x / scale a real division in the input precision (not a multiplication by a
 * reciprocal). Defined here for what the spec leaves open: NaN -> the zero point,
 * +Inf / -Inf -> the upper / lower saturation bound. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernel.h"
#include "exec/qgroup.h"

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


/* ------------------------------------------------------------------ fast paths --- */

/* float32 QuantizeLinear / DequantizeLinear to / from int8, uint8, int16, uint16, per
 * tensor or per axis: rows of elements sharing one scale and zero point, each computed
 * by a row function of the instruction set chosen once per process (AVX-512F, AVX2 or
 * portable C; ONNXQ_QUANT_ISA=generic|avx2|avx512 restricts it). Every row function
 * computes exactly what the element-wise reference code computes:
 *   Quantize:   q = x / scale (IEEE float division, correctly rounded in every path);
 *               NaN -> zp; else clamp(round_half_even(q) + zp, lo, hi). The vector
 *               paths round q to an integral float (vroundps / vrndscaleps, ties to
 *               even, the same integer as nearbyint), replace NaN by 0, clamp to
 *               [lo - zp, hi - zp] in float (integers exactly representable for these
 *               types; +-Inf land on the bounds), then convert and add zp: the same
 *               integer as clamp(r + zp, lo, hi).
 *   Dequantize: (float)(x - zp) * scale; x - zp is an integer below 2^17 in magnitude,
 *               so the int32 -> float conversion is exact in every path.
 * Other cases (float16, double, 4-bit, int32, blocked) take the element-wise code. */

typedef void (*q_row_fn)(const float *x, int64_t n, float s, int32_t zp, int32_t lo,
                         int32_t hi, int32_t dt, void *out);
typedef void (*dq_row_fn)(const void *x, int32_t dt, int64_t n, int32_t zp, float s,
                          float *out);

static void q_row_generic(const float *x, int64_t n, float s, int32_t zp, int32_t lo,
                          int32_t hi, int32_t dt, void *out)
{
    for (int64_t i = 0; i < n; i++) {
        float q = x[i] / s;
        int64_t v = quantize_one(q, zp, lo, hi);
        switch (dt) {
        case OQ_DTYPE_INT8: ((int8_t *)out)[i] = (int8_t)v; break;
        case OQ_DTYPE_UINT8: ((uint8_t *)out)[i] = (uint8_t)v; break;
        case OQ_DTYPE_INT16: ((int16_t *)out)[i] = (int16_t)v; break;
        default: ((uint16_t *)out)[i] = (uint16_t)v; break;
        }
    }
}

static int32_t qload(const void *x, int32_t dt, int64_t i)
{
    switch (dt) {
    case OQ_DTYPE_INT8: return ((const int8_t *)x)[i];
    case OQ_DTYPE_UINT8: return ((const uint8_t *)x)[i];
    case OQ_DTYPE_INT16: return ((const int16_t *)x)[i];
    default: return ((const uint16_t *)x)[i];
    }
}

static void dq_row_generic(const void *x, int32_t dt, int64_t n, int32_t zp, float s,
                           float *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = (float)((int64_t)qload(x, dt, i) - zp) * s;
}

static size_t qsize(int32_t dt)
{
    return dt == OQ_DTYPE_INT8 || dt == OQ_DTYPE_UINT8 ? 1 : 2;
}

#if defined(__GNUC__) && defined(__x86_64__)
#define OQ_HAVE_Q_X86 1
#include <immintrin.h>

__attribute__((target("avx2"))) static void q_row_avx2(const float *x, int64_t n, float s,
                                                       int32_t zp, int32_t lo, int32_t hi,
                                                       int32_t dt, void *out)
{
    const __m256 sv = _mm256_set1_ps(s), lov = _mm256_set1_ps((float)(lo - zp)),
                 hiv = _mm256_set1_ps((float)(hi - zp)), zero = _mm256_setzero_ps();
    const __m128i zv = _mm_set1_epi32(zp);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 q = _mm256_div_ps(_mm256_loadu_ps(x + i), sv);
        __m256 r = _mm256_round_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        r = _mm256_blendv_ps(r, zero, _mm256_cmp_ps(q, q, _CMP_UNORD_Q));
        r = _mm256_min_ps(_mm256_max_ps(r, lov), hiv);
        __m256i iv = _mm256_cvtps_epi32(r);
        __m128i a = _mm_add_epi32(_mm256_castsi256_si128(iv), zv);
        __m128i b = _mm_add_epi32(_mm256_extracti128_si256(iv, 1), zv);
        switch (dt) {
        case OQ_DTYPE_INT8: {
            __m128i w = _mm_packs_epi32(a, b);
            _mm_storel_epi64((__m128i *)((int8_t *)out + i), _mm_packs_epi16(w, w));
            break;
        }
        case OQ_DTYPE_UINT8: {
            __m128i w = _mm_packs_epi32(a, b);
            _mm_storel_epi64((__m128i *)((uint8_t *)out + i), _mm_packus_epi16(w, w));
            break;
        }
        case OQ_DTYPE_INT16:
            _mm_storeu_si128((__m128i *)((int16_t *)out + i), _mm_packs_epi32(a, b));
            break;
        default:
            _mm_storeu_si128((__m128i *)((uint16_t *)out + i), _mm_packus_epi32(a, b));
            break;
        }
    }
    if (i < n)
        q_row_generic(x + i, n - i, s, zp, lo, hi, dt, (uint8_t *)out + (size_t)i * qsize(dt));
}

__attribute__((target("avx2"))) static void dq_row_avx2(const void *x, int32_t dt, int64_t n,
                                                        int32_t zp, float s, float *out)
{
    const __m256 sv = _mm256_set1_ps(s);
    const __m256i zv = _mm256_set1_epi32(zp);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v;
        switch (dt) {
        case OQ_DTYPE_INT8:
            v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)((const int8_t *)x + i)));
            break;
        case OQ_DTYPE_UINT8:
            v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)((const uint8_t *)x + i)));
            break;
        case OQ_DTYPE_INT16:
            v = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)((const int16_t *)x + i)));
            break;
        default:
            v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)x + i)));
            break;
        }
        v = _mm256_sub_epi32(v, zv);
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_cvtepi32_ps(v), sv));
    }
    if (i < n)
        dq_row_generic((const uint8_t *)x + (size_t)i * qsize(dt), dt, n - i, zp, s, out + i);
}

__attribute__((target("avx512f"))) static void q_row_avx512(const float *x, int64_t n, float s,
                                                            int32_t zp, int32_t lo, int32_t hi,
                                                            int32_t dt, void *out)
{
    const __m512 sv = _mm512_set1_ps(s), lov = _mm512_set1_ps((float)(lo - zp)),
                 hiv = _mm512_set1_ps((float)(hi - zp)), zero = _mm512_setzero_ps();
    const __m512i zv = _mm512_set1_epi32(zp);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 q = _mm512_div_ps(_mm512_maskz_loadu_ps(m, x + i), sv);
        __m512 r = _mm512_roundscale_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(q, q, _CMP_UNORD_Q), zero);
        r = _mm512_min_ps(_mm512_max_ps(r, lov), hiv);
        __m512i iv = _mm512_add_epi32(_mm512_cvtps_epi32(r), zv);
        /* values are in the type's range: the truncating narrowing is exact */
        if (dt == OQ_DTYPE_INT8 || dt == OQ_DTYPE_UINT8)
            _mm512_mask_cvtepi32_storeu_epi8((uint8_t *)out + i, m, iv);
        else
            _mm512_mask_cvtepi32_storeu_epi16((uint16_t *)out + i, m, iv);
    }
}

__attribute__((target("avx512f"))) static void dq_row_avx512(const void *x, int32_t dt,
                                                             int64_t n, int32_t zp, float s,
                                                             float *out)
{
    const __m512 sv = _mm512_set1_ps(s);
    const __m512i zv = _mm512_set1_epi32(zp);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i v;
        switch (dt) {
        case OQ_DTYPE_INT8:
            v = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)((const int8_t *)x + i)));
            break;
        case OQ_DTYPE_UINT8:
            v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)((const uint8_t *)x + i)));
            break;
        case OQ_DTYPE_INT16:
            v = _mm512_cvtepi16_epi32(
                _mm256_loadu_si256((const __m256i *)((const int16_t *)x + i)));
            break;
        default:
            v = _mm512_cvtepu16_epi32(
                _mm256_loadu_si256((const __m256i *)((const uint16_t *)x + i)));
            break;
        }
        v = _mm512_sub_epi32(v, zv);
        _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_cvtepi32_ps(v), sv));
    }
    if (i < n)
        dq_row_generic((const uint8_t *)x + (size_t)i * qsize(dt), dt, n - i, zp, s, out + i);
}
#endif

typedef struct q_isa {
    const char *name;
    q_row_fn q;
    dq_row_fn dq;
} q_isa;

static const q_isa q_isas[] = {
    {"generic", q_row_generic, dq_row_generic},
#ifdef OQ_HAVE_Q_X86
    {"avx2", q_row_avx2, dq_row_avx2},
    {"avx512", q_row_avx512, dq_row_avx512},
#endif
};

static bool q_isa_usable(size_t i)
{
#ifdef OQ_HAVE_Q_X86
    __builtin_cpu_init();
    if (i == 1)
        return __builtin_cpu_supports("avx2");
    if (i == 2)
        return __builtin_cpu_supports("avx512f");
#endif
    return i == 0;
}

/* 0 unknown, else 1 + index into q_isas; racing writers store the same value */
static _Atomic int q_isa_choice;

static const q_isa *q_isa_get(void)
{
    int c = atomic_load_explicit(&q_isa_choice, memory_order_relaxed);
    if (!c) {
        const char *env = getenv("ONNXQ_QUANT_ISA");
        size_t want = sizeof q_isas / sizeof q_isas[0];
        for (size_t i = 0; env && i < sizeof q_isas / sizeof q_isas[0]; i++)
            if (strcmp(env, q_isas[i].name) == 0)
                want = i + 1;
        c = 1;
        for (size_t i = want; i-- > 0;)
            if (q_isa_usable(i)) {
                c = (int)i + 1;
                break;
            }
        atomic_store_explicit(&q_isa_choice, c, memory_order_relaxed);
    }
    return &q_isas[c - 1];
}

void oq_k_dq_row(const void *x, int32_t dt, int64_t n, int32_t zp, float s, float *out)
{
    q_isa_get()->dq(x, dt, n, zp, s, out);
}

void oq_k_q_row(const float *x, int64_t n, float s, int32_t zp, int32_t dt, void *out)
{
    double lo, hi;
    qrange(dt, &lo, &hi);
    q_isa_get()->q(x, n, s, zp, (int32_t)lo, (int32_t)hi, dt, out);
}

bool oq_k_quant_set_isa(const char *name)
{
    for (size_t i = 0; i < sizeof q_isas / sizeof q_isas[0]; i++)
        if (strcmp(name, q_isas[i].name) == 0 && q_isa_usable(i)) {
            atomic_store_explicit(&q_isa_choice, (int)i + 1, memory_order_relaxed);
            return true;
        }
    return false;
}

const char *oq_k_quant_isa(void)
{
    return q_isa_get()->name;
}

static bool q_fast_type(int32_t dt)
{
    return dt == OQ_DTYPE_INT8 || dt == OQ_DTYPE_UINT8 || dt == OQ_DTYPE_INT16 ||
           dt == OQ_DTYPE_UINT16;
}

typedef struct q_job {
    const qmap *m;
    const void *x;           /* float (Quantize) or the integer input (Dequantize) */
    const float *scale;
    const oq_rt_tensor *zp;  /* may be NULL */
    int32_t lo, hi, qdt;     /* the integer type and its range */
    void *y;
    const q_isa *isa;
    bool dequant;
} q_job;

/* elements [b, e): rows of one scale (the whole range per tensor, the part of one
 * channel's run per axis) */
static void q_range(void *arg, int64_t b, int64_t e, int w)
{
    const q_job *j = arg;
    size_t qs = qsize(j->qdt);
    (void)w;
    for (int64_t i = b; i < e;) {
        int64_t c = 0, end = e;
        if (j->m->axis_dim) {
            int64_t run = i / j->m->inner;
            c = run % j->m->axis_dim;
            if ((run + 1) * j->m->inner < end)
                end = (run + 1) * j->m->inner;
        }
        int32_t zp = j->zp ? (int32_t)qget_any(j->zp, c) : 0;
        if (j->dequant)
            j->isa->dq((const uint8_t *)j->x + (size_t)i * qs, j->qdt, end - i, zp, j->scale[c],
                       (float *)j->y + i);
        else
            j->isa->q((const float *)j->x + i, end - i, j->scale[c], zp, j->lo, j->hi, j->qdt,
                      (uint8_t *)j->y + (size_t)i * qs);
        i = end;
    }
}

/* Run the fast path when it applies (float32, 8/16-bit, per tensor or per axis with
 * runs of at least 16 elements); false: use the element-wise code. */
static bool q_fast(const oq_kctx *k, const qmap *m, const oq_rt_tensor *x,
                   const oq_rt_tensor *s, const oq_rt_tensor *z, oq_rt_tensor *y, bool dequant)
{
    int32_t qdt = dequant ? x->dtype : y->dtype;
    if (s->dtype != OQ_DTYPE_FLOAT || !q_fast_type(qdt) || m->block ||
        (m->axis_dim && m->inner < 16))
        return false;
    double lo, hi;
    qrange(qdt, &lo, &hi);
    q_job j = {m, x->data, s->data, z, (int32_t)lo, (int32_t)hi, qdt, y->data, q_isa_get(),
               dequant};
    int64_t n = oq_rt_tensor_numel(x);
    if (n > 0)
        oq_k_parallel_for(k, n, 32768, q_range, &j);
    return true;
}

static oq_status run_q(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                       oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0], *s = in[1], *z = n_in > 2 ? in[2] : NULL;
    qmap m;
    oq_status st = qmap_init(k, x, s, z, &m);
    if (st)
        return st;
    if (q_fast(k, &m, x, s, z, &out[0], false))
        return OQ_OK;
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
    if (q_fast(k, &m, x, s, z, &out[0], true))
        return OQ_OK;
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
 * y = saturate(round(x / scale) + zp), float32 arithmetic and ties to even, as onnxruntime
 * (dynamic_quantize_matmul.cc GetQuantizationParameter, MLAS QuantizeLinear). An all-zero
 * input (max = min = 0) gets scale 1 and zero point 0 as in onnxruntime, not the 0 / 255
 * the formula gives (every output is 0 either way, but a zero scale would reach the Mul
 * that rescales a MatMulInteger). */
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
    float scale = mx == mn ? 1.0f : (mx - mn) / 255.0f;
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


/* ------------------------------------------------------------------ fused groups --- */
/* Two same-number groups of src/exec/qgroup.h for the float islands of a quantized
 * model (a squeeze-excitation block), both ONNXQ_NO_LUT=1 off:
 *  - OQ_QG_FTAB: DQ(x) -> elementwise chain -> a float value, as y = table[x byte] with
 *    the 256 results of the nodes' own kernels (oq_qgroup_eval_table): each element of
 *    the chain depends on its 8-bit x alone, so these are the nodes' bytes;
 *  - OQ_QG_FBIN: float a, float b -> Add | Mul -> QuantizeLinear (per tensor, 8-bit), over
 *    the rows of oq_k_bcast_apply in pieces of 256: the float op (the kernel's a op b,
 *    exactly rounded), then the QuantizeLinear row (oq_k_q_row) the Q kernel runs. */

oq_status oq_qgroup_eval_table(oq_kctx *k, const oq_qgroup *grp, oq_rt_tensor *out)
{
    memset(out, 0, sizeof *out);
    const oq_node *dq = grp->dq_x;
    oq_tensor *txz = dq && dq->n_inputs > 2 ? oq_value_const_tensor(dq->inputs[2]) : NULL;
    if (!txz || !txz->has_dtype || (txz->dtype != OQ_DTYPE_UINT8 && txz->dtype != OQ_DTYPE_INT8) ||
        grp->n_chain > OQ_QG_LUT_MAX)
        return oq_k_error(k, OQ_ERR_INVALID, "table: no 8-bit zero point");
    uint8_t bytes[256];
    for (int i = 0; i < 256; i++)
        bytes[i] = (uint8_t)i; /* int8: the same bytes read as -128..127 */
    int64_t dim = 256;
    /* values computed so far: the DQ's output and each chain node's */
    size_t nv = grp->n_chain + 1;
    const oq_value *vals[OQ_QG_LUT_MAX + 1];
    oq_rt_tensor res[OQ_QG_LUT_MAX + 1];
    memset(res, 0, sizeof res);
    oq_status st = OQ_OK;
    for (size_t step = 0; step < nv && st == OQ_OK; step++) {
        const oq_node *n = step == 0 ? dq : grp->chain[step - 1];
        const oq_rt_tensor *ins[8];
        oq_rt_tensor cst[8], x;
        memset(cst, 0, sizeof cst);
        if (n->n_inputs > 8) {
            st = oq_k_error(k, OQ_ERR_UNSUPPORTED, "table: node with %zu inputs", n->n_inputs);
            break;
        }
        for (size_t i = 0; i < n->n_inputs && st == OQ_OK; i++) {
            const oq_value *v = n->inputs[i];
            ins[i] = NULL;
            if (!v)
                continue;
            if (step == 0 && i == 0) {
                oq_rt_tensor_borrow(&x, txz->dtype, &dim, 1, bytes);
                ins[i] = &x;
                continue;
            }
            for (size_t j = 0; j < step && !ins[i]; j++)
                if (vals[j] == v)
                    ins[i] = &res[j];
            if (ins[i])
                continue;
            oq_tensor *t = oq_value_const_tensor((oq_value *)v);
            const void *d = t ? oq_tensor_data(t, NULL) : NULL;
            if (!d || oq_rt_tensor_borrow(&cst[i], t->dtype, t->dims, t->rank, (void *)d) != OQ_OK)
                st = oq_k_error(k, OQ_ERR_INVALID, "table: input \"%s\" of \"%s\" unreadable",
                                v->name ? v->name : "", n->name ? n->name : "");
            else
                ins[i] = &cst[i];
        }
        if (st != OQ_OK)
            break;
        st = oq_exec_eval_node_arith(grp->model, n, ins, n->n_inputs, -1, &res[step], 1, k->diag,
                                     oq_k_arith(k));
        if (st == OQ_OK && oq_rt_tensor_numel(&res[step]) != 256)
            st = oq_k_error(k, OQ_ERR_INVALID, "table: \"%s\" changed the shape",
                            n->name ? n->name : "");
        vals[step] = n->outputs[0];
    }
    if (st == OQ_OK) { /* the last value is the caller's now */
        *out = res[nv - 1];
        memset(&res[nv - 1], 0, sizeof res[nv - 1]);
    }
    for (size_t i = 0; i < nv; i++)
        oq_rt_tensor_release(&res[i]);
    return st;
}

typedef struct ftab_state {
    float tab[256];
    int32_t xdt;
    bool rank1;            /* a chain constant of rank 1: a rank-0 x gives [1] */
} ftab_state;

static oq_status prepare_ftab(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in)
{
    (void)in;
    (void)n_in;
    const oq_qgroup *grp = (const oq_qgroup *)k->node;
    if (grp->kind != OQ_QG_FTAB)
        return oq_k_error(k, OQ_ERR_INTERNAL, "not a table group");
    ftab_state *s = calloc(1, sizeof *s);
    if (!s)
        return OQ_ERR_NOMEM;
    k->state = s;
    oq_rt_tensor t;
    oq_status st = oq_qgroup_eval_table(k, grp, &t);
    if (st != OQ_OK)
        return st;
    if (t.dtype != OQ_DTYPE_FLOAT)
        st = oq_k_error(k, OQ_ERR_UNSUPPORTED, "table: the chain's result is %s, not float",
                        oq_dtype_name(t.dtype));
    else
        memcpy(s->tab, t.data, sizeof s->tab);
    oq_rt_tensor_release(&t);
    s->xdt = oq_value_const_tensor(grp->dq_x->inputs[2])->dtype;
    for (size_t c = 0; c < grp->n_chain; c++)
        for (size_t i = 0; i < grp->chain[c]->n_inputs; i++) {
            oq_tensor *ct = oq_value_const_tensor(grp->chain[c]->inputs[i]);
            s->rank1 = s->rank1 || (ct && ct->rank == 1);
        }
    return st;
}

static oq_status infer_ftab(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    const ftab_state *s = k->state;
    out[0].dtype = OQ_DTYPE_FLOAT;
    if (!oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    (void)n_in;
    if (in[0]->dtype != s->xdt)
        return oq_k_error(k, OQ_ERR_INVALID, "fused table: input of type %s, zero point of type %s",
                          oq_dtype_name(in[0]->dtype), oq_dtype_name(s->xdt));
    static const int64_t one = 1;
    if (in[0]->rank == 0 && s->rank1)
        return oq_k_set_out(k, &out[0], OQ_DTYPE_FLOAT, &one, 1);
    return oq_k_set_out(k, &out[0], OQ_DTYPE_FLOAT, in[0]->dims, in[0]->rank);
}

typedef struct ftab_job {
    const float *tab;
    const uint8_t *x;
    float *y;
    int isa;               /* q_isas index: 0 generic, 1 AVX2, 2 AVX-512 */
} ftab_job;

#ifdef OQ_HAVE_Q_X86
/* y[i] = tab[x[i]] for the first n / 8 * 8 elements (8-lane gathers) */
__attribute__((target("avx2"))) static int64_t ftab_avx2(const float *tab, const uint8_t *x,
                                                         float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(x + i)));
        _mm256_storeu_ps(y + i, _mm256_i32gather_ps(tab, idx, 4));
    }
    return i;
}

__attribute__((target("avx512f"))) static int64_t ftab_avx512(const float *tab, const uint8_t *x,
                                                              float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
        _mm512_storeu_ps(y + i, _mm512_i32gather_ps(idx, tab, 4));
    }
    return i;
}
#endif

#ifdef OQ_HAVE_Q_X86
/* AMD CPUs run an 8-lane gather slower than 8 scalar loads (AMD EPYC Zen 5: 0.39
 * against 0.19 ns per element), so there the AVX2 row takes the plain loop */
static bool ftab_scalar_cpu(void)
{
    static _Atomic int amd = -1; /* racing writers store the same value */
    int a = atomic_load_explicit(&amd, memory_order_relaxed);
    if (a < 0) {
        __builtin_cpu_init();
        a = __builtin_cpu_is("amd") ? 1 : 0;
        atomic_store_explicit(&amd, a, memory_order_relaxed);
    }
    return a == 1;
}
#endif

static void ftab_range(void *arg, int64_t b, int64_t e, int w)
{
    const ftab_job *j = arg;
    (void)w;
    const uint8_t *x = j->x + b;
    float *y = j->y + b;
    int64_t n = e - b, i = 0;
#ifdef OQ_HAVE_Q_X86
    if (j->isa == 2)
        i = ftab_avx512(j->tab, x, y, n);
    else if (j->isa == 1 && !ftab_scalar_cpu())
        i = ftab_avx2(j->tab, x, y, n);
#endif
    for (; i < n; i++)
        y[i] = j->tab[x[i]];
}

static oq_status run_ftab(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    (void)n_in;
    (void)n_out;
    const ftab_state *s = k->state;
    ftab_job j = {s->tab, in[0]->data, out[0].data, (int)(q_isa_get() - q_isas)};
    int64_t n = oq_rt_tensor_numel(in[0]); /* = the output's (a rank-0 x may give [1]) */
    if (n > 0)
        oq_k_parallel_for(k, n, 32768, ftab_range, &j);
    return OQ_OK;
}

typedef struct fbin_state {
    float ys;
    int32_t yzp, ydt;
    bool mul;
} fbin_state;

static oq_status prepare_fbin(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in)
{
    (void)in;
    (void)n_in;
    const oq_qgroup *grp = (const oq_qgroup *)k->node;
    if (grp->kind != OQ_QG_FBIN || !grp->q || grp->q->n_inputs < 3)
        return oq_k_error(k, OQ_ERR_INTERNAL, "not a float Add/Mul -> Q group");
    fbin_state *s = calloc(1, sizeof *s);
    if (!s)
        return OQ_ERR_NOMEM;
    k->state = s;
    oq_tensor *ts = oq_value_const_tensor(grp->q->inputs[1]);
    oq_tensor *tz = oq_value_const_tensor(grp->q->inputs[2]);
    const void *sd = ts ? oq_tensor_data(ts, NULL) : NULL, *zd = tz ? oq_tensor_data(tz, NULL) : NULL;
    if (!sd || !zd || ts->dtype != OQ_DTYPE_FLOAT || oq_tensor_numel(ts) != 1 ||
        oq_tensor_numel(tz) != 1 || (tz->dtype != OQ_DTYPE_UINT8 && tz->dtype != OQ_DTYPE_INT8))
        return oq_k_error(k, OQ_ERR_INVALID, "fused group: constant data unreadable");
    s->ys = *(const float *)sd;
    s->ydt = tz->dtype;
    s->yzp = tz->dtype == OQ_DTYPE_INT8 ? *(const int8_t *)zd : *(const uint8_t *)zd;
    s->mul = strcmp(grp->anchor->op_type, "Mul") == 0;
    return OQ_OK;
}

static oq_status infer_fbin(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    const fbin_state *s = k->state;
    out[0].dtype = s->ydt;
    if (!oq_k_shapes_known(in, 2))
        return oq_k_defer(k, out, n_out);
    (void)n_in;
    if (in[0]->dtype != OQ_DTYPE_FLOAT || in[1]->dtype != OQ_DTYPE_FLOAT)
        return oq_k_error(k, OQ_ERR_INVALID, "fused group: operands of type %s and %s",
                          oq_dtype_name(in[0]->dtype), oq_dtype_name(in[1]->dtype));
    int64_t d[OQ_RT_MAX_RANK];
    size_t r;
    oq_status st = oq_k_broadcast(k, in, 2, d, &r);
    if (st != OQ_OK)
        return st;
    return oq_k_set_out(k, &out[0], s->ydt, d, r);
}

#define FBIN_PIECE 256

/* f[i] = a[i * ia] op b[i * ib] (ia, ib: 1, or 0 for a broadcast value), the float op
 * of the Add / Mul kernels: IEEE single precision, the same in every lane and path */
static void fbin_op(bool mul, const float *a, int64_t ia, const float *b, int64_t ib, float *f,
                    int64_t i, int64_t n)
{
    for (; i < n; i++)
        f[i] = mul ? a[i * ia] * b[i * ib] : a[i * ia] + b[i * ib];
}

#ifdef OQ_HAVE_Q_X86
__attribute__((target("avx2"))) static int64_t fbin_avx2(bool mul, const float *a, int64_t ia,
                                                         const float *b, int64_t ib, float *f,
                                                         int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = ia ? _mm256_loadu_ps(a + i) : _mm256_set1_ps(a[0]);
        __m256 y = ib ? _mm256_loadu_ps(b + i) : _mm256_set1_ps(b[0]);
        _mm256_storeu_ps(f + i, mul ? _mm256_mul_ps(x, y) : _mm256_add_ps(x, y));
    }
    return i;
}

__attribute__((target("avx512f"))) static int64_t fbin_avx512(bool mul, const float *a,
                                                              int64_t ia, const float *b,
                                                              int64_t ib, float *f, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 x = ia ? _mm512_loadu_ps(a + i) : _mm512_set1_ps(a[0]);
        __m512 y = ib ? _mm512_loadu_ps(b + i) : _mm512_set1_ps(b[0]);
        _mm512_storeu_ps(f + i, mul ? _mm512_mul_ps(x, y) : _mm512_add_ps(x, y));
    }
    return i;
}
#endif

typedef struct fbin_job {
    const fbin_state *s;
    int isa;               /* q_isas index: 0 generic, 1 AVX2, 2 AVX-512 */
} fbin_job;

static void fbin_row(const void *state, void *out, const void *const *in, const int64_t *inc,
                     int64_t count)
{
    const fbin_job *j = state;
    const fbin_state *s = j->s;
    const float *a = in[0], *b = in[1];
    float f[FBIN_PIECE];
    for (int64_t p = 0; p < count; p += FBIN_PIECE) {
        int64_t n = count - p < FBIN_PIECE ? count - p : FBIN_PIECE, i = 0;
        const float *pa = a + p * inc[0], *pb = b + p * inc[1];
#ifdef OQ_HAVE_Q_X86
        if (j->isa == 2)
            i = fbin_avx512(s->mul, pa, inc[0], pb, inc[1], f, n);
        else if (j->isa == 1)
            i = fbin_avx2(s->mul, pa, inc[0], pb, inc[1], f, n);
#endif
        fbin_op(s->mul, pa, inc[0], pb, inc[1], f, i, n);
        oq_k_q_row(f, n, s->ys, s->yzp, s->ydt, (uint8_t *)out + p);
    }
}

static oq_status run_fbin(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    (void)n_in;
    (void)n_out;
    fbin_job j = {k->state, (int)(q_isa_get() - q_isas)};
    oq_k_bcast_apply(k, in, 2, &out[0], fbin_row, &j);
    return OQ_OK;
}

const oq_kernel oq_kernels_quant_ops[] = {
    {"", "DynamicQuantizeLinear", 11, 0, 0, OQ_T(FLOAT), NULL, NULL, infer_dql, run_dql, NULL, 1},
    {"", "QuantizeLinear", 10, 0, 0, 0, q_types_ok, NULL, infer_q, run_q, NULL, 2},
    {"", "DequantizeLinear", 10, 0, 0, 0, dq_types_ok, NULL, infer_dq, run_dq, NULL, 2},
    {OQ_QGROUP_DOMAIN, OQ_QGROUP_OP_FTAB, 0, 0, 0, OQ_T(UINT8) | OQ_T(INT8), NULL, prepare_ftab,
     infer_ftab, run_ftab, free, 1},
    {OQ_QGROUP_DOMAIN, OQ_QGROUP_OP_FBIN, 0, 0, 0, OQ_T(FLOAT), NULL, prepare_fbin, infer_fbin,
     run_fbin, free, 2},
};
OQ_KERNEL_TABLE_END(quant_ops);
