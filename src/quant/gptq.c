/* Weight-only blockwise quantization: round to nearest and GPTQ. include/onnxq/gptq.h,
 * docs/quantize.md "Weight-only". */
#include "onnxq/gptq.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnxq/quant.h"

int64_t oq_wq_n_blocks(int64_t K, int64_t block)
{
    return block > 0 ? (K + block - 1) / block : 0;
}

static bool wq_range(const oq_wq_spec *s, int32_t *qmin, int32_t *qmax)
{
    if (s->dtype != OQ_DTYPE_INT4 && s->dtype != OQ_DTYPE_UINT4 && s->dtype != OQ_DTYPE_INT8 &&
        s->dtype != OQ_DTYPE_UINT8)
        return false;
    return oq_qrange(s->dtype, false, qmin, qmax) == OQ_OK;
}

static float storable_scale(float sc, bool half)
{
    if (!(sc > 0.0f) || !isfinite(sc))
        sc = 1.0f;
    if (!half)
        return sc < FLT_MIN ? FLT_MIN : sc;
    if (sc > 65504.0f)
        sc = 65504.0f;
    float h = oq_half_to_float(oq_float_to_half(sc));
    return h > 0.0f ? h : 0x1p-24f; /* the smallest float16 subnormal */
}

/* Parameters of a group whose values lie in [mn, mx] (symmetric: the scale may be
 * negative). */
static void params_of_range(double mn, double mx, const oq_wq_spec *s, float *scale, int32_t *zp)
{
    int32_t qmin = 0, qmax = 0;
    wq_range(s, &qmin, &qmax);
    if (s->symmetric) {
        /* the value of largest magnitude maps to the type's lowest level (int4: -8), as
         * onnxruntime's MatMulNBits quantizer does: a positive one gets a negative scale,
         * so that either sign uses all 8 steps on its side (with max(-min/8, max/7) a
         * positive extreme had 7); the trained decoder's perplexity: RTN32 +0.41 ->
         * +0.38 %, RTN128 +0.62 -> +0.50 %, AWQ128 +0.38 -> +0.27 % (docs/quantize.md) */
        int32_t mid = qmin < 0 ? 0 : (qmin + qmax + 1) / 2;
        double lo = (double)(qmin - mid); /* int4: -8 */
        double ext = -mn >= mx ? mn : mx;
        float a = storable_scale((float)fabs(ext / lo), s->half_scales);
        *scale = ext > 0 ? -a : a;
        *zp = mid;
        return;
    }
    double lo = mn < 0 ? mn : 0.0, hi = mx > 0 ? mx : 0.0;
    *scale = storable_scale((float)((hi - lo) / ((double)qmax - qmin)), s->half_scales);
    double z = (double)qmin - nearbyint(lo / (double)*scale);
    *zp = (int32_t)(z < qmin ? qmin : z > qmax ? qmax : z);
}

void oq_wq_group_params(const float *v, int64_t n, int64_t stride, const oq_wq_spec *s, float *scale,
                        int32_t *zero_point)
{
    double mn = 0, mx = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = v[i * stride];
        if (i == 0 || x < mn)
            mn = x;
        if (i == 0 || x > mx)
            mx = x;
    }
    params_of_range(mn, mx, s, scale, zero_point);
}

static oq_status check_args(const float *w, int64_t K, int64_t N, const oq_wq_spec *s, oq_diag *d)
{
    int32_t a, b;
    if (!wq_range(s, &a, &b))
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "weight-only: dtype %s (int4, uint4, int8, uint8)",
                             oq_dtype_name(s->dtype));
    if (K <= 0 || N <= 0 || s->block <= 0)
        return oq_diag_error(d, OQ_ERR_INVALID, "weight-only: bad shape [%" PRId64 ", %" PRId64 "] or block %" PRId64,
                             K, N, s->block);
    for (int64_t i = 0; i < K * N; i++)
        if (!isfinite(w[i]))
            return oq_diag_error(d, OQ_ERR_NUMERIC, "weight-only: %s at element %" PRId64,
                                 isnan(w[i]) ? "NaN" : "Inf", i);
    return OQ_OK;
}

