/* Range selection from a histogram observer: percentile, entropy (KL divergence) and
 * MSE. Formulas and candidate sets: docs/calibration.md.
 *
 * All methods first resample the observer's histogram into a working histogram of
 * OQ_HIST_BINS bins spanning exactly the data (signed: [min(xmin,0), max(xmax,0)];
 * symmetric methods fold it to |x| on [0, max|x|]). Each observer bin is clipped to the
 * exact [xmin, xmax] and its count spread uniformly over what is left, so the working
 * histogram is a piecewise-uniform density with the exact total and extremes. */
#include "onnxq/quant.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NB OQ_HIST_BINS

typedef struct work {
    double lo, w;            /* working bin i = [lo + i*w, lo + (i+1)*w] */
    double total;            /* all finite values, the MSE is per element of this */
    double mass;             /* cum[NB]: what the density holds (total minus zeros) */
    double c[NB];            /* counts (fractional after resampling) */
    double cum[NB + 1];      /* cum[i] = sum of c[0..i) */
    double scratch[NB];
} work;

const char *oq_calib_method_name(oq_calib_method m)
{
    switch (m) {
    case OQ_CALIB_MINMAX: return "minmax";
    case OQ_CALIB_PERCENTILE: return "percentile";
    case OQ_CALIB_ENTROPY: return "entropy";
    case OQ_CALIB_MSE: return "mse";
    case OQ_CALIB_AUTO: return "auto";
    }
    return "?";
}

int oq_calib_method_from_name(const char *s)
{
    if (!s)
        return -1;
    for (int m = OQ_CALIB_MINMAX; m <= OQ_CALIB_AUTO; m++)
        if (!strcmp(s, oq_calib_method_name((oq_calib_method)m)))
            return m;
    return -1;
}

double oq_default_percentile(int32_t dtype)
{
    return dtype == OQ_DTYPE_INT16 || dtype == OQ_DTYPE_UINT16 ? 99.999 : 99.99;
}

void oq_range_request_default(oq_range_request *r)
{
    memset(r, 0, sizeof(*r));
    r->method = OQ_CALIB_PERCENTILE;
    r->percentile = 99.99;
    r->dtype = OQ_DTYPE_UINT8;
    r->symmetric = false;
    r->reduce_range = false;
}

static void spread(work *wk, double l, double r, double c)
{
    if (!(c > 0.0))
        return;
    double fl = (l - wk->lo) / wk->w, fr = (r - wk->lo) / wk->w;
    if (fl < 0.0)
        fl = 0.0;
    if (fr > (double)NB)
        fr = (double)NB;
    if (fl > (double)NB)
        fl = (double)NB;
    if (fr < fl)
        fr = fl;
    double len = fr - fl;
    if (len <= 1e-12) { /* a point mass */
        int i = (int)floor(fl);
        if (i >= NB)
            i = NB - 1;
        wk->c[i] += c;
        return;
    }
    int i0 = (int)floor(fl), i1 = (int)ceil(fr);
    if (i1 > NB)
        i1 = NB;
    for (int i = i0; i < i1; i++) {
        double a = fl > (double)i ? fl : (double)i;
        double b = fr < (double)(i + 1) ? fr : (double)(i + 1);
        if (b > a)
            wk->c[i] += c * (b - a) / len;
    }
}

static double clampd(double v, double a, double b)
{
    return v < a ? a : (v > b ? b : v);
}

enum { WORK_SIGNED = 0, WORK_FOLDED = 1, WORK_SIGNED_SYM = 2 };

/* Build the working histogram; returns false when the span is zero. WORK_SIGNED spans
 * [min(xmin,0), max(xmax,0)], WORK_FOLDED holds |x| on [0, M], WORK_SIGNED_SYM spans
 * [-M, M], M = max|x|. */
