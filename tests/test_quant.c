/* Quantization math: observers, range selection, scale / zero point, weights, bias.
 * Expected values are hand-computed (comments show the arithmetic), analytic (uniform
 * quantiles) or brute-forced directly on the samples. */
#include <criterion/criterion.h>
#include <float.h>
#include <malloc.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "onnxq/calib.h"
#include "onnxq/quant.h"
#include "testutil.h"

/* ---------------------------------------------------------------- helpers ---- */

static uint64_t rng_state;
static double urand(void) /* splitmix64 -> [0, 1) */
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1p-53;
}
static double nrand(void) /* Box-Muller */
{
    double u = urand(), v = urand();
    if (u < 1e-300)
        u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Mean squared error of symmetric int8 (scale T/127) or uint8 [0, T] quantization
 * of the samples, computed directly with QuantizeLinear / DequantizeLinear. */
/* E[(f(DQ(Q(x))) - f(x))^2] on the samples with the real quantizer (zero point nudged);
 * f: the activation act (NULL: the identity, the plain squared error). */
static double sample_err(const float *x, int64_t n, float rmin, float rmax, int32_t dtype, bool sym,
                         const oq_act *act)
{
    float s;
    int32_t zp, qmin, qmax;
    cr_assert_eq(oq_qparams_compute(rmin, rmax, dtype, sym, false, &s, &zp, NULL), OQ_OK);
    oq_qrange(dtype, false, &qmin, &qmax);
    double e = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double y = oq_dequantize_value(oq_quantize_value(x[i], s, zp, qmin, qmax), s, zp), t = x[i];
        if (act) {
            y = oq_act_value(act, y);
            t = oq_act_value(act, t);
        }
        e += (t - y) * (t - y);
    }
    return e / (double)n;
}

static double sample_mse(const float *x, int64_t n, float rmin, float rmax, int32_t dtype, bool sym)
{
    return sample_err(x, n, rmin, rmax, dtype, sym, NULL);
}

/* ---------------------------------------------------------------- observers ---- */

Test(observer, minmax_known_data)
{
    oq_observer o;
    oq_observer_init(&o, OQ_OBSERVER_MINMAX, OQ_NAN_ERROR);
    const float a[] = {3.0f, -1.0f, 2.0f, 7.0f};
    const float b[] = {-5.0f, 0.5f};
    float lo, hi;
    cr_assert_not(oq_observer_minmax(&o, &lo, &hi));
    cr_assert_eq(oq_observer_update(&o, a, 4, NULL, "t", NULL), OQ_OK);
    cr_assert_eq(oq_observer_update(&o, b, 2, NULL, "t", NULL), OQ_OK);
    cr_assert(oq_observer_minmax(&o, &lo, &hi));
    cr_assert_eq(lo, -5.0f);
    cr_assert_eq(hi, 7.0f);
    cr_assert_eq(o.count, 6);
}

Test(observer, moving_average)
{
    /* c = 0.5: first batch [0,10] initializes; second batch [2,4]:
     * min = 0 + 0.5*(2-0) = 1, max = 10 + 0.5*(4-10) = 7; third [-6, 9]:
     * min = 1 + 0.5*(-6-1) = -2.5, max = 7 + 0.5*(9-7) = 8 */
    oq_observer o;
    oq_observer_init(&o, OQ_OBSERVER_MINMAX, OQ_NAN_ERROR);
    cr_assert_eq(oq_observer_set_averaging(&o, 0.5, NULL), OQ_OK);
    const float b1[] = {0.0f, 10.0f, 5.0f}, b2[] = {2.0f, 4.0f}, b3[] = {9.0f, -6.0f};
    oq_observer_update(&o, b1, 3, NULL, NULL, NULL);
    oq_observer_update(&o, b2, 2, NULL, NULL, NULL);
    float lo, hi;
    oq_observer_minmax(&o, &lo, &hi);
    cr_assert_eq(lo, 1.0f);
    cr_assert_eq(hi, 7.0f);
    oq_observer_update(&o, b3, 2, NULL, NULL, NULL);
    oq_observer_minmax(&o, &lo, &hi);
    cr_assert_eq(lo, -2.5f);
    cr_assert_eq(hi, 8.0f);
    cr_assert_eq(o.min, -6.0f); /* the exact extremes are still kept */
    cr_assert_eq(o.max, 10.0f);
    cr_assert_eq(oq_observer_set_averaging(&o, 1.5, NULL), OQ_ERR_USAGE);
}

Test(observer, nan_error_policy)
{
    oq_observer o;
    oq_diag d;
    oq_diag_init(&d);
    oq_observer_init(&o, OQ_OBSERVER_HISTOGRAM, OQ_NAN_ERROR);
    const float x[] = {1.0f, 2.0f, NAN, INFINITY, -INFINITY, NAN, 3.0f};
    oq_nonfinite nf;
    cr_assert_eq(oq_observer_update(&o, x, 7, &nf, "tensor \"relu1\" (node \"r1\"), sample s7",
                                    &d),
                 OQ_ERR_NUMERIC);
    cr_assert_eq(nf.nan_count, 2);
    cr_assert_eq(nf.inf_count, 2);
    cr_assert_eq(nf.first_index, 2);
    cr_assert_eq(d.errors, 1);
    const oq_diag_entry *e = oq_diag_first_error(&d);
    cr_assert(strstr(e->message, "relu1") && strstr(e->message, "s7"), "%s", e->message);
    cr_assert(strstr(e->message, "2 NaN") && strstr(e->message, "element 2"), "%s",
              e->message);
    oq_diag_free(&d);
}

Test(observer, nan_ignore_policy)
{
    oq_observer o;
    oq_observer_init(&o, OQ_OBSERVER_HISTOGRAM, OQ_NAN_IGNORE);
    const float x[] = {NAN, 1.0f, -INFINITY, 2.0f};
    const float y[] = {INFINITY, -4.0f};
    oq_nonfinite nf;
    cr_assert_eq(oq_observer_update(&o, x, 4, &nf, NULL, NULL), OQ_OK);
    cr_assert_eq(nf.first_index, 0);
    cr_assert_eq(oq_observer_update(&o, y, 2, &nf, NULL, NULL), OQ_OK);
    cr_assert_eq(nf.inf_count, 1);
    cr_assert_eq(o.nan_count, 1);
    cr_assert_eq(o.inf_count, 2);
    cr_assert_eq(o.count, 3);
    cr_assert_eq(o.hist.total, 3);
    cr_assert_eq(o.min, -4.0f);
    cr_assert_eq(o.max, 2.0f);
    /* all non-finite: nothing observed */
    oq_observer p;
    oq_observer_init(&p, OQ_OBSERVER_MINMAX, OQ_NAN_IGNORE);
    const float z[] = {NAN, NAN};
    cr_assert_eq(oq_observer_update(&p, z, 2, NULL, NULL, NULL), OQ_OK);
    cr_assert_not(p.initialized);
}

Test(observer, histogram_growth_keeps_counts)
{
    /* Batches whose range keeps growing, in both directions and by large factors. */
    enum { NBATCH = 6, PER = 20000 };
    const double ranges[NBATCH][2] = {{0.0, 1.0}, {-3.0, 0.5},  {0.2, 0.3},
                                      {100.0, 200.0}, {-1e4, -9e3}, {-50.0, 50.0}};
    static float all[NBATCH * PER];
    oq_observer o;
    oq_observer_init(&o, OQ_OBSERVER_HISTOGRAM, OQ_NAN_ERROR);
    rng_state = 42;
    float mn = FLT_MAX, mx = -FLT_MAX;
    for (int b = 0; b < NBATCH; b++) {
        float *x = all + b * PER;
        for (int i = 0; i < PER; i++) {
            x[i] = (float)(ranges[b][0] + (ranges[b][1] - ranges[b][0]) * urand());
            mn = x[i] < mn ? x[i] : mn;
            mx = x[i] > mx ? x[i] : mx;
        }
        cr_assert_eq(oq_observer_update(&o, x, PER, NULL, NULL, NULL), OQ_OK);
        uint64_t sum = 0;
        for (int i = 0; i < OQ_HIST_BINS; i++)
            sum += o.hist.counts[i];
        cr_assert_eq(sum, (uint64_t)(b + 1) * PER, "batch %d: %llu counts", b,
                     (unsigned long long)sum);
        cr_assert_eq(o.hist.total, sum);
        cr_assert_eq(o.min, mn);
        cr_assert_eq(o.max, mx);
    }
    /* Every value sits in the bin that contains it (direct binning of all samples with
     * the final grid), except possibly values at the right edge of an earlier range
     * (each batch's max was clamped into the last bin of the range it defined). */
    static uint64_t direct[OQ_HIST_BINS];
    memset(direct, 0, sizeof(direct));
    for (int i = 0; i < NBATCH * PER; i++) {
        double t = floor(((double)all[i] - o.hist.lo) / o.hist.width);
        int k = t < 0 ? 0 : (t >= OQ_HIST_BINS ? OQ_HIST_BINS - 1 : (int)t);
        direct[k]++;
    }
    uint64_t diff = 0;
    for (int i = 0; i < OQ_HIST_BINS; i++)
        diff += o.hist.counts[i] > direct[i] ? o.hist.counts[i] - direct[i]
                                             : direct[i] - o.hist.counts[i];
    cr_assert_leq(diff, 2 * NBATCH, "%llu values misplaced", (unsigned long long)diff);
    /* the range covers the data with at most a factor ~2 of slack */
    double span = o.hist.width * OQ_HIST_BINS;
    cr_assert_leq(o.hist.lo, mn);
    cr_assert_geq(o.hist.lo + span, mx);
    cr_assert_lt(span, 2.01 * ((double)mx - mn) + 0.01, "span %g", span);
}

Test(observer, constant_first_batch_then_growth)
{
    oq_observer o;
    oq_observer_init(&o, OQ_OBSERVER_HISTOGRAM, OQ_NAN_ERROR);
    float z[100] = {0};
    oq_observer_update(&o, z, 100, NULL, NULL, NULL);
    cr_assert(o.hist.width > 0.0);
    const float y[] = {-1e6f, 1e6f, 3.0f};
    oq_observer_update(&o, y, 3, NULL, NULL, NULL);
    uint64_t sum = 0;
    for (int i = 0; i < OQ_HIST_BINS; i++)
        sum += o.hist.counts[i];
    cr_assert_eq(sum, 103);
    cr_assert_eq(o.min, -1e6f);
    cr_assert_eq(o.max, 1e6f);
}

