/* Weight-only quantization (src/quant/gptq.c): block parameters computed by hand, RTN,
 * GPTQ's properties (no correlation between inputs: exactly RTN; correlated inputs: a
 * smaller layer output error than RTN) and its errors. tests/weight_only.sh compares
 * whole models with a numpy GPTQ. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "onnxq/gptq.h"
#include "testutil.h"

static uint64_t rng = 12345;
static float nrand(void)
{
    return tu_nrand(&rng);
}

Test(wq, group_params_by_hand)
{
    float v[16];
    for (int i = 0; i < 16; i++)
        v[i] = (float)(i - 8) * 0.5f; /* -4 .. 3.5 */
    oq_wq_spec s = {OQ_DTYPE_INT4, true, 16, false};
    float sc;
    int32_t zp;
    oq_wq_group_params(v, 16, 1, &s, &sc, &zp); /* the largest magnitude, -4, to -8: 0.5 */
    cr_assert_eq(sc, 0.5f);
    cr_assert_eq(zp, 0);
    s.dtype = OQ_DTYPE_UINT4; /* symmetric uint4: zero point 8, the same scale */
    oq_wq_group_params(v, 16, 1, &s, &sc, &zp);
    cr_assert_eq(sc, 0.5f);
    cr_assert_eq(zp, 8);
    float w[3] = {1.0f, -2.0f, 0.5f};
    s.symmetric = false; /* [-2, 1]: scale 3/15 = 0.2, zp = 0 - round(-2/0.2) = 10 */
    oq_wq_group_params(w, 3, 1, &s, &sc, &zp);
    cr_assert_float_eq(sc, 0.2f, 1e-8);
    cr_assert_eq(zp, 10);
    s.dtype = OQ_DTYPE_INT8; /* asymmetric int8: 3/255, zp = -128 - round(-2/(3/255)) = 42 */
    oq_wq_group_params(w, 3, 1, &s, &sc, &zp);
    cr_assert_float_eq(sc, 3.0f / 255.0f, 1e-9);
    cr_assert_eq(zp, 42);
    s.symmetric = true; /* -2 to -128: 1/64 */
    oq_wq_group_params(w, 3, 1, &s, &sc, &zp);
    cr_assert_eq(sc, 1.0f / 64.0f);
    cr_assert_eq(zp, 0);
    w[0] = 3.0f; /* a positive extreme to -128: the scale is negative, -3/128 */
    oq_wq_group_params(w, 3, 1, &s, &sc, &zp);
    cr_assert_eq(sc, -3.0f / 128.0f);
    w[0] = 1.0f;
    float z[4] = {0};
    oq_wq_group_params(z, 4, 1, &s, &sc, &zp); /* all zero: scale 1 */
    cr_assert_eq(sc, 1.0f);
    s.half_scales = true; /* -(0.1 / 128) rounded to float16 */
    float t[2] = {0.1f, 0.0f};
    oq_wq_group_params(t, 2, 1, &s, &sc, &zp);
    cr_assert_eq(sc, -oq_half_to_float(oq_float_to_half(0.1f / 128.0f)));
}

Test(wq, rtn_blocks_along_k_with_a_partial_block)
{
    /* K = 20, N = 2, blocks of 16: block 1 holds k = 16..19 only */
    enum { K = 20, N = 2 };
    float w[K * N];
    for (int k = 0; k < K; k++) {
        w[k * N] = (float)k;              /* block 0: 15 -> -8: scale -15/8; block 1: -19/8 */
        w[k * N + 1] = k == 17 ? -8.0f : 1.0f; /* block 1: -8 -> -8: scale 1 */
    }
    int32_t q[K * N], zp[2 * N];
    float sc[2 * N];
    oq_wq_spec s = {OQ_DTYPE_INT4, true, 16, false};
    cr_assert_eq(oq_wq_rtn(w, K, N, &s, q, sc, zp, NULL), OQ_OK);
    cr_assert_float_eq(sc[0], -15.0f / 8.0f, 1e-6);
    cr_assert_float_eq(sc[2], -19.0f / 8.0f, 1e-6);
    cr_assert_eq(sc[3], 1.0f);
    cr_assert_eq(q[15 * N], -8);
    cr_assert_eq(q[7 * N], -4); /* 7 / (-15/8) = -3.73 */
    cr_assert_eq(q[17 * N + 1], -8);
    cr_assert_eq(q[18 * N + 1], 1);
    w[3] = NAN;
    cr_assert_eq(oq_wq_rtn(w, K, N, &s, q, sc, zp, NULL), OQ_ERR_NUMERIC);
}