static bool work_build(work *wk, const oq_observer *o, int mode, bool drop_zeros)
{
    const oq_histogram *h = &o->hist;
    double xmin = o->min, xmax = o->max;
    double lo, hi;
    bool folded = mode == WORK_FOLDED;
    if (mode != WORK_SIGNED) {
        hi = fabs(xmin) > fabs(xmax) ? fabs(xmin) : fabs(xmax);
        lo = folded ? 0.0 : -hi;
    } else {
        lo = xmin < 0.0 ? xmin : 0.0;
        hi = xmax > 0.0 ? xmax : 0.0;
    }
    memset(wk->c, 0, sizeof(wk->c));
    wk->total = 0.0;
    if (!(hi > lo))
        return false;
    wk->lo = lo;
    wk->w = (hi - lo) / (double)NB;
    /* Exact zeros sit in the observer bin holding 0 (or, after rounding at a bin edge,
     * a neighbour): take them out of it, that bin first. */
    uint64_t take[3] = {0, 0, 0};
    int zbin = 0;
    if (drop_zeros && o->zero_count) {
        double t = floor((0.0 - h->lo) / h->width);
        zbin = t < 0.0 ? 0 : (t >= (double)OQ_HIST_BINS ? OQ_HIST_BINS - 1 : (int)t);
        uint64_t left = o->zero_count;
        const int order[3] = {1, 2, 0}; /* zbin, zbin + 1, zbin - 1 */
        for (int k = 0; k < 3 && left; k++) {
            int i = zbin - 1 + order[k];
            if (i < 0 || i >= OQ_HIST_BINS)
                continue;
            take[order[k]] = h->counts[i] < left ? h->counts[i] : left;
            left -= take[order[k]];
        }
    }
    for (int i = 0; i < NB; i++) {
        double c = (double)h->counts[i];
        wk->total += c;
        if (i >= zbin - 1 && i <= zbin + 1)
            c -= (double)take[i - zbin + 1];
        if (c == 0.0)
            continue;
        double l = h->lo + (double)i * h->width, r = l + h->width;
        l = clampd(l, xmin, xmax);
        r = clampd(r, xmin, xmax);
        if (!folded || l >= 0.0) {
            spread(wk, l, r, c);
        } else if (r <= 0.0) {
            spread(wk, -r, -l, c);
        } else {
            double f = -l / (r - l);
            spread(wk, 0.0, -l, c * f);
            spread(wk, 0.0, r, c * (1.0 - f));
        }
    }
    wk->cum[0] = 0.0;
    for (int i = 0; i < NB; i++)
        wk->cum[i + 1] = wk->cum[i] + wk->c[i];
    wk->mass = wk->cum[NB];
    return true;
}

static double edge(const work *wk, int i)
{
    return wk->lo + (double)i * wk->w;
}

/* Value below which a fraction q of the mass lies (linear inside a bin). */
static double work_quantile(const work *wk, double q)
{
    double target = q * wk->total;
    for (int i = 0; i < NB; i++) {
        if (wk->c[i] > 0.0 && wk->cum[i + 1] >= target) {
            double f = (target - wk->cum[i]) / wk->c[i];
            return edge(wk, i) + clampd(f, 0.0, 1.0) * wk->w;
        }
    }
    return edge(wk, NB);
}

/* ----------------------------------------------------------------------- MSE ---- */

/* H(u) = integral over [0, u] of (t - round(t))^2 dt: the rounding error of a unit grid
 * starting at 0, where [0, 0.5] is the first half cell. */
static double Hint(double u)
{
    if (u <= 0.5)
        return u * u * u / 3.0;
    double k = floor(u + 0.5);
    double f = u - k;
    return 1.0 / 24.0 + (k - 1.0) / 12.0 + (f * f * f + 0.125) / 3.0;
}

static inline double cube(double v)
{
    return v * v * v;
}

/* Expected squared error per element of the uniform quantizer with nlev levels on
 * [a, b] (clipping outside), for the piecewise-uniform working density; the clipped part
 * weighted by clip_w (1: the plain MSE). */
static double mse_cost_w(const work *wk, double a, double b, double nlev, double clip_w)
{
    double delta = (b - a) / (nlev - 1.0);
    double d3 = delta * delta * delta;
    double sum = 0.0;
    for (int i = 0; i < NB; i++) {
        double c = wk->c[i];
        if (c <= 0.0)
            continue;
        double l = edge(wk, i), r = l + wk->w, s = 0.0;
        if (l < a) {
            double m = r < a ? r : a;
            s += clip_w * (cube(a - l) - cube(a - m)) / 3.0;
        }
        if (r > b) {
            double m = l > b ? l : b;
            s += clip_w * (cube(r - b) - cube(m - b)) / 3.0;
        }
        double il = l > a ? l : a, ir = r < b ? r : b;
        if (ir > il)
            s += d3 * (Hint((ir - a) / delta) - Hint((il - a) / delta));
        sum += c * s / wk->w;
    }
    return sum / wk->total;
}

static double mse_cost(const work *wk, double a, double b, double nlev)
{
    return mse_cost_w(wk, a, b, nlev, 1.0);
}

/* ------------------------------------------------------------------- entropy ---- */

#define KL_EPS 1e-4 /* counts: stands in for an empty quantized bin under a nonzero P */

/* KL(P || Q) for the window of bins [i0, i1) quantized into nlev levels. P is the
 * window with the mass outside folded into its edge bins; Q is the window without that
 * mass, merged into nlev groups of consecutive bins, each group's sum spread evenly over
 * its nonzero bins. */
static double kl_cost(work *wk, int i0, int i1, int nlev)
{
    int n = i1 - i0;
    double *q = wk->scratch;
    const double *s = wk->c + i0;
    double zq = 0.0;
    for (int k = 0; k < nlev; k++) {
        int gs = (int)(((int64_t)k * n) / nlev), ge = (int)(((int64_t)(k + 1) * n) / nlev);
        if (ge <= gs)
            continue;
        double sum = 0.0;
        int nz = 0;
        for (int j = gs; j < ge; j++)
            if (s[j] > 0.0) {
                sum += s[j];
                nz++;
            }
        for (int j = gs; j < ge; j++)
            q[j] = (s[j] > 0.0) ? sum / (double)nz : 0.0;
        zq += sum;
    }
    if (!(zq > 0.0))
        return INFINITY;
    double left = wk->cum[i0], right = wk->mass - wk->cum[i1];
    double zp = wk->mass, kl = 0.0;
    for (int j = 0; j < n; j++) {
        double p = s[j];
        if (j == 0)
            p += left;
        if (j == n - 1)
            p += right;
        if (p <= 0.0)
            continue;
        double qq = q[j] > 0.0 ? q[j] : KL_EPS;
        kl += (p / zp) * log((p / zp) / (qq / zq));
    }
    return kl;
}