Test(observer, memory_is_fixed)
{
    /* The state is one flat struct: its size is a compile-time constant and updating
     * it with many samples allocates nothing. */
    oq_observer *o = malloc(sizeof(*o));
    oq_observer_init(o, OQ_OBSERVER_HISTOGRAM, OQ_NAN_IGNORE);
    enum { N = 4096 };
    float *x = malloc(N * sizeof(float));
    rng_state = 7;
    struct mallinfo2 before = mallinfo2();
    for (int b = 0; b < 500; b++) {
        for (int i = 0; i < N; i++)
            x[i] = (float)(nrand() * (1.0 + b));
        oq_observer_update(o, x, N, NULL, NULL, NULL);
    }
    struct mallinfo2 after = mallinfo2();
    cr_assert_eq(after.uordblks, before.uordblks, "heap grew by %zu bytes",
                 after.uordblks - before.uordblks);
    cr_assert_eq(o->hist.total, 500ull * N);
    cr_assert_lt(sizeof(oq_observer), (size_t)OQ_HIST_BINS * 8 + 256);
    free(x);
    free(o);
}

Test(observer, per_channel_minmax)
{
    /* shape [2, 3, 2], axis 1: channel c holds x[o][c][i] */
    const float w[12] = {1, 2, -3, 4, 5, 6, /* o = 0 */ -7, 8, 9, -10, 11, 0.5f};
    const int64_t dims[3] = {2, 3, 2};
    float mn[3], mx[3];
    cr_assert_eq(oq_minmax_per_channel(w, dims, 3, 1, mn, mx, "w", NULL), OQ_OK);
    cr_assert_eq(mn[0], -7.0f); /* {1, 2, -7, 8} */
    cr_assert_eq(mx[0], 8.0f);
    cr_assert_eq(mn[1], -10.0f); /* {-3, 4, 9, -10} */
    cr_assert_eq(mx[1], 9.0f);
    cr_assert_eq(mn[2], 0.5f); /* {5, 6, 11, 0.5} */
    cr_assert_eq(mx[2], 11.0f);
    cr_assert_eq(oq_minmax_per_channel(w, dims, 3, -3, mn, mx, "w", NULL), OQ_OK);
    cr_assert_eq(mn[0], -3.0f);
    cr_assert_eq(mx[1], 11.0f);
    float bad[12];
    memcpy(bad, w, sizeof(bad));
    bad[5] = NAN;
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_minmax_per_channel(bad, dims, 3, 1, mn, mx, "conv1.weight", &d),
                 OQ_ERR_NUMERIC);
    cr_assert(strstr(oq_diag_first_error(&d)->message, "conv1.weight"));
    oq_diag_free(&d);
}

/* --------------------------------------------------------- range selection ---- */

static void feed_uniform(oq_observer *o, double a, double b, int n)
{
    /* first a narrow batch so that the range has to grow */
    float *x = malloc((size_t)n * sizeof(float));
    for (int i = 0; i < n; i++)
        x[i] = (float)(a + (b - a) * (0.45 + 0.1 * urand()));
    oq_observer_update(o, x, n / 10, NULL, NULL, NULL);
    for (int i = 0; i < n; i++)
        x[i] = (float)(a + (b - a) * urand());
    oq_observer_update(o, x, n, NULL, NULL, NULL);
    free(x);
}

Test(range, percentile_uniform_asymmetric)
{
    /* U[-2, 6]: quantile q is -2 + 8q. The narrow first batch (10% extra mass in
     * [1.6, 2.4]) shifts quantiles; account for it analytically: total mass 1.1,
     * P(x <= t) = (t+2)/8 + 0.1*clamp((t-1.6)/0.8, 0, 1). For p = 99: upper tail
     * 0.011 lies above 2.4: t = 6 - 8*0.011 = 5.912; lower tail 0.011 below 1.6:
     * t = -2 + 8*0.011 = -1.912. */
    oq_observer o;
    oq_observer_init(&o, OQ_OBSERVER_HISTOGRAM, OQ_NAN_ERROR);
    rng_state = 1;
    feed_uniform(&o, -2.0, 6.0, 1000000);
    oq_range_request r;
    oq_range_request_default(&r);
    r.percentile = 99.0;
    float lo, hi;
    cr_assert_eq(oq_observer_range(&o, &r, &lo, &hi, NULL, NULL, NULL), OQ_OK);
    double bw = o.hist.width;
    cr_assert_lt(fabs(hi - 5.912), bw, "hi %g (bin %g)", hi, bw);
    cr_assert_lt(fabs(lo + 1.912), bw, "lo %g", lo);
    r.percentile = 100.0;
    oq_observer_range(&o, &r, &lo, &hi, NULL, NULL, NULL);
    cr_assert_eq(lo, o.min);
    cr_assert_eq(hi, o.max);
}

Test(range, percentile_uniform_symmetric)
{
    /* U[-3, 5], 1e6 samples: P(|x| <= T) = (T + 3)/8 for T >= 3, so the 99.9th
     * percentile of |x| is T = 8*0.999 - 3 = 4.992 */
    oq_observer o;
    oq_observer_init(&o, OQ_OBSERVER_HISTOGRAM, OQ_NAN_ERROR);
    rng_state = 2;
    float *x = malloc(1000000 * sizeof(float));
    for (int i = 0; i < 1000000; i++)
        x[i] = (float)(-3.0 + 8.0 * urand());
    oq_observer_update(&o, x, 1000000, NULL, NULL, NULL);
    free(x);
    oq_range_request r;
    oq_range_request_default(&r);
    r.percentile = 99.9;
    r.symmetric = true;
    r.dtype = OQ_DTYPE_INT8;
    float lo, hi;
    oq_observer_range(&o, &r, &lo, &hi, NULL, NULL, NULL);
    cr_assert_lt(fabs(hi - 4.992), o.hist.width, "T %g", hi);
    cr_assert_eq(lo, -hi);
}

/* n samples of N(0,1) (or ReLU(N(0,1))) plus 2 far outliers at +-20 (+20 for ReLU). */
static float *gauss_with_outliers(int n, bool relu, int *pn)
{
    float *x = malloc((size_t)(n + 2) * sizeof(float));
    rng_state = 12345;
    for (int i = 0; i < n; i++) {
        double v = nrand();
        x[i] = (float)(relu && v < 0 ? 0.0 : v);
    }
    x[n] = 20.0f;
    x[n + 1] = relu ? 20.0f : -20.0f;
    *pn = n + 2;
    return x;
}

/* Brute force on the samples: the threshold T minimising the sample MSE of the
 * quantizer [-T, T] (symmetric) or [0, T], on a 0.25 grid over [0.25, 20] and then a
 * 0.01 grid around the best point. */
static double brute_force(const float *x, int n, int32_t dtype, bool sym, double *best_mse)
{
    double bt = 0, be = INFINITY;
    for (double t = 0.25; t <= 20.0; t += 0.25) {
        double e = sample_mse(x, n, sym ? (float)-t : 0.0f, (float)t, dtype, sym);
        if (e < be) {
            be = e;
            bt = t;
        }
    }
    double c = bt;
    for (double t = c - 0.25; t <= c + 0.25; t += 0.01) {
        double e = sample_mse(x, n, sym ? (float)-t : 0.0f, (float)t, dtype, sym);
        if (e < be) {
            be = e;
            bt = t;
        }
    }
    *best_mse = be;
    return bt;
}

/* Run method m on the samples streamed in chunks and compare with the brute force:
 * threshold within t_tol (relative) and sample MSE within mse_factor of the best
 * (a tolerance <= 0 skips that comparison). */
static void check_search(oq_calib_method m, int32_t dtype, bool sym, bool relu, int nsamples,
                         double t_tol, double mse_factor)
{
    int n;
    float *x = gauss_with_outliers(nsamples, relu, &n);
    oq_observer o;
    oq_observer_init(&o, OQ_OBSERVER_HISTOGRAM, OQ_NAN_ERROR);
    for (int i = 0; i < n; i += 10000) /* streamed in chunks */
        oq_observer_update(&o, x + i, (n - i) < 10000 ? n - i : 10000, NULL, NULL, NULL);
    oq_range_request r;
    oq_range_request_default(&r);
    r.method = m;
    r.dtype = dtype;
    r.symmetric = sym;
    oq_range_info info;
    float lo, hi;
    cr_assert_eq(oq_observer_range(&o, &r, &lo, &hi, &info, NULL, NULL), OQ_OK);
    double best_mse, bt = brute_force(x, n, dtype, sym, &best_mse);
    double got = sample_mse(x, n, lo, hi, dtype, sym);
    cr_log_info("%s %s%s n=%d: chose [%g, %g] (%d candidates, cost %g), sample MSE %g; "
                "brute force T=%g MSE %g",
                oq_calib_method_name(m), oq_dtype_name(dtype), sym ? " sym" : "", n, lo, hi,
                info.candidates, info.best_cost, got, bt, best_mse);
    /* a real search: entropy tries every admissible bin edge (>= 2048 - levels), mse
     * every 4th edge and then each edge around the best (docs/calibration.md) */
    cr_assert_gt(info.candidates, m == OQ_CALIB_ENTROPY ? 1500 : 500, "only %d candidates",
                 info.candidates);
    cr_assert_lt(hi, 10.0, "threshold %g is not well inside the outliers at 20", hi);
    if (t_tol > 0)
        cr_assert_lt(fabs(hi - bt), t_tol * bt, "T %g vs brute force %g", hi, bt);
    if (mse_factor > 0)
        cr_assert_leq(got, mse_factor * best_mse, "MSE %g vs best %g", got, best_mse);
    if (sym)
        cr_assert_eq(lo, -hi);
    else
        cr_assert_eq(lo, 0.0f);
    free(x);
}

/* int8: clipping 2 outliers in 1e6 at 20 costs less than the rounding noise of a wide
 * range; the optimum (brute force) is near 5.6 */
Test(range, mse_gaussian_outliers_int8_symmetric, .timeout = 120)
{
    check_search(OQ_CALIB_MSE, OQ_DTYPE_INT8, true, false, 1000000, 0.05, 1.02);
}

Test(range, mse_relu_outliers_uint4, .timeout = 60)
{
    check_search(OQ_CALIB_MSE, OQ_DTYPE_UINT4, false, true, 100000, 0.05, 1.02);
}

Test(range, mse_gaussian_outliers_int4_symmetric, .timeout = 60)
{
    check_search(OQ_CALIB_MSE, OQ_DTYPE_INT4, true, false, 100000, 0.05, 1.02);
}

Test(range, entropy_gaussian_outliers_int8_symmetric, .timeout = 120)
{
    check_search(OQ_CALIB_ENTROPY, OQ_DTYPE_INT8, true, false, 1000000, 0.5, 1.3);
}

Test(range, entropy_relu_outliers_uint4, .timeout = 60)
{
    check_search(OQ_CALIB_ENTROPY, OQ_DTYPE_UINT4, false, true, 100000, 0.5, 1.3);
}

/* uint8 asymmetric: KL ignores the squared error of the 2 outliers, so only check that
 * it searched and clipped them */
