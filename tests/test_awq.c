/* AWQ (src/quant/awq.c): scales computed by hand, the output error formula against a
 * row-by-row computation with an independent int4 rounding, and a hand-built layer with
 * one outlier input channel where the search must beat round to nearest by a margin
 * computed here from the same independent reference. tests/weight_only_llm.sh runs the
 * pass on a small decoder (fold, onnxruntime). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "onnxq/awq.h"
#include "testutil.h"

static uint64_t rng = 777;
static float nrand(void)
{
    return tu_nrand(&rng);
}

Test(awq, scales_by_hand)
{
    oq_awq_stats a;
    cr_assert_eq(oq_awq_stats_init(&a, 3, NULL), OQ_OK);
    float x[6] = {1, -4, 16, -1, 4, -16}; /* mean |x| = 1, 4, 16 */
    cr_assert_eq(oq_awq_stats_add(&a, x, 2, NULL), OQ_OK);
    cr_assert_eq(a.h.rows, 2u);
    cr_assert_float_eq(a.abs_sum[2], 32.0, 0);
    cr_assert_float_eq(a.h.xtx[0 * 3 + 2], 32.0, 0); /* 1*16 + (-1)(-16) */
    float s[3];
    oq_awq_scales(&a, 0.5, s); /* (1/16, 1/4, 1)^0.5 = 0.25, 0.5, 1; / sqrt(0.25 * 1) */
    cr_assert_float_eq(s[0], 0.5f, 1e-6);
    cr_assert_float_eq(s[1], 1.0f, 1e-6);
    cr_assert_float_eq(s[2], 2.0f, 1e-6);
    oq_awq_scales(&a, 0.0, s);
    cr_assert(s[0] == 1.0f && s[1] == 1.0f && s[2] == 1.0f);
    oq_awq_scales(&a, 1.0, s); /* 1/16, 1/4, 1 over sqrt(1/16) */
    cr_assert_float_eq(s[0], 0.25f, 1e-6);
    cr_assert_float_eq(s[2], 4.0f, 1e-6);
    float bad[3] = {1, NAN, 0};
    cr_assert_neq(oq_awq_stats_add(&a, bad, 1, NULL), OQ_OK);
    oq_awq_stats_free(&a);
}

/* The documented int4 symmetric scale of a block whose values lie in [mn, mx]: the value
 * of largest magnitude maps to -8 (negative scale when it is positive); 1 for zeros. */
static float sym_scale(double mn, double mx)
{
    double ext = -mn >= mx ? mn : mx;
    float a = (float)fabs(ext / 8.0);
    if (!(a > 0))
        return 1.0f;
    return ext > 0 ? -a : a;
}

/* Independent int4 symmetric blockwise RTN (the documented rule, sym_scale, per block of
 * a column, q = round half to even, clamped to -8..7), applied to diag(s) W; then the
 * mean over rows of |x W - (x / s) deq|^2, row by row in double. */
static double ref_error(const float *x, int64_t R, const float *w, int64_t K, int64_t N, int64_t block,
                        const float *s)
{
    double *wh = malloc((size_t)(K * N) * sizeof(double));
    for (int64_t n = 0; n < N; n++)
        for (int64_t k0 = 0; k0 < K; k0 += block) {
            double mn = 0, mx = 0;
            for (int64_t k = k0; k < k0 + block && k < K; k++) {
                double v = (double)(s[k] * w[k * N + n]);
                mn = k == k0 || v < mn ? v : mn;
                mx = k == k0 || v > mx ? v : mx;
            }
            float sc = sym_scale(mn, mx);
            for (int64_t k = k0; k < k0 + block && k < K; k++) {
                float v = s[k] * w[k * N + n];
                float q = nearbyintf(v / sc);
                q = q < -8 ? -8 : q > 7 ? 7 : q;
                wh[k * N + n] = (double)(q * sc) * (double)(1.0f / s[k]);
            }
        }
    double e = 0;
    for (int64_t r = 0; r < R; r++)
        for (int64_t n = 0; n < N; n++) {
            double y = 0, yh = 0;
            for (int64_t k = 0; k < K; k++) {
                y += (double)x[r * K + k] * w[k * N + n];
                yh += (double)x[r * K + k] * wh[k * N + n];
            }
            e += (y - yh) * (y - yh);
        }
    free(wh);
    return e / (double)R;
}

#define K 64
#define N 16
#define R 256
#define OUTLIER 5