/* --------------------------------------------------------------- the searches ---- */

typedef struct search {
    work *wk;
    bool kl;
    int nlev;
    int minw;     /* minimum window width in bins */
    int zf, zc;   /* window must satisfy i0 <= zf and i1 >= zc (contains 0) */
    double sym_q, sym_lo, sym_hi; /* symmetric MSE: grid step T/sym_q on
                                   * [sym_lo*step, sym_hi*step]; 0 = not used */
    int candidates;
    int stride;   /* see sweep() */
} search;

static double search_cost(search *s, int i0, int i1)
{
    s->candidates++;
    if (s->kl)
        return kl_cost(s->wk, i0, i1, s->nlev);
    if (s->sym_q > 0.0) { /* symmetric MSE: T = edge i1 of [0, M] on the signed [-M, M] */
        double m = s->wk->lo + (double)NB * s->wk->w;
        double t = (i1 == NB) ? m : (double)i1 * m / (double)NB;
        double step = t / s->sym_q;
        return mse_cost(s->wk, s->sym_lo * step, s->sym_hi * step, (double)s->nlev);
    }
    return mse_cost(s->wk, edge(s->wk, i0), edge(s->wk, i1), (double)s->nlev);
}

/* Candidates are bin edges. A sweep over a run of edges [lo, hi] first evaluates every
 * stride-th edge (and hi), then every edge within stride of the best one. The MSE curve
 * is smooth at the scale of a few bins, so MSE uses stride 4 (about 2048/4 + 8
 * evaluations per sweep); the KL curve is not (empty and sparse bins make it jagged),
 * so entropy uses stride 1: every edge. */
#define MSE_STRIDE 4

typedef struct sweep_ctx {
    search *s;
    int fixed;   /* the other edge */
    bool upper;  /* sweeping the upper edge i1 (else the lower edge i0) */
} sweep_ctx;

static double sweep_cost(const sweep_ctx *c, int j)
{
    return c->upper ? search_cost(c->s, c->fixed, j) : search_cost(c->s, j, c->fixed);
}

static int sweep(const sweep_ctx *c, int lo, int hi, int cur, double *best)
{
    const int STRIDE = c->s->stride;
    int bj = cur;
    for (int j = lo; j <= hi; j += STRIDE) {
        if (j == cur)
            continue;
        double v = sweep_cost(c, j);
        if (v < *best) {
            *best = v;
            bj = j;
        }
    }
    if (hi >= lo && (hi - lo) % STRIDE != 0 && hi != cur) {
        double v = sweep_cost(c, hi);
        if (v < *best) {
            *best = v;
            bj = hi;
        }
    }
    int centre = bj;
    int a = centre - STRIDE + 1 > lo ? centre - STRIDE + 1 : lo;
    int b = centre + STRIDE - 1 < hi ? centre + STRIDE - 1 : hi;
    for (int j = a; j <= b; j++) {
        if (j == centre || j == cur || (j - lo) % STRIDE == 0 || j == hi)
            continue;
        double v = sweep_cost(c, j);
        if (v < *best) {
            *best = v;
            bj = j;
        }
    }
    return bj;
}

/* Coordinate descent over windows [i0, i1) of bin edges: start from the full range,
 * alternately sweep the upper edge and the lower edge, until neither moves (at most 4
 * rounds). When 0 is the lower end of the working range (symmetric, or data >= 0) the
 * lower edge is fixed and one sweep is the whole search. */
static double search_run(search *s, int *pi0, int *pi1)
{
    int i0 = 0, i1 = NB;
    double best = search_cost(s, i0, i1);
    for (int round = 0; round < 4; round++) {
        bool moved = false;
        sweep_ctx cu = {s, i0, true};
        int lo1 = s->zc > i0 + s->minw ? s->zc : i0 + s->minw;
        int bi = sweep(&cu, lo1, NB, i1, &best);
        if (bi != i1) {
            i1 = bi;
            moved = true;
        }
        if (s->zf == 0) /* the lower edge is pinned at 0 */
            break;
        sweep_ctx cl = {s, i1, false};
        int hi0 = s->zf < i1 - s->minw ? s->zf : i1 - s->minw;
        bi = sweep(&cl, 0, hi0, i0, &best);
        if (bi != i0) {
            i0 = bi;
            moved = true;
        }
        if (!moved)
            break;
    }
    *pi0 = i0;
    *pi1 = i1;
    return best;
}