/* ||X (dequant(q) - W)||^2 */
static double out_err(const float *x, int64_t rows, const float *w, const int32_t *q, const float *sc, const int32_t *zp,
                      int64_t K, int64_t N, int64_t B)
{
    double e = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t n = 0; n < N; n++) {
            double t = 0;
            for (int64_t k = 0; k < K; k++) {
                int64_t p = (k / B) * N + n;
                t += (double)x[r * K + k] * ((double)(q[k * N + n] - zp[p]) * sc[p] - w[k * N + n]);
            }
            e += t * t;
        }
    return e;
}

Test(gptq, uncorrelated_inputs_give_rtn_and_correlated_ones_beat_it)
{
    enum { K = 48, N = 8, R = 200, B = 16 };
    float *w = malloc(sizeof(float) * K * N), *x = malloc(sizeof(float) * R * K);
    int32_t *q = malloc(sizeof(int32_t) * K * N), *qr = malloc(sizeof(int32_t) * K * N);
    float sc[3 * N], scr[3 * N];
    int32_t zp[3 * N], zpr[3 * N];
    for (int i = 0; i < K * N; i++)
        w[i] = nrand();
    oq_wq_spec s = {OQ_DTYPE_INT4, true, B, false};
    cr_assert_eq(oq_wq_rtn(w, K, N, &s, qr, scr, zpr, NULL), OQ_OK);
    /* rows that are unit vectors times a scale: H diagonal, U diagonal, nothing spreads */
    oq_gptq_stats h;
    cr_assert_eq(oq_gptq_stats_init(&h, K, NULL), OQ_OK);
    for (int r = 0; r < R; r++) {
        memset(x, 0, sizeof(float) * K);
        x[r % K] = (float)(1 + r % 5);
        cr_assert_eq(oq_gptq_stats_add(&h, x, 1, NULL), OQ_OK);
    }
    double used = -1;
    cr_assert_eq(oq_gptq_quantize(w, K, N, &s, &h, 0.01, q, sc, zp, &used, NULL), OQ_OK);
    cr_assert_eq(used, 0.01);
    cr_assert_eq(memcmp(q, qr, sizeof(int32_t) * K * N), 0);
    cr_assert_eq(memcmp(sc, scr, sizeof sc), 0);
    oq_gptq_stats_free(&h);
    /* correlated inputs: x = z M with M mixing neighbouring features */
    for (int r = 0; r < R; r++) {
        float z[K];
        for (int k = 0; k < K; k++)
            z[k] = nrand();
        for (int k = 0; k < K; k++)
            x[r * K + k] = z[k] + 0.8f * z[(k + 1) % K] + 0.5f * z[(k + 7) % K];
    }
    cr_assert_eq(oq_gptq_stats_init(&h, K, NULL), OQ_OK);
    cr_assert_eq(oq_gptq_stats_add(&h, x, R, NULL), OQ_OK);
    cr_assert_eq(oq_gptq_quantize(w, K, N, &s, &h, 0.01, q, sc, zp, NULL, NULL), OQ_OK);
    double eg = out_err(x, R, w, q, sc, zp, K, N, B), er = out_err(x, R, w, qr, scr, zpr, K, N, B);
    cr_assert_lt(eg, 0.8 * er, "GPTQ %g vs RTN %g", eg, er);
    oq_gptq_stats_free(&h);
    free(w);
    free(x);
    free(q);
    free(qr);
}