oq_status oq_wq_rtn(const float *w, int64_t K, int64_t N, const oq_wq_spec *s, int32_t *q, float *scales,
                    int32_t *zero_points, oq_diag *d)
{
    oq_status st = check_args(w, K, N, s, d);
    if (st != OQ_OK)
        return st;
    int32_t qmin, qmax;
    wq_range(s, &qmin, &qmax);
    int64_t nb = oq_wq_n_blocks(K, s->block);
    for (int64_t b = 0; b < nb; b++) {
        int64_t k0 = b * s->block, k1 = k0 + s->block < K ? k0 + s->block : K;
        for (int64_t n = 0; n < N; n++) {
            float sc;
            int32_t zp;
            oq_wq_group_params(w + k0 * N + n, k1 - k0, N, s, &sc, &zp);
            scales[b * N + n] = sc;
            zero_points[b * N + n] = zp;
            for (int64_t k = k0; k < k1; k++)
                q[k * N + n] = oq_quantize_value(w[k * N + n], sc, zp, qmin, qmax);
        }
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ GPTQ ------- */

oq_status oq_gptq_stats_init(oq_gptq_stats *h, int64_t K, oq_diag *d)
{
    memset(h, 0, sizeof *h);
    if (K <= 0 || K > (int64_t)1 << 16)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "gptq: reduction size %" PRId64 " out of range (1..65536)", K);
    h->xtx = calloc((size_t)(K * K), sizeof(double));
    if (!h->xtx)
        return oq_diag_error(d, OQ_ERR_NOMEM, "gptq: out of memory for a %" PRId64 "x%" PRId64 " Hessian", K, K);
    h->K = K;
    return OQ_OK;
}

oq_status oq_gptq_stats_add(oq_gptq_stats *h, const float *x, int64_t rows, oq_diag *d)
{
    enum { RB = 8 }; /* rows per pass over H: H (K*K doubles) is read once per RB rows */
    int64_t K = h->K;
    double *r = malloc((size_t)(K * RB) * sizeof(double));
    if (!r)
        return oq_diag_error(d, OQ_ERR_NOMEM, "gptq: out of memory");
    for (int64_t t0 = 0; t0 < rows; t0 += RB) {
        int64_t nr = rows - t0 < RB ? rows - t0 : RB;
        for (int64_t t = 0; t < nr; t++) {
            const float *xr = x + (t0 + t) * K;
            for (int64_t i = 0; i < K; i++) {
                if (!isfinite(xr[i])) {
                    free(r);
                    return oq_diag_error(d, OQ_ERR_NUMERIC, "gptq: %s in a layer input (row %" PRId64 ", element %" PRId64 ")",
                                         isnan(xr[i]) ? "NaN" : "Inf", t0 + t, i);
                }
                r[t * K + i] = xr[i];
            }
        }
        /* row i of H += sum_t r_t[i] * r_t[i..K): contiguous in j, so it vectorizes */
        const double *r0 = r, *r1 = r + K, *r2 = r + 2 * K, *r3 = r + 3 * K, *r4 = r + 4 * K, *r5 = r + 5 * K,
                     *r6 = r + 6 * K, *r7 = r + 7 * K;
        for (int64_t i = 0; i < K; i++) {
            double *hr = h->xtx + i * K;
            if (nr == RB) {
                double a0 = r0[i], a1 = r1[i], a2 = r2[i], a3 = r3[i], a4 = r4[i], a5 = r5[i], a6 = r6[i], a7 = r7[i];
                if (a0 == 0 && a1 == 0 && a2 == 0 && a3 == 0 && a4 == 0 && a5 == 0 && a6 == 0 && a7 == 0)
                    continue;
                for (int64_t j = i; j < K; j++)
                    hr[j] += a0 * r0[j] + a1 * r1[j] + a2 * r2[j] + a3 * r3[j] + a4 * r4[j] + a5 * r5[j] +
                             a6 * r6[j] + a7 * r7[j];
            } else {
                for (int64_t t = 0; t < nr; t++) {
                    const double *rt = r + t * K;
                    double a = rt[i];
                    if (a != 0.0)
                        for (int64_t j = i; j < K; j++)
                            hr[j] += a * rt[j];
                }
            }
        }
    }
    h->rows += (uint64_t)rows;
    free(r);
    return OQ_OK;
}

void oq_gptq_stats_free(oq_gptq_stats *h)
{
    free(h->xtx);
    memset(h, 0, sizeof *h);
}

/* In place: a (K x K, symmetric positive definite) -> its lower Cholesky factor L.
 * false when a pivot is not positive (or lost to rounding: below 1e-12 of its diagonal
 * entry, a singular matrix that rounding would let through with a huge inverse). */
/* sum_p x[p] y[p], p < n, in four independent sums (one running sum is bound by the
 * latency of each addition) */
static double dot4(const double *x, const double *y, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t p = 0;
    for (; p + 4 <= n; p += 4) {
        s0 += x[p] * y[p];
        s1 += x[p + 1] * y[p + 1];
        s2 += x[p + 2] * y[p + 2];
        s3 += x[p + 3] * y[p + 3];
    }
    for (; p < n; p++)
        s0 += x[p] * y[p];
    return (s0 + s1) + (s2 + s3);
}

static bool cholesky_lower(double *a, int64_t K)
{
    for (int64_t j = 0; j < K; j++) {
        double d0 = a[j * K + j], s = d0 - dot4(a + j * K, a + j * K, j);
        if (!(s > 1e-12 * d0) || !isfinite(s))
            return false;
        double l = sqrt(s);
        a[j * K + j] = l;
        for (int64_t i = j + 1; i < K; i++)
            a[i * K + j] = (a[i * K + j] - dot4(a + i * K, a + j * K, j)) / l;
        for (int64_t i = 0; i < j; i++)
            a[i * K + j] = 0.0;
    }
    return true;
}

/* u = the upper Cholesky factor of a^-1 (a^-1 = u^T u), a positive definite; a is
 * destroyed. false when a is not positive definite. With J the exchange matrix (indices
 * reversed): J a J = L L^T (Cholesky), so a = V V^T with V = J L J upper triangular, and
 * a^-1 = (V^-1)^T V^-1: u = V^-1 = J L^-1 J. One Cholesky and one triangular inverse,
 * both reading rows (the textbook route, chol -> inverse -> chol of the inverse, reads
 * columns of K x K matrices: for K = 5632 minutes of cache misses). */
static bool chol_inverse_upper(double *a, double *u, int64_t K)
{
    for (int64_t i = 0; i < K; i++) /* a <- J a J (a is symmetric: its upper triangle) */
        for (int64_t j = i; j < K; j++) {
            int64_t ri = K - 1 - i, rj = K - 1 - j; /* rj <= ri */
            u[i * K + j] = u[j * K + i] = a[rj * K + ri];
        }
    memcpy(a, u, (size_t)(K * K) * sizeof(double));
    if (!cholesky_lower(a, K))
        return false;
    /* X = L^-1 (lower) into u, row by row: X[i][0..i] = (e_i - sum_{p<i} L[i][p] X[p]) / L[i][i] */
    memset(u, 0, (size_t)(K * K) * sizeof(double));
    for (int64_t i = 0; i < K; i++) {
        double *xi = u + i * K;
        for (int64_t p = 0; p < i; p++) {
            double l = a[i * K + p];
            if (l == 0.0)
                continue;
            const double *xp = u + p * K;
            for (int64_t c = 0; c <= p; c++)
                xi[c] -= l * xp[c];
        }
        xi[i] += 1.0;
        double inv = 1.0 / a[i * K + i];
        for (int64_t c = 0; c <= i; c++)
            xi[c] *= inv;
    }
    /* u <- J X J (upper), through a */
    for (int64_t i = 0; i < K; i++)
        for (int64_t j = 0; j < K; j++)
            a[i * K + j] = u[(K - 1 - i) * K + (K - 1 - j)];
    memcpy(u, a, (size_t)(K * K) * sizeof(double));
    return true;
}

oq_status oq_gptq_quantize(const float *w, int64_t K, int64_t N, const oq_wq_spec *s, const oq_gptq_stats *h,
                           double damp, int32_t *q, float *scales, int32_t *zero_points, double *damp_used,
                           oq_diag *d)
{
    return oq_gptq_quantize_ordered(w, K, N, s, h, damp, false, q, scales, zero_points, damp_used, d);
}

/* act order: the features by decreasing H[k][k] (ties: by index) */
static int64_t *act_order_perm(const double *H, int64_t K)
{
    int64_t *p = malloc((size_t)K * sizeof(int64_t));
    if (!p)
        return NULL;
    for (int64_t i = 0; i < K; i++)
        p[i] = i;
    for (int64_t i = 1; i < K; i++) { /* insertion sort keeps ties in index order */
        int64_t v = p[i], j = i;
        while (j > 0 && H[p[j - 1] * K + p[j - 1]] < H[v * K + v]) {
            p[j] = p[j - 1];
            j--;
        }
        p[j] = v;
    }
    return p;
}

oq_status oq_gptq_quantize_ordered(const float *w, int64_t K, int64_t N, const oq_wq_spec *s, const oq_gptq_stats *h,
                                   double damp, bool act_order, int32_t *q, float *scales, int32_t *zero_points,
                                   double *damp_used, oq_diag *d)
{
    int64_t *perm = NULL;
    oq_status st = check_args(w, K, N, s, d);
    if (st != OQ_OK)
        return st;
    if (!h || h->K != K || h->rows == 0)
        return oq_diag_error(d, OQ_ERR_USAGE, "gptq: no input statistics for a reduction size of %" PRId64, K);
    if (!(damp >= 0.0) || !isfinite(damp))
        return oq_diag_error(d, OQ_ERR_USAGE, "gptq: dampening %g must be >= 0", damp);
    int32_t qmin, qmax;
    wq_range(s, &qmin, &qmax);
    int64_t lazy = s->block > 128 ? s->block : 128;
    size_t kk = (size_t)(K * K);
    double *H = malloc(kk * sizeof(double)), *A = malloc(kk * sizeof(double)), *U = malloc(kk * sizeof(double));
    double *W = malloc((size_t)(K * N) * sizeof(double)), *E = malloc((size_t)(lazy * N) * sizeof(double));
    if (!H || !A || !U || !W || !E) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "gptq: out of memory");
        goto done;
    }
    double f = 2.0 / (double)h->rows, mean = 0.0;
    for (int64_t i = 0; i < K; i++)
        for (int64_t j = i; j < K; j++)
            H[i * K + j] = H[j * K + i] = f * h->xtx[i * K + j];
    for (int64_t i = 0; i < K; i++) {
        if (H[i * K + i] == 0.0)
            H[i * K + i] = 1.0; /* a feature never seen: its own row, nothing to spread */
        mean += H[i * K + i];
    }
    mean /= (double)K;
    if (act_order) { /* H and W in the order of perm; block parameters fixed beforehand
                      * from W's contiguous blocks (static groups: the stored layout) */
        perm = act_order_perm(H, K);
        if (!perm) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "gptq: out of memory");
            goto done;
        }
        for (int64_t i = 0; i < K; i++)
            for (int64_t j = 0; j < K; j++)
                A[i * K + j] = H[perm[i] * K + perm[j]];
        memcpy(H, A, kk * sizeof(double));
        int64_t nb = oq_wq_n_blocks(K, s->block);
        for (int64_t b = 0; b < nb; b++) {
            int64_t k0 = b * s->block, n0 = s->block < K - k0 ? s->block : K - k0;
            for (int64_t n = 0; n < N; n++)
                oq_wq_group_params(w + k0 * N + n, n0, N, s, &scales[b * N + n], &zero_points[b * N + n]);
        }
    }
    bool ok = false;
    double fac = damp;
    for (int attempt = 0; attempt < 3 && !ok; attempt++, fac *= 10.0) {
        memcpy(A, H, kk * sizeof(double));
        for (int64_t i = 0; i < K; i++)
            A[i * K + i] += fac * mean;
        ok = chol_inverse_upper(A, U, K);
        if (ok && damp_used)
            *damp_used = fac;
    }
    if (!ok) {
        st = oq_diag_error(d, OQ_ERR_NUMERIC, "gptq: the input Hessian is not positive definite even with "
                                              "dampening %g (give more calibration data or a larger dampening)", fac / 10.0);
        goto done;
    }
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++)
            W[k * N + n] = w[(perm ? perm[k] : k) * N + n];
    for (int64_t i1 = 0; i1 < K; i1 += lazy) {
        int64_t i2 = i1 + lazy < K ? i1 + lazy : K;
        for (int64_t k = i1; k < i2; k++) {
            int64_t ko = perm ? perm[k] : k; /* the feature in W's order */
            int64_t b = ko / s->block;
            if (!perm && k % s->block == 0) {
                int64_t k1 = k + s->block < K ? k + s->block : K;
                for (int64_t n = 0; n < N; n++) {
                    double mn = W[k * N + n], mx = mn;
                    for (int64_t j = k + 1; j < k1; j++) {
                        double x = W[j * N + n];
                        mn = x < mn ? x : mn;
                        mx = x > mx ? x : mx;
                    }
                    params_of_range(mn, mx, s, &scales[b * N + n], &zero_points[b * N + n]);
                }
            }
            double dk = U[k * K + k];
            double *e = E + (k - i1) * N;
            for (int64_t n = 0; n < N; n++) {
                float sc = scales[b * N + n];
                int32_t zp = zero_points[b * N + n];
                int32_t qv = oq_quantize_value((float)W[k * N + n], sc, zp, qmin, qmax);
                q[ko * N + n] = qv;
                float dq = oq_dequantize_value(qv, sc, zp);
                if (s->half_scales) /* what a DequantizeLinear with float16 scales outputs */
                    dq = oq_half_to_float(oq_float_to_half(dq));
                e[n] = (W[k * N + n] - (double)dq) / dk;
            }
            for (int64_t j = k + 1; j < i2; j++) {
                double u = U[k * K + j];
                if (u != 0.0)
                    for (int64_t n = 0; n < N; n++)
                        W[j * N + n] -= u * e[n];
            }
        }
        for (int64_t j = i2; j < K; j++)
            for (int64_t k = i1; k < i2; k++) {
                double u = U[k * K + j];
                const double *e = E + (k - i1) * N;
                if (u != 0.0)
                    for (int64_t n = 0; n < N; n++)
                        W[j * N + n] -= u * e[n];
            }
    }
done:
    free(perm);
    free(H);
    free(A);
    free(U);
    free(W);
    free(E);
    return st;
}