Test(range, entropy_relu_outliers_uint8, .timeout = 60)
{
    check_search(OQ_CALIB_ENTROPY, OQ_DTYPE_UINT8, false, true, 100000, 0, 0);
}

Test(range, mse_without_outliers_keeps_gaussian_optimum)
{
    /* 8-bit symmetric on N(0,1), no outliers: the MSE-optimal clip is known to be
     * near 4 sigma (well below the sample max of ~4.4-4.9 only by a little) and the
     * expected MSE at the choice must be within 2% of brute force on the samples. */
    int n = 100000;
    float *x = malloc((size_t)n * sizeof(float));
    rng_state = 99;
    for (int i = 0; i < n; i++)
        x[i] = (float)nrand();
    oq_observer o;
    oq_observer_init(&o, OQ_OBSERVER_HISTOGRAM, OQ_NAN_ERROR);
    oq_observer_update(&o, x, n, NULL, NULL, NULL);
    oq_range_request r;
    oq_range_request_default(&r);
    r.method = OQ_CALIB_MSE;
    r.dtype = OQ_DTYPE_INT4;
    r.symmetric = true;
    float lo, hi;
    oq_range_info info;
    oq_observer_range(&o, &r, &lo, &hi, &info, NULL, NULL);
    double best, bt = brute_force(x, n, OQ_DTYPE_INT4, true, &best);
    /* the continuous optimum for 4-bit (7 positive levels) on N(0,1) is ~2.5 sigma */
    cr_assert(hi > 2.0 && hi < 3.0, "T %g", hi);
    cr_assert_leq(sample_mse(x, n, lo, hi, OQ_DTYPE_INT4, true), 1.02 * best, "T %g vs %g",
                  hi, bt);
    /* the expected MSE the search reports agrees with the samples */
    cr_assert_lt(fabs(info.best_cost - best) / best, 0.03, "model %g, samples %g",
                 info.best_cost, best);
    free(x);
}

Test(range, constant_and_empty)
{
    oq_observer o;
    oq_range_request r;
    oq_range_request_default(&r);
    float lo, hi;
    for (int m = 0; m <= OQ_CALIB_AUTO; m++) {
        r.method = (oq_calib_method)m;
        oq_observer_init(&o, OQ_OBSERVER_HISTOGRAM, OQ_NAN_ERROR);
        cr_assert_eq(oq_observer_range(&o, &r, &lo, &hi, NULL, NULL, NULL), OQ_OK);
        cr_assert(lo == 0.0f && hi == 0.0f);
        float c[64];
        for (int i = 0; i < 64; i++)
            c[i] = 3.0f;
        oq_observer_update(&o, c, 64, NULL, NULL, NULL);
        cr_assert_eq(oq_observer_range(&o, &r, &lo, &hi, NULL, NULL, NULL), OQ_OK);
        cr_assert(lo == 3.0f && hi == 3.0f, "%s: [%g, %g]", oq_calib_method_name(r.method),
                  lo, hi);
        float s;
        int32_t zp;
        cr_assert_eq(oq_qparams_compute(lo, hi, OQ_DTYPE_UINT8, false, false, &s, &zp, NULL),
                     OQ_OK);
        cr_assert_float_eq(s, 3.0f / 255.0f, 1e-9);
        cr_assert_eq(zp, 0);
    }
    oq_observer_init(&o, OQ_OBSERVER_MINMAX, OQ_NAN_ERROR);
    float one = 1.0f;
    oq_observer_update(&o, &one, 1, NULL, NULL, NULL);
    r.method = OQ_CALIB_ENTROPY;
    cr_assert_eq(oq_observer_range(&o, &r, &lo, &hi, NULL, NULL, NULL), OQ_ERR_USAGE);
    cr_assert_eq(oq_calib_method_from_name("mse"), OQ_CALIB_MSE);
    cr_assert_eq(oq_calib_method_from_name("kl"), -1);
}

/* ------------------------------------------------------------------ qparams ---- */

static void qp(float lo, float hi, int32_t dt, bool sym, bool rr, float es, int32_t ezp)
{
    float s;
    int32_t zp;
    cr_assert_eq(oq_qparams_compute(lo, hi, dt, sym, rr, &s, &zp, NULL), OQ_OK);
    cr_assert_float_eq(s, es, fabsf(es) * 1e-6f, "[%g,%g] %s sym=%d rr=%d: scale %.9g != %.9g",
                       lo, hi, oq_dtype_name(dt), sym, rr, s, es);
    cr_assert_eq(zp, ezp, "[%g,%g] %s sym=%d rr=%d: zp %d != %d", lo, hi, oq_dtype_name(dt),
                 sym, rr, zp, ezp);
}

Test(qparams, ranges)
{
    int32_t a, b;
    struct { int32_t dt; bool rr; int32_t lo, hi; } t[] = {
        {OQ_DTYPE_INT8, false, -128, 127}, {OQ_DTYPE_UINT8, false, 0, 255},
        {OQ_DTYPE_INT16, false, -32768, 32767}, {OQ_DTYPE_UINT16, false, 0, 65535},
        {OQ_DTYPE_INT4, false, -8, 7}, {OQ_DTYPE_UINT4, false, 0, 15},
        {OQ_DTYPE_INT32, false, INT32_MIN, INT32_MAX},
        {OQ_DTYPE_INT8, true, -64, 63}, {OQ_DTYPE_UINT8, true, 0, 127},
        {OQ_DTYPE_INT4, true, -4, 3}, {OQ_DTYPE_UINT16, true, 0, 32767},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        cr_assert_eq(oq_qrange(t[i].dt, t[i].rr, &a, &b), OQ_OK);
        cr_assert(a == t[i].lo && b == t[i].hi, "%s: [%d, %d]", oq_dtype_name(t[i].dt), a, b);
    }
    cr_assert_eq(oq_qrange(OQ_DTYPE_FLOAT, false, &a, &b), OQ_ERR_UNSUPPORTED);
}

Test(qparams, hand_computed)
{
    /* uint8 asymmetric: [0,255] -> s 1, zp 0; [-10, 15.5] -> s 25.5/255 = 0.1,
     * zp = 0 - round(-10/0.1) = 100 */
    qp(0.0f, 255.0f, OQ_DTYPE_UINT8, false, false, 1.0f, 0);
    qp(-10.0f, 15.5f, OQ_DTYPE_UINT8, false, false, 0.1f, 100);
    /* zero point ties round to even: [-0.5, 254.5] -> s 1, zp = -round(-0.5) = 0;
     * [-1.5, 253.5] -> zp = -round(-1.5) = 2 */
    qp(-0.5f, 254.5f, OQ_DTYPE_UINT8, false, false, 1.0f, 0);
    qp(-1.5f, 253.5f, OQ_DTYPE_UINT8, false, false, 1.0f, 2);
    /* positive-only range is widened to include 0: [2, 10] -> [0, 10] */
    qp(2.0f, 10.0f, OQ_DTYPE_UINT8, false, false, 10.0f / 255.0f, 0);
    /* negative-only: [-5.1, -1] -> [-5.1, 0]: s = 0.02, zp = 255 */
    qp(-5.1f, -1.0f, OQ_DTYPE_UINT8, false, false, 0.02f, 255);
    /* int8 asymmetric [-12.8, 12.7]: s = 25.5/255 = 0.1, zp = -128 + 128 = 0 */
    qp(-12.8f, 12.7f, OQ_DTYPE_INT8, false, false, 0.1f, 0);
    /* int8 symmetric: T = 6.35 -> s = T/127 = 0.05, zp 0 */
    qp(-3.0f, 6.35f, OQ_DTYPE_INT8, true, false, 0.05f, 0);
    /* uint8 symmetric: T = 1.27, zp 128, s = 1.27/127 */
    qp(-1.27f, 0.5f, OQ_DTYPE_UINT8, true, false, 0.01f, 128);
    /* reduce_range: int8 symmetric T = 6.3 over 63 -> 0.1; uint8 [0, 12.7] / 127 */
    qp(-6.3f, 1.0f, OQ_DTYPE_INT8, true, true, 0.1f, 0);
    qp(0.0f, 12.7f, OQ_DTYPE_UINT8, false, true, 0.1f, 0);
    /* int16 symmetric: 3.2767 / 32767 = 1e-4; uint16 asym [0, 65.535] -> 1e-3 */
    qp(-3.2767f, 1.0f, OQ_DTYPE_INT16, true, false, 1e-4f, 0);
    qp(0.0f, 65.535f, OQ_DTYPE_UINT16, false, false, 1e-3f, 0);
    /* uint16 symmetric: zp 32768, s = T / 32767 */
    qp(-32.767f, 0.0f, OQ_DTYPE_UINT16, true, false, 1e-3f, 32768);
    /* int16 asymmetric [-1, 1]: s = 2/65535, zp = -32768 - round(-1/s) = -32768 +
     * round(32767.5) = -32768 + 32768 = 0 (tie to even: 32767.5 -> 32768) */
    qp(-1.0f, 1.0f, OQ_DTYPE_INT16, false, false, 2.0f / 65535.0f, 0);
    /* 4-bit: int4 sym T=7 -> 1; uint4 [-3, 12] -> s 1, zp 3; int4 asym [-8, 7] -> s 1,
     * zp 0; uint4 sym T = 7 -> zp 8, s = 7/7 */
    qp(-7.0f, 2.0f, OQ_DTYPE_INT4, true, false, 1.0f, 0);
    qp(-3.0f, 12.0f, OQ_DTYPE_UINT4, false, false, 1.0f, 3);
    qp(-8.0f, 7.0f, OQ_DTYPE_INT4, false, false, 1.0f, 0);
    qp(-7.0f, 7.0f, OQ_DTYPE_UINT4, true, false, 1.0f, 8);
    /* constant and zero tensors: valid nonzero finite scale */
    qp(0.0f, 0.0f, OQ_DTYPE_UINT8, false, false, 1.0f, 0);
    qp(0.0f, 0.0f, OQ_DTYPE_INT8, true, false, 1.0f, 0);
    qp(0.0f, 0.0f, OQ_DTYPE_UINT8, true, false, 1.0f, 128);
    qp(-2.55f, -2.55f, OQ_DTYPE_UINT8, false, false, 0.01f, 255);
    /* a denormal range still gives a normal scale */
    float s;
    int32_t zp;
    cr_assert_eq(oq_qparams_compute(0.0f, 1e-42f, OQ_DTYPE_UINT8, false, false, &s, &zp, NULL),
                 OQ_OK);
    cr_assert(s >= FLT_MIN && isfinite(s));
    cr_assert_eq(oq_qparams_compute(NAN, 1.0f, OQ_DTYPE_UINT8, false, false, &s, &zp, NULL),
                 OQ_ERR_NUMERIC);
    cr_assert_eq(oq_qparams_compute(0.0f, INFINITY, OQ_DTYPE_INT8, true, false, &s, &zp, NULL),
                 OQ_ERR_NUMERIC);
    cr_assert_eq(oq_qparams_compute(0.0f, 1.0f, OQ_DTYPE_FLOAT, true, false, &s, &zp, NULL),
                 OQ_ERR_UNSUPPORTED);
}