Test(gptq, errors)
{
    enum { K = 8, N = 2 };
    float w[K * N] = {0}, x[K] = {0};
    int32_t q[K * N], zp[N];
    float sc[N];
    oq_wq_spec s = {OQ_DTYPE_INT4, true, 16, false};
    oq_gptq_stats h;
    cr_assert_eq(oq_gptq_stats_init(&h, K, NULL), OQ_OK);
    cr_assert_eq(oq_gptq_quantize(w, K, N, &s, &h, 0.01, q, sc, zp, NULL, NULL), OQ_ERR_USAGE); /* no rows */
    x[0] = NAN;
    cr_assert_eq(oq_gptq_stats_add(&h, x, 1, NULL), OQ_ERR_NUMERIC);
    /* one row (1, 1, 0...): H is singular on features 0 and 1; without dampening no
     * Cholesky factor exists, with it one does */
    x[0] = 1;
    x[1] = 1;
    cr_assert_eq(oq_gptq_stats_add(&h, x, 1, NULL), OQ_OK);
    cr_assert_eq(oq_gptq_quantize(w, K, N, &s, &h, 0.0, q, sc, zp, NULL, NULL), OQ_ERR_NUMERIC);
    cr_assert_eq(oq_gptq_quantize(w, K, N, &s, &h, 0.01, q, sc, zp, NULL, NULL), OQ_OK);
    s.dtype = OQ_DTYPE_INT16;
    cr_assert_eq(oq_gptq_quantize(w, K, N, &s, &h, 0.01, q, sc, zp, NULL, NULL), OQ_ERR_UNSUPPORTED);
    oq_gptq_stats_free(&h);
}

/* act order: features by decreasing H[k][k], block parameters fixed from W's contiguous
 * blocks: with a diagonal H nothing spreads, so it is RTN exactly (scales included);
 * with correlated inputs of very different energies its error is below RTN's, and the
 * order is the one computed here (checked through a feature whose rounding is exact
 * only when quantized first) */
Test(gptq, act_order)
{
    enum { K = 32, N = 4, R = 300, B = 16 };
    float *w = malloc(sizeof(float) * K * N), *x = malloc(sizeof(float) * R * K);
    int32_t *q = malloc(sizeof(int32_t) * K * N), *qr = malloc(sizeof(int32_t) * K * N);
    float sc[2 * N], scr[2 * N];
    int32_t zp[2 * N], zpr[2 * N];
    for (int i = 0; i < K * N; i++)
        w[i] = nrand();
    oq_wq_spec s = {OQ_DTYPE_INT4, true, B, false};
    cr_assert_eq(oq_wq_rtn(w, K, N, &s, qr, scr, zpr, NULL), OQ_OK);
    oq_gptq_stats h;
    cr_assert_eq(oq_gptq_stats_init(&h, K, NULL), OQ_OK);
    for (int r = 0; r < R; r++) { /* unit rows, energies 1..5 by feature: diagonal H */
        memset(x, 0, sizeof(float) * K);
        x[r % K] = (float)(1 + (r * 7) % 5);
        cr_assert_eq(oq_gptq_stats_add(&h, x, 1, NULL), OQ_OK);
    }
    cr_assert_eq(oq_gptq_quantize_ordered(w, K, N, &s, &h, 0.01, true, q, sc, zp, NULL, NULL), OQ_OK);
    cr_assert_eq(memcmp(q, qr, sizeof(int32_t) * K * N), 0);
    cr_assert_eq(memcmp(sc, scr, sizeof sc), 0);
    oq_gptq_stats_free(&h);
    /* correlated, feature energies from 0.2 to 6 */
    for (int r = 0; r < R; r++) {
        float z[K];
        for (int k = 0; k < K; k++)
            z[k] = nrand();
        for (int k = 0; k < K; k++)
            x[r * K + k] = (0.2f + (float)((k * 11) % K) * 0.18f) * (z[k] + 0.7f * z[(k + 3) % K]);
    }
    cr_assert_eq(oq_gptq_stats_init(&h, K, NULL), OQ_OK);
    cr_assert_eq(oq_gptq_stats_add(&h, x, R, NULL), OQ_OK);
    cr_assert_eq(oq_gptq_quantize_ordered(w, K, N, &s, &h, 0.01, true, q, sc, zp, NULL, NULL), OQ_OK);
    cr_assert_eq(memcmp(sc, scr, sizeof sc), 0); /* static groups: RTN's block parameters */
    double ea = out_err(x, R, w, q, sc, zp, K, N, B), er = out_err(x, R, w, qr, scr, zpr, K, N, B);
    cr_assert_lt(ea, 0.8 * er, "GPTQ act order %g vs RTN %g", ea, er);
    /* the first feature in act order (largest H[k][k]) is rounded from W itself: RTN's value */
    int64_t top = 0;
    for (int64_t k = 1; k < K; k++)
        if (h.xtx[k * K + k] > h.xtx[top * K + top])
            top = k;
    for (int n = 0; n < N; n++)
        cr_assert_eq(q[top * N + n], qr[top * N + n]);
    oq_gptq_stats_free(&h);
    free(w);
    free(x);
    free(q);
    free(qr);
}

