/* onnxq — quantization math: observers, range selection, scale / zero point, weight and
 * bias quantization. Pure math and no I/O: the calibration pass feeds observers with the
 * tensors the executor produces, picks a range per tensor and turns it into parameters.
 *
 * Conventions
 *  - Observers keep FIXED-SIZE state: sizeof(oq_observer) does not depend on how many
 *    samples were seen. No observer function allocates.
 *  - Non-finite input (NaN, +-Inf) is never folded into the statistics. Every update
 *    reports what it saw in an oq_nonfinite; under OQ_NAN_ERROR the update returns
 *    OQ_ERR_NUMERIC with one diag line naming `what` (the caller passes e.g.
 *    `tensor "conv1_out" (node "conv1"), sample calib/s3`), under OQ_NAN_IGNORE it
 *    counts them and returns OQ_OK.
 *  - Quantization follows ONNX QuantizeLinear exactly:
 *        q = saturate(round_half_to_even(x / scale) + zero_point)
 *    with x / scale a float32 division; NaN gives the zero point, +-Inf the bounds.
 *  - Methods and formulas: docs/calibration.md.
 */
#ifndef ONNXQ_QUANT_H
#define ONNXQ_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnxq/ir.h"
#include "onnxq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ non-finite values ---- */

typedef enum oq_nan_policy {
    OQ_NAN_ERROR = 0,  /* any NaN/Inf stops: OQ_ERR_NUMERIC */
    OQ_NAN_IGNORE = 1, /* exclude them from the statistics and count them */
    OQ_NAN_QUANTIZED = 2 /* calibration: as IGNORE, and insert-qdq refuses to quantize a
                          * tensor that had any (oq_calib_table.nonfinite_error) */
} oq_nan_policy;

typedef struct oq_nonfinite {
    uint64_t nan_count;   /* NaN values in this call */
    uint64_t inf_count;   /* +Inf or -Inf values in this call */
    int64_t first_index;  /* element index of the first one in this call, -1 if none */
} oq_nonfinite;

/* ----------------------------------------------------------------- observers ---- */

#define OQ_HIST_BINS 2048

typedef enum oq_observer_kind {
    OQ_OBSERVER_MINMAX = 0,    /* running min / max (or their moving average) */
    OQ_OBSERVER_HISTOGRAM = 1  /* min / max plus a growing-range histogram */
} oq_observer_kind;

/* A histogram whose range grows without losing counts. Bin i covers
 * [lo + i*width, lo + (i+1)*width); the last bin also holds its right edge. When data
 * falls outside, the width is multiplied by 2^m and the origin moved by a whole number
 * of old bins, so every old bin lands inside exactly one new bin (counts move exactly). */
typedef struct oq_histogram {
    double lo;       /* left edge of bin 0 */
    double width;    /* bin width (> 0 once initialized) */
    uint64_t total;  /* sum of counts */
    uint64_t counts[OQ_HIST_BINS];
} oq_histogram;

typedef struct oq_observer {
    oq_observer_kind kind;
    oq_nan_policy nan_policy;
    /* minmax: 0 = plain running min/max; in (0,1] = moving average of per-update
     * min/max with this constant (m <- m + c*(batch_m - m), first update initializes). */
    double averaging_constant;
    bool initialized;
    float min, max;          /* exact min / max of all finite values seen */
    float avg_min, avg_max;  /* moving averages (valid when averaging_constant > 0) */
    uint64_t count;          /* finite values observed */
    uint64_t zero_count;     /* of which exactly 0 (or -0): quantized exactly by any
                              * range, so entropy / mse leave them out of the search */
    uint64_t updates;        /* number of update calls that contained finite values */
    uint64_t nan_count;      /* non-finite values excluded (OQ_NAN_IGNORE) */
    uint64_t inf_count;
    oq_histogram hist;       /* used by OQ_OBSERVER_HISTOGRAM */
} oq_observer;

void oq_observer_init(oq_observer *o, oq_observer_kind kind, oq_nan_policy policy);
/* Set the moving-average constant for minmax (0 disables). Returns OQ_ERR_USAGE when
 * c is outside [0, 1]. */
oq_status oq_observer_set_averaging(oq_observer *o, double c, oq_diag *d);

/* Feed n float32 values. `nf` (may be NULL) receives what non-finite values were in
 * this call. `what` names the tensor/sample for the error message (may be NULL). */
oq_status oq_observer_update(oq_observer *o, const float *x, int64_t n, oq_nonfinite *nf,
                             const char *what, oq_diag *d);

