/* onnxq — weight-only quantization of a matrix W [K, N] in blocks along the reduction
 * axis K (the layout of MatMul's B; Gemm's transposed B is transposed by the caller):
 * round to nearest (RTN), or GPTQ (Frantar et al. 2022: columns quantized one at a time,
 * the error of each spread over the columns not yet quantized through the inverse
 * Hessian of the layer's squared output error, H = 2/n sum x^T x).
 *
 *   oq_wq_spec s = {OQ_DTYPE_INT4, true, 32, true};     // int4 symmetric, blocks of 32
 *   oq_wq_rtn(w, K, N, &s, q, scales, zps, d);          // q [K*N], scales/zps [nb*N]
 *
 *   oq_gptq_stats h;  oq_gptq_stats_init(&h, K);
 *   for each calibration batch x [rows, K]: oq_gptq_stats_add(&h, x, rows);
 *   oq_gptq_quantize(w, K, N, &s, &h, 0.01, q, scales, zps, &damp_used, d);
 *   oq_gptq_stats_free(&h);
 *
 * Block b of output column n holds k in [b*block, min((b+1)*block, K)); its scale and
 * zero point are at index b*N + n (the [ceil(K/block), N] shape of a DequantizeLinear
 * with axis 0 and block_size on W). docs/weight-only.md. */
#ifndef ONNXQ_GPTQ_H
#define ONNXQ_GPTQ_H

#include <stdbool.h>
#include <stdint.h>

#include "onnxq/ir.h"
#include "onnxq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct oq_wq_spec {
    int32_t dtype;      /* OQ_DTYPE_INT4, UINT4, INT8 or UINT8 */
    bool symmetric;     /* zero point at the type's middle (0 signed, 8 / 128 unsigned) */
    int64_t block;      /* elements of K per scale (> 0) */
    bool half_scales;   /* scales rounded to float16 (and kept in its range) before use */
} oq_wq_spec;

int64_t oq_wq_n_blocks(int64_t K, int64_t block);

/* Scale and zero point of one group of n values v[0], v[stride], ...:
 * symmetric: the smallest scale with which every value fits the type's whole range
 * without clipping, max(-min / -qlo, max / qhi) around the middle zero point (int4:
 * max(-min/8, max/7); the most negative value lands exactly on -8);
 * asymmetric: the range widened to include 0, scale = (max - min) / (qmax - qmin),
 * zero point qmin - round(min / scale), clamped. An all-zero group gets scale 1. */
void oq_wq_group_params(const float *v, int64_t n, int64_t stride, const oq_wq_spec *s, float *scale,
                        int32_t *zero_point);

/* Round to nearest: q[k*N + n] in the dtype's range, scales / zero_points [nb*N]. */
oq_status oq_wq_rtn(const float *w, int64_t K, int64_t N, const oq_wq_spec *s, int32_t *q, float *scales,
                    int32_t *zero_points, oq_diag *d);

/* The input statistics of one layer: sum of x^T x over every row x (K values) seen,
 * in double (K*K*8 bytes, whatever the number of samples). */
typedef struct oq_gptq_stats {
    int64_t K;
    double *xtx;        /* K x K, upper triangle accumulated, mirrored by oq_gptq_quantize */
    uint64_t rows;
    float *part;        /* private: one call's x^T x (a float32 GEMM), added to xtx */
    void *pool;         /* private: the threads of that GEMM */
} oq_gptq_stats;

oq_status oq_gptq_stats_init(oq_gptq_stats *h, int64_t K, oq_diag *d);
/* Add rows x [rows, K] (row-major): x^T x of the call as a float32 GEMM on every CPU,
 * summed into xtx in double. Non-finite values are an error. */
oq_status oq_gptq_stats_add(oq_gptq_stats *h, const float *x, int64_t rows, oq_diag *d);
void oq_gptq_stats_free(oq_gptq_stats *h);

/* GPTQ with the statistics h (h->rows > 0): H = 2/rows * xtx, dampened by
 * damp * mean(diag H) on the diagonal (tried again with 10x and 100x that when H is not
 * positive definite; *damp_used gets the factor that worked), Cholesky factor of H^-1,
 * then row by row of W (input feature k = 0..K-1) with the error spread over the rows
 * not yet quantized, in lazy batches of max(128, block) rows. A feature never seen
 * (H[k][k] == 0) keeps its weights and spreads nothing. Block parameters come from the
 * updated weights when the first row of the block is reached; the error is taken
 * against the dequantized value as the model computes it (rounded to float16 with
 * half_scales: DequantizeLinear's output type). Outputs as oq_wq_rtn.
 * OQ_ERR_NUMERIC when H stays indefinite. */
oq_status oq_gptq_quantize(const float *w, int64_t K, int64_t N, const oq_wq_spec *s, const oq_gptq_stats *h,
                           double damp, int32_t *q, float *scales, int32_t *zero_points, double *damp_used,
                           oq_diag *d);
/* The same, with act_order: the features quantized in the order of decreasing H[k][k]
 * (the inputs with the most energy first, their error spread over the rest), the block
 * parameters fixed beforehand from W's contiguous blocks ("static groups": the layout
 * DequantizeLinear and MatMulNBits store, no group index). */
oq_status oq_gptq_quantize_ordered(const float *w, int64_t K, int64_t N, const oq_wq_spec *s, const oq_gptq_stats *h,
                                   double damp, bool act_order, int32_t *q, float *scales, int32_t *zero_points,
                                   double *damp_used, oq_diag *d);

/* GPTQ for int8 weights with fixed symmetric per-column scales (static quantization: the
 * scales were chosen by the quantizer, the rounding is what changes): w [K, N], scales
 * [N] (> 0), q [K*N] in [-127, 127]. pairs: no two same-sign values at rows (2i, 2i+1)
 * of one column exceed 128 steps together (onnxruntime's AVX2 u8 x s8 kernels add such a
 * pair into one saturating int16; the rows must be in the kernels' reduction order): the
 * second of a pair is lowered to fit, and that error spread like any other. Dampening and
 * its retries as oq_gptq_quantize. docs/quantize.md "Weight rounding". */
oq_status oq_gptq_round_fixed(const float *w, int64_t K, int64_t N, const float *scales, bool pairs,
                              const oq_gptq_stats *h, double damp, int32_t *q, double *damp_used, oq_diag *d);
/* The layer's squared output error over the rows h saw, sum_n e_n^T (sum x^T x) e_n with
 * e = w - q * scales (the quantity GPTQ lowers); -1 on out of memory. */
double oq_gptq_proxy_error(const float *w, int64_t K, int64_t N, const float *scales, const int32_t *q,
                           const oq_gptq_stats *h);
/* The same for nq candidate roundings q[0..nq) at once (X^T X expanded once, one GEMM):
 * err[c]; false on out of memory. */
bool oq_gptq_proxy_errors(const float *w, int64_t K, int64_t N, const float *scales, const int32_t *const *q,
                          size_t nq, const oq_gptq_stats *h, double *err);

#ifdef __cplusplus
}
#endif
#endif