/* The textbook GPTQ in double (Frantar et al., Algorithm 1 without lazy batches): H^-1 by
 * Gauss-Jordan, its upper Cholesky factor U (H^-1 = U^T U), then row by row of W: quantize,
 * err = (w - dq) / U[k][k], W[j] -= U[k][j] err for j > k. Symmetric int4, block
 * parameters from the updated rows when a block starts. */
static void ref_gptq(const float *w0, const double *H, int K, int N, int B, int32_t *q)
{
    double *A = malloc(sizeof(double) * K * 2 * K), *Hi = malloc(sizeof(double) * K * K);
    double *U = calloc((size_t)K * K, sizeof(double)), *W = malloc(sizeof(double) * K * N);
    float *sc = malloc(sizeof(float) * N);
    for (int i = 0; i < K; i++)
        for (int j = 0; j < 2 * K; j++)
            A[i * 2 * K + j] = j < K ? H[i * K + j] : (j - K == i);
    for (int c = 0; c < K; c++) { /* Gauss-Jordan, H positive definite: no pivoting */
        double p = A[c * 2 * K + c];
        for (int j = 0; j < 2 * K; j++)
            A[c * 2 * K + j] /= p;
        for (int i = 0; i < K; i++)
            if (i != c) {
                double f = A[i * 2 * K + c];
                for (int j = 0; j < 2 * K; j++)
                    A[i * 2 * K + j] -= f * A[c * 2 * K + j];
            }
    }
    for (int i = 0; i < K; i++)
        for (int j = 0; j < K; j++)
            Hi[i * K + j] = A[i * 2 * K + K + j];
    for (int i = 0; i < K; i++) { /* upper Cholesky: U[i][i..] from Hi = U^T U */
        double s = Hi[i * K + i];
        for (int p = 0; p < i; p++)
            s -= U[p * K + i] * U[p * K + i];
        U[i * K + i] = sqrt(s);
        for (int j = i + 1; j < K; j++) {
            double t = Hi[i * K + j];
            for (int p = 0; p < i; p++)
                t -= U[p * K + i] * U[p * K + j];
            U[i * K + j] = t / U[i * K + i];
        }
    }
    for (int i = 0; i < K * N; i++)
        W[i] = w0[i];
    for (int k = 0; k < K; k++) {
        if (k % B == 0)
            for (int n = 0; n < N; n++) {
                float mn = (float)W[k * N + n], mx = mn;
                for (int j = k + 1; j < k + B && j < K; j++) {
                    float v = (float)W[j * N + n];
                    mn = v < mn ? v : mn;
                    mx = v > mx ? v : mx;
                }
                sc[n] = -mn > mx ? mn / -8.0f : mx / -8.0f; /* the extreme to -8 */
                if (sc[n] == 0)
                    sc[n] = 1;
            }
        for (int n = 0; n < N; n++) {
            double v = rint((float)W[k * N + n] / sc[n]);
            int32_t qv = (int32_t)(v < -8 ? -8 : v > 7 ? 7 : v);
            q[k * N + n] = qv;
            double e = (W[k * N + n] - (double)((float)qv * sc[n])) / U[k * K + k];
            for (int j = k + 1; j < K; j++)
                W[j * N + n] -= U[k * K + j] * e;
        }
    }
    free(A);
    free(Hi);
    free(U);
    free(W);
    free(sc);
}

/* K = 300: three blocks of the blocked Cholesky and inverse (128, 128, 44), the lazy
 * batches and the trailing GEMM updates: the integers agree with the textbook double
 * GPTQ above on the same dampened H (float32 arithmetic: a few values one step apart
 * where the double version lands near a rounding midpoint) */