oq_status oq_observer_range(const oq_observer *o, const oq_range_request *r, float *rmin,
                            float *rmax, oq_range_info *info, const char *what, oq_diag *d)
{
    const char *wn = what ? what : "tensor";
    oq_range_info inf = {0, 0.0};
    int32_t qmin, qmax;
    *rmin = *rmax = 0.0f;
    if (info)
        *info = inf;
    if (oq_qrange(r->dtype, r->reduce_range, &qmin, &qmax) != OQ_OK)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "%s: cannot quantize to %s", wn,
                             oq_dtype_name(r->dtype));
    if (!o->initialized)
        return OQ_OK;
    if (r->method == OQ_CALIB_MINMAX) {
        float a, b;
        oq_observer_minmax(o, &a, &b);
        if (r->symmetric) {
            float t = fabsf(a) > fabsf(b) ? fabsf(a) : fabsf(b);
            a = -t;
            b = t;
        }
        *rmin = a;
        *rmax = b;
        return OQ_OK;
    }
    if (o->kind != OQ_OBSERVER_HISTOGRAM)
        return oq_diag_error(d, OQ_ERR_USAGE, "%s: method %s needs a histogram observer", wn,
                             oq_calib_method_name(r->method));
    if (r->method == OQ_CALIB_PERCENTILE && !(r->percentile > 0.0 && r->percentile <= 100.0))
        return oq_diag_error(d, OQ_ERR_USAGE, "%s: percentile %g is outside (0, 100]", wn,
                             r->percentile);
    if (r->method == OQ_CALIB_AUTO)
        return oq_observer_range_auto(o, NULL, r, rmin, rmax, NULL, what, d);
    if (r->method != OQ_CALIB_PERCENTILE && r->method != OQ_CALIB_ENTROPY &&
        r->method != OQ_CALIB_MSE)
        return oq_diag_error(d, OQ_ERR_USAGE, "%s: unknown calibration method %d", wn,
                             (int)r->method);

    work *wk = malloc(sizeof(*wk));
    if (!wk)
        return oq_diag_error(d, OQ_ERR_NOMEM, "%s: out of memory", wn);
    double xmin = o->min, xmax = o->max, a = xmin, b = xmax;
    bool sym = r->symmetric;
    bool sym_mse = sym && r->method == OQ_CALIB_MSE;
    if (!work_build(wk, o, sym_mse ? WORK_SIGNED_SYM : (sym ? WORK_FOLDED : WORK_SIGNED),
                    r->method != OQ_CALIB_PERCENTILE) ||
        !(wk->mass > 0.0)) {
        /* zero span: a constant tensor (or all zeros) */
        if (sym) {
            double t = fabs(xmin) > fabs(xmax) ? fabs(xmin) : fabs(xmax);
            a = -t;
            b = t;
        }
        goto done;
    }
    if (r->method == OQ_CALIB_PERCENTILE) {
        double p = r->percentile / 100.0;
        if (sym) {
            double t = work_quantile(wk, p);
            a = -t;
            b = t;
        } else {
            a = work_quantile(wk, 1.0 - p);
            b = work_quantile(wk, p);
        }
    } else if (sym_mse) {
        /* Symmetric MSE on the signed density: threshold T = i*M/NB gives the grid
         * step T/q and the representable interval [(qmin-zp)*step, (qmax-zp)*step],
         * which for signed types reaches one step further on the negative side. */
        int64_t zp = qmin < 0 ? 0 : ((int64_t)qmin + qmax + 1) / 2;
        search s;
        memset(&s, 0, sizeof(s));
        s.wk = wk;
        s.sym_q = (double)qmax - (double)zp;
        s.sym_lo = (double)qmin - (double)zp;
        s.sym_hi = (double)qmax - (double)zp;
        int64_t lv = (int64_t)qmax - qmin + 1;
        s.nlev = (int)(lv > 0x7fffffff ? 0x7fffffff : lv);
        s.minw = 1;
        s.stride = MSE_STRIDE;
        int i0, i1;
        inf.best_cost = search_run(&s, &i0, &i1);
        inf.candidates = s.candidates;
        double m = wk->lo + (double)NB * wk->w;
        double t = (i1 == NB) ? m : (double)i1 * m / (double)NB;
        a = -t;
        b = t;
    } else {
        search s;
        memset(&s, 0, sizeof(s));
        s.wk = wk;
        s.kl = r->method == OQ_CALIB_ENTROPY;
        if (sym) {
            /* magnitudes 0..q: q = qmax (signed, zp 0) or qmax - zp (unsigned) */
            int64_t q = qmin < 0 ? qmax : qmax - (int64_t)((qmin + (int64_t)qmax + 1) / 2);
            s.nlev = (int)(q + 1 > NB ? NB : q + 1);
            s.zf = 0;
            s.zc = 0;
        } else {
            int64_t lv = (int64_t)qmax - qmin + 1;
            s.nlev = (int)(lv > NB ? NB : lv);
            double z = -wk->lo / wk->w;
            s.zf = (int)floor(z + 1e-9);
            s.zc = (int)ceil(z - 1e-9);
            if (s.zf > NB)
                s.zf = NB;
            if (s.zc < 0)
                s.zc = 0;
        }
        if (!s.kl) {
            int64_t lv = sym ? (int64_t)s.nlev : (int64_t)qmax - qmin + 1;
            s.nlev = (int)(lv > 0x7fffffff ? 0x7fffffff : lv);
            s.minw = 1;
            s.stride = MSE_STRIDE;
        } else {
            s.minw = s.nlev;
            s.stride = 1;
        }
        int i0, i1;
        inf.best_cost = search_run(&s, &i0, &i1);
        inf.candidates = s.candidates;
        a = edge(wk, i0);
        b = edge(wk, i1);
        if (i1 == NB)
            b = sym ? wk->lo + (double)NB * wk->w : (xmax > 0.0 ? xmax : 0.0);
        if (i0 == 0 && !sym)
            a = xmin < 0.0 ? xmin : 0.0;
        if (sym) {
            a = -b;
        }
    }
    if (!sym) {
        a = clampd(a, xmin, xmax);
        b = clampd(b, xmin, xmax);
    }