/* Merge another observer of the same kind into o (e.g. per-thread observers). */
oq_status oq_observer_merge(oq_observer *o, const oq_observer *other, oq_diag *d);

/* The minmax range: exact min/max, or the moving averages when averaging is on.
 * An observer that saw no finite value gives [0, 0] and returns false. */
bool oq_observer_minmax(const oq_observer *o, float *rmin, float *rmax);

/* Histogram primitives (also used by the observer). */
void oq_histogram_reset(oq_histogram *h);
/* Add finite values; caller guarantees finiteness and passes their min/max. */
void oq_histogram_add(oq_histogram *h, const float *x, int64_t n, float xmin, float xmax);
/* Grow the range so that it covers [a, b], moving counts exactly. */
void oq_histogram_grow(oq_histogram *h, double a, double b);

/* Per-channel min/max of a weight tensor along `axis` (negative counts from the end).
 * mins/maxs have dims[axis] entries. Non-finite weights are an error naming `what`. */
oq_status oq_minmax_per_channel(const float *x, const int64_t *dims, size_t rank, int axis,
                                float *mins, float *maxs, const char *what, oq_diag *d);

/* A streaming per-channel absolute-maximum observer (SmoothQuant's activation
 * statistics): acc[c] <- max(acc[c], |x|) over every element of channel c of x along
 * `axis` (negative counts from the end), i.e. the max over all other axes. acc has
 * dims[axis] entries, zeroed by the caller before the first update; its size is fixed
 * by the channel count, not by how many tensors were seen. NaN and Inf are skipped and
 * counted in *nonfinite (may be NULL). A bad axis or shape is OQ_ERR_USAGE naming what. */
oq_status oq_absmax_per_channel_update(float *acc, const float *x, const int64_t *dims, size_t rank, int axis,
                                       uint64_t *nonfinite, const char *what, oq_diag *d);

/* ------------------------------------------------------------ range selection ---- */

typedef enum oq_calib_method {
    OQ_CALIB_MINMAX = 0,
    OQ_CALIB_PERCENTILE = 1,
    OQ_CALIB_ENTROPY = 2,
    OQ_CALIB_MSE = 3,
    OQ_CALIB_AUTO = 4      /* per tensor, the candidate with the least held-out error */
} oq_calib_method;

const char *oq_calib_method_name(oq_calib_method m);
/* "minmax" | "percentile" | "entropy" | "mse" | "auto"; returns -1 when unknown. */
int oq_calib_method_from_name(const char *s);

typedef struct oq_range_request {
    oq_calib_method method;
    double percentile;     /* for OQ_CALIB_PERCENTILE, in (0, 100]; default 99.99 */
    int32_t dtype;         /* target integer type: the number of levels it gives */
    bool symmetric;        /* symmetric: choose a threshold T, range [-T, T] */
    bool reduce_range;
} oq_range_request;

void oq_range_request_default(oq_range_request *r); /* percentile 99.99, uint8, asym */

/* The default percentile for activations of this type: 99.99 for 8-bit (and narrower)
 * types, 99.999 for 16-bit ones, whose finer steps make clipping the costlier error
 * (docs/calibration.md has the measurements). */
double oq_default_percentile(int32_t dtype);

/* What a range search looked at (for reports and tests). */
typedef struct oq_range_info {
    int candidates;        /* candidate ranges evaluated (entropy, mse) */
    double best_cost;      /* KL divergence or expected MSE per element at the choice */
} oq_range_info;

/* Pick [rmin, rmax] from an observer. minmax works on either observer kind; the other
 * methods need a histogram observer. An observer that saw nothing gives [0,0].
 * OQ_CALIB_AUTO here scores the candidates on the same observer (no held-out share:
 * oq_observer_range_auto). */
oq_status oq_observer_range(const oq_observer *o, const oq_range_request *r, float *rmin,
                            float *rmax, oq_range_info *info, const char *what, oq_diag *d);

/* ---------------------------------------- ranges for what the activation reads ---- */

/* The function every consumer applies to a tensor, when all of them do (the error that
 * matters is the one after it). */
typedef enum oq_act_kind {
    OQ_ACT_NONE = 0,
    OQ_ACT_SILU = 1,       /* x * Sigmoid(x): Sigmoid(x) and Mul(x, Sigmoid(x)) read x */
    OQ_ACT_HSWISH = 2,     /* x * HardSigmoid(x) (HardSwish: alpha 1/6, beta 0.5) */
    OQ_ACT_SIGMOID = 3,    /* Sigmoid(x) alone */
    OQ_ACT_HSIGMOID = 4,   /* HardSigmoid(x) alone */
    OQ_ACT_TANH = 5        /* Tanh(x) alone */
} oq_act_kind;