Test(qparams, quantize_linear_semantics)
{
    /* ties to even, saturation, NaN -> zero point, +-Inf -> bounds */
    const float in[] = {2.5f, 3.5f, -2.5f, -3.5f, 0.5f, 1.5f, -0.5f, 200.0f, -200.0f};
    const int32_t ex[] = {2, 4, -2, -4, 0, 2, 0, 127, -128};
    for (int i = 0; i < 9; i++)
        cr_assert_eq(oq_quantize_value(in[i], 1.0f, 0, -128, 127), ex[i], "x=%g", in[i]);
    cr_assert_eq(oq_quantize_value(NAN, 1.0f, 0, -128, 127), 0);
    cr_assert_eq(oq_quantize_value(NAN, 0.1f, 128, 0, 255), 128);
    cr_assert_eq(oq_quantize_value(INFINITY, 0.1f, 128, 0, 255), 255);
    cr_assert_eq(oq_quantize_value(-INFINITY, 0.1f, 128, 0, 255), 0);
    cr_assert_eq(oq_quantize_value(INFINITY, 1.0f, 0, INT32_MIN, INT32_MAX), INT32_MAX);
    /* zero point added after rounding: 2.5 -> 2 + 128 */
    cr_assert_eq(oq_quantize_value(2.5f, 1.0f, 128, 0, 255), 130);
    cr_assert_eq(oq_quantize_value(9.0f, 1.0f, 0, -8, 7), 7);
    cr_assert_eq(oq_quantize_value(-1.0f, 1.0f, 0, 0, 15), 0);
    /* a real float32 division, not x * (1/scale): in float32 52.15/0.7 = 74.5 exactly
     * (-> 74), whereas 52.15 * (1/0.7) = 74.50001 (-> 75); 25.65/0.3 = 85.49999 (-> 85)
     * against 85.5 (-> 86) by the reciprocal. (values from numpy float32) */
    cr_assert_eq(oq_quantize_value(52.15f, 0.7f, 0, 0, 255), 74);
    cr_assert_eq(oq_quantize_value(25.65f, 0.3f, 0, 0, 255), 85);
    cr_assert_float_eq(oq_dequantize_value(130, 0.5f, 128), 1.0f, 0.0);
    cr_assert_float_eq(oq_dequantize_value(-128, 2.0f, 0), -256.0f, 0.0);
}

Test(qparams, pack_int4_order)
{
    /* two per byte, element 2k in the low nibble: (1, -2) -> 0xE1, (7, -8) -> 0x87,
     * (3) -> 0x03 */
    const int32_t v[5] = {1, -2, 7, -8, 3};
    uint8_t out[3] = {0xff, 0xff, 0xff};
    cr_assert_eq(oq_pack_ints(OQ_DTYPE_INT4, v, 5, out, NULL), OQ_OK);
    cr_assert_eq(out[0], 0xE1);
    cr_assert_eq(out[1], 0x87);
    cr_assert_eq(out[2], 0x03);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(oq_unpack_int(OQ_DTYPE_INT4, out, i), v[i]);
    const int32_t u[4] = {15, 0, 9, 6};
    cr_assert_eq(oq_pack_ints(OQ_DTYPE_UINT4, u, 4, out, NULL), OQ_OK);
    cr_assert_eq(out[0], 0x0F);
    cr_assert_eq(out[1], 0x69);
    const int32_t w[2] = {-300, 65535};
    uint8_t b16[4];
    oq_pack_ints(OQ_DTYPE_INT16, w, 1, b16, NULL);
    cr_assert_eq(oq_unpack_int(OQ_DTYPE_INT16, b16, 0), -300);
    oq_pack_ints(OQ_DTYPE_UINT16, w + 1, 1, b16, NULL);
    cr_assert(b16[0] == 0xff && b16[1] == 0xff);
}

Test(weights, per_channel_int8)
{
    /* [2, 3], axis 0. Row 0: T = 127 -> s 1: [-127, 2.5, 3.5] -> [-127, 2, 4].
     * Row 1: T = 63.5 -> s 0.5: [63.5, -1.25, 0.75] -> [127, -2 (tie), 2 (tie)]. */
    const float w[6] = {-127.0f, 2.5f, 3.5f, 63.5f, -1.25f, 0.75f};
    const int64_t dims[2] = {2, 3};
    oq_weight_spec s;
    oq_weight_spec_default(&s);
    int64_t pd[2];
    size_t pr;
    cr_assert_eq(oq_weight_param_shape(dims, 2, &s, pd, &pr, NULL), 2);
    cr_assert(pr == 1 && pd[0] == 2);
    float sc[2];
    int32_t zp[2];
    int8_t q[6];
    cr_assert_eq(oq_quantize_weight(w, dims, 2, &s, sc, zp, q, "w", NULL), OQ_OK);
    cr_assert(sc[0] == 1.0f && sc[1] == 0.5f && zp[0] == 0 && zp[1] == 0);
    const int8_t ex[6] = {-127, 2, 4, 127, -2, 2};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(q[i], ex[i], "q[%d] = %d", i, q[i]);
}

Test(weights, per_channel_axis1_and_zero_channel)
{
    /* [2, 2] axis 1 (ConvTranspose-like): channel 0 = {w00, w10} = {0, 0} -> scale 1
     * (valid for a zero channel); channel 1 = {1.5, -3} uint8 asymmetric:
     * [-3, 1.5] -> s = 4.5/255, zp = round(3/s) = round(170) = 170 */
    const float w[4] = {0.0f, 1.5f, 0.0f, -3.0f};
    const int64_t dims[2] = {2, 2};
    oq_weight_spec s;
    oq_weight_spec_default(&s);
    s.axis = 1;
    s.dtype = OQ_DTYPE_UINT8;
    s.symmetric = false;
    float sc[2];
    int32_t zp[2];
    uint8_t q[4];
    cr_assert_eq(oq_quantize_weight(w, dims, 2, &s, sc, zp, q, "w", NULL), OQ_OK);
    cr_assert_eq(sc[0], 1.0f);
    cr_assert_eq(zp[0], 0);
    cr_assert_float_eq(sc[1], 4.5f / 255.0f, 1e-9);
    cr_assert_eq(zp[1], 170);
    cr_assert_eq(q[0], 0);
    cr_assert_eq(q[2], 0);
    cr_assert_eq(q[1], 255); /* 1.5/s + 170 = 85 + 170 */
    cr_assert_eq(q[3], 0);   /* -3/s + 170 = -170 + 170 */
}

Test(weights, blocked_int4_packed)
{
    /* [2, 4], blocks of 2 along axis 1 -> params [2, 2]. int4 symmetric (T/7):
     * row 0 blocks: {-7, 1.5} T=7 s=1 -> {-7, 2}; {0.5, 3.5} T=3.5 s=0.5 -> {1, 7}
     * row 1 blocks: {14, -2} T=14 s=2 -> {7, -1}; {-1, 0} T=1 s=1/7 -> {-7, 0}
     * packed: (-7, 2) -> 0x29, (1, 7) -> 0x71, (7, -1) -> 0xF7, (-7, 0) -> 0x09 */
    const float w[8] = {-7.0f, 1.5f, 0.5f, 3.5f, 14.0f, -2.0f, -1.0f, 0.0f};
    const int64_t dims[2] = {2, 4};
    oq_weight_spec s;
    oq_weight_spec_default(&s);
    s.dtype = OQ_DTYPE_INT4;
    s.axis = 1;
    s.block_size = 2;
    int64_t pd[2];
    size_t pr;
    cr_assert_eq(oq_weight_param_shape(dims, 2, &s, pd, &pr, NULL), 4);
    cr_assert(pr == 2 && pd[0] == 2 && pd[1] == 2);
    float sc[4];
    int32_t zp[4];
    uint8_t q[4];
    cr_assert_eq(oq_quantize_weight(w, dims, 2, &s, sc, zp, q, "w", NULL), OQ_OK);
    cr_assert(sc[0] == 1.0f && sc[1] == 0.5f && sc[2] == 2.0f);
    cr_assert_float_eq(sc[3], 1.0f / 7.0f, 1e-9);
    cr_assert_eq(q[0], 0x29);
    cr_assert_eq(q[1], 0x71);
    cr_assert_eq(q[2], 0xF7);
    cr_assert_eq(q[3], 0x09);
    /* a block size that does not divide the axis: [1, 3] blocks of 2 -> 2 params */
    const int64_t d3[2] = {1, 3};
    cr_assert_eq(oq_weight_param_shape(d3, 2, &s, pd, &pr, NULL), 2);
}

Test(weights, with_params_saturation_and_errors)
{
    const float w[4] = {1.0f, -300.0f, 300.0f, NAN};
    const int64_t dims[1] = {4};
    float s = 1.0f;
    int32_t zp = 0;
    int8_t q[4];
    int64_t nsat;
    cr_assert_eq(oq_quantize_with_params(w, dims, 1, OQ_DTYPE_INT8, 0, 0, &s, &zp, 1, q, &nsat,
                                         NULL),
                 OQ_OK);
    cr_assert(q[0] == 1 && q[1] == -128 && q[2] == 127 && q[3] == 0);
    cr_assert_eq(nsat, 2);
    float zero = 0.0f;
    cr_assert_eq(oq_quantize_with_params(w, dims, 1, OQ_DTYPE_INT8, 0, 0, &zero, &zp, 1, q,
                                         NULL, NULL),
                 OQ_ERR_NUMERIC);
    oq_weight_spec sp;
    oq_weight_spec_default(&sp);
    float sc[4];
    int32_t zps[4];
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_quantize_weight(w, dims, 1, &sp, sc, zps, q, "conv.weight", &d),
                 OQ_ERR_NUMERIC);
    cr_assert(strstr(oq_diag_first_error(&d)->message, "conv.weight"));
    oq_diag_free(&d);
}