done:
    free(wk);
    *rmin = (float)a;
    *rmax = (float)b;
    if (info)
        *info = inf;
    return OQ_OK;
}

/* ---------------------------------------------------------------------- auto ---- */

static const char *const AUTO_NAMES[OQ_AUTO_CANDIDATES] = {"minmax", "p99.999", "p99.99", "p99.9", "mse"};
static const double AUTO_PCT[OQ_AUTO_CANDIDATES] = {0.0, 99.999, 99.99, 99.9, 0.0};
/* A narrower range must beat a wider one by more than OQ_AUTO_TIE (relative) on the
 * held-out samples: within it the difference is noise, and the wider range clips less on
 * data unlike the calibration samples. Clipped errors weigh OQ_AUTO_CLIP_WEIGHT. */
static double auto_clip_w(void)
{
    return OQ_AUTO_CLIP_WEIGHT;
}

const char *oq_auto_candidate_name(int c)
{
    return c >= 0 && c < OQ_AUTO_CANDIDATES ? AUTO_NAMES[c] : "?";
}

int oq_auto_candidate_from_name(const char *s)
{
    for (int c = 0; s && c < OQ_AUTO_CANDIDATES; c++)
        if (!strcmp(s, AUTO_NAMES[c]))
            return c;
    return -1;
}

/* First and second moments of the working density, prefix sums over bins (p1[i]: sum of
 * the mass times x over bins [0, i), p2[i]: of the mass times x^2; each bin uniform). */
typedef struct moments {
    double p1[NB + 1], p2[NB + 1];
} moments;

static void moments_build(moments *mo, const work *wk)
{
    mo->p1[0] = mo->p2[0] = 0.0;
    for (int i = 0; i < NB; i++) {
        double l = edge(wk, i), r = l + wk->w, c = wk->c[i];
        mo->p1[i + 1] = mo->p1[i] + c * (l + r) / 2.0;
        mo->p2[i + 1] = mo->p2[i] + c * (l * l + l * r + r * r) / 3.0;
    }
}

/* Mass, first and second moment of the density below x. */
static void below(const work *wk, const moments *mo, double x, double m[3])
{
    double f = (x - wk->lo) / wk->w;
    if (!(f > 0.0)) {
        m[0] = m[1] = m[2] = 0.0;
        return;
    }
    if (f >= (double)NB) {
        m[0] = wk->cum[NB];
        m[1] = mo->p1[NB];
        m[2] = mo->p2[NB];
        return;
    }
    int k = (int)f;
    double c = wk->c[k] * (f - (double)k), l = edge(wk, k);
    m[0] = wk->cum[k] + c;
    m[1] = mo->p1[k] + c * (l + x) / 2.0;
    m[2] = mo->p2[k] + c * (l * l + l * x + x * x) / 3.0;
}

/* Expected squared error per element of a grid of nlev levels on [a, b], with the
 * rounding noise of the values inside taken as step^2/12 (exact: the clipped tails).
 * O(1) per range, for the search; the candidates are then scored with mse_cost. */
static double fast_cost(const work *wk, const moments *mo, double a, double b, double nlev, double clip_w)
{
    double lo[3], hi[3];
    below(wk, mo, a, lo);
    below(wk, mo, b, hi);
    double up0 = wk->cum[NB] - hi[0], up1 = mo->p1[NB] - hi[1], up2 = mo->p2[NB] - hi[2];
    double cl = a * a * lo[0] - 2.0 * a * lo[1] + lo[2];
    double cu = up2 - 2.0 * b * up1 + b * b * up0;
    double inside = hi[0] - lo[0];
    double step = (b - a) / (nlev - 1.0);
    return (clip_w * ((cl > 0.0 ? cl : 0.0) + (cu > 0.0 ? cu : 0.0)) +
            (inside > 0.0 ? inside : 0.0) * step * step / 12.0) / wk->total;
}

/* The least fast_cost range of o (the mse candidate of auto): asymmetric, a coordinate
 * descent over the bin edges of the signed working histogram, every edge; symmetric,
 * every threshold T = i M / NB with the grid the parameters give. */