typedef struct oq_act {
    oq_act_kind kind;
    double alpha, beta;    /* HardSigmoid's: max(0, min(1, alpha x + beta)) */
} oq_act;

/* f(x) and f'(x) of act. */
double oq_act_value(const oq_act *a, double x);
double oq_act_slope(const oq_act *a, double x);

/* Narrow [*rmin, *rmax] (from any method) to the range that minimises the expected squared
 * error after the activation, E[(f(DQ(Q(x))) - f(x))^2], over histogram observer o: inside
 * the range the rounding noise step^2/12 weighted by f'(x)^2, outside it the clipping
 * error f(bound) - f(x). Only narrows: the bound where f saturates (the negative side of
 * SiLU and HardSwish, both sides of Sigmoid, HardSigmoid and Tanh) moves towards 0, the
 * other stays. Asymmetric ranges only (r->symmetric: unchanged), and only for a
 * histogram observer. *changed: a bound moved. */
oq_status oq_observer_range_for_act(const oq_observer *o, const oq_range_request *r, const oq_act *act,
                                    float *rmin, float *rmax, bool *changed, oq_diag *d);

/* ------------------------------------------------------ auto: chosen per tensor ---- */

/* The candidates of OQ_CALIB_AUTO, in the order ties are broken (the widest first). */
typedef enum oq_auto_candidate {
    OQ_AUTO_MINMAX = 0,   /* exact min / max */
    OQ_AUTO_P99_999 = 1,  /* percentile 99.999 */
    OQ_AUTO_P99_99 = 2,   /* percentile 99.99 */
    OQ_AUTO_P99_9 = 3,    /* percentile 99.9 */
    OQ_AUTO_MSE = 4,      /* least expected squared error (clipping + rounding) */
    OQ_AUTO_CANDIDATES = 5
} oq_auto_candidate;

/* The criterion: the expected squared error per element on the held-out samples, with
 * the clipped part weighted by OQ_AUTO_CLIP_WEIGHT (rounding noise weight 1); the widest
 * range whose error is within OQ_AUTO_TIE (relative) of the least wins. The mse candidate
 * minimises the same weighted error on the fit samples. docs/calibration.md "auto". */
#define OQ_AUTO_CLIP_WEIGHT 1.0
#define OQ_AUTO_TIE 0.02

/* "minmax" | "p99.999" | "p99.99" | "p99.9" | "mse"; from_name returns -1 when unknown. */
const char *oq_auto_candidate_name(int c);
int oq_auto_candidate_from_name(const char *s);

/* What oq_observer_range_auto looked at. */
typedef struct oq_auto_result {
    int chosen;                           /* oq_auto_candidate */
    bool held_out;                        /* scored on a held-out observer (false: on the
                                           * fit observer itself, e.g. too few samples) */
    float lo[OQ_AUTO_CANDIDATES];         /* each candidate's range on the fit observer */
    float hi[OQ_AUTO_CANDIDATES];
    double cost[OQ_AUTO_CANDIDATES];      /* its expected squared error per element on the
                                           * scoring observer (oq_observer_range_mse) */
} oq_auto_result;

/* Expected squared error per element of quantizing what histogram observer o saw with
 * the parameters [rmin, rmax] gives (oq_qparams_compute with r's dtype, symmetric,
 * reduce_range): the exact integral of (x - DQ(Q(x)))^2 over o's piecewise-uniform
 * density, clipping included; exact zeros count as values without error. An observer
 * that saw nothing gives 0. */
oq_status oq_observer_range_mse(const oq_observer *o, const oq_range_request *r, float rmin,
                                float rmax, double *cost, oq_diag *d);

/* One auto candidate's range on o (c: oq_auto_candidate; r: dtype, symmetric,
 * reduce_range). OQ_AUTO_MSE is auto's fast search (rounding noise as step^2/12, exact
 * tails), not method mse's exact one. */
oq_status oq_observer_range_candidate(const oq_observer *o, int c, const oq_range_request *r, float *rmin,
                                      float *rmax, const char *what, oq_diag *d);

/* OQ_CALIB_AUTO: each candidate's range is fit on `fit` (histogram observer) and scored
 * by oq_observer_range_mse on `check`, the samples held out of `fit` (NULL or empty: on
 * `fit` itself); the cheapest wins (ties: the earlier candidate). The range returned is
 * the winner's method applied to fit and check merged (all samples). res may be NULL.
 * docs/calibration.md "auto". */
