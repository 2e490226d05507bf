/* AWQ: activation-aware scaling before round to nearest. include/onnxq/awq.h,
 * docs/design/weight-only.md "AWQ". */
#include "onnxq/awq.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnxq/quant.h"
#include "quant/quant-impl.h"

oq_status oq_awq_stats_init(oq_awq_stats *a, int64_t K, oq_diag *d)
{
    memset(a, 0, sizeof *a);
    oq_status st = oq_gptq_stats_init(&a->h, K, d);
    if (st != OQ_OK)
        return st;
    a->abs_sum = calloc((size_t)K, sizeof(double));
    if (!a->abs_sum) {
        oq_gptq_stats_free(&a->h);
        return oq_diag_error(d, OQ_ERR_NOMEM, "awq: out of memory");
    }
    return OQ_OK;
}

oq_status oq_awq_stats_add(oq_awq_stats *a, const float *x, int64_t rows, oq_diag *d)
{
    oq_status st = oq_gptq_stats_add(&a->h, x, rows, d); /* refuses non-finite values */
    if (st != OQ_OK)
        return st;
    int64_t K = a->h.K;
    for (int64_t t = 0; t < rows; t++)
        for (int64_t k = 0; k < K; k++)
            a->abs_sum[k] += fabs((double)x[t * K + k]);
    return OQ_OK;
}

void oq_awq_stats_free(oq_awq_stats *a)
{
    oq_gptq_stats_free(&a->h);
    free(a->abs_sum);
    memset(a, 0, sizeof *a);
}

void oq_awq_scales(const oq_awq_stats *a, double alpha, float *s)
{
    int64_t K = a->h.K;
    double top = 0;
    for (int64_t k = 0; k < K; k++)
        top = a->abs_sum[k] > top ? a->abs_sum[k] : top;
    if (alpha == 0.0 || top <= 0.0 || a->h.rows == 0) {
        for (int64_t k = 0; k < K; k++)
            s[k] = 1.0f;
        return;
    }
    double floor_ = 1e-5 * top, lo = INFINITY, hi = 0;
    for (int64_t k = 0; k < K; k++) {
        double m = a->abs_sum[k] > floor_ ? a->abs_sum[k] : floor_;
        double v = pow(m / top, alpha); /* the mean's 1/rows cancels in the normalization */
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    double mid = sqrt(lo * hi);
    for (int64_t k = 0; k < K; k++) {
        double m = a->abs_sum[k] > floor_ ? a->abs_sum[k] : floor_;
        s[k] = (float)(pow(m / top, alpha) / mid);
    }
}

oq_status oq_awq_error(const oq_gptq_stats *h, const float *w, int64_t N, const oq_wq_spec *spec, const float *s,
                       double *err, oq_diag *d)
{
    int64_t K = h->K, nb = oq_wq_n_blocks(K, spec->block);
    if (h->rows == 0 || N <= 0)
        return oq_diag_error(d, OQ_ERR_USAGE, "awq: no input statistics, or no output columns");
    float *ws = malloc((size_t)(K * N) * sizeof(float)), *sc = malloc((size_t)(nb * N) * sizeof(float));
    int32_t *q = malloc((size_t)(K * N) * sizeof(int32_t)), *zp = malloc((size_t)(nb * N) * sizeof(int32_t));
    float *dl = malloc((size_t)(K * N) * sizeof(float)), *hf = malloc((size_t)(K * K) * sizeof(float));
    float *hd = malloc((size_t)(K * N) * sizeof(float));
    oq_pool *pool = h->pool ? NULL : oq_pool_new(oq_cpu_count()); /* h's, from its statistics */
    oq_status st = OQ_OK;
    if (!ws || !sc || !q || !zp || !dl || !hf || !hd || (!h->pool && !pool)) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "awq: out of memory");
        goto done;
    }
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++)
            ws[k * N + n] = s ? s[k] * w[k * N + n] : w[k * N + n];
    st = oq_wq_rtn(ws, K, N, spec, q, sc, zp, d);
    if (st != OQ_OK)
        goto done;
    for (int64_t k = 0; k < K; k++) {
        int64_t b = k / spec->block;
        for (int64_t n = 0; n < N; n++) {
            float dq = oq_dequantize_value(q[k * N + n], sc[b * N + n], zp[b * N + n]);
            if (spec->half_scales)
                dq = oq_half_to_float(oq_float_to_half(dq));
            /* the model computes (x * (1/s)) . dq: in x's space the weight is dq / s */
            double wh = s ? (double)dq * (double)(1.0f / s[k]) : (double)dq;
            dl[k * N + n] = (float)((double)w[k * N + n] - wh);
        }
    }
    /* sum_n d_n^T H d_n = sum(d .* (H d)): H mirrored from its upper triangle, H d one
     * float32 GEMM (K^2 N operations per call: the AWQ search makes one per alpha and layer) */
    for (int64_t i = 0; i < K; i++)
        for (int64_t j = i; j < K; j++)
            hf[i * K + j] = hf[j * K + i] = (float)h->xtx[i * K + j];
    st = oq_quant_sgemm(h->pool ? (oq_pool *)h->pool : pool, false, false, K, N, K, 1.0f, hf, K, dl, N, 0.0f, hd, N);
    if (st != OQ_OK) {
        st = oq_diag_error(d, st, "awq: out of memory");
        goto done;
    }
    double e = 0;
    for (int64_t i = 0; i < K * N; i++)
        e += (double)dl[i] * (double)hd[i];
    *err = e / (double)h->rows;