Test(gptq, blocked_factorization_agrees_with_textbook_double_gptq)
{
    enum { K = 300, N = 12, R = 900, B = 32 };
    float *w = malloc(sizeof(float) * K * N), *x = malloc(sizeof(float) * R * K), z[K];
    int32_t *q = malloc(sizeof(int32_t) * K * N), *qr = malloc(sizeof(int32_t) * K * N);
    int nb = (K + B - 1) / B;
    float *sc = malloc(sizeof(float) * nb * N);
    int32_t *zp = malloc(sizeof(int32_t) * nb * N);
    double *H = calloc((size_t)K * K, sizeof(double));
    for (int i = 0; i < K * N; i++)
        w[i] = nrand();
    for (int r = 0; r < R; r++) {
        for (int k = 0; k < K; k++)
            z[k] = nrand();
        for (int k = 0; k < K; k++) /* neighbours and a feature 131 away: across blocks */
            x[r * K + k] = z[k] + 0.7f * z[(k + 1) % K] + 0.4f * z[(k + 131) % K];
    }
    oq_gptq_stats h;
    cr_assert_eq(oq_gptq_stats_init(&h, K, NULL), OQ_OK);
    for (int r = 0; r < R; r += 100) /* in several calls, as sample by sample */
        cr_assert_eq(oq_gptq_stats_add(&h, x + r * K, 100, NULL), OQ_OK);
    oq_wq_spec s = {OQ_DTYPE_INT4, true, B, false};
    cr_assert_eq(oq_gptq_quantize(w, K, N, &s, &h, 0.01, q, sc, zp, NULL, NULL), OQ_OK);
    double mean = 0;
    for (int i = 0; i < K; i++)
        for (int j = 0; j < K; j++) {
            double a = 0;
            for (int r = 0; r < R; r++)
                a += (double)x[r * K + i] * x[r * K + j];
            H[i * K + j] = 2.0 * a / R;
        }
    for (int i = 0; i < K; i++)
        mean += H[i * K + i] / K;
    for (int i = 0; i < K; i++)
        H[i * K + i] += 0.01 * mean;
    ref_gptq(w, H, K, N, B, qr);
    int same = 0, far = 0;
    for (int i = 0; i < K * N; i++) {
        same += q[i] == qr[i];
        far += abs(q[i] - qr[i]) > 1;
    }
    cr_assert_geq(same, K * N * 98 / 100, "%d of %d integers agree", same, K * N);
    cr_assert_eq(far, 0, "%d integers more than one step apart", far);
    oq_gptq_stats_free(&h);
    free(w);
    free(x);
    free(q);
    free(qr);
    free(sc);
    free(zp);
    free(H);
}

/* Fixed-scale int8 GPTQ (static weight rounding), worked by hand: two inputs that are
 * always equal (x = [1, 1]), w = [0.6, 0.6], scale 1. Round to nearest gives [1, 1]: both
 * errors -0.4 add up, output error (-0.8)^2 = 0.64. GPTQ rounds w0 to 1 (error -0.4) and
 * moves w1 by -0.4 * H10 / (H11 + damp) = -0.4 * 2 / 2.02 to 0.204, which rounds to 0:
 * [1, 0], output error (-0.4 + 0.6)^2 = 0.04. */
Test(gptq_fixed, correlated_pair_by_hand)
{
    oq_gptq_stats h;
    cr_assert_eq(oq_gptq_stats_init(&h, 2, NULL), OQ_OK);
    float x[2] = {1.0f, 1.0f}, w[2] = {0.6f, 0.6f}, sc = 1.0f;
    cr_assert_eq(oq_gptq_stats_add(&h, x, 1, NULL), OQ_OK);
    int32_t q[2], rtn[2] = {1, 1};
    cr_assert_eq(oq_gptq_round_fixed(w, 2, 1, &sc, false, &h, 0.01, q, NULL, NULL), OQ_OK);
    cr_assert_eq(q[0], 1);
    cr_assert_eq(q[1], 0);
    cr_assert_float_eq(oq_gptq_proxy_error(w, 2, 1, &sc, rtn, &h), 0.64, 1e-6);
    cr_assert_float_eq(oq_gptq_proxy_error(w, 2, 1, &sc, q, &h), 0.04, 1e-6);
    oq_gptq_stats_free(&h);
}

/* The pair limit: rows (0, 1) of a column hold 100 and 60 steps of the same sign, 160 >
 * 128; with inputs that never co-occur (H diagonal) nothing is spread, so the second is
 * lowered to 128 - 100 = 28; a pair of opposite signs (-100, 60) is left alone. Without
 * the limit: [100, 60]. */
