/* onnxq — AWQ, activation-aware weight quantization (Lin et al. 2023): before a layer
 * y = x W (W [K, N], blocks along K as in include/onnxq/gptq.h) is rounded, its input
 * features are scaled, y = (x / s) (diag(s) W), with s_k = mean|x_k|^alpha: the weights
 * of the features that carry large activations grow, so their rounding error shrinks
 * relative to the output. alpha is searched on calibration inputs to minimize the
 * layer's output error after round to nearest; 1/s is folded into the op that produces x
 * (an RMSNorm/LayerNorm scale, the previous MatMul's columns) or applied by a Mul.
 *
 *   oq_awq_stats a;  oq_awq_stats_init(&a, K, d);
 *   for each calibration batch x [rows, K]: oq_awq_stats_add(&a, x, rows, d);
 *   const float *ws[] = {wq, wk, wv};  int64_t ns[] = {Nq, Nk, Nv};   // layers reading x
 *   oq_awq_result r;
 *   oq_awq_search(&a, ws, ns, 3, &spec, 20, s, &r, d);    // s [K]; r.alpha, r.err, r.err_rtn
 *   oq_awq_stats_free(&a);
 *
 * The error of a candidate is exact over every calibration row: with H = sum x^T x,
 * E(s) = 1/rows * sum_n d_n^T H d_n, d = W - diag(1/s) deq(RTN(diag(s) W)) (column n:
 * d_n); alpha = 0 is s = 1, plain RTN, so the search never does worse than RTN on the
 * calibration rows. docs/design/weight-only.md "AWQ". */
#ifndef ONNXQ_AWQ_H
#define ONNXQ_AWQ_H

#include <stddef.h>
#include <stdint.h>

#include "onnxq/gptq.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct oq_awq_stats {
    oq_gptq_stats h;     /* sum of x^T x (upper triangle) and the row count */
    double *abs_sum;     /* [K] sum of |x_k| */
} oq_awq_stats;

oq_status oq_awq_stats_init(oq_awq_stats *a, int64_t K, oq_diag *d);
/* Add rows x [rows, K]. Non-finite values are an error. */
oq_status oq_awq_stats_add(oq_awq_stats *a, const float *x, int64_t rows, oq_diag *d);
void oq_awq_stats_free(oq_awq_stats *a);

/* The scales of one alpha: m_k = mean|x_k| (at least 1e-5 of the largest, so a feature
 * never seen gets a finite scale), s_k = m_k^alpha / sqrt(max_j m_j^alpha * min_j m_j^alpha)
 * (the geometric middle of the range at 1). alpha 0: every s_k = 1. */
void oq_awq_scales(const oq_awq_stats *a, double alpha, float *s);

/* E(s) above for one layer W [K, N] (with spec's rounding; half_scales: the dequantized
 * weight rounded to float16 as DequantizeLinear outputs it). s NULL: s = 1 (RTN). */
oq_status oq_awq_error(const oq_gptq_stats *h, const float *w, int64_t N, const oq_wq_spec *spec, const float *s,
                       double *err, oq_diag *d);

typedef struct oq_awq_result {
    double alpha;        /* the alpha chosen */
    double err;          /* E at that alpha, summed over the layers */
    double err_rtn;      /* E at alpha 0 (round to nearest) */
} oq_awq_result;

/* Search alpha in {0, 1/grid, ..., 1} (grid >= 1) for the layers w[0..n) (each [K, N[i]])
 * that read the same input: the alpha with the smallest summed E wins (the smaller alpha
 * on a tie). s [K] gets its scales. */
oq_status oq_awq_search(const oq_awq_stats *a, const float *const *w, const int64_t *N, size_t n, const oq_wq_spec *spec,
                        int grid, float *s, oq_awq_result *r, oq_diag *d);

/* Clip search (AutoAWQ's second step): for every block b of column n of w [K, N] (the
 * weights as they will be rounded, after the AWQ scaling; s the scales, NULL for 1: the
 * statistics are those of x / s), the range rounded with is shrunk by r in
 * {1, 1 - 0.5/grid, ..., 0.5}, and the r with the smallest block error
 * d_b^T H'_bb d_b (H' = the statistics of x / s restricted to the block's rows; the
 * cross-block terms are left out, as AutoAWQ and NNCF do) wins, 1 on a tie. ratio [nb*N];
 * *err_before / *err_after (may be NULL): the summed block errors at r = 1 and at the
 * chosen r, over rows. */
oq_status oq_awq_clip_search(const oq_gptq_stats *h, const float *s, const float *w, int64_t N, const oq_wq_spec *spec,
                             int grid, float *ratio, double *err_before, double *err_after, oq_diag *d);
/* Round to nearest with block ranges shrunk by ratio [nb*N] (NULL: oq_wq_rtn): the block's
 * parameters are those of its values times r, every value clamped to the type's range. */
oq_status oq_awq_rtn_clipped(const float *w, int64_t K, int64_t N, const oq_wq_spec *spec, const float *ratio, int32_t *q,
                             float *scales, int32_t *zero_points, oq_diag *d);

#ifdef __cplusplus
}
#endif
#endif
