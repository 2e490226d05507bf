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