static bool fast_mse_range(work *wk, moments *mo, const oq_observer *o, const oq_range_request *r,
                           double *pa, double *pb)
{
    int32_t qmin, qmax;
    if (oq_qrange(r->dtype, r->reduce_range, &qmin, &qmax) != OQ_OK)
        return false;
    double nlev = (double)qmax - (double)qmin + 1.0;
    double xmin = o->min, xmax = o->max;
    if (r->symmetric) {
        if (!work_build(wk, o, WORK_SIGNED_SYM, true) || !(wk->mass > 0.0))
            return false;
        moments_build(mo, wk);
        double zp = qmin < 0 ? 0.0 : (double)(((int64_t)qmin + qmax + 1) / 2);
        double q = (double)qmax - zp, slo = (double)qmin - zp, shi = (double)qmax - zp;
        double m = wk->lo + (double)NB * wk->w, best = INFINITY, bt = m;
        for (int i = NB; i >= 1; i--) {
            double t = (i == NB) ? m : (double)i * m / (double)NB, step = t / q;
            double c = fast_cost(wk, mo, slo * step, shi * step, nlev, auto_clip_w());
            if (c < best) {
                best = c;
                bt = t;
            }
        }
        *pa = -bt;
        *pb = bt;
        return true;
    }
    if (!work_build(wk, o, WORK_SIGNED, true) || !(wk->mass > 0.0))
        return false;
    moments_build(mo, wk);
    double z = -wk->lo / wk->w;
    int zf = (int)floor(z + 1e-9), zc = (int)ceil(z - 1e-9);
    if (zf > NB)
        zf = NB;
    if (zc < 0)
        zc = 0;
    int i0 = 0, i1 = NB;
    double cw = auto_clip_w();
    double best = fast_cost(wk, mo, edge(wk, i0), edge(wk, i1), nlev, cw);
    for (int round = 0; round < 8; round++) {
        bool moved = false;
        for (int j = (zc > i0 + 1 ? zc : i0 + 1); j <= NB; j++) {
            double c = fast_cost(wk, mo, edge(wk, i0), edge(wk, j), nlev, cw);
            if (c < best) {
                best = c;
                i1 = j;
                moved = true;
            }
        }
        for (int j = 0; j <= zf && j < i1; j++) {
            double c = fast_cost(wk, mo, edge(wk, j), edge(wk, i1), nlev, cw);
            if (c < best) {
                best = c;
                i0 = j;
                moved = true;
            }
        }
        if (!moved)
            break;
    }
    double a = i0 == 0 ? (xmin < 0.0 ? xmin : 0.0) : edge(wk, i0);
    double b = i1 == NB ? (xmax > 0.0 ? xmax : 0.0) : edge(wk, i1);
    *pa = clampd(a, xmin, xmax);
    *pb = clampd(b, xmin, xmax);
    return true;
}

/* One candidate's range on observer o. */
static oq_status candidate_range(int c, work *wk, moments *mo, const oq_observer *o, const oq_range_request *r,
                                 float *lo, float *hi, const char *what, oq_diag *d)
{
    oq_range_request q = *r;
    if (c == OQ_AUTO_MSE) {
        double a, b;
        if (fast_mse_range(wk, mo, o, r, &a, &b)) {
            *lo = (float)a;
            *hi = (float)b;
            return OQ_OK;
        }
        q.method = OQ_CALIB_MINMAX; /* a constant tensor: nothing to choose */
    } else if (c == OQ_AUTO_MINMAX) {
        q.method = OQ_CALIB_MINMAX;
    } else {
        q.method = OQ_CALIB_PERCENTILE;
        q.percentile = AUTO_PCT[c];
    }
    return oq_observer_range(o, &q, lo, hi, NULL, what, d);
}

oq_status oq_observer_range_candidate(const oq_observer *o, int c, const oq_range_request *r, float *rmin,
                                      float *rmax, const char *what, oq_diag *d)
{
    *rmin = *rmax = 0.0f;
    if (c < 0 || c >= OQ_AUTO_CANDIDATES)
        return oq_diag_error(d, OQ_ERR_USAGE, "%s: no auto candidate %d", what ? what : "tensor", c);
    if (!o->initialized)
        return OQ_OK;
    if (c != OQ_AUTO_MINMAX && o->kind != OQ_OBSERVER_HISTOGRAM)
        return oq_diag_error(d, OQ_ERR_USAGE, "%s: candidate %s needs a histogram observer", what ? what : "tensor",
                             AUTO_NAMES[c]);
    work *wk = malloc(sizeof(*wk));
    moments *mo = malloc(sizeof(*mo));
    oq_status st = wk && mo ? candidate_range(c, wk, mo, o, r, rmin, rmax, what ? what : "tensor", d)
                            : oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    free(wk);
    free(mo);
    return st;
}

/* Exact expected squared error of the grid [rmin, rmax] gives, on the working histogram
 * wk (WORK_SIGNED, zeros dropped) of the scoring observer. */