done:
    if (pool)
        oq_pool_free(pool);
    free(ws);
    free(sc);
    free(q);
    free(zp);
    free(dl);
    free(hf);
    free(hd);
    return st;
}

oq_status oq_awq_search(const oq_awq_stats *a, const float *const *w, const int64_t *N, size_t n, const oq_wq_spec *spec,
                        int grid, float *s, oq_awq_result *r, oq_diag *d)
{
    int64_t K = a->h.K;
    if (grid < 1 || grid > 1000)
        return oq_diag_error(d, OQ_ERR_USAGE, "awq: grid %d must be in 1..1000", grid);
    if (n == 0 || a->h.rows == 0)
        return oq_diag_error(d, OQ_ERR_USAGE, "awq: no layers or no input statistics");
    float *cand = malloc((size_t)K * sizeof(float));
    if (!cand)
        return oq_diag_error(d, OQ_ERR_NOMEM, "awq: out of memory");
    oq_status st = OQ_OK;
    memset(r, 0, sizeof *r);
    for (int gi = 0; gi <= grid && st == OQ_OK; gi++) {
        double alpha = (double)gi / grid, e = 0;
        oq_awq_scales(a, alpha, cand);
        for (size_t i = 0; i < n && st == OQ_OK; i++) {
            double ei = 0;
            st = oq_awq_error(&a->h, w[i], N[i], spec, gi == 0 ? NULL : cand, &ei, d);
            e += ei;
        }
        if (st != OQ_OK)
            break;
        if (gi == 0)
            r->err_rtn = e;
        if (gi == 0 || e < r->err) {
            r->err = e;
            r->alpha = alpha;
            memcpy(s, cand, (size_t)K * sizeof(float));
        }
    }
    free(cand);
    return st;
}

/* H'[i][j] = xtx[i][j] / (s_i s_j) / rows: the statistics of x / s */
static double hs(const oq_gptq_stats *h, const float *s, int64_t i, int64_t j)
{
    double v = i <= j ? h->xtx[i * h->K + j] : h->xtx[j * h->K + i];
    return s ? v / ((double)s[i] * (double)s[j]) : v;
}

/* The parameters of v[0..n) (stride) with the block range shrunk by r: those of
 * [r*min, r*max] (oq_wq_group_params reads only the extremes). */
static void clipped_params(const float *v, int64_t n, int64_t stride, const oq_wq_spec *spec, float r, float *sc,
                           int32_t *zp)
{
    float ext[2] = {0, 0};
    for (int64_t i = 0; i < n; i++) {
        float x = v[i * stride];
        if (i == 0 || x < ext[0])
            ext[0] = x;
        if (i == 0 || x > ext[1])
            ext[1] = x;
    }
    ext[0] *= r;
    ext[1] *= r;
    oq_wq_group_params(ext, 2, 1, spec, sc, zp);
}

