/* Streaming observers with fixed-size state: running (or moving-average) min/max and a
 * histogram that grows its range without losing counts. See include/onnxq/quant.h. */
#include "onnxq/quant.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "exec/kernel.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define OQ_OBS_AVX2 1
#endif

/* AVX2 for the scans below (the same results as the portable loops) where the
 * QuantizeLinear/DequantizeLinear rows use AVX2 or AVX-512: the same choice of
 * instruction set (ONNXQ_QUANT_ISA=generic keeps the portable loops). */
static bool use_avx2(void)
{
    return strcmp(oq_k_quant_isa(), "generic") != 0;
}

void oq_histogram_reset(oq_histogram *h)
{
    memset(h, 0, sizeof(*h));
}

void oq_observer_init(oq_observer *o, oq_observer_kind kind, oq_nan_policy policy)
{
    memset(o, 0, sizeof(*o));
    o->kind = kind;
    o->nan_policy = policy;
}

oq_status oq_observer_set_averaging(oq_observer *o, double c, oq_diag *d)
{
    if (!(c >= 0.0 && c <= 1.0))
        return oq_diag_error(d, OQ_ERR_USAGE,
                             "moving-average constant %g is outside [0, 1]", c);
    o->averaging_constant = c;
    return OQ_OK;
}

/* Grow the histogram so that it covers [a, b]. The new width is 2^m times the old one
 * and the new origin lies a whole number j of old bins to the left, so old bin i lands
 * entirely in new bin floor((i + j) / 2^m): counts move exactly. */
void oq_histogram_grow(oq_histogram *h, double a, double b)
{
    double hi = h->lo + (double)OQ_HIST_BINS * h->width;
    if (a >= h->lo && b <= hi)
        return;
    /* only the occupied bins must stay covered: empty bins at either end may fall
     * outside (otherwise every extension to the left would double the width) */
    int first = 0, last = OQ_HIST_BINS - 1;
    while (first < OQ_HIST_BINS && !h->counts[first])
        first++;
    while (last > first && !h->counts[last])
        last--;
    double occ_lo = first < OQ_HIST_BINS ? h->lo + (double)first * h->width : a;
    double occ_hi = first < OQ_HIST_BINS ? h->lo + (double)(last + 1) * h->width : b;
    if (a > occ_lo)
        a = occ_lo;
    if (b < occ_hi)
        b = occ_hi;
    double j = 0.0;
    if (a < h->lo)
        j = ceil((h->lo - a) / h->width);
    double k = 1.0;
    double new_lo = h->lo - j * h->width;
    while (new_lo + (double)OQ_HIST_BINS * (k * h->width) < b && k < 0x1p1000)
        k *= 2.0;
    if (k == 1.0 && j == 0.0)
        return;
    uint64_t moved[OQ_HIST_BINS];
    memset(moved, 0, sizeof(moved));
    for (int i = 0; i < OQ_HIST_BINS; i++) {
        if (!h->counts[i])
            continue;
        double t = floor(((double)i + j) / k);
        int ni = t < 0.0 ? 0 : (t >= (double)OQ_HIST_BINS ? OQ_HIST_BINS - 1 : (int)t);
        moved[ni] += h->counts[i];
    }
    memcpy(h->counts, moved, sizeof(moved));
    h->lo = new_lo;
    h->width *= k;
}

static inline int hist_index(const oq_histogram *h, double x)
{
    double t = floor((x - h->lo) / h->width);
    if (!(t >= 0.0)) /* also catches NaN */
        return 0;
    if (t >= (double)OQ_HIST_BINS)
        return OQ_HIST_BINS - 1;
    return (int)t;
}

#ifdef OQ_OBS_AVX2
/* The binning loop of oq_histogram_add, four elements at a time: the same bin per element
 * (the same double arithmetic, truncation, clamping; NaN and +-Inf not counted), element
 * i + u into part[u]. Returns where it stopped (a multiple of 4 from i). */
__attribute__((target("avx2"))) static int64_t bin4_avx2(const float *x, int64_t i, int64_t end, double lo,
                                                         double inv, uint32_t part[4][OQ_HIST_BINS])
{
    const __m256d vlo = _mm256_set1_pd(lo), vinv = _mm256_set1_pd(inv), zero = _mm256_setzero_pd(),
                  top = _mm256_set1_pd((double)(OQ_HIST_BINS - 1));
    const __m128 absmask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff)), fmax = _mm_set1_ps(FLT_MAX);
    int32_t k[4];
    for (; i + 4 <= end; i += 4) {
        __m128 v = _mm_loadu_ps(x + i);
        __m256d t = _mm256_mul_pd(_mm256_sub_pd(_mm256_cvtps_pd(v), vlo), vinv);
        __m256d pos = _mm256_cmp_pd(t, zero, _CMP_GT_OQ); /* false for NaN: bin 0 */
        __m256d c = _mm256_and_pd(pos, _mm256_min_pd(t, top));
        _mm_storeu_si128((__m128i *)k, _mm256_cvttpd_epi32(c));
        int fin = _mm_movemask_ps(_mm_cmp_ps(_mm_and_ps(v, absmask), fmax, _CMP_LE_OQ));
        part[0][k[0]] += (uint32_t)(fin & 1);
        part[1][k[1]] += (uint32_t)((fin >> 1) & 1);
        part[2][k[2]] += (uint32_t)((fin >> 2) & 1);
        part[3][k[3]] += (uint32_t)((fin >> 3) & 1);
    }
    return i;
}