Test(bias, per_channel_and_overflow)
{
    /* s_in = 0.5, s_w = {0.25, 2} -> bias scales {0.125, 1}; bias {1, 2.5} -> {8, 2} */
    const float b[2] = {1.0f, 2.5f};
    const float ws[2] = {0.25f, 2.0f};
    int32_t q[2];
    float bs[2];
    int64_t nov, first;
    cr_assert_eq(oq_quantize_bias(b, 2, 0.5f, ws, 2, q, bs, &nov, &first, "b", NULL), OQ_OK);
    cr_assert(bs[0] == 0.125f && bs[1] == 1.0f);
    cr_assert(q[0] == 8 && q[1] == 2);
    cr_assert(nov == 0 && first == -1);
    /* tiny scales: 0.01 * 0.01 = 1e-4; 1e9 / 1e-4 = 1e13 overflows -> INT32_MAX */
    const float big[3] = {0.5f, 1e9f, -1e9f};
    const float w1 = 0.01f;
    int32_t q3[3];
    cr_assert_eq(oq_quantize_bias(big, 3, 0.01f, &w1, 1, q3, NULL, &nov, &first, "b", NULL),
                 OQ_OK);
    cr_assert_eq(nov, 2);
    cr_assert_eq(first, 1);
    cr_assert_eq(q3[1], INT32_MAX);
    cr_assert_eq(q3[2], INT32_MIN);
    cr_assert_eq(q3[0], 5000);
    /* the weight scale that makes 1e9 fit */
    float sw = oq_bias_min_weight_scale(1e9f, 0.01f);
    cr_assert_eq(oq_quantize_bias(big + 1, 1, 0.01f, &sw, 1, q3, NULL, &nov, &first, "b",
                                  NULL),
                 OQ_OK);
    cr_assert_eq(nov, 0);
    cr_assert_gt(q3[0], 2000000000);
    /* just enough: s_w >= 1e9 / (0.01 * (2^31 - 1)) = 46.57, and the quantized bias
     * ends up above 2e9, i.e. s_w < 1e9 / (0.01 * 2e9) = 50 */
    cr_assert_geq(sw, 46.566f);
    cr_assert_lt(sw, 50.0f);
}

Test(observer, merge)
{
    /* two observers over halves of the data merge into the counts/extremes of one */
    oq_observer a, b;
    oq_observer_init(&a, OQ_OBSERVER_HISTOGRAM, OQ_NAN_IGNORE);
    oq_observer_init(&b, OQ_OBSERVER_HISTOGRAM, OQ_NAN_IGNORE);
    const float x[] = {0.0f, 1.0f, 2.0f, NAN};
    const float y[] = {-10.0f, 5.0f, 0.0f};
    oq_observer_update(&a, x, 4, NULL, NULL, NULL);
    oq_observer_update(&b, y, 3, NULL, NULL, NULL);
    cr_assert_eq(oq_observer_merge(&a, &b, NULL), OQ_OK);
    cr_assert_eq(a.count, 6);
    cr_assert_eq(a.zero_count, 2);
    cr_assert_eq(a.nan_count, 1);
    cr_assert_eq(a.hist.total, 6);
    cr_assert(a.min == -10.0f && a.max == 5.0f);
    uint64_t sum = 0;
    for (int i = 0; i < OQ_HIST_BINS; i++)
        sum += a.hist.counts[i];
    cr_assert_eq(sum, 6);
    /* into an observer that has only seen NaN: its NaN count survives */
    oq_observer c;
    oq_observer_init(&c, OQ_OBSERVER_HISTOGRAM, OQ_NAN_IGNORE);
    const float nn[] = {NAN, NAN};
    oq_observer_update(&c, nn, 2, NULL, NULL, NULL);
    cr_assert_eq(oq_observer_merge(&c, &a, NULL), OQ_OK);
    cr_assert_eq(c.nan_count, 3);
    cr_assert_eq(c.count, 6);
    cr_assert_eq(c.hist.total, 6);
    oq_observer m;
    oq_observer_init(&m, OQ_OBSERVER_MINMAX, OQ_NAN_IGNORE);
    cr_assert_eq(oq_observer_merge(&a, &m, NULL), OQ_ERR_USAGE);
}

Test(range, entropy_16bit_is_full_range)
{
    /* 65536 levels cannot be resolved by 2048 bins: the only window is the full range */
    oq_observer o;
    oq_observer_init(&o, OQ_OBSERVER_HISTOGRAM, OQ_NAN_ERROR);
    rng_state = 5;
    float x[5000];
    for (int i = 0; i < 5000; i++)
        x[i] = (float)nrand();
    oq_observer_update(&o, x, 5000, NULL, NULL, NULL);
    oq_range_request r;
    oq_range_request_default(&r);
    r.method = OQ_CALIB_ENTROPY;
    r.dtype = OQ_DTYPE_UINT16;
    float lo, hi;
    oq_range_info info;
    cr_assert_eq(oq_observer_range(&o, &r, &lo, &hi, &info, NULL, NULL), OQ_OK);
    cr_assert_eq(lo, o.min);
    cr_assert_eq(hi, o.max);
    cr_assert_eq(info.candidates, 1);
}

Test(qparams, from_observer)
{
    /* minmax uint8 on {-1, 0, 3}: [-1, 3] -> scale 4/255, zp = -round(-1/(4/255)) =
     * round(63.75) = 64 */
    oq_observer o;
    oq_observer_init(&o, OQ_OBSERVER_MINMAX, OQ_NAN_ERROR);
    const float x[] = {-1.0f, 0.0f, 3.0f};
    oq_observer_update(&o, x, 3, NULL, NULL, NULL);
    oq_range_request r;
    oq_range_request_default(&r);
    r.method = OQ_CALIB_MINMAX;
    float s;
    int32_t zp;
    cr_assert_eq(oq_observer_qparams(&o, &r, &s, &zp, NULL, "t", NULL), OQ_OK);
    cr_assert_float_eq(s, 4.0f / 255.0f, 1e-9);
    cr_assert_eq(zp, 64);
    /* an observer that saw nothing still gives valid parameters */
    oq_observer_init(&o, OQ_OBSERVER_HISTOGRAM, OQ_NAN_IGNORE);
    r.method = OQ_CALIB_PERCENTILE;
    cr_assert_eq(oq_observer_qparams(&o, &r, &s, &zp, NULL, "t", NULL), OQ_OK);
    cr_assert(s == 1.0f && zp == 0);
}

/* ------------------------------------------------- against onnxruntime ---- */

typedef struct ort_case {
    const char *name;
    int32_t dtype;
    int mode; /* 0 tensor, 1 channel, 2 block */
    int64_t rows, cols;
    int axis;
    int64_t block;
} ort_case;

/* Parameter index of element (r, c) of a 2-D tensor, written out per mode (independent
 * of the library's layout code). */
static int64_t case_pidx(const ort_case *k, int64_t r, int64_t c)
{
    if (k->mode == 0)
        return 0;
    if (k->mode == 1)
        return k->axis == 0 ? r : c;
    if (k->axis == 1) {
        int64_t g = (k->cols + k->block - 1) / k->block;
        return r * g + c / k->block;
    }
    return (r / k->block) * k->cols + c;
}

static void hex_out(FILE *f, const uint8_t *b, int64_t n)
{
    fputc('"', f);
    for (int64_t i = 0; i < n; i++)
        fprintf(f, "%02x", b[i]);
    fputc('"', f);
}