Test(gptq_fixed, pair_limit_lowers_the_second_of_a_pair)
{
    oq_gptq_stats h;
    cr_assert_eq(oq_gptq_stats_init(&h, 2, NULL), OQ_OK);
    float x[4] = {1.0f, 0.0f, 0.0f, 1.0f};
    cr_assert_eq(oq_gptq_stats_add(&h, x, 2, NULL), OQ_OK);
    float w[4] = {100.0f, -100.0f, 60.0f, 60.0f}, sc[2] = {1.0f, 1.0f}; /* [K=2, N=2] */
    int32_t q[4];
    cr_assert_eq(oq_gptq_round_fixed(w, 2, 2, sc, true, &h, 0.01, q, NULL, NULL), OQ_OK);
    cr_assert_eq(q[0], 100);
    cr_assert_eq(q[2], 28);
    cr_assert_eq(q[1], -100);
    cr_assert_eq(q[3], 60);
    cr_assert_eq(oq_gptq_round_fixed(w, 2, 2, sc, false, &h, 0.01, q, NULL, NULL), OQ_OK);
    cr_assert_eq(q[2], 60);
    w[0] = 200.0f; /* beyond the range: clamped to 127, the second to 1 */
    cr_assert_eq(oq_gptq_round_fixed(w, 2, 2, sc, true, &h, 0.01, q, NULL, NULL), OQ_OK);
    cr_assert_eq(q[0], 127);
    cr_assert_eq(q[2], 1);
    oq_gptq_stats_free(&h);
}

/* Correlated inputs, 64 features, 8 columns at per-column scales: GPTQ's output error is
 * below round to nearest's on the rows it saw and on rows it did not (same distribution),
 * every pair within the limit, every value in [-127, 127]. */
Test(gptq_fixed, beats_round_to_nearest_and_keeps_the_pairs)
{
    enum { K = 64, N = 8, R = 512 };
    float *x = malloc(sizeof(float) * R * K), *y = malloc(sizeof(float) * R * K), w[K * N], sc[N];
    cr_assert(x && y);
    for (int r = 0; r < R; r++) { /* x = a shared factor plus noise: strongly correlated */
        float f = nrand(), g = nrand();
        for (int k = 0; k < K; k++) {
            x[r * K + k] = f + 0.3f * nrand();
            y[r * K + k] = g + 0.3f * nrand();
        }
    }
    for (int n = 0; n < N; n++) {
        float mx = 0;
        for (int k = 0; k < K; k++) {
            w[k * N + n] = nrand() * (float)(n + 1);
            mx = fabsf(w[k * N + n]) > mx ? fabsf(w[k * N + n]) : mx;
        }
        sc[n] = mx / 127.0f * 2.0f; /* coarse: the rounding matters */
    }
    oq_gptq_stats h, e;
    cr_assert_eq(oq_gptq_stats_init(&h, K, NULL), OQ_OK);
    cr_assert_eq(oq_gptq_stats_init(&e, K, NULL), OQ_OK);
    cr_assert_eq(oq_gptq_stats_add(&h, x, R, NULL), OQ_OK);
    cr_assert_eq(oq_gptq_stats_add(&e, y, R, NULL), OQ_OK);
    int32_t q[K * N], rtn[K * N];
    for (int i = 0; i < K * N; i++)
        rtn[i] = (int32_t)fmaxf(-127.0f, fminf(127.0f, nearbyintf(w[i] / sc[i % N])));
    cr_assert_eq(oq_gptq_round_fixed(w, K, N, sc, true, &h, 0.01, q, NULL, NULL), OQ_OK);
    double seen_rtn = oq_gptq_proxy_error(w, K, N, sc, rtn, &h), seen = oq_gptq_proxy_error(w, K, N, sc, q, &h);
    double other_rtn = oq_gptq_proxy_error(w, K, N, sc, rtn, &e), other = oq_gptq_proxy_error(w, K, N, sc, q, &e);
    cr_assert_lt(seen, 0.5 * seen_rtn, "seen: %g vs %g", seen, seen_rtn);
    cr_assert_lt(other, 0.7 * other_rtn, "other rows: %g vs %g", other, other_rtn);
    for (int i = 0; i < K * N; i++)
        cr_assert(q[i] >= -127 && q[i] <= 127);
    for (int k = 0; k + 1 < K; k += 2)
        for (int n = 0; n < N; n++) {
            int a = q[k * N + n], b = q[(k + 1) * N + n];
            cr_assert(!((a > 0 && b > 0) || (a < 0 && b < 0)) || abs(a) + abs(b) <= 128);
        }
    oq_gptq_stats_free(&h);
    oq_gptq_stats_free(&e);
    free(x);
    free(y);
}
