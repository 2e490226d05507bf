/* Private to src/quant: helpers shared by its files. */
#ifndef ONNXQ_QUANT_IMPL_H
#define ONNXQ_QUANT_IMPL_H
#include <stdbool.h>
#include <stdint.h>
#include "exec/exec-impl.h" /* the thread pool and the float32 GEMM of the executor */

/* C = alpha op(A) op(B) + beta C (oq_k_sgemm) on the pool's threads. */
oq_status oq_quant_sgemm(oq_pool *pool, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                         const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                         int64_t ldc);

#endif
