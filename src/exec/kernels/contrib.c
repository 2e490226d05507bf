/* com.microsoft operators used by quantized models: QLinearAdd, QLinearMul
 * (multidirectional broadcasting) and MatMulNBits (blockwise 2-8 bit weights). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernel.h"

#define MS "com.microsoft"

static int64_t qv(const oq_rt_tensor *t, int64_t i)
{
    return t->dtype == OQ_DTYPE_INT8 ? ((const int8_t *)t->data)[i] : ((const uint8_t *)t->data)[i];
}

/* ------------------------------------------------------------------ QLinearAdd/Mul */

static oq_status infer_qlbin(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                             oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (n_in < 7 || !in[0] || !in[1] || !in[3] || !in[4] || !in[6])
        return oq_k_error(k, OQ_ERR_INVALID, "needs A, A_scale, A_zp?, B, B_scale, B_zp?, "
                          "C_scale, C_zp?");
    if (!oq_k_shapes_known(in, n_in))
        return oq_k_defer(k, out, n_out);
    const oq_rt_tensor *ab[2] = {in[0], in[3]};
    int64_t d[OQ_RT_MAX_RANK];
    size_t r = 0;
    oq_status st = oq_k_broadcast(k, ab, 2, d, &r);
    return st ? st : oq_k_set_out(k, &out[0], in[0]->dtype, d, r);
}

typedef struct qlbin {
    float as, bs, cs;
    int64_t az, bz, cz;
    bool mul, s8;
} qlbin;

static void qlbin_row(const void *st, void *o, const void *const *in, const int64_t *inc,
                      int64_t n)
{
    const qlbin *q = st;
    for (int64_t i = 0; i < n; i++) {
        int64_t a = q->s8 ? ((const int8_t *)in[0])[i * inc[0]] : ((const uint8_t *)in[0])[i * inc[0]];
        int64_t b = q->s8 ? ((const int8_t *)in[1])[i * inc[1]] : ((const uint8_t *)in[1])[i * inc[1]];
        float fa = (float)(a - q->az) * q->as, fb = (float)(b - q->bz) * q->bs;
        float c = q->mul ? fa * fb : fa + fb;
        double r = nearbyint((double)(c / q->cs)) + (double)q->cz;
        double lo = q->s8 ? -128 : 0, hi = q->s8 ? 127 : 255;
        r = r < lo ? lo : r > hi ? hi : r;
        if (q->s8)
            ((int8_t *)o)[i] = (int8_t)r;
        else
            ((uint8_t *)o)[i] = (uint8_t)r;
    }
}

static oq_status run_qlbin(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    qlbin q;
    q.as = ((const float *)in[1]->data)[0];
    q.bs = ((const float *)in[4]->data)[0];
    q.cs = ((const float *)in[6]->data)[0];
    q.az = in[2] ? qv(in[2], 0) : 0;
    q.bz = in[5] ? qv(in[5], 0) : 0;
    q.cz = n_in > 7 && in[7] ? qv(in[7], 0) : 0;
    q.mul = strcmp(k->node->op_type, "QLinearMul") == 0;
    q.s8 = in[0]->dtype == OQ_DTYPE_INT8;
    if (in[3]->dtype != in[0]->dtype)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "A and B must have the same type");
    const oq_rt_tensor *ab[2] = {in[0], in[3]};
    oq_k_bcast_apply(k, ab, 2, &out[0], qlbin_row, &q);
    return OQ_OK;
}

/* ------------------------------------------------------------------ MatMulNBits -- */

typedef struct nbits {
    int64_t K, N, bits, block, n_blocks, blob;
} nbits;

static oq_status nbits_attrs(oq_kctx *k, nbits *g)
{
    g->K = oq_node_attr_int(k->node, "K", 0);
    g->N = oq_node_attr_int(k->node, "N", 0);
    g->bits = oq_node_attr_int(k->node, "bits", 4);
    g->block = oq_node_attr_int(k->node, "block_size", 0);
    if (g->K <= 0 || g->N <= 0 || g->block < 16 || (g->block & (g->block - 1)) || g->bits < 2 ||
        g->bits > 8)
        return oq_k_error(k, OQ_ERR_INVALID, "bad K/N/bits/block_size");
    g->n_blocks = (g->K + g->block - 1) / g->block;
    g->blob = g->block * g->bits / 8;
    return OQ_OK;
}