oq_status oq_awq_clip_search(const oq_gptq_stats *h, const float *s, const float *w, int64_t N, const oq_wq_spec *spec,
                             int grid, float *ratio, double *err_before, double *err_after, oq_diag *d)
{
    int64_t K = h->K, B = spec->block, nb = oq_wq_n_blocks(K, B);
    int32_t qmin, qmax;
    if (grid < 1 || grid > 1000 || h->rows == 0 || B <= 0 || oq_qrange(spec->dtype, false, &qmin, &qmax) != OQ_OK)
        return oq_diag_error(d, OQ_ERR_USAGE, "awq: clip search: bad grid, type or no statistics");
    double *dl = malloc((size_t)B * sizeof(double)), *hb = malloc((size_t)(B * B) * sizeof(double));
    if (!dl || !hb) {
        free(dl);
        free(hb);
        return oq_diag_error(d, OQ_ERR_NOMEM, "awq: out of memory");
    }
    double before = 0, after = 0;
    for (int64_t b = 0; b < nb; b++) {
        int64_t k0 = b * B, n0 = B < K - k0 ? B : K - k0;
        for (int64_t i = 0; i < n0; i++) /* the block's statistics of x / s: once for every column */
            for (int64_t j = i; j < n0; j++)
                hb[i * n0 + j] = (i == j ? 1.0 : 2.0) * hs(h, s, k0 + i, k0 + j);
        for (int64_t n = 0; n < N; n++) {
            const float *v = w + k0 * N + n;
            double best = 0;
            float best_r = 1.0f;
            for (int g = 0; g <= grid; g++) {
                float r = (float)(1.0 - 0.5 * g / grid), sc;
                int32_t zp;
                clipped_params(v, n0, N, spec, r, &sc, &zp);
                for (int64_t i = 0; i < n0; i++) {
                    float dq = oq_dequantize_value(oq_quantize_value(v[i * N], sc, zp, qmin, qmax), sc, zp);
                    if (spec->half_scales)
                        dq = oq_half_to_float(oq_float_to_half(dq));
                    dl[i] = (double)v[i * N] - dq;
                }
                double e = 0;
                for (int64_t i = 0; i < n0; i++) {
                    const double *hr = hb + i * n0;
                    double t = 0;
                    for (int64_t j = i; j < n0; j++)
                        t += hr[j] * dl[j];
                    e += dl[i] * t;
                }
                if (g == 0) {
                    before += e;
                    best = e;
                } else if (e < best) {
                    best = e;
                    best_r = r;
                }
            }
            ratio[b * N + n] = best_r;
            after += best;
        }
    }
    free(dl);
    free(hb);
    if (err_before)
        *err_before = before / (double)h->rows;
    if (err_after)
        *err_after = after / (double)h->rows;
    return OQ_OK;
}

oq_status oq_awq_rtn_clipped(const float *w, int64_t K, int64_t N, const oq_wq_spec *spec, const float *ratio, int32_t *q,
                             float *scales, int32_t *zero_points, oq_diag *d)
{
    oq_status st = oq_wq_rtn(w, K, N, spec, q, scales, zero_points, d); /* checks, and ratio 1 */
    if (st != OQ_OK || !ratio)
        return st;
    int32_t qmin, qmax;
    oq_qrange(spec->dtype, false, &qmin, &qmax);
    int64_t B = spec->block, nb = oq_wq_n_blocks(K, B);
    for (int64_t b = 0; b < nb; b++) {
        int64_t k0 = b * B, n0 = B < K - k0 ? B : K - k0;
        for (int64_t n = 0; n < N; n++) {
            float r = ratio[b * N + n];
            if (r == 1.0f)
                continue;
            float sc;
            int32_t zp;
            clipped_params(w + k0 * N + n, n0, N, spec, r, &sc, &zp);
            scales[b * N + n] = sc;
            zero_points[b * N + n] = zp;
            for (int64_t k = k0; k < k0 + n0; k++)
                q[k * N + n] = oq_quantize_value(w[k * N + n], sc, zp, qmin, qmax);
        }
    }
    return OQ_OK;
}