/* min, max, zeros and whether anything is not finite: the fast pass of
 * oq_observer_update (min/max with the portable loop's comparisons per lane) */
__attribute__((target("avx2"))) static int64_t scan_avx2(const float *x, int64_t n, float *bmin, float *bmax,
                                                         uint64_t *zeros, int *bad)
{
    __m256 mn = _mm256_set1_ps(*bmin), mx = _mm256_set1_ps(*bmax), z = _mm256_setzero_ps(),
           absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), fm = _mm256_set1_ps(FLT_MAX);
    __m256 ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    uint64_t zc = 0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        mn = _mm256_min_ps(v, mn); /* v < mn ? v : mn */
        mx = _mm256_max_ps(v, mx); /* v > mx ? v : mx */
        ok = _mm256_and_ps(ok, _mm256_cmp_ps(_mm256_and_ps(v, absmask), fm, _CMP_LE_OQ));
        zc += (uint64_t)__builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_cmp_ps(v, z, _CMP_EQ_OQ)));
    }
    float a[8], b[8];
    _mm256_storeu_ps(a, mn);
    _mm256_storeu_ps(b, mx);
    for (int u = 0; u < 8; u++) {
        *bmin = a[u] < *bmin ? a[u] : *bmin;
        *bmax = b[u] > *bmax ? b[u] : *bmax;
    }
    *zeros += zc;
    *bad |= _mm256_movemask_ps(ok) != 0xff;
    return i;
}
#endif

void oq_histogram_add(oq_histogram *h, const float *x, int64_t n, float xmin, float xmax)
{
    if (n <= 0 || !(xmin <= xmax))
        return;
    if (!(h->width > 0.0)) {
        /* First data: the range is exactly [xmin, xmax]; a single value gets a small
         * range around it so that the width is positive. */
        double lo = xmin, span = (double)xmax - (double)xmin;
        if (!(span > 0.0)) {
            double mag = fabs((double)xmin);
            span = mag > 0.0 ? mag * 0x1p-10 : 0x1p-40;
            lo = (double)xmin - span / 2.0;
        }
        h->lo = lo;
        h->width = span / (double)OQ_HIST_BINS;
    } else {
        oq_histogram_grow(h, xmin, xmax);
    }
    /* multiply by the reciprocal: a value within rounding of an edge may land in the
     * neighbouring bin, which changes no count */
    const double lo = h->lo, inv = 1.0 / h->width;
    uint64_t added = 0;
    int64_t i = 0;
    if (n >= 4096) {
        /* four partial histograms, one per element mod 4: runs of equal values (the zeros
         * after a Relu) then update four counters in turn instead of one, which the CPU
         * cannot overlap; the same bins, summed exactly */
        static _Thread_local uint32_t part[4][OQ_HIST_BINS]; /* zero between calls */
        for (; i < n;) {
            int64_t end = n - i > ((int64_t)1 << 30) ? i + ((int64_t)1 << 30) : n; /* uint32 counts */
            end -= (end - i) % 4;
            if (end == i)
                break;
#ifdef OQ_OBS_AVX2
            if (use_avx2())
                i = bin4_avx2(x, i, end, lo, inv, part);
#endif
            for (; i < end; i += 4)
                for (int u = 0; u < 4; u++) {
                    float v = x[i + u];
                    double t = ((double)v - lo) * inv;
                    int k = !(t > 0.0) ? 0 : (t >= (double)(OQ_HIST_BINS - 1) ? OQ_HIST_BINS - 1 : (int)t);
                    part[u][k] += isfinite(v); /* NaN: bin 0, not counted */
                }
            for (int b = 0; b < OQ_HIST_BINS; b++) {
                uint64_t c = (uint64_t)part[0][b] + part[1][b] + part[2][b] + part[3][b];
                h->counts[b] += c;
                added += c;
                part[0][b] = part[1][b] = part[2][b] = part[3][b] = 0;
            }
        }
    }
    for (; i < n; i++) {
        float v = x[i];
        if (!isfinite(v))
            continue;
        double t = ((double)v - lo) * inv;
        int k = t <= 0.0 ? 0 : (t >= (double)(OQ_HIST_BINS - 1) ? OQ_HIST_BINS - 1 : (int)t);
        h->counts[k]++;
        added++;
    }
    h->total += added;
}