oq_status oq_observer_range_auto(const oq_observer *fit, const oq_observer *check,
                                 const oq_range_request *r, float *rmin, float *rmax,
                                 oq_auto_result *res, const char *what, oq_diag *d);

/* -------------------------------------------------------- scale / zero point ---- */

/* Integer range of a quantized type: int8 [-128,127], uint8 [0,255], int16, uint16,
 * int4 [-8,7], uint4 [0,15], int32. reduce_range removes one bit (int8 [-64,63],
 * uint8 [0,127], ...); it does not apply to int32. Returns OQ_ERR_UNSUPPORTED for other
 * types. */
oq_status oq_qrange(int32_t dtype, bool reduce_range, int32_t *qmin, int32_t *qmax);

/* Scale and zero point for the real range [rmin, rmax] (widened to include 0).
 *  asymmetric: scale = (rmax - rmin) / (qmax - qmin), zp = qmin - round(rmin / scale)
 *              clamped to [qmin, qmax];
 *  symmetric:  T = max(|rmin|, |rmax|); signed: zp = 0, scale = T / qmax;
 *              unsigned: zp = (qmin + qmax + 1) / 2, scale = T / (qmax - zp).
 * A zero-width range gives scale 1; a scale below FLT_MIN becomes FLT_MIN. The scale is
 * always finite and > 0, the zero point an integer in [qmin, qmax]. Non-finite input is
 * OQ_ERR_NUMERIC. */
oq_status oq_qparams_compute(float rmin, float rmax, int32_t dtype, bool symmetric,
                             bool reduce_range, float *scale, int32_t *zero_point,
                             oq_diag *d);

/* Range selection and parameters in one call: oq_observer_range with r, then
 * oq_qparams_compute with r->dtype, r->symmetric, r->reduce_range. */
oq_status oq_observer_qparams(const oq_observer *o, const oq_range_request *r, float *scale,
                              int32_t *zero_point, oq_range_info *info, const char *what,
                              oq_diag *d);

/* ONNX QuantizeLinear of one value into [qmin, qmax]. */
int32_t oq_quantize_value(float x, float scale, int32_t zero_point, int32_t qmin,
                          int32_t qmax);
/* ONNX DequantizeLinear of one value. */
float oq_dequantize_value(int32_t q, float scale, int32_t zero_point);

/* The same two, inline (for loops over every element): the functions above call them. */
static inline int32_t oq_quantize_value_inline(float x, float scale, int32_t zero_point,
                                               int32_t qmin, int32_t qmax)
{
    if (x != x) /* NaN */
        return zero_point < qmin ? qmin : (zero_point > qmax ? qmax : zero_point);
    float v = x / scale; /* float32 division, as QuantizeLinear specifies */
    if (v != v)          /* 0 / 0 cannot happen with a valid scale; keep it defined */
        return zero_point;
    double r = __builtin_nearbyint((double)v) + (double)zero_point; /* ties to even */
    if (r < (double)qmin)
        return qmin;
    if (r > (double)qmax)
        return qmax;
    return (int32_t)r;
}

static inline float oq_dequantize_value_inline(int32_t q, float scale, int32_t zero_point)
{
    return (float)((int64_t)q - (int64_t)zero_point) * scale;
}

/* Store n integers (already in range) as dtype elements: 1, 2 or 4 bytes each, or
 * int4/uint4 packed two per byte, element 2k in the low nibble, 2k+1 in the high
 * nibble (ONNX order); an odd tail leaves the last high nibble 0.
 * out must hold oq_dtype_nbytes(dtype, n) bytes. */
oq_status oq_pack_ints(int32_t dtype, const int32_t *v, int64_t n, void *out, oq_diag *d);
/* Read element i of a packed buffer (inverse of oq_pack_ints). */
int32_t oq_unpack_int(int32_t dtype, const void *buf, int64_t i);

/* ------------------------------------------------------------ int16 weight pairs -- */

/* onnxruntime's u8 x s8 kernels on x86 CPUs without VNNI add the products of two adjacent
 * reduction elements into a saturating int16 (vpmaddubsw), which overflows for a uint8
 * input when both int8 weights have the same sign and |w_a| + |w_b| > 128. Calls
 * fn(user, i, j) for each such pair of flat indices of n's weight (input 1): Conv
 * [M, C/group, k...] in the flattened (kh, kw, cin) order within each group (none for a
 * depthwise Conv: exact kernels), Gemm [K, N] (or [N, K] with transB) and MatMul
 * [..., K, N] along K. Returns false (no call) for other ops. */
