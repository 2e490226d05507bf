/* The weight pairs that onnxruntime's u8 x s8 kernels add into one saturating int16 on x86
 * CPUs without VNNI (docs/quantize.md "pair limit", docs/run.md "The integer arithmetic"). */
#include <stdlib.h>
#include <string.h>

#include "onnxq/quant.h"
#include "quant/quant-impl.h"

bool oq_weight_pairs(const oq_node *n, const int64_t *dims, size_t rank,
                     void (*fn)(void *user, int64_t i, int64_t j), void *user)
{
    if (oq_quant_op_is(n, "Conv") && rank >= 3) {
        int64_t M = dims[0], C = dims[1], S = 1;
        for (size_t k = 2; k < rank; k++)
            S *= dims[k];
        if (C == 1 && oq_node_attr_int(n, "group", 1) == M)
            return true; /* depthwise: exact kernels (a channel multiplier > 1 is a grouped GEMM) */
        int64_t K = C * S;
        for (int64_t m = 0; m < M; m++) {
            int64_t base = m * K;
            for (int64_t k = 0; k + 1 < K; k += 2) { /* (kh, kw, cin) flattened: k = s*C + c */
                int64_t s0 = k / C, c0 = k % C, s1 = (k + 1) / C, c1 = (k + 1) % C;
                fn(user, base + c0 * S + s0, base + c1 * S + s1);
            }
        }
        return true;
    }
    if ((oq_quant_op_is(n, "MatMul") || oq_quant_op_is(n, "Gemm")) && rank >= 2) {
        bool tb = oq_quant_op_is(n, "Gemm") && oq_node_attr_int(n, "transB", 0);
        int64_t R = dims[rank - 2], Cc = dims[rank - 1], B = 1;
        for (size_t k = 0; k + 2 < rank; k++)
            B *= dims[k];
        int64_t K = tb ? Cc : R, N = tb ? R : Cc;
        for (int64_t b = 0; b < B; b++)
            for (int64_t col = 0; col < N; col++)
                for (int64_t k = 0; k + 1 < K; k += 2) {
                    int64_t i = tb ? col * K + k : k * N + col, j = tb ? i + 1 : i + N;
                    fn(user, b * R * Cc + i, b * R * Cc + j);
                }
        return true;
    }
    return false;
}

typedef struct {
    const int8_t *q;
    bool fit;
} fit_walk;

static void check_pair(void *user, int64_t i, int64_t j)
{
    fit_walk *f = user;
    if (oq_weight_pair_over(f->q[i], f->q[j]))
        f->fit = false;
}

bool oq_weight_pairs_fit(const oq_node *n, const int8_t *q, const int64_t *dims, size_t rank)
{
    fit_walk f = {q, true};
    return oq_weight_pairs(n, dims, rank, check_pair, &f) && f.fit;
}
