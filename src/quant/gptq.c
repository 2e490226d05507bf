/* Weight-only blockwise quantization: round to nearest and GPTQ. include/onnxq/gptq.h,
 * docs/weight-only.md. */
#include "onnxq/gptq.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnxq/quant.h"
#include "quant/quant-impl.h"

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

oq_status oq_quant_sgemm(oq_pool *pool, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                         const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                         int64_t ldc)
{
    oq_kctx k;
    memset(&k, 0, sizeof k);
    k.pool = pool;
    return oq_k_sgemm(&k, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

typedef struct acc_job {
    double *xtx;
    const float *part;
    int64_t K;
} acc_job;

static void acc_rows(void *arg, int64_t i0, int64_t i1, int w)
{
    acc_job *j = arg;
    (void)w;
    for (int64_t i = i0; i < i1; i++) {
        double *h = j->xtx + i * j->K;
        const float *g = j->part + i * j->K;
        for (int64_t c = i; c < j->K; c++)
            h[c] += g[c];
    }
}

oq_status oq_gptq_stats_add(oq_gptq_stats *h, const float *x, int64_t rows, oq_diag *d)
{
    int64_t K = h->K;
    for (int64_t i = 0; i < rows * K; i++)
        if (!isfinite(x[i]))
            return oq_diag_error(d, OQ_ERR_NUMERIC, "gptq: %s in a layer input (row %" PRId64 ", element %" PRId64 ")",
                                 isnan(x[i]) ? "NaN" : "Inf", i / K, i % K);
    if (rows <= 0)
        return OQ_OK;
    if (!h->pool && !(h->pool = oq_pool_new(oq_cpu_count())))
        return oq_diag_error(d, OQ_ERR_NOMEM, "gptq: cannot start threads");
    if (!h->part && !(h->part = malloc((size_t)(K * K) * sizeof(float))))
        return oq_diag_error(d, OQ_ERR_NOMEM, "gptq: out of memory for a %" PRId64 "x%" PRId64 " product", K, K);
    /* the upper triangle, a band of rows at a time: x[:, i0:i1]^T x[:, i0:] (about half a
     * full product; the rest of each band's square is computed and not used) */
    enum { BAND = 256 };
    for (int64_t i0 = 0; i0 < K; i0 += BAND) {
        int64_t ib = K - i0 < BAND ? K - i0 : BAND;
        oq_status st = oq_quant_sgemm(h->pool, true, false, ib, K - i0, rows, 1.0f, x + i0, K, x + i0, K, 0.0f,
                             h->part + i0 * K + i0, K);
        if (st != OQ_OK)
            return oq_diag_error(d, st, "gptq: out of memory");
    }
    acc_job j = {h->xtx, h->part, K};
    oq_pool_for(h->pool, K, 64, acc_rows, &j);
    h->rows += (uint64_t)rows;
    return OQ_OK;
}

void oq_gptq_stats_free(oq_gptq_stats *h)
{
    free(h->xtx);
    free(h->part);
    if (h->pool)
        oq_pool_free(h->pool);
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

/* Inverse of a lower triangular n x n matrix l (double, row-major) into x (lower). */
static void tri_inverse_lower(const double *l, double *x, int64_t n)
{
    memset(x, 0, (size_t)(n * n) * sizeof(double));
    for (int64_t i = 0; i < n; i++) {
        double *xi = x + i * n;
        for (int64_t p = 0; p < i; p++) {
            double v = l[i * n + p];
            if (v == 0.0)
                continue;
            const double *xp = x + p * n;
            for (int64_t c = 0; c <= p; c++)
                xi[c] -= v * xp[c];
        }
        xi[i] += 1.0;
        double inv = 1.0 / l[i * n + i];
        for (int64_t c = 0; c <= i; c++)
            xi[c] *= inv;
    }
}

enum { CB = 128 }; /* the block of the blocked factorizations */

/* u = the upper Cholesky factor of a^-1 (a^-1 = u^T u), a (K x K, float32, symmetric
 * positive definite) destroyed; false when a is not positive definite. With J the exchange
 * matrix (indices reversed): J a J = L L^T (Cholesky), so a = V V^T with V = J L J upper
 * triangular, and a^-1 = (V^-1)^T V^-1: u = V^-1 = J L^-1 J. Blocked: each diagonal block
 * factored and inverted in double, the panels and the trailing updates as float32 GEMMs
 * (the K^3 part); then L^-1 block row by block row, X[I, :i0] = -L_II^-1 (L[I, :i0]
 * X[:i0, :i0]), also GEMMs. float32 as in the GPTQ reference implementation; K = 5632 in a
 * few seconds where the row-by-row double version took a minute. */
static bool chol_inverse_upper(float *a, float *u, int64_t K, oq_pool *pool)
{
    int64_t nbk = (K + CB - 1) / CB;
    double *l11 = malloc(sizeof(double) * CB * CB), *x11 = malloc(sizeof(double) * CB * CB);
    float *linv = malloc(sizeof(float) * (size_t)(nbk * CB * CB)); /* each diagonal block's inverse */
    float *t = malloc(sizeof(float) * (size_t)(K * CB));
    bool ok = l11 && x11 && linv && t;
    for (int64_t i = 0; ok && i < K; i++) /* u <- J a J (a is symmetric) */
        for (int64_t j = 0; j < K; j++)
            u[i * K + j] = a[(K - 1 - i) * K + (K - 1 - j)];
    float *L = u; /* factored in place, lower */
    for (int64_t bi = 0; ok && bi < nbk; bi++) {
        int64_t k0 = bi * CB, kb = K - k0 < CB ? K - k0 : CB, k1 = k0 + kb, rest = K - k1;
        for (int64_t i = 0; i < kb; i++)
            for (int64_t j = 0; j < kb; j++)
                l11[i * kb + j] = L[(k0 + i) * K + k0 + j];
        if (!cholesky_lower(l11, kb)) {
            ok = false;
            break;
        }
        tri_inverse_lower(l11, x11, kb);
        float *li = linv + bi * CB * CB;
        for (int64_t i = 0; i < kb; i++)
            for (int64_t j = 0; j < kb; j++) {
                L[(k0 + i) * K + k0 + j] = (float)l11[i * kb + j];
                li[i * kb + j] = (float)x11[i * kb + j];
            }
        if (rest == 0)
            break;
        /* panel: L21 = A21 L11^-T */
        ok = oq_quant_sgemm(pool, false, true, rest, kb, kb, 1.0f, L + k1 * K + k0, K, li, kb, 0.0f, t, kb) == OQ_OK;
        for (int64_t i = 0; ok && i < rest; i++)
            memcpy(L + (k1 + i) * K + k0, t + i * kb, (size_t)kb * sizeof(float));
        /* trailing: A22 -= L21 L21^T */
        ok = ok && oq_quant_sgemm(pool, false, true, rest, rest, kb, -1.0f, L + k1 * K + k0, K, L + k1 * K + k0, K, 1.0f,
                         L + k1 * K + k1, K) == OQ_OK;
    }
    /* X = L^-1 into a, block row by block row */
    for (int64_t bi = 0; ok && bi < nbk; bi++) {
        int64_t i0 = bi * CB, kb = K - i0 < CB ? K - i0 : CB;
        const float *li = linv + bi * CB * CB;
        for (int64_t i = 0; i < kb; i++) {
            memset(a + (i0 + i) * K, 0, (size_t)K * sizeof(float));
            memcpy(a + (i0 + i) * K + i0, li + i * kb, (size_t)kb * sizeof(float));
        }
        if (i0 == 0)
            continue;
        float *tt = malloc(sizeof(float) * (size_t)(kb * i0));
        ok = tt && oq_quant_sgemm(pool, false, false, kb, i0, i0, 1.0f, L + i0 * K, K, a, K, 0.0f, tt, i0) == OQ_OK &&
             oq_quant_sgemm(pool, false, false, kb, i0, kb, -1.0f, li, kb, tt, i0, 0.0f, a + i0 * K, K) == OQ_OK;
        free(tt);
    }
    for (int64_t i = 0; ok && i < K; i++) /* u <- J X J (upper) */
        for (int64_t j = 0; j < K; j++)
            u[i * K + j] = a[(K - 1 - i) * K + (K - 1 - j)];
    free(l11);
    free(x11);
    free(linv);
    free(t);
    return ok;
}

/* GPTQ's update of the rows k+1 .. i2-1 of W (the rest of the lazy batch) by row k's
 * scaled errors e[N]: W[j] -= U[k][j] e */
static void spread_in_batch(float *W, const float *U, const float *e, int64_t K, int64_t N, int64_t k, int64_t i2)
{
    for (int64_t j = k + 1; j < i2; j++) {
        float u = U[k * K + j];
        if (u != 0.0f)
            for (int64_t n = 0; n < N; n++)
                W[j * N + n] -= u * e[n];
    }
}

/* ... and of the rows after the batch [i1, i2): W[i2:, :] -= U[i1:i2, i2:]^T E; false out of memory */
static bool spread_after_batch(oq_pool *pool, float *W, const float *U, const float *E, int64_t K, int64_t N,
                               int64_t i1, int64_t i2)
{
    return i2 >= K || oq_quant_sgemm(pool, true, false, K - i2, N, i2 - i1, -1.0f, U + i1 * K + i2, K, E, N, 1.0f,
                                     W + i2 * N, N) == OQ_OK;
}

/* H = 2/rows * xtx, full and symmetric (K x K doubles, malloc'ed; NULL out of memory), a
 * feature never seen (H[k][k] == 0) given 1 on the diagonal: its own row, nothing to
 * spread; *mean: the mean of the diagonal. */
static double *full_hessian(const oq_gptq_stats *h, double *mean)
{
    int64_t K = h->K;
    double *H = malloc((size_t)(K * K) * sizeof *H);
    if (!H)
        return NULL;
    double f = 2.0 / (double)h->rows;
    *mean = 0.0;
    for (int64_t i = 0; i < K; i++)
        for (int64_t j = i; j < K; j++)
            H[i * K + j] = H[j * K + i] = f * h->xtx[i * K + j];
    for (int64_t i = 0; i < K; i++) {
        if (H[i * K + i] == 0.0)
            H[i * K + i] = 1.0;
        *mean += H[i * K + i];
    }
    *mean /= (double)K;
    return H;
}

/* U = the upper Cholesky factor of (H + fac * mean * I)^-1 (A: K x K scratch), fac = damp,
 * then 10 and 100 times that while not positive definite; false when none is. *used: the
 * factor that worked (may be NULL). */
static bool damped_inverse(const double *H, int64_t K, double mean, double damp, float *A, float *U, oq_pool *pool,
                           double *used)
{
    double fac = damp;
    for (int attempt = 0; attempt < 3; attempt++, fac *= 10.0) {
        for (size_t i = 0; i < (size_t)(K * K); i++)
            A[i] = (float)H[i];
        for (int64_t i = 0; i < K; i++)
            A[i * K + i] = (float)(H[i * K + i] + fac * mean);
        if (chol_inverse_upper(A, U, K, pool)) {
            if (used)
                *used = fac;
            return true;
        }
    }
    return false;
}

/* The buffers of one GPTQ run: H (from full_hessian) and its diagonal's mean, A and U
 * (damped_inverse), W (the weights being rounded, K x N), E (a lazy batch of scaled
 * errors, lazy x N) and the thread pool. */
typedef struct gptq_work {
    int64_t K, N, lazy;
    double *H, mean;
    float *A, *U, *W, *E;
    oq_pool *pool;
} gptq_work;

static void work_free(gptq_work *g)
{
    if (g->pool)
        oq_pool_free(g->pool);
    free(g->H);
    free(g->A);
    free(g->U);
    free(g->W);
    free(g->E);
    memset(g, 0, sizeof *g);
}

/* false out of memory (nothing left allocated) */
static bool work_new(gptq_work *g, const oq_gptq_stats *h, int64_t K, int64_t N, int64_t lazy)
{
    size_t kk = (size_t)(K * K);
    memset(g, 0, sizeof *g);
    g->K = K;
    g->N = N;
    g->lazy = lazy;
    g->H = full_hessian(h, &g->mean);
    g->A = malloc(kk * sizeof(float));
    g->U = malloc(kk * sizeof(float));
    g->W = malloc((size_t)(K * N) * sizeof(float));
    g->E = malloc((size_t)(lazy * N) * sizeof(float));
    g->pool = oq_pool_new(oq_cpu_count());
    if (g->H && g->A && g->U && g->W && g->E && g->pool)
        return true;
    work_free(g);
    return false;
}

/* Rounds row k of g->W (in the caller's integers) and writes its scaled error
 * (W[k] - dequantized) / dk into e[N]. */
typedef void (*gptq_round_row)(void *ctx, const gptq_work *g, int64_t k, float dk, float *e);

/* GPTQ's sweep over the rows of g->W in order: each rounded by round_row, its error spread
 * over the rows after it (lazily, g->lazy rows at a time). false out of memory. */
static bool sweep(gptq_work *g, gptq_round_row round_row, void *ctx)
{
    int64_t K = g->K, N = g->N;
    for (int64_t i1 = 0; i1 < K; i1 += g->lazy) {
        int64_t i2 = i1 + g->lazy < K ? i1 + g->lazy : K;
        for (int64_t k = i1; k < i2; k++) {
            float *e = g->E + (k - i1) * N;
            round_row(ctx, g, k, g->U[k * K + k], e);
            spread_in_batch(g->W, g->U, e, K, N, k, i2);
        }
        if (!spread_after_batch(g->pool, g->W, g->U, g->E, K, N, i1, i2))
            return false;
    }
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

/* oq_gptq_quantize_ordered's rounding of a row: per-block parameters fitted when a block
 * starts (not act order: from the rows as the sweep has left them), then round to nearest */
typedef struct {
    const oq_wq_spec *s;
    const int64_t *perm; /* act order: row k is feature perm[k] of w */
    int32_t qmin, qmax, *q, *zero_points;
    float *scales;
} ordered_ctx;

static void ordered_row(void *user, const gptq_work *g, int64_t k, float dk, float *e)
{
    const ordered_ctx *c = user;
    const oq_wq_spec *s = c->s;
    int64_t K = g->K, N = g->N;
    const float *W = g->W;
    int64_t ko = c->perm ? c->perm[k] : k; /* the feature in W's order */
    int64_t b = ko / s->block;
    if (!c->perm && k % s->block == 0) {
        int64_t k1 = k + s->block < K ? k + s->block : K;
        for (int64_t n = 0; n < N; n++) {
            float mn = W[k * N + n], mx = mn;
            for (int64_t j = k + 1; j < k1; j++) {
                float x = W[j * N + n];
                mn = x < mn ? x : mn;
                mx = x > mx ? x : mx;
            }
            params_of_range(mn, mx, s, &c->scales[b * N + n], &c->zero_points[b * N + n]);
        }
    }
    for (int64_t n = 0; n < N; n++) {
        float sc = c->scales[b * N + n];
        int32_t zp = c->zero_points[b * N + n];
        int32_t qv = oq_quantize_value(W[k * N + n], sc, zp, c->qmin, c->qmax);
        c->q[ko * N + n] = qv;
        float dq = oq_dequantize_value(qv, sc, zp);
        if (s->half_scales) /* what a DequantizeLinear with float16 scales outputs */
            dq = oq_half_to_float(oq_float_to_half(dq));
        e[n] = (W[k * N + n] - dq) / dk;
    }
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
    ordered_ctx c = {s, NULL, 0, 0, q, zero_points, scales};
    wq_range(s, &c.qmin, &c.qmax);
    gptq_work g;
    if (!work_new(&g, h, K, N, s->block > 128 ? s->block : 128))
        return oq_diag_error(d, OQ_ERR_NOMEM, "gptq: out of memory");
    if (act_order) { /* H and W in the order of perm; block parameters fixed beforehand
                      * from W's contiguous blocks (static groups: the stored layout) */
        size_t kk = (size_t)(K * K);
        double *P = NULL;
        if (!(perm = act_order_perm(g.H, K)) || !(P = malloc(kk * sizeof(double)))) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "gptq: out of memory");
            goto done;
        }
        for (int64_t i = 0; i < K; i++)
            for (int64_t j = 0; j < K; j++)
                P[i * K + j] = g.H[perm[i] * K + perm[j]];
        free(g.H);
        g.H = P;
        int64_t nb = oq_wq_n_blocks(K, s->block);
        for (int64_t b = 0; b < nb; b++) {
            int64_t k0 = b * s->block, n0 = s->block < K - k0 ? s->block : K - k0;
            for (int64_t n = 0; n < N; n++)
                oq_wq_group_params(w + k0 * N + n, n0, N, s, &scales[b * N + n], &zero_points[b * N + n]);
        }
    }
    c.perm = perm;
    if (!damped_inverse(g.H, K, g.mean, damp, g.A, g.U, g.pool, damp_used)) {
        st = oq_diag_error(d, OQ_ERR_NUMERIC, "gptq: the input Hessian is not positive definite even with "
                                              "dampening %g (give more calibration data or a larger dampening)", damp * 100);
        goto done;
    }
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++)
            g.W[k * N + n] = w[(perm ? perm[k] : k) * N + n];
    if (!sweep(&g, ordered_row, &c))
        st = oq_diag_error(d, OQ_ERR_NOMEM, "gptq: out of memory");
done:
    work_free(&g);
    free(perm);
    return st;
}

/* ------------------------------------------- GPTQ with fixed per-column scales ------- */

/* symmetric int8 in [-127, 127] at scale sc */
static int32_t round_sym(float v, float sc)
{
    return oq_quantize_value(v, sc, 0, -127, 127);
}

/* oq_gptq_round_fixed's rounding of a row: symmetric int8 at the column's scale, the
 * second of a pair lowered to fit the pair limit */
typedef struct {
    const float *scales;
    bool pairs;
    int32_t *q;
} fixed_ctx;

static void fixed_row(void *user, const gptq_work *g, int64_t k, float dk, float *e)
{
    const fixed_ctx *c = user;
    int64_t N = g->N;
    const float *W = g->W;
    bool second = c->pairs && (k & 1); /* the second of a pair (k - 1, k) in the kernels' order */
    for (int64_t n = 0; n < N; n++) {
        float sc = c->scales[n];
        int32_t qv = round_sym(W[k * N + n], sc);
        if (second)
            qv = oq_weight_pair_fit_second(c->q[(k - 1) * N + n], qv);
        c->q[k * N + n] = qv;
        e[n] = (W[k * N + n] - (float)qv * sc) / dk;
    }
}

oq_status oq_gptq_round_fixed(const float *w, int64_t K, int64_t N, const float *scales, bool pairs,
                              const oq_gptq_stats *h, double damp, int32_t *q, double *damp_used, oq_diag *d)
{
    if (K <= 0 || N <= 0 || !h || h->K != K || h->rows == 0)
        return oq_diag_error(d, OQ_ERR_USAGE, "gptq: no input statistics for a reduction size of %" PRId64, K);
    if (!(damp >= 0.0) || !isfinite(damp))
        return oq_diag_error(d, OQ_ERR_USAGE, "gptq: dampening %g must be >= 0", damp);
    for (int64_t n = 0; n < N; n++)
        if (!(scales[n] > 0.0f) || !isfinite(scales[n]))
            return oq_diag_error(d, OQ_ERR_INVALID, "gptq: scale %g of column %" PRId64, (double)scales[n], n);
    for (int64_t i = 0; i < K * N; i++)
        if (!isfinite(w[i]))
            return oq_diag_error(d, OQ_ERR_NUMERIC, "gptq: %s at weight element %" PRId64, isnan(w[i]) ? "NaN" : "Inf",
                                 i);
    oq_status st = OQ_OK;
    gptq_work g;
    if (!work_new(&g, h, K, N, 128))
        return oq_diag_error(d, OQ_ERR_NOMEM, "gptq: out of memory");
    fixed_ctx c = {scales, pairs, q};
    if (!damped_inverse(g.H, K, g.mean, damp, g.A, g.U, g.pool, damp_used))
        st = oq_diag_error(d, OQ_ERR_NUMERIC, "gptq: the input Hessian is not positive definite even with "
                                              "dampening %g", damp * 100);
    else {
        memcpy(g.W, w, (size_t)(K * N) * sizeof(float));
        if (!sweep(&g, fixed_row, &c))
            st = oq_diag_error(d, OQ_ERR_NOMEM, "gptq: out of memory");
    }
    work_free(&g);
    return st;
}

bool oq_gptq_proxy_errors(const float *w, int64_t K, int64_t N, const float *scales, const int32_t *const *q,
                          size_t nq, const oq_gptq_stats *h, double *err)
{
    /* per candidate c, sum over columns n of e_n^T X^T X e_n, e = w - q_c * scale:
     * trace(E^T (X^T X) E), every candidate's E side by side in one float32 GEMM with X^T X
     * built once, the sums in double */
    if (!h || h->K != K || nq == 0)
        return false;
    size_t kk = (size_t)(K * K), cn = nq * (size_t)N, kn = (size_t)K * cn;
    float *H = malloc(kk * sizeof *H), *E = malloc(kn * sizeof *E), *T = malloc(kn * sizeof *T);
    oq_pool *pool = oq_pool_new(oq_cpu_count());
    bool ok = H && E && T && pool;
    if (ok) {
        for (int64_t i = 0; i < K; i++)
            for (int64_t j = i; j < K; j++)
                H[i * K + j] = H[j * K + i] = (float)h->xtx[i * K + j];
        for (int64_t k = 0; k < K; k++)
            for (size_t c = 0; c < nq; c++)
                for (int64_t n = 0; n < N; n++)
                    E[(size_t)k * cn + c * (size_t)N + (size_t)n] =
                        (float)((double)w[k * N + n] - (double)q[c][k * N + n] * scales[n]);
        ok = oq_quant_sgemm(pool, false, false, K, (int64_t)cn, K, 1.0f, H, K, E, (int64_t)cn, 0.0f, T,
                            (int64_t)cn) == OQ_OK;
    }
    for (size_t c = 0; ok && c < nq; c++) {
        double tot = 0.0;
        for (int64_t k = 0; k < K; k++)
            for (int64_t n = 0; n < N; n++) {
                size_t i = (size_t)k * cn + c * (size_t)N + (size_t)n;
                tot += (double)E[i] * T[i];
            }
        err[c] = tot;
    }
    if (pool)
        oq_pool_free(pool);
    free(H);
    free(E);
    free(T);
    return ok;
}

double oq_gptq_proxy_error(const float *w, int64_t K, int64_t N, const float *scales, const int32_t *q,
                           const oq_gptq_stats *h)
{
    double e;
    return oq_gptq_proxy_errors(w, K, N, scales, &q, 1, h, &e) ? e : -1.0;
}