static void nonfinite_message(oq_diag *d, const char *what, const oq_nonfinite *nf)
{
    oq_diag_error(d, OQ_ERR_NUMERIC,
                  "%s%s%" PRIu64 " NaN and %" PRIu64 " Inf value(s), first at element %" PRId64,
                  what ? what : "", what ? ": " : "", nf->nan_count, nf->inf_count,
                  nf->first_index);
}

oq_status oq_observer_update(oq_observer *o, const float *x, int64_t n, oq_nonfinite *nf,
                             const char *what, oq_diag *d)
{
    oq_nonfinite local = {0, 0, -1};
    float bmin = FLT_MAX, bmax = -FLT_MAX;
    uint64_t finite = 0, zeros = 0;
    if (n < 0 || (n > 0 && !x))
        return oq_diag_error(d, OQ_ERR_USAGE, "%s%sobserver update with %" PRId64 " values",
                             what ? what : "", what ? ": " : "", n);
    /* Fast pass (no branches on the data): min, max, zeros and whether anything is
     * non-finite. Only when something is, the careful pass below runs. */
    int bad = 0;
    int64_t i0 = 0;
#ifdef OQ_OBS_AVX2
    if (n >= 64 && use_avx2())
        i0 = scan_avx2(x, n, &bmin, &bmax, &zeros, &bad);
#endif
    for (int64_t i = i0; i < n; i++) {
        float v = x[i];
        bmin = v < bmin ? v : bmin;
        bmax = v > bmax ? v : bmax;
        bad |= !(fabsf(v) <= FLT_MAX);
        zeros += (v == 0.0f);
    }
    finite = (uint64_t)n;
    if (bad) {
        bmin = FLT_MAX;
        bmax = -FLT_MAX;
        finite = 0;
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            if (isfinite(v)) {
                if (v < bmin)
                    bmin = v;
                if (v > bmax)
                    bmax = v;
                finite++;
            } else {
                if (isnan(v))
                    local.nan_count++;
                else
                    local.inf_count++;
                if (local.first_index < 0)
                    local.first_index = i;
            }
        }
    }
    /* a zero extreme is +0 whatever the order the values were met in (-0 + 0 is +0) */
    bmin += 0.0f;
    bmax += 0.0f;
    if (nf)
        *nf = local;
    o->nan_count += local.nan_count;
    o->inf_count += local.inf_count;
    if (finite) {
        if (!o->initialized) {
            o->min = bmin;
            o->max = bmax;
            o->avg_min = bmin;
            o->avg_max = bmax;
            o->initialized = true;
        } else {
            if (bmin < o->min)
                o->min = bmin;
            if (bmax > o->max)
                o->max = bmax;
            double c = o->averaging_constant;
            o->avg_min = (float)((double)o->avg_min + c * ((double)bmin - (double)o->avg_min));
            o->avg_max = (float)((double)o->avg_max + c * ((double)bmax - (double)o->avg_max));
        }
        o->count += finite;
        o->zero_count += zeros;
        o->updates++;
        if (o->kind == OQ_OBSERVER_HISTOGRAM)
            oq_histogram_add(&o->hist, x, n, bmin, bmax);
    }
    if ((local.nan_count || local.inf_count) && o->nan_policy == OQ_NAN_ERROR) {
        nonfinite_message(d, what, &local);
        return OQ_ERR_NUMERIC;
    }
    return OQ_OK;
}

oq_status oq_observer_merge(oq_observer *o, const oq_observer *other, oq_diag *d)
{
    if (o->kind != other->kind)
        return oq_diag_error(d, OQ_ERR_USAGE, "cannot merge observers of different kinds");
    o->nan_count += other->nan_count;
    o->inf_count += other->inf_count;
    if (!other->initialized)
        return OQ_OK;
    if (!o->initialized) { /* take other's statistics, keep our own NaN/Inf counts */
        uint64_t nn = o->nan_count, ni = o->inf_count;
        oq_nan_policy pol = o->nan_policy;
        double c = o->averaging_constant;
        *o = *other;
        o->nan_count = nn;
        o->inf_count = ni;
        o->nan_policy = pol;
        o->averaging_constant = c;
        return OQ_OK;
    }
    if (other->min < o->min)
        o->min = other->min;
    if (other->max > o->max)
        o->max = other->max;
    double wa = (double)o->updates, wb = (double)other->updates;
    o->avg_min = (float)((o->avg_min * wa + other->avg_min * wb) / (wa + wb));
    o->avg_max = (float)((o->avg_max * wa + other->avg_max * wb) / (wa + wb));
    o->count += other->count;
    o->zero_count += other->zero_count;
    o->updates += other->updates;
    if (o->kind == OQ_OBSERVER_HISTOGRAM && other->hist.width > 0.0) {
        const oq_histogram *s = &other->hist;
        oq_histogram *h = &o->hist;
        oq_histogram_grow(h, s->lo, s->lo + (double)OQ_HIST_BINS * s->width);
        /* Each source bin goes, whole, to the bin holding its centre. */
        for (int i = 0; i < OQ_HIST_BINS; i++) {
            if (!s->counts[i])
                continue;
            h->counts[hist_index(h, s->lo + ((double)i + 0.5) * s->width)] += s->counts[i];
            h->total += s->counts[i];
        }
    }
    return OQ_OK;
}