Test(ort, quantize_and_packing_match_onnxruntime, .timeout = 300)
{
    const int32_t dts[6] = {OQ_DTYPE_INT8, OQ_DTYPE_UINT8, OQ_DTYPE_INT16, OQ_DTYPE_UINT16,
                            OQ_DTYPE_INT4, OQ_DTYPE_UINT4};
    const ort_case shapes[5] = {
        {"per-tensor", 0, 0, 4, 5, 0, 0},       {"per-channel axis 1", 0, 1, 3, 4, 1, 0},
        {"per-channel axis 0", 0, 1, 3, 7, 0, 0}, {"blocks of 2 on axis 1", 0, 2, 2, 5, 1, 2},
        {"blocks of 3 on axis 0", 0, 2, 4, 2, 0, 3}};
    char *dir = tu_tmpdir();
    char path[600];
    snprintf(path, sizeof(path), "%s/cases.json", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("[\n", f);
    rng_state = 2024;
    int ncase = 0;
    for (int di = 0; di < 6; di++)
        for (int si = 0; si < 5; si++)
            for (int from_data = 0; from_data < 2; from_data++) {
                ort_case k = shapes[si];
                k.dtype = dts[di];
                int32_t qmin, qmax;
                oq_qrange(k.dtype, false, &qmin, &qmax);
                const int64_t dims[2] = {k.rows, k.cols};
                int64_t n = k.rows * k.cols;
                oq_weight_spec sp;
                oq_weight_spec_default(&sp);
                sp.dtype = k.dtype;
                sp.per_channel = k.mode != 0;
                sp.axis = k.axis;
                sp.block_size = k.mode == 2 ? k.block : 0;
                sp.symmetric = (ncase % 3) == 0;
                int64_t pd[2];
                size_t pr;
                int64_t np_ = oq_weight_param_shape(dims, 2, &sp, pd, &pr, NULL);
                cr_assert_gt(np_, 0);
                float sc[64], x[64];
                int32_t zp[64];
                uint8_t packed[256], zpk[64];
                if (from_data) {
                    /* parameters from random data, arbitrary scales */
                    for (int64_t i = 0; i < n; i++)
                        x[i] = (float)(nrand() * 0.37);
                    cr_assert_eq(oq_quantize_weight(x, dims, 2, &sp, sc, zp, packed, "w", NULL),
                                 OQ_OK);
                    /* and quantize values beyond the range too */
                    x[0] *= 3.0f;
                } else {
                    /* power-of-two scales and zero points spread over the range, inputs with
                     * exact ties, saturating values and infinities */
                    for (int64_t p = 0; p < np_; p++) {
                        sc[p] = ldexpf(1.0f, (int)(urand() * 6) - 3);
                        zp[p] = qmin + (int32_t)(urand() * ((double)qmax - qmin + 1));
                    }
                    for (int64_t r = 0; r < k.rows; r++)
                        for (int64_t c = 0; c < k.cols; c++) {
                            int64_t e = r * k.cols + c, p = case_pidx(&k, r, c);
                            double span = ((double)qmax - qmin) * sc[p];
                            int kind = (int)(e % 4);
                            if (kind == 0) /* a tie: (m + 0.5) * scale */
                                x[e] = (float)((floor((urand() - 0.5) * 20.0) + 0.5) * sc[p]);
                            else if (kind == 1)
                                x[e] = (float)((urand() - 0.5) * span);
                            else if (kind == 2)
                                x[e] = (float)((urand() - 0.5) * 4.0 * span);
                            else
                                x[e] = (float)((urand() - 0.5) * 10.0 * sc[p]);
                        }
                    x[1] = INFINITY;
                    x[2] = -INFINITY;
                    x[3] = -0.0f;
                }
                cr_assert_eq(oq_quantize_with_params(x, dims, 2, k.dtype, k.axis,
                                                     k.mode == 2 ? k.block : 0, sc, zp, np_,
                                                     packed, NULL, NULL),
                             OQ_OK);
                cr_assert_eq(oq_pack_ints(k.dtype, zp, np_, zpk, NULL), OQ_OK);
                fprintf(f, "%s{\"name\": \"%s %s%s\", \"dtype\": %d, \"mode\": \"%s\", ",
                        ncase ? ",\n" : "", oq_dtype_name(k.dtype), k.name,
                        from_data ? " (scales from data)" : "", k.dtype,
                        k.mode == 0 ? "tensor" : k.mode == 1 ? "channel" : "block");
                fprintf(f, "\"axis\": %d, \"block\": %lld, \"dims\": [%lld, %lld], \"pdims\": [",
                        k.axis, (long long)k.block, (long long)k.rows, (long long)k.cols);
                for (size_t i = 0; i < pr; i++)
                    fprintf(f, "%s%lld", i ? ", " : "", (long long)pd[i]);
                fputs("], \"x\": [", f);
                for (int64_t i = 0; i < n; i++) {
                    if (isinf(x[i]))
                        fprintf(f, "%s\"%s\"", i ? ", " : "", x[i] > 0 ? "inf" : "-inf");
                    else
                        fprintf(f, "%s%.9g", i ? ", " : "", (double)x[i]);
                }
                fputs("], \"scales\": [", f);
                for (int64_t p = 0; p < np_; p++)
                    fprintf(f, "%s%.9g", p ? ", " : "", (double)sc[p]);
                fputs("], \"zps\": [", f);
                for (int64_t p = 0; p < np_; p++)
                    fprintf(f, "%s%d", p ? ", " : "", zp[p]);
                fputs("], \"pidx\": [", f);
                for (int64_t r = 0; r < k.rows; r++)
                    for (int64_t c = 0; c < k.cols; c++)
                        fprintf(f, "%s%lld", r + c ? ", " : "", (long long)case_pidx(&k, r, c));
                fputs("], \"q\": [", f);
                for (int64_t i = 0; i < n; i++)
                    fprintf(f, "%s%d", i ? ", " : "", oq_unpack_int(k.dtype, packed, i));
                fputs("], \"zp_packed\": ", f);
                hex_out(f, zpk, oq_dtype_nbytes(k.dtype, np_));
                fputs(", \"packed\": ", f);
                hex_out(f, packed, oq_dtype_nbytes(k.dtype, n));
                fputs("}", f);
                ncase++;
            }
    fputs("\n]\n", f);
    fclose(f);
    tu_ort_check("quant_ort_check.py", dir);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    tu_run(cmd, NULL);
    free(dir);
}

/* ------------------------------------------------------ auto (chosen per tensor) ---- */

static void feed_chunks(oq_observer *o, const float *x, int n)
{
    oq_observer_init(o, OQ_OBSERVER_HISTOGRAM, OQ_NAN_ERROR);
    for (int i = 0; i < n; i += 10000)
        cr_assert_eq(oq_observer_update(o, x + i, (n - i) < 10000 ? n - i : 10000, NULL, NULL, NULL), OQ_OK);
}

/* auto's criterion computed directly on the samples: QuantizeLinear / DequantizeLinear
 * with the parameters of [lo, hi]; values outside the representable interval count
 * OQ_AUTO_CLIP_WEIGHT times (clipping), the others once (rounding). */
static double sample_auto_cost(const float *x, int n, float lo, float hi, int32_t dtype)
{
    float s;
    int32_t zp, qmin, qmax;
    cr_assert_eq(oq_qparams_compute(lo, hi, dtype, false, false, &s, &zp, NULL), OQ_OK);
    oq_qrange(dtype, false, &qmin, &qmax);
    double a = ((double)qmin - zp) * s, b = ((double)qmax - zp) * s, e = 0.0;
    for (int i = 0; i < n; i++) {
        float y = oq_dequantize_value(oq_quantize_value(x[i], s, zp, qmin, qmax), s, zp);
        double d2 = ((double)x[i] - y) * ((double)x[i] - y);
        e += (x[i] < a || x[i] > b) ? OQ_AUTO_CLIP_WEIGHT * d2 : d2;
    }
    return e / n;
}

/* The rule of oq_observer_range_auto applied to given costs: the widest range within
 * OQ_AUTO_TIE of the least. */
static int auto_rule(const double *cost, const float *lo, const float *hi)
{
    double best = INFINITY;
    for (int c = 0; c < OQ_AUTO_CANDIDATES; c++)
        best = cost[c] < best ? cost[c] : best;
    int ch = -1;
    for (int c = 0; c < OQ_AUTO_CANDIDATES; c++)
        if (cost[c] <= best * (1.0 + OQ_AUTO_TIE) && (ch < 0 || hi[c] - lo[c] > hi[ch] - lo[ch]))
            ch = c;
    return ch;
}

/* The range error of oq_observer_range_mse against the same error on the samples. */
Test(auto_range, range_mse_matches_samples)
{
    int n = 200000;
    float *x = malloc((size_t)n * sizeof(float));
    rng_state = 777;
    for (int i = 0; i < n; i++)
        x[i] = (float)(nrand() * 0.7 + 0.3);
    oq_observer o;
    feed_chunks(&o, x, n);
    oq_range_request r;
    oq_range_request_default(&r);
    const float rg[][2] = {{-3.0f, 3.5f}, {-1.0f, 1.2f}, {-0.5f, 0.5f}, {0.0f, 2.0f}};
    for (size_t k = 0; k < sizeof rg / sizeof rg[0]; k++) {
        double c, want = sample_mse(x, n, rg[k][0], rg[k][1], OQ_DTYPE_UINT8, false);
        cr_assert_eq(oq_observer_range_mse(&o, &r, rg[k][0], rg[k][1], &c, NULL), OQ_OK);
        cr_log_info("range_mse [%g, %g]: histogram %g, samples %g", rg[k][0], rg[k][1], c, want);
        cr_assert_lt(fabs(c - want), 0.02 * want, "[%g, %g]: %g vs %g", rg[k][0], rg[k][1], c, want);
    }
    free(x);
}

/* N(0, 1) with three outliers at +-40 in the fit share, none in the held-out share: the
 * full range wastes the 256 levels on the outliers, so auto picks a clipped range; the
 * winner is the one the rule picks from the costs measured directly on the held-out
 * samples. */
Test(auto_range, outliers_give_clipped_range)
{
    int nf = 200000, nh = 60000;
    float *f = malloc((size_t)(nf + 3) * sizeof(float)), *h = malloc((size_t)nh * sizeof(float));
    rng_state = 4242;
    for (int i = 0; i < nf; i++)
        f[i] = (float)nrand();
    f[nf] = 40.0f;
    f[nf + 1] = -40.0f;
    f[nf + 2] = 40.0f;
    for (int i = 0; i < nh; i++)
        h[i] = (float)nrand();
    oq_observer of, oh;
    feed_chunks(&of, f, nf + 3);
    feed_chunks(&oh, h, nh);
    oq_range_request r;
    oq_range_request_default(&r);
    r.method = OQ_CALIB_AUTO;
    oq_auto_result res;
    float lo, hi;
    cr_assert_eq(oq_observer_range_auto(&of, &oh, &r, &lo, &hi, &res, NULL, NULL), OQ_OK);
    cr_assert(res.held_out);
    double direct[OQ_AUTO_CANDIDATES];
    for (int c = 0; c < OQ_AUTO_CANDIDATES; c++) {
        direct[c] = sample_auto_cost(h, nh, res.lo[c], res.hi[c], OQ_DTYPE_UINT8);
        cr_log_info("outliers: %-8s [%g, %g] held-out cost %g, on the samples %g", oq_auto_candidate_name(c),
                    res.lo[c], res.hi[c], res.cost[c], direct[c]);
        cr_assert_lt(fabs(res.cost[c] - direct[c]), 0.03 * direct[c], "%s", oq_auto_candidate_name(c));
    }
    int want = auto_rule(direct, res.lo, res.hi);
    cr_log_info("outliers: chose %s [%g, %g]", oq_auto_candidate_name(res.chosen), lo, hi);
    cr_assert_eq(res.chosen, want, "chose %s, the samples say %s", oq_auto_candidate_name(res.chosen),
                 oq_auto_candidate_name(want));
    cr_assert_neq(res.chosen, OQ_AUTO_MINMAX);
    cr_assert(hi < 8.0f && lo > -8.0f && hi > 2.5f && lo < -2.5f, "[%g, %g] is not a clipped range", lo, hi);
    /* minmax costs about (80/255)^2/12 = 0.0082, far more than the clipped winner */
    cr_assert_gt(direct[OQ_AUTO_MINMAX], 5.0 * direct[res.chosen]);
    free(f);
    free(h);
}

/* A uniform tensor has no tail worth clipping: auto keeps min / max. */
Test(auto_range, uniform_gives_minmax)
{
    int nf = 120000, nh = 40000;
    float *f = malloc((size_t)nf * sizeof(float)), *h = malloc((size_t)nh * sizeof(float));
    rng_state = 99;
    for (int i = 0; i < nf; i++)
        f[i] = (float)(urand() * 4.0 - 1.0);
    for (int i = 0; i < nh; i++)
        h[i] = (float)(urand() * 4.0 - 1.0);
    oq_observer of, oh;
    feed_chunks(&of, f, nf);
    feed_chunks(&oh, h, nh);
    oq_range_request r;
    oq_range_request_default(&r);
    oq_auto_result res;
    float lo, hi;
    cr_assert_eq(oq_observer_range_auto(&of, &oh, &r, &lo, &hi, &res, NULL, NULL), OQ_OK);
    cr_log_info("uniform: chose %s [%g, %g]; costs minmax %g mse %g", oq_auto_candidate_name(res.chosen), lo, hi,
                res.cost[OQ_AUTO_MINMAX], res.cost[OQ_AUTO_MSE]);
    cr_assert_eq(res.chosen, OQ_AUTO_MINMAX, "chose %s", oq_auto_candidate_name(res.chosen));
    float mn = fminf(of.min, oh.min), mx = fmaxf(of.max, oh.max);
    cr_assert(lo == mn && hi == mx, "[%g, %g] vs min/max [%g, %g]", lo, hi, mn, mx);
    free(f);
    free(h);
}

/* The held-out share decides: fit on 10^6 values of N(0, 1) with two outliers at +-30,
 * auto scored on the fit share itself clips them (the outliers' clipping error, 2 x 26^2
 * / 10^6, is below the full range's rounding noise, (60/255)^2 / 12); when the held-out share has 2 % of its values at
 * +-28 (the outliers were not rare after all), clipping them is what costs most and the
 * chosen range covers them. */
Test(auto_range, held_out_share_changes_choice)
{
    int nf = 1000000, nh = 30000;
    float *f = malloc((size_t)(nf + 2) * sizeof(float)), *h = malloc((size_t)nh * sizeof(float));
    rng_state = 31337;
    for (int i = 0; i < nf; i++)
        f[i] = (float)nrand();
    f[nf] = 30.0f;
    f[nf + 1] = -30.0f;
    for (int i = 0; i < nh; i++)
        h[i] = (i % 50 == 0) ? (i % 100 == 0 ? 28.0f : -28.0f) : (float)nrand();
    oq_observer of, oh;
    feed_chunks(&of, f, nf + 2);
    feed_chunks(&oh, h, nh);
    oq_range_request r;
    oq_range_request_default(&r);
    oq_auto_result in, out;
    float lo, hi, lo2, hi2;
    cr_assert_eq(oq_observer_range_auto(&of, NULL, &r, &lo, &hi, &in, NULL, NULL), OQ_OK);
    cr_assert_eq(oq_observer_range_auto(&of, &oh, &r, &lo2, &hi2, &out, NULL, NULL), OQ_OK);
    cr_log_info("in-sample: %s [%g, %g]; held-out: %s [%g, %g]", oq_auto_candidate_name(in.chosen), lo, hi,
                oq_auto_candidate_name(out.chosen), lo2, hi2);
    cr_assert_not(in.held_out);
    cr_assert(out.held_out);
    cr_assert(hi < 20.0f && lo > -20.0f, "in-sample: [%g, %g] does not clip the outliers", lo, hi);
    cr_assert_neq(in.chosen, out.chosen);
    cr_assert(lo2 <= -28.0f && hi2 >= 28.0f, "held-out: [%g, %g] clips the values at +-28", lo2, hi2);
    free(f);
    free(h);
}

/* method auto through oq_observer_range (in-sample) and its names */
Test(auto_range, names_and_in_sample)
{
    cr_assert_eq(oq_calib_method_from_name("auto"), OQ_CALIB_AUTO);
    cr_assert_str_eq(oq_calib_method_name(OQ_CALIB_AUTO), "auto");
    for (int c = 0; c < OQ_AUTO_CANDIDATES; c++)
        cr_assert_eq(oq_auto_candidate_from_name(oq_auto_candidate_name(c)), c);
    cr_assert_eq(oq_auto_candidate_from_name("p99"), -1);
    float x[1000];
    for (int i = 0; i < 1000; i++)
        x[i] = (float)i / 999.0f;
    oq_observer o;
    feed_chunks(&o, x, 1000);
    oq_range_request r;
    oq_range_request_default(&r);
    r.method = OQ_CALIB_AUTO;
    float lo, hi;
    cr_assert_eq(oq_observer_range(&o, &r, &lo, &hi, NULL, NULL, NULL), OQ_OK);
    cr_assert(lo == 0.0f && hi == 1.0f, "[%g, %g]", lo, hi);
}

/* The table of method auto keeps what won, held out or in-sample, through its JSON. */
Test(auto_range, table_json_keeps_choices)
{
    oq_calib_entry e[3];
    memset(e, 0, sizeof e);
    char n0[] = "a", n1[] = "b/c", n2[] = "d";
    e[0].name = n0;
    e[0].choice = oq_auto_candidate_name(OQ_AUTO_P99_99);
    e[0].held_out = true;
    e[1].name = n1;
    e[1].choice = oq_auto_candidate_name(OQ_AUTO_MSE);
    e[1].held_out = false;
    e[2].name = n2; /* never seen: no choice */
    e[0].lo = -1.5f;
    e[0].hi = 2.25f;
    oq_calib_table t = {.count = 3, .items = e, .samples = 9, .method = OQ_CALIB_AUTO, .held_out_samples = 2};
    char *js = oq_calib_table_to_json(&t);
    cr_assert_not_null(js);
    cr_log_info("%s", js);
    cr_assert_not_null(strstr(js, "\"choices\":{\"a\":\"p99.99\",\"b/c\":\"mse*\"}"), "%s", js);
    oq_calib_table u;
    cr_assert_eq(oq_calib_table_from_json(js, &u, NULL), OQ_OK);
    cr_assert_eq(u.method, OQ_CALIB_AUTO);
    cr_assert_eq(u.held_out_samples, 2);
    cr_assert_eq(u.count, 3);
    cr_assert_str_eq(u.items[0].choice, "p99.99");
    cr_assert(u.items[0].held_out);
    cr_assert(u.items[0].lo == -1.5f && u.items[0].hi == 2.25f);
    cr_assert_str_eq(u.items[1].choice, "mse");
    cr_assert_not(u.items[1].held_out);
    cr_assert_null(u.items[2].choice);
    oq_calib_table_free(&u);
    free(js);
}

/* oq_histogram_add counts long batches (>= 4096 values) in four partial histograms: the
 * counts must equal those of the same values added one at a time (the short-batch path),
 * with NaN and +-Inf left out, a long run of one value (Relu zeros), values on the edges
 * and a length that is not a multiple of 4. */
Test(observer, long_batches_count_as_single_values)
{
    enum { N = 3 * 4096 + 3 };
    static float x[N];
    rng_state = 7;
    for (int i = 0; i < N; i++)
        x[i] = i < 5000 ? 0.0f : (float)(-2.0 + 6.0 * urand());
    x[5001] = NAN;
    x[6002] = INFINITY;
    x[7003] = -INFINITY;
    x[8004] = -2.0f;
    x[9005] = 4.0f;
    oq_histogram a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    oq_histogram_add(&a, x, N, -2.0f, 4.0f);
    oq_histogram_add(&b, x, 1, -2.0f, 4.0f); /* sets the same grid: [xmin, xmax] */
    memset(b.counts, 0, sizeof b.counts);
    b.total = 0;
    for (int i = 0; i < N; i++)
        oq_histogram_add(&b, x + i, 1, -2.0f, 4.0f);
    cr_assert_eq(a.lo, b.lo);
    cr_assert_eq(a.width, b.width);
    cr_assert_eq(a.total, (uint64_t)N - 3);
    cr_assert_eq(b.total, a.total);
    for (int k = 0; k < OQ_HIST_BINS; k++)
        cr_assert_eq(a.counts[k], b.counts[k], "bin %d: %llu vs %llu", k, (unsigned long long)a.counts[k],
                     (unsigned long long)b.counts[k]);
    /* the 5000 zeros: bin floor((0 + 2) / (6 / 2048)) = floor(682.67) = 682 */
    cr_assert_geq(a.counts[682], 5000);
}

/* oq_observer_update on long batches (the AVX2 scans where the CPU has them) against the
 * definitions computed here: min and max of the finite values, zeros (+0 and -0) counted,
 * NaN/Inf counted and left out, a zero extreme reported as +0, and each finite value in bin
 * floor((v - lo) / width) of the histogram the first batch sets up over [min, max] (clamped
 * to the first and last bins; a value within rounding of an edge may sit in the neighbour,
 * so the counts are compared bin by bin with that slack: at most one value moved per edge
 * it lies on). Odd lengths exercise the tails. */
Test(observer, long_batches_match_the_definitions)
{
    enum { N = 20011 };
    static float x[N];
    uint32_t s = 12345;
    for (int trial = 0; trial < 3; trial++) {
        for (int i = 0; i < N; i++) {
            s = s * 1664525u + 1013904223u;
            x[i] = (float)((int)(s >> 8) % 20001 - 7000) * 0.001f; /* [-7, 13] on a 0.001 grid */
        }
        x[17] = 0.0f;
        x[18] = -0.0f;
        if (trial == 1) { /* non-finite values, left out */
            x[5] = NAN;
            x[4100] = INFINITY;
            x[N - 1] = -INFINITY;
        }
        if (trial == 2) /* only values >= 0 with -0 among them: the minimum is +0 */
            for (int i = 0; i < N; i++)
                x[i] = i % 7 == 3 ? -0.0f : fabsf(x[i]);
        float mn = FLT_MAX, mx = -FLT_MAX;
        uint64_t zeros = 0, nonfinite = 0;
        for (int i = 0; i < N; i++) {
            if (!isfinite(x[i])) {
                nonfinite++;
                continue;
            }
            mn = x[i] < mn ? x[i] : mn;
            mx = x[i] > mx ? x[i] : mx;
            zeros += x[i] == 0.0f;
        }
        oq_observer o;
        oq_observer_init(&o, OQ_OBSERVER_HISTOGRAM, OQ_NAN_IGNORE);
        oq_nonfinite nf;
        cr_assert_eq(oq_observer_update(&o, x, N, &nf, "x", NULL), OQ_OK);
        cr_assert_eq(nf.nan_count + nf.inf_count, nonfinite);
        cr_assert(o.min == mn && o.max == mx, "[%g, %g] vs [%g, %g]", o.min, o.max, mn, mx);
        if (mn == 0.0f)
            cr_assert(!signbit(o.min), "a zero minimum is +0");
        cr_assert_eq(o.count, (uint64_t)N - nonfinite);
        if (trial != 2) /* every value is exactly zero or not: both signs count */
            cr_assert_eq(o.zero_count, zeros);
        uint64_t want[OQ_HIST_BINS] = {0};
        double lo = o.hist.lo, w = o.hist.width;
        cr_assert(lo == mn && fabs(w * OQ_HIST_BINS - ((double)mx - mn)) <= 1e-12 * (mx - mn), "grid");
        for (int i = 0; i < N; i++) {
            if (!isfinite(x[i]))
                continue;
            double t = floor(((double)x[i] - lo) / w);
            want[t < 0 ? 0 : t > OQ_HIST_BINS - 1 ? OQ_HIST_BINS - 1 : (int)t]++;
        }
        uint64_t total = 0, moved = 0;
        for (int b = 0; b < OQ_HIST_BINS; b++) {
            total += o.hist.counts[b];
            moved += o.hist.counts[b] > want[b] ? o.hist.counts[b] - want[b] : want[b] - o.hist.counts[b];
        }
        cr_assert_eq(total, (uint64_t)N - nonfinite);
        cr_assert(moved <= 40, "%llu values in another bin than floor((v - lo) / width)", (unsigned long long)moved);
    }
}

/* ------------------------------------------------- ranges for the activation ---- */

static double sample_act_mse(const float *x, int n, float lo, float hi, const oq_act *a)
{
    return sample_err(x, n, lo, hi, OQ_DTYPE_UINT8, false, a);
}

/* A pre-activation with a long negative tail (N(0, 2) plus 2 % of values down to -40):
 * for SiLU the negative side narrows (what lies below about -6 comes out of SiLU as ~0),
 * the positive side stays; for Sigmoid both may move. Judged on the samples with the real
 * quantizer: the chosen range's error after the activation is below the method's range's
 * and within 10 % of the best of a fine grid of lower bounds (SiLU). */
Test(act_range, narrows_to_the_error_after_the_activation)
{
    int n = 200000;
    float *x = malloc((size_t)n * sizeof(float));
    rng_state = 99;
    for (int i = 0; i < n; i++)
        x[i] = i % 50 == 0 ? (float)(-40.0 * (double)(i % 997) / 997.0) : (float)(2.0 * nrand());
    oq_observer o;
    feed_chunks(&o, x, n);
    oq_range_request r;
    oq_range_request_default(&r);
    r.method = OQ_CALIB_MINMAX;
    float lo0, hi0;
    cr_assert_eq(oq_observer_range(&o, &r, &lo0, &hi0, NULL, NULL, NULL), OQ_OK);
    const oq_act acts[3] = {{OQ_ACT_SILU, 0, 0}, {OQ_ACT_SIGMOID, 0, 0}, {OQ_ACT_HSWISH, 1.0 / 6.0, 0.5}};
    for (int k = 0; k < 3; k++) {
        float lo = lo0, hi = hi0;
        bool moved = false;
        cr_assert_eq(oq_observer_range_for_act(&o, &r, &acts[k], &lo, &hi, &moved, NULL), OQ_OK);
        double e0 = sample_act_mse(x, n, lo0, hi0, &acts[k]), e = sample_act_mse(x, n, lo, hi, &acts[k]);
        cr_log_info("%s: [%g, %g] -> [%g, %g], error after it %g -> %g", oq_act_name(acts[k].kind), lo0, hi0, lo, hi,
                    e0, e);
        cr_expect(moved);
        cr_expect_geq(lo, lo0);
        cr_expect_leq(hi, hi0);
        cr_expect_lt(e, 0.5 * e0, "%s: %g not below half of %g", oq_act_name(acts[k].kind), e, e0);
        if (acts[k].kind != OQ_ACT_SIGMOID)
            cr_expect_eq(hi, hi0, "%s: the positive side stays", oq_act_name(acts[k].kind));
        if (acts[k].kind == OQ_ACT_HSWISH)
            cr_expect_geq(lo, -3.0f - (hi0 - lo0) / 64.0f, "hardswish is 0 below -3: %g", lo);
        if (acts[k].kind == OQ_ACT_SILU) {
            double best = INFINITY;
            for (double g = -0.25; g >= lo0; g -= 0.25)
                best = fmin(best, sample_act_mse(x, n, (float)g, hi0, &acts[k]));
            cr_expect_leq(e, 1.1 * best, "silu: %g, grid best %g", e, best);
        }
    }
    /* symmetric ranges and no activation are left alone */
    float lo = lo0, hi = hi0;
    bool moved = true;
    oq_act none = {OQ_ACT_NONE, 0, 0};
    cr_assert_eq(oq_observer_range_for_act(&o, &r, &none, &lo, &hi, &moved, NULL), OQ_OK);
    cr_expect(!moved && lo == lo0 && hi == hi0);
    r.symmetric = true;
    cr_assert_eq(oq_observer_range_for_act(&o, &r, &acts[0], &lo, &hi, &moved, NULL), OQ_OK);
    cr_expect(!moved && lo == lo0 && hi == hi0);
    free(x);
}

/* Which tensors read as an activation's input: the SiLU pair (either operand order), a
 * HardSwish op, HardSigmoid with its Mul, Sigmoid or Tanh alone; not a Sigmoid that also
 * feeds something else, not a tensor with another consumer, not a graph output. */
Test(act_range, activation_read_from_the_graph)
{
    oq_model *m = oq_model_new();
    oq_model_set_opset(m, "", 14);
    oq_value *x = tu_input_1xc(m, "x", 4);
    oq_value *a = tu_node(m, "Relu", "a", x, NULL, NULL, "a"); /* a: SiLU, Mul(sig, a) */
    oq_value *sa = tu_node(m, "Sigmoid", "sa", a, NULL, NULL, "sa");
    oq_value *ya = tu_node(m, "Mul", "ma", sa, a, NULL, "ya");
    oq_value *b = tu_node(m, "Relu", "b", ya, NULL, NULL, "b"); /* b: HardSwish op */
    oq_value *yb = tu_node(m, "HardSwish", "hb", b, NULL, NULL, "yb");
    oq_value *c = tu_node(m, "Relu", "c", yb, NULL, NULL, "c"); /* c: x * HardSigmoid(x) */
    oq_value *hc = tu_node(m, "HardSigmoid", "hc", c, NULL, NULL, "hc");
    oq_node_set_attr_float(hc->producer, "alpha", 0.25f);
    oq_value *yc = tu_node(m, "Mul", "mc", c, hc, NULL, "yc");
    oq_value *e = tu_node(m, "Relu", "e", yc, NULL, NULL, "e"); /* e: Sigmoid whose output is also read elsewhere */
    oq_value *se = tu_node(m, "Sigmoid", "se", e, NULL, NULL, "se");
    oq_value *ye = tu_node(m, "Mul", "me", se, e, NULL, "ye");
    oq_value *ye2 = tu_node(m, "Add", "ae", se, ye, NULL, "ye2");
    oq_value *f = tu_node(m, "Relu", "f", ye2, NULL, NULL, "f"); /* f: Tanh alone */
    oq_value *yf = tu_node(m, "Tanh", "tf", f, NULL, NULL, "yf");
    oq_value *g = tu_node(m, "Relu", "g", yf, NULL, NULL, "g"); /* g: Sigmoid and Relu */
    oq_value *sg = tu_node(m, "Sigmoid", "sg", g, NULL, NULL, "sg");
    oq_value *rg = tu_node(m, "Relu", "rg", g, NULL, NULL, "rg");
    oq_value *yg = tu_node(m, "Add", "ag", sg, rg, NULL, "yg");
    oq_graph_add_output(m->graph, yg, NULL);
    oq_graph_add_output(m->graph, sa, NULL); /* sa is also an output: a's Sigmoid has two readers */
    oq_act k;
    k = oq_calib_act_of(a);
    cr_expect_eq(k.kind, OQ_ACT_NONE, "a: its Sigmoid's output is also a graph output (%d)", k.kind);
    k = oq_calib_act_of(b);
    cr_expect_eq(k.kind, OQ_ACT_HSWISH);
    cr_expect_float_eq(k.alpha, 1.0 / 6.0, 1e-9);
    k = oq_calib_act_of(c);
    cr_expect_eq(k.kind, OQ_ACT_HSWISH);
    cr_expect_float_eq(k.alpha, 0.25, 1e-9);
    cr_expect_float_eq(k.beta, 0.5, 1e-9);
    cr_expect_eq(oq_calib_act_of(e).kind, OQ_ACT_NONE);
    cr_expect_eq(oq_calib_act_of(f).kind, OQ_ACT_TANH);
    cr_expect_eq(oq_calib_act_of(g).kind, OQ_ACT_NONE);
    cr_expect_eq(oq_calib_act_of(yg).kind, OQ_ACT_NONE);
    cr_expect_str_eq(oq_act_name(OQ_ACT_SILU), "silu");
    oq_model_free(m);

    /* the plain SiLU pair, Mul(x, Sigmoid(x)) */
    m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    x = tu_input_1xc(m, "x", 4);
    a = tu_node(m, "Relu", "a", x, NULL, NULL, "a");
    sa = tu_node(m, "Sigmoid", "sa", a, NULL, NULL, "sa");
    ya = tu_node(m, "Mul", "ma", a, sa, NULL, "ya");
    oq_value *s2 = tu_node(m, "Relu", "r2", ya, NULL, NULL, "s2");
    oq_value *y2 = tu_node(m, "Sigmoid", "s2g", s2, NULL, NULL, "y2");
    oq_graph_add_output(m->graph, y2, NULL);
    cr_expect_eq(oq_calib_act_of(a).kind, OQ_ACT_SILU);
    cr_expect_eq(oq_calib_act_of(s2).kind, OQ_ACT_SIGMOID);
    cr_expect_eq(oq_calib_act_of(y2).kind, OQ_ACT_NONE, "a graph output");
    oq_model_free(m);

    /* HardSwish as exporters write it: x * Clip(x + 3, 0, 6) / 6 (alpha 1/6, beta 0.5), and
     * with Clip(x + 2, 0, 4): alpha 1/4, beta 1/2; not with a Clip from -1 */
    m = oq_model_new();
    oq_model_set_opset(m, "", 13);
    x = tu_input_1xc(m, "x", 4);
    a = tu_node(m, "Relu", "a", x, NULL, NULL, "a");
    oq_value *ad = tu_node(m, "Add", "ad", a, tu_scalar_f(m, "three", 3.0f), NULL, "ad");
    oq_value *cl = tu_node(m, "Clip", "cl", ad, tu_scalar_f(m, "zero", 0.0f), tu_scalar_f(m, "six", 6.0f), "cl");
    oq_value *mu = tu_node(m, "Mul", "mu", cl, a, NULL, "mu");
    oq_value *y = tu_node(m, "Div", "dv", mu, tu_scalar_f(m, "six2", 6.0f), NULL, "y");
    oq_value *b2 = tu_node(m, "Relu", "b2", y, NULL, NULL, "b2");
    oq_value *ad2 = tu_node(m, "Add", "ad2", tu_scalar_f(m, "two", 2.0f), b2, NULL, "ad2");
    oq_value *cl2 = tu_node(m, "Clip", "cl2", ad2, tu_scalar_f(m, "zero2", 0.0f), tu_scalar_f(m, "four", 4.0f), "cl2");
    oq_value *mu2 = tu_node(m, "Mul", "mu2", b2, cl2, NULL, "mu2");
    oq_value *c3 = tu_node(m, "Relu", "c3", mu2, NULL, NULL, "c3");
    oq_value *ad3 = tu_node(m, "Add", "ad3", c3, tu_scalar_f(m, "three3", 3.0f), NULL, "ad3");
    oq_value *cl3 = tu_node(m, "Clip", "cl3", ad3, tu_scalar_f(m, "m1", -1.0f), tu_scalar_f(m, "six3", 6.0f), "cl3");
    oq_value *mu3 = tu_node(m, "Mul", "mu3", c3, cl3, NULL, "mu3");
    oq_graph_add_output(m->graph, mu3, NULL);
    k = oq_calib_act_of(a);
    cr_expect_eq(k.kind, OQ_ACT_HSWISH);
    cr_expect_float_eq(k.alpha, 1.0 / 6.0, 1e-9);
    cr_expect_float_eq(k.beta, 0.5, 1e-9);
    k = oq_calib_act_of(b2);
    cr_expect_eq(k.kind, OQ_ACT_HSWISH);
    cr_expect_float_eq(k.alpha, 0.25, 1e-9);
    cr_expect_float_eq(k.beta, 0.5, 1e-9);
    cr_expect_eq(oq_calib_act_of(c3).kind, OQ_ACT_NONE, "Clip from -1 is not HardSwish");
    oq_model_free(m);
}
