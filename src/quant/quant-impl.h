/* Private to src/quant: helpers shared by its files. */
#ifndef ONNXQ_QUANT_IMPL_H
#define ONNXQ_QUANT_IMPL_H
#include <stdbool.h>
#include <stdint.h>
#include "exec/exec-impl.h"
#include "onnxq/ir.h" /* the thread pool and the float32 GEMM of the executor */

/* C = alpha op(A) op(B) + beta C (oq_k_sgemm) on the pool's threads. */
oq_status oq_quant_sgemm(oq_pool *pool, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                         const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                         int64_t ldc);

/* n is the default domain's op `op` (NULL: false). src/quant/qgraph.c */
bool oq_quant_op_is(const oq_node *n, const char *op);
/* The DequantizeLinear (with data and scale inputs) producing v, or NULL. */
const oq_node *oq_quant_producer_dq(const oq_value *v);
/* The value of a constant holding one number (any numeric type) into *out, its type into
 * *dtype (may be NULL); false when v is absent, not constant or not one element. */
bool oq_quant_const_scalar(const oq_value *v, double *out, int32_t *dtype);

#endif
