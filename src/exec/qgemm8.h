/* Private to src/exec: the uint8 x int8 GEMM micro-kernels of the integer QDQ groups
 * (src/exec/kernels/qlinear.c), in src/exec/kernels/qgemm8.c.
 *
 * C[m][n] = sum over k of A[m][k] * B[k][n], A uint8 rows, B int8 packed by
 * oq_q8_pack(), int32 results that wrap modulo 2^32 as onnxruntime's accumulators do.
 * Two arithmetics:
 *
 *   OQ_Q8_VNNI   exact (AVX-512 VNNI vpdpbusd);
 *   OQ_Q8_AVX2   the pair sums A[m][2j] B[2j][n] + A[m][2j+1] B[2j+1][n] saturated to
 *                int16 (vpmaddubsw, then vpmaddwd with ones), which is what onnxruntime's
 *                AVX2 U8S8 kernels compute (QgemmU8X8KernelAvx2.S,
 *                MultiplyAccumulateRowU8S8Avx2); exact when no pair can saturate
 *                (oq_q8_pairs_safe).
 *
 * K is zero padded to a multiple of 4 (a pad weight is 0: the pair sums are unchanged,
 * as MLAS pads an odd K); N to a multiple of OQ_Q8_NR. */
#ifndef ONNXQ_EXEC_QGEMM8_H
#define ONNXQ_EXEC_QGEMM8_H

#include <stdbool.h>
#include <stdint.h>

#define OQ_Q8_NR 16 /* columns per packed panel */
#define OQ_Q8_MR 8  /* rows per micro-kernel call */

typedef enum oq_q8_isa { OQ_Q8_NONE = 0, OQ_Q8_AVX2 = 1, OQ_Q8_VNNI = 2 } oq_q8_isa;

/* What this CPU runs (ONNXQ_QGEMM_ISA=generic gives NONE, =avx2 at most AVX2). */
oq_q8_isa oq_q8_cpu(void);

static inline int64_t oq_q8_k4(int64_t K)
{
    return (K + 3) / 4 * 4;
}

/* bytes of the packed B of K rows and N columns */
static inline int64_t oq_q8_packed_size(int64_t K, int64_t N)
{
    return (N + OQ_Q8_NR - 1) / OQ_Q8_NR * oq_q8_k4(K) * OQ_Q8_NR;
}

/* Pack B: b(k, n) gives the int8 value of row k, column n. Layout: panels of OQ_Q8_NR
 * columns, each [K4 / 4][OQ_Q8_NR][4]. */
void oq_q8_pack(int8_t *dst, int64_t K, int64_t N, int8_t (*b)(const void *ctx, int64_t k, int64_t n),
                const void *ctx);

/* No pair (k even, same column) of B can saturate int16 for any uint8 A:
 * same-sign pairs have |b0| + |b1| <= 128. */
bool oq_q8_pairs_safe(const int8_t *packed, int64_t K, int64_t N);

/* One tile: rows A + r * lda (r < mr <= OQ_Q8_MR; each readable for K4 bytes, the bytes
 * past K being anything: their weights are 0), one packed panel; C [mr][OQ_Q8_NR]. */
void oq_q8_tile(oq_q8_isa isa, const uint8_t *A, int64_t lda, int mr, const int8_t *panel,
                int64_t K4, int32_t *C);

/* Requantization of a tile (onnxruntime's MlasRequantizeOutput, and its float-output
 * processor): per column n (constants padded to whole panels)
 *   a = acc + colm[n] * rowsum[r] + colc[n]         (int32, wrapping)
 *   y = nearbyint(clamp((float)a * scale[n], fmin, fmax)) + yzp   as uint8 or int8, or
 *   y = (float)a * scale[n]                          (float_out)
 * out: [mr][OQ_Q8_NR] bytes, or floats. */
typedef struct oq_q8_out {
    const int32_t *colm, *colc;
    const float *scale;
    float fmin, fmax;
    int32_t yzp;
    bool s8, float_out;
} oq_q8_out;
void oq_q8_requant(oq_q8_isa isa, const int32_t *acc, int mr, const int64_t *rowsum,
                   const oq_q8_out *o, int64_t n0, void *out);

/* in [8][OQ_Q8_NR] bytes to out [OQ_Q8_NR][8] */
void oq_q8_transpose8(const uint8_t *in, uint8_t *out);

/* sum of n uint8 values */
int64_t oq_q8_sum(const uint8_t *a, int64_t n);

#endif