Test(awq, outlier_channel_beats_rtn)
{
    /* inputs: channel 5 carries |x| ~ 40, the others ~ 1; weights ~ 0.1 with the outlier
     * channel's weights ordinary: RTN's block scales are set by the other weights, so the
     * outlier channel's rounding error is multiplied by 40 in the output */
    static float x[R * K], w[K * N];
    for (int64_t i = 0; i < R * K; i++)
        x[i] = nrand() * (i % K == OUTLIER ? 40.0f : 1.0f);
    for (int64_t i = 0; i < K * N; i++)
        w[i] = 0.1f * nrand();
    oq_awq_stats a;
    cr_assert_eq(oq_awq_stats_init(&a, K, NULL), OQ_OK);
    cr_assert_eq(oq_awq_stats_add(&a, x, R / 2, NULL), OQ_OK); /* two batches */
    cr_assert_eq(oq_awq_stats_add(&a, x + (R / 2) * K, R / 2, NULL), OQ_OK);
    oq_wq_spec spec = {OQ_DTYPE_INT4, true, 32, false};
    float one[K], s[K];
    for (int k = 0; k < K; k++)
        one[k] = 1.0f;
    /* the error through x^T x equals the row-by-row error, for s = 1 and for alpha 0.5 (to
     * float32's precision: each call's x^T x is a float32 GEMM, summed in double) */
    double e_rtn = 0, e_half = 0;
    cr_assert_eq(oq_awq_error(&a.h, w, N, &spec, NULL, &e_rtn, NULL), OQ_OK);
    double ref_rtn = ref_error(x, R, w, K, N, 32, one);
    cr_assert_float_eq(e_rtn, ref_rtn, 1e-5 * ref_rtn);
    oq_awq_scales(&a, 0.5, s);
    cr_assert_eq(oq_awq_error(&a.h, w, N, &spec, s, &e_half, NULL), OQ_OK);
    cr_assert_float_eq(e_half, ref_error(x, R, w, K, N, 32, s), 1e-5 * e_half);
    /* the search over 0, 0.1, ..., 1: its choice is the grid's argmin of the reference */
    double best = 0, best_alpha = 0;
    for (int g = 0; g <= 10; g++) {
        oq_awq_scales(&a, g / 10.0, s);
        double e = ref_error(x, R, w, K, N, 32, s);
        if (g == 0 || e < best) {
            best = e;
            best_alpha = g / 10.0;
        }
    }
    const float *ws[1] = {w};
    int64_t ns[1] = {N};
    oq_awq_result r;
    cr_assert_eq(oq_awq_search(&a, ws, ns, 1, &spec, 10, s, &r, NULL), OQ_OK);
    cr_assert_float_eq(r.err_rtn, ref_rtn, 1e-5 * ref_rtn);
    cr_assert_float_eq(r.alpha, best_alpha, 1e-12);
    cr_assert_float_eq(r.err, best, 1e-5 * best);
    /* the outlier channel's scale is the largest, and the error drops by more than 2x
     * (computed: the reference's best over the grid against RTN) */
    for (int k = 0; k < K; k++)
        cr_assert(k == OUTLIER || s[k] < s[OUTLIER]);
    cr_assert_gt(best_alpha, 0.0);
    cr_assert_lt(r.err, 0.5 * r.err_rtn, "awq %g vs rtn %g", r.err, r.err_rtn);
    /* two layers on the same input: the summed error */
    const float *ws2[2] = {w, w};
    int64_t ns2[2] = {N, N};
    oq_awq_result r2;
    cr_assert_eq(oq_awq_search(&a, ws2, ns2, 2, &spec, 10, s, &r2, NULL), OQ_OK);
    cr_assert_float_eq(r2.err, 2 * r.err, 1e-9 * r.err);
    cr_assert_eq(oq_awq_search(&a, ws, ns, 1, &spec, 0, s, &r, NULL), OQ_ERR_USAGE);
    oq_awq_stats_free(&a);
}

/* a layer whose inputs are all alike: no channel to favour, alpha 0 (RTN) is as good as
 * any, and the search keeps the smaller alpha on a tie */
Test(awq, uniform_inputs_keep_rtn)
{
    static float x[R * K], w[K * N];
    for (int64_t i = 0; i < R * K; i++)
        x[i] = (i / K) % 2 ? 1.0f : -1.0f; /* |x_k| = 1 for every k */
    for (int64_t i = 0; i < K * N; i++)
        w[i] = 0.1f * nrand();
    oq_awq_stats a;
    cr_assert_eq(oq_awq_stats_init(&a, K, NULL), OQ_OK);
    cr_assert_eq(oq_awq_stats_add(&a, x, R, NULL), OQ_OK);
    oq_wq_spec spec = {OQ_DTYPE_INT4, true, 32, false};
    float s[K];
    const float *ws[1] = {w};
    int64_t ns[1] = {N};
    oq_awq_result r;
    cr_assert_eq(oq_awq_search(&a, ws, ns, 1, &spec, 10, s, &r, NULL), OQ_OK);
    cr_assert_eq(r.alpha, 0.0);
    cr_assert_eq(r.err, r.err_rtn);
    for (int k = 0; k < K; k++)
        cr_assert_eq(s[k], 1.0f);
    oq_awq_stats_free(&a);
}