static double grid_cost(const work *wk, const oq_range_request *r, float rmin, float rmax, double clip_w)
{
    float s;
    int32_t zp, qmin, qmax;
    if (oq_qrange(r->dtype, r->reduce_range, &qmin, &qmax) != OQ_OK ||
        oq_qparams_compute(rmin, rmax, r->dtype, r->symmetric, r->reduce_range, &s, &zp, NULL) != OQ_OK)
        return INFINITY;
    double a = ((double)qmin - (double)zp) * (double)s, b = ((double)qmax - (double)zp) * (double)s;
    return mse_cost_w(wk, a, b, (double)qmax - (double)qmin + 1.0, clip_w);
}

oq_status oq_observer_range_mse(const oq_observer *o, const oq_range_request *r, float rmin, float rmax,
                                double *cost, oq_diag *d)
{
    *cost = 0.0;
    int32_t qmin, qmax;
    if (oq_qrange(r->dtype, r->reduce_range, &qmin, &qmax) != OQ_OK)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "cannot quantize to %s", oq_dtype_name(r->dtype));
    if (!o->initialized)
        return OQ_OK;
    if (o->kind != OQ_OBSERVER_HISTOGRAM)
        return oq_diag_error(d, OQ_ERR_USAGE, "the range error needs a histogram observer");
    work *wk = malloc(sizeof(*wk));
    if (!wk)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    if (work_build(wk, o, WORK_SIGNED, true) && wk->mass > 0.0)
        *cost = grid_cost(wk, r, rmin, rmax, 1.0);
    free(wk);
    return OQ_OK;
}

oq_status oq_observer_range_auto(const oq_observer *fit, const oq_observer *check, const oq_range_request *r,
                                 float *rmin, float *rmax, oq_auto_result *res, const char *what, oq_diag *d)
{
    const char *wn = what ? what : "tensor";
    oq_auto_result rs;
    memset(&rs, 0, sizeof rs);
    *rmin = *rmax = 0.0f;
    if (res)
        *res = rs;
    int32_t qmin, qmax;
    if (oq_qrange(r->dtype, r->reduce_range, &qmin, &qmax) != OQ_OK)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "%s: cannot quantize to %s", wn, oq_dtype_name(r->dtype));
    if (check && !check->initialized)
        check = NULL;
    if (!fit->initialized) { /* seen only in the held-out samples: no held-out check */
        if (!check)
            return OQ_OK;
        fit = check;
        check = NULL;
    }
    if (fit->kind != OQ_OBSERVER_HISTOGRAM || (check && check->kind != OQ_OBSERVER_HISTOGRAM))
        return oq_diag_error(d, OQ_ERR_USAGE, "%s: method auto needs histogram observers", wn);
    oq_status st = OQ_OK;
    work *wk = malloc(sizeof(*wk));
    moments *mo = malloc(sizeof(*mo));
    oq_observer *all = check ? malloc(sizeof(*all)) : NULL;
    if (!wk || !mo || (check && !all)) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "%s: out of memory", wn);
        goto done;
    }
    for (int c = 0; c < OQ_AUTO_CANDIDATES; c++)
        if ((st = candidate_range(c, wk, mo, fit, r, &rs.lo[c], &rs.hi[c], wn, d)) != OQ_OK)
            goto done;
    /* score every candidate on the held-out share (else on the fit share) */
    const oq_observer *sc = check ? check : fit;
    rs.held_out = check != NULL;
    bool any = work_build(wk, sc, WORK_SIGNED, true) && wk->mass > 0.0;
    double best = INFINITY;
    for (int c = 0; c < OQ_AUTO_CANDIDATES; c++) {
        rs.cost[c] = any ? grid_cost(wk, r, rs.lo[c], rs.hi[c], auto_clip_w()) : 0.0;
        if (rs.cost[c] < best)
            best = rs.cost[c];
    }
    /* the widest range among those within OQ_AUTO_TIE of the least error */
    rs.chosen = -1;
    for (int c = 0; c < OQ_AUTO_CANDIDATES; c++) {
        if (!(rs.cost[c] <= best * (1.0 + OQ_AUTO_TIE)))
            continue;
        if (rs.chosen < 0 || (double)rs.hi[c] - (double)rs.lo[c] > (double)rs.hi[rs.chosen] - (double)rs.lo[rs.chosen])
            rs.chosen = c;
    }
    if (rs.chosen < 0)
        rs.chosen = 0;
    /* the winner's method on all samples */
    const oq_observer *fin = fit;
    if (check) {
        *all = *fit;
        if ((st = oq_observer_merge(all, check, d)) != OQ_OK)
            goto done;
        fin = all;
    }
    st = candidate_range(rs.chosen, wk, mo, fin, r, rmin, rmax, wn, d);
done:
    free(wk);
    free(mo);
    free(all);
    if (res && st == OQ_OK)
        *res = rs;
    return st;
}

/* ------------------------------------------- ranges for what the activation reads ---- */

static double sigm(double x)
{
    return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
}