bool oq_weight_pairs(const oq_node *n, const int64_t *dims, size_t rank,
                     void (*fn)(void *user, int64_t i, int64_t j), void *user);
/* true when the int8 weights a and b, adjacent along the reduction, can saturate an int16
 * sum of two u8 x s8 products: the same sign and |a| + |b| > 128 */
static inline bool oq_weight_pair_over(int32_t a, int32_t b)
{
    return ((a > 0 && b > 0) || (a < 0 && b < 0)) && (a > 0 ? a + b : -(a + b)) > 128;
}
/* b lowered, keeping its sign, so that the pair (a, b) is not over the limit */
static inline int32_t oq_weight_pair_fit_second(int32_t a, int32_t b)
{
    if (!oq_weight_pair_over(a, b))
        return b;
    return b > 0 ? 128 - a : -(128 + a);
}
/* true when n's int8 weight q has no same-sign pair above 128 steps (false for an op
 * oq_weight_pairs does not know) */
bool oq_weight_pairs_fit(const oq_node *n, const int8_t *q, const int64_t *dims, size_t rank);

/* ------------------------------------------------------------ weights and bias ---- */

typedef struct oq_weight_spec {
    int32_t dtype;        /* int8 (default), uint8, int16, uint16, int4, uint4 */
    bool symmetric;
    bool reduce_range;
    bool per_channel;     /* one scale per index along axis */
    int axis;             /* for per_channel / blocks; negative counts from the end */
    int64_t block_size;   /* > 0: blocked along axis (ONNX opset 21), implies per block */
} oq_weight_spec;

void oq_weight_spec_default(oq_weight_spec *s); /* int8 symmetric per-channel axis 0 */

/* Shape of the scale / zero-point tensors for a weight of shape dims: [] (rank 0) per
 * tensor, [dims[axis]] per channel, dims with dims[axis] -> ceil(dims[axis]/block) for
 * blocks. Writes the rank to *prank, the dims into pdims (room for `rank` entries) and
 * returns the element count, or -1 on a bad spec. */
int64_t oq_weight_param_shape(const int64_t *dims, size_t rank, const oq_weight_spec *s,
                              int64_t *pdims, size_t *prank, oq_diag *d);

/* Quantize a float weight: scales / zero_points get oq_weight_param_shape() entries,
 * `out` gets oq_dtype_nbytes(dtype, numel) bytes packed as oq_pack_ints does. Ranges
 * are the exact min/max of each group; non-finite weights are an error naming `what`. */
oq_status oq_quantize_weight(const float *w, const int64_t *dims, size_t rank,
                             const oq_weight_spec *s, float *scales, int32_t *zero_points,
                             void *out, const char *what, oq_diag *d);

/* Quantize with given parameters (per tensor when nparams == 1, else per channel along
 * axis, or per block when block_size > 0) into `out`. Counts saturated values (not
 * NaN) into *n_saturated when non-NULL. */
oq_status oq_quantize_with_params(const float *w, const int64_t *dims, size_t rank,
                                  int32_t dtype, int axis, int64_t block_size,
                                  const float *scales, const int32_t *zero_points,
                                  int64_t nparams, void *out, int64_t *n_saturated,
                                  oq_diag *d);

/* Bias to int32, zero point 0, scale[c] = input_scale * weight_scales[c] (float32
 * product; n_wscales is 1 or n). Values beyond int32 saturate and are counted in
 * *n_overflow, the first such index in *first_overflow (-1 if none). out_scales (may be
 * NULL) receives the n (or 1) bias scales. */
oq_status oq_quantize_bias(const float *bias, int64_t n, float input_scale,
                           const float *weight_scales, int64_t n_wscales, int32_t *out,
                           float *out_scales, int64_t *n_overflow, int64_t *first_overflow,
                           const char *what, oq_diag *d);

/* Smallest weight scale for which round(|bias| / (input_scale * weight_scale)) fits in
 * int32 (used to raise a channel's weight scale instead of clipping the bias). */
float oq_bias_min_weight_scale(float bias, float input_scale);
/* The same with |round(bias / (input_scale * weight_scale))| <= limit (0 < limit <=
 * 2147483520, the largest float32 below 2^31): fold-bias keeps room in the int32
 * accumulator for sum|w_q| * max|x_q|. */
float oq_bias_min_weight_scale_limit(float bias, float input_scale, double limit);

#ifdef __cplusplus
}
#endif
#endif