/* clip search: ratio 1 everywhere is RTN; the ratios chosen are those of a brute force
 * written here (independent int4 rounding of the shrunk range, the block's error summed
 * row by row: sum_r (sum_{k in block} x_rk d_k)^2); heavy-tailed weights make some
 * blocks prefer a shrunk range, and the summed error drops */
Test(awq, clip_search_against_brute_force)
{
    enum { CK = 64, CN = 6, CR = 128, CB = 16, G = 10 };
    static float x[CR * CK], w[CK * CN];
    for (int64_t i = 0; i < CR * CK; i++)
        x[i] = nrand() * (1.0f + (float)(i % CK) / 16.0f);
    for (int64_t i = 0; i < CK * CN; i++) { /* Student-t-like: normal over sqrt(chi2/2) */
        float z1 = nrand(), z2 = nrand();
        w[i] = 0.1f * nrand() / sqrtf((z1 * z1 + z2 * z2) / 2.0f + 0.05f);
    }
    oq_gptq_stats h;
    cr_assert_eq(oq_gptq_stats_init(&h, CK, NULL), OQ_OK);
    cr_assert_eq(oq_gptq_stats_add(&h, x, CR, NULL), OQ_OK);
    oq_wq_spec spec = {OQ_DTYPE_INT4, true, CB, false};
    float ratio[(CK / CB) * CN], one[(CK / CB) * CN];
    double e0 = 0, e1 = 0;
    cr_assert_eq(oq_awq_clip_search(&h, NULL, w, CN, &spec, G, ratio, &e0, &e1, NULL), OQ_OK);
    double ref0 = 0, ref1 = 0;
    int clipped = 0;
    for (int b = 0; b < CK / CB; b++)
        for (int n = 0; n < CN; n++) {
            double best = 0;
            float best_r = 1.0f;
            for (int g = 0; g <= G; g++) {
                float r = (float)(1.0 - 0.5 * g / G);
                double mn = 0, mx = 0;
                for (int k = b * CB; k < (b + 1) * CB; k++) {
                    double v = w[k * CN + n];
                    mn = k == b * CB || v < mn ? v : mn;
                    mx = k == b * CB || v > mx ? v : mx;
                }
                float sc = sym_scale(mn * r, mx * r);
                double e = 0;
                for (int rr = 0; rr < CR; rr++) {
                    double t = 0;
                    for (int k = b * CB; k < (b + 1) * CB; k++) {
                        float q = nearbyintf(w[k * CN + n] / sc);
                        q = q < -8 ? -8 : q > 7 ? 7 : q;
                        t += (double)x[rr * CK + k] * ((double)w[k * CN + n] - (double)(q * sc));
                    }
                    e += t * t;
                }
                if (g == 0) {
                    ref0 += e;
                    best = e;
                } else if (e < best * (1 - 1e-9)) {
                    best = e;
                    best_r = r;
                }
            }
            ref1 += best;
            cr_assert_float_eq(ratio[b * CN + n], best_r, 1e-7, "block %d column %d: %g, brute force %g", b, n,
                               ratio[b * CN + n], best_r);
            clipped += best_r < 1.0f;
        }
    cr_assert_float_eq(e0, ref0 / CR, 1e-5 * e0); /* float32 statistics (the GEMM) */
    cr_assert_float_eq(e1, ref1 / CR, 1e-5 * e0);
    cr_assert_gt(clipped, 0);
    cr_assert_lt(e1, e0);
    /* ratio 1 everywhere: RTN exactly; the chosen ratios: every value clamped to -8..7 */
    for (int i = 0; i < (CK / CB) * CN; i++)
        one[i] = 1.0f;
    int32_t q[CK * CN], qr[CK * CN], zp[(CK / CB) * CN], zpr[(CK / CB) * CN];
    float sc[(CK / CB) * CN], scr[(CK / CB) * CN];
    cr_assert_eq(oq_wq_rtn(w, CK, CN, &spec, qr, scr, zpr, NULL), OQ_OK);
    cr_assert_eq(oq_awq_rtn_clipped(w, CK, CN, &spec, one, q, sc, zp, NULL), OQ_OK);
    cr_assert_eq(memcmp(q, qr, sizeof q), 0);
    cr_assert_eq(memcmp(sc, scr, sizeof sc), 0);
    cr_assert_eq(oq_awq_rtn_clipped(w, CK, CN, &spec, ratio, q, sc, zp, NULL), OQ_OK);
    for (int i = 0; i < (CK / CB) * CN; i++)
        cr_assert(ratio[i] == 1.0f ? sc[i] == scr[i] : fabsf(sc[i]) < fabsf(scr[i])); /* a smaller step */
    for (int i = 0; i < CK * CN; i++)
        cr_assert(q[i] >= -8 && q[i] <= 7);
    oq_gptq_stats_free(&h);
}