static oq_status infer_nbits(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                             oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, n_in))
        return oq_k_defer(k, out, n_out);
    nbits g;
    oq_status st = nbits_attrs(k, &g);
    if (st)
        return st;
    const oq_rt_tensor *a = in[0], *b = in[1];
    if (a->rank < 1 || a->dims[a->rank - 1] != g.K)
        return oq_k_error(k, OQ_ERR_INVALID, "A's last dim must be K=%lld", (long long)g.K);
    if (oq_rt_tensor_numel(b) != g.N * g.n_blocks * g.blob)
        return oq_k_error(k, OQ_ERR_INVALID, "B must hold N x n_blocks x blob_size bytes");
    if (oq_rt_tensor_numel(in[2]) != g.N * g.n_blocks)
        return oq_k_error(k, OQ_ERR_INVALID, "scales must hold N x n_blocks values");
    if (n_in > 4 && in[4])
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "g_idx is not supported");
    int64_t d[OQ_RT_MAX_RANK];
    memcpy(d, a->dims, a->rank * sizeof(int64_t));
    d[a->rank - 1] = g.N;
    return oq_k_set_out(k, &out[0], a->dtype, d, a->rank);
}

static oq_status run_nbits(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    if (in[0]->dtype == OQ_DTYPE_FLOAT16) /* scales, zero points, bias widened too */
        return oq_k_run_widened(k, run_nbits, in, n_in, out, n_out);
    nbits g;
    oq_status st = nbits_attrs(k, &g);
    if (st)
        return st;
    const uint8_t *B = in[1]->data;
    const float *sc = in[2]->data;
    const oq_rt_tensor *zp = n_in > 3 ? in[3] : NULL;
    const float *bias = n_in > 5 && in[5] ? in[5]->data : NULL;
    /* dequantize W [N, K] once per run (row n, block b, element i) */
    float *w = oq_k_scratch(k, (size_t)(g.N * g.K) * sizeof(float));
    if (!w)
        return OQ_ERR_NOMEM;
    int64_t dflt = (int64_t)1 << (g.bits - 1), mask = ((int64_t)1 << g.bits) - 1;
    int64_t zp_row_bytes = (g.n_blocks * g.bits + 7) / 8;
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t bl = 0; bl < g.n_blocks; bl++) {
            float s = sc[n * g.n_blocks + bl];
            double z = (double)dflt;
            if (zp && zp->dtype == OQ_DTYPE_UINT8) {
                int64_t bit = bl * g.bits;
                const uint8_t *zr = (const uint8_t *)zp->data + n * zp_row_bytes;
                z = (double)((zr[bit / 8] >> (bit % 8)) & mask);
            } else if (zp && zp->dtype == OQ_DTYPE_FLOAT) {
                z = ((const float *)zp->data)[n * g.n_blocks + bl];
            }
            const uint8_t *blob = B + (n * g.n_blocks + bl) * g.blob;
            for (int64_t i = 0; i < g.block && bl * g.block + i < g.K; i++) {
                int64_t bit = i * g.bits;
                int64_t q = (blob[bit / 8] >> (bit % 8)) & mask;
                if (bit % 8 + g.bits > 8)
                    q = (q | ((int64_t)blob[bit / 8 + 1] << (8 - bit % 8))) & mask;
                w[n * g.K + bl * g.block + i] = (float)(((double)q - z) * s);
            }
        }
    int64_t M = oq_rt_tensor_numel(in[0]) / g.K;
    float *y = out[0].data;
    if (bias)
        for (int64_t m = 0; m < M; m++)
            memcpy(y + m * g.N, bias, (size_t)g.N * sizeof(float));
    return oq_k_sgemm(k, false, true, M, g.N, g.K, 1.0f, in[0]->data, g.K, w, g.K,
                      bias ? 1.0f : 0.0f, y, g.N);
}

const oq_kernel oq_kernels_contrib[] = {
    {MS, "QLinearAdd", 1, 0, 0, OQ_T(UINT8) | OQ_T(INT8), NULL, NULL, infer_qlbin, run_qlbin, NULL, 7},
    {MS, "QLinearMul", 1, 0, 0, OQ_T(UINT8) | OQ_T(INT8), NULL, NULL, infer_qlbin, run_qlbin, NULL, 7},
    {MS, "MatMulNBits", 1, 0, 0, OQ_T(FLOAT) | OQ_T(FLOAT16), NULL, NULL, infer_nbits, run_nbits, NULL, 3},
};
OQ_KERNEL_TABLE_END(contrib);