static double hsig(const oq_act *a, double x)
{
    double v = a->alpha * x + a->beta;
    return v < 0 ? 0 : v > 1 ? 1 : v;
}

double oq_act_value(const oq_act *a, double x)
{
    switch (a->kind) {
    case OQ_ACT_SILU: return x * sigm(x);
    case OQ_ACT_HSWISH: return x * hsig(a, x);
    case OQ_ACT_SIGMOID: return sigm(x);
    case OQ_ACT_HSIGMOID: return hsig(a, x);
    case OQ_ACT_TANH: return tanh(x);
    default: return x;
    }
}

double oq_act_slope(const oq_act *a, double x)
{
    switch (a->kind) {
    case OQ_ACT_SILU: {
        double s = sigm(x);
        return s * (1.0 + x * (1.0 - s));
    }
    case OQ_ACT_HSWISH: {
        double v = a->alpha * x + a->beta;
        return v <= 0 ? 0 : v >= 1 ? 1 : v + a->alpha * x;
    }
    case OQ_ACT_SIGMOID: {
        double s = sigm(x);
        return s * (1.0 - s);
    }
    case OQ_ACT_HSIGMOID: {
        double v = a->alpha * x + a->beta;
        return v <= 0 || v >= 1 ? 0 : a->alpha;
    }
    case OQ_ACT_TANH: {
        double t = tanh(x);
        return 1.0 - t * t;
    }
    default: return 1.0;
    }
}

/* E[(f(q(x)) - f(x))^2] per element for [a, b] with nlev levels: bin centres, rounding
 * noise step^2/12 times f'^2 inside, the clipping error outside. fa, fb: f(a), f(b). */
static double act_cost(const work *wk, const double *fx, const double *slope2, double a, double b, double nlev,
                       double fa, double fb)
{
    double step2 = (b - a) / (nlev - 1.0);
    step2 = step2 * step2 / 12.0;
    double sum = 0.0;
    for (int i = 0; i < NB; i++) {
        double c = wk->c[i];
        if (c <= 0.0)
            continue;
        double x = edge(wk, i) + 0.5 * wk->w, e;
        if (x < a)
            e = (fa - fx[i]) * (fa - fx[i]);
        else if (x > b)
            e = (fb - fx[i]) * (fb - fx[i]);
        else
            e = slope2[i] * step2;
        sum += c * e;
    }
    return sum;
}

oq_status oq_observer_range_for_act(const oq_observer *o, const oq_range_request *r, const oq_act *act,
                                    float *rmin, float *rmax, bool *changed, oq_diag *d)
{
    *changed = false;
    if (!act || act->kind == OQ_ACT_NONE || r->symmetric || !o->initialized || o->kind != OQ_OBSERVER_HISTOGRAM ||
        !(*rmax > *rmin))
        return OQ_OK;
    int32_t qmin, qmax;
    if (oq_qrange(r->dtype, r->reduce_range, &qmin, &qmax) != OQ_OK)
        return OQ_OK;
    double nlev = (double)qmax - (double)qmin + 1.0;
    bool both = act->kind == OQ_ACT_SIGMOID || act->kind == OQ_ACT_HSIGMOID || act->kind == OQ_ACT_TANH;
    double lo0 = *rmin, hi0 = *rmax;
    if (!(lo0 < 0.0) && !(both && hi0 > 0.0))
        return OQ_OK; /* nothing on a saturating side to narrow */
    work *wk = malloc(sizeof(*wk));
    double *fx = malloc(2 * NB * sizeof *fx);
    if (!wk || !fx) {
        free(wk);
        free(fx);
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    }
    double *slope2 = fx + NB;
    if (work_build(wk, o, WORK_SIGNED, false) && wk->mass > 0.0) {
        for (int i = 0; i < NB; i++) {
            double x = edge(wk, i) + 0.5 * wk->w, s = oq_act_slope(act, x);
            fx[i] = oq_act_value(act, x);
            slope2[i] = s * s;
        }
        enum { K = 64 };
        /* candidates: the bound times k / K (k = 1 .. K), the other bound fixed or (both
         * sides saturate) searched the same way */
        double best = INFINITY, ba = lo0, bb = hi0;
        int kb_max = both && hi0 > 0.0 ? K : 1;
        for (int ka = K; ka >= 1; ka--) { /* the widest first: it wins ties */
            double a = lo0 < 0.0 ? lo0 * (double)ka / K : lo0;
            for (int kb = kb_max; kb >= 1; kb--) {
                double b = kb_max > 1 ? hi0 * (double)kb / K : hi0;
                if (!(b > a))
                    continue;
                double cst = act_cost(wk, fx, slope2, a, b, nlev, oq_act_value(act, a), oq_act_value(act, b));
                if (cst < best * (1.0 - 1e-12)) {
                    best = cst;
                    ba = a;
                    bb = b;
                }
            }
            if (!(lo0 < 0.0))
                break;
        }
        if (ba != lo0 || bb != hi0) {
            *rmin = (float)ba;
            *rmax = (float)bb;
            *changed = true;
        }
    }
    free(wk);
    free(fx);
    return OQ_OK;
}