bool oq_observer_minmax(const oq_observer *o, float *rmin, float *rmax)
{
    if (!o->initialized) {
        *rmin = *rmax = 0.0f;
        return false;
    }
    if (o->averaging_constant > 0.0) {
        *rmin = o->avg_min;
        *rmax = o->avg_max;
    } else {
        *rmin = o->min;
        *rmax = o->max;
    }
    return true;
}

/* dims = [outer..., ch, inner...] around `axis` (negative counts from the end). A bad
 * axis is OQ_ERR_USAGE, a bad shape `bad_shape`, both naming w. */
static oq_status channel_split(const int64_t *dims, size_t rank, int axis, int64_t *outer, int64_t *ch,
                               int64_t *inner, oq_status bad_shape, const char *w, oq_diag *d)
{
    if (rank == 0 || axis < -(int)rank || axis >= (int)rank)
        return oq_diag_error(d, OQ_ERR_USAGE, "%s: axis %d is out of range for rank %zu", w, axis, rank);
    if (axis < 0)
        axis += (int)rank;
    *outer = oq_dims_numel(dims, (size_t)axis);
    *ch = dims[axis];
    *inner = oq_dims_numel(dims + axis + 1, rank - (size_t)axis - 1);
    if (*outer < 0 || *ch < 0 || *inner < 0 || oq_dims_numel(dims, rank) < 0)
        return oq_diag_error(d, bad_shape, "%s: bad shape", w);
    return OQ_OK;
}

oq_status oq_minmax_per_channel(const float *x, const int64_t *dims, size_t rank, int axis,
                                float *mins, float *maxs, const char *what, oq_diag *d)
{
    const char *w = what ? what : "weight";
    int64_t outer, ch, inner;
    oq_status st = channel_split(dims, rank, axis, &outer, &ch, &inner, OQ_ERR_INVALID, w, d);
    if (st != OQ_OK)
        return st;
    for (int64_t c = 0; c < ch; c++) {
        mins[c] = 0.0f;
        maxs[c] = 0.0f;
    }
    if (outer == 0 || inner == 0)
        return OQ_OK;
    for (int64_t c = 0; c < ch; c++) {
        float mn = FLT_MAX, mx = -FLT_MAX;
        for (int64_t o = 0; o < outer; o++) {
            const float *p = x + (o * ch + c) * inner;
            for (int64_t i = 0; i < inner; i++) {
                float v = p[i];
                if (!isfinite(v))
                    return oq_diag_error(d, OQ_ERR_NUMERIC,
                                         "%s: %s at element %" PRId64 " (channel %" PRId64 ")",
                                         w, isnan(v) ? "NaN" : "Inf", (o * ch + c) * inner + i,
                                         c);
                if (v < mn)
                    mn = v;
                if (v > mx)
                    mx = v;
            }
        }
        mins[c] = mn;
        maxs[c] = mx;
    }
    return OQ_OK;
}

oq_status oq_absmax_per_channel_update(float *acc, const float *x, const int64_t *dims, size_t rank, int axis,
                                       uint64_t *nonfinite, const char *what, oq_diag *d)
{
    int64_t outer, ch, inner;
    oq_status st = channel_split(dims, rank, axis, &outer, &ch, &inner, OQ_ERR_USAGE, what ? what : "tensor", d);
    if (st != OQ_OK)
        return st;
    uint64_t bad = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < ch; c++) {
            const float *p = x + (o * ch + c) * inner;
            float m = acc[c];
            for (int64_t i = 0; i < inner; i++) {
                float a = fabsf(p[i]);
                if (!(a <= FLT_MAX)) /* NaN or Inf */
                    bad++;
                else if (a > m)
                    m = a;
            }
            acc[c] = m;
        }
    if (nonfinite)
        *nonfinite += bad;
    return OQ_OK;
}
