/* com.microsoft operators: those of quantized models, QLinearAdd, QLinearMul
 * (multidirectional broadcasting) and MatMulNBits (blockwise 2-8 bit weights); and the
 * fused ones onnxruntime's transformer optimizer writes into the models it saves, so that
 * such a model runs, calibrates and quantizes: Gelu, BiasGelu, FastGelu, QuickGelu,
 * BiasAdd, SkipLayerNormalization, SkipSimplifiedLayerNormalization, FusedMatMul
 * (onnxruntime's contrib operator spec; tests/ops_random compares each with onnxruntime). */
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

/* ------------------------------------------------------------------ fused activations */

/* a bias / gamma / beta over the last axis of x: its C values, or NULL when absent; an
 * error when it has another element count */
static oq_status last_axis(oq_kctx *k, const oq_rt_tensor *x, const oq_rt_tensor *b, const char *what,
                           const float **out)
{
    *out = NULL;
    if (!b)
        return OQ_OK;
    int64_t C = x->rank ? x->dims[x->rank - 1] : 1;
    if (b->dtype != OQ_DTYPE_FLOAT || oq_rt_tensor_numel(b) != C)
        return oq_k_error(k, OQ_ERR_INVALID, "%s: %lld float values expected (the last axis)", what, (long long)C);
    *out = b->data;
    return OQ_OK;
}

/* X (+ bias broadcast over the last axis): Gelu and BiasGelu (erf form), FastGelu (tanh
 * form), QuickGelu (x sigmoid(alpha x)), BiasAdd (X + bias + skip) */
static oq_status run_gelu_family(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, oq_rt_tensor *out,
                                 size_t n_out)
{
    (void)n_out;
    const char *op = k->node->op_type;
    const oq_rt_tensor *x = in[0];
    const float *b = NULL, *skip = NULL;
    oq_status st = last_axis(k, x, n_in > 1 ? in[1] : NULL, "bias", &b);
    if (st != OQ_OK)
        return st;
    if (strcmp(op, "BiasAdd") == 0) {
        if (n_in < 3 || !in[2] || oq_rt_tensor_numel(in[2]) != oq_rt_tensor_numel(x))
            return oq_k_error(k, OQ_ERR_INVALID, "BiasAdd: skip must have the input's shape");
        skip = in[2]->data;
    }
    int kind = strcmp(op, "FastGelu") == 0 ? 1 : strcmp(op, "QuickGelu") == 0 ? 2 : strcmp(op, "BiasAdd") == 0 ? 3 : 0;
    double alpha = oq_node_attr_float(k->node, "alpha", 1.702f);
    int64_t n = oq_rt_tensor_numel(x), C = x->rank ? x->dims[x->rank - 1] : 1;
    const float *xd = x->data;
    float *y = out[0].data;
    for (int64_t i = 0; i < n; i++) {
        double v = (double)xd[i] + (b ? (double)b[i % C] : 0.0);
        switch (kind) {
        case 0: v = 0.5 * v * (1.0 + erf(v * 0.70710678118654752440)); break;
        case 1: v = 0.5 * v * (1.0 + tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v))); break;
        case 2: v = v / (1.0 + exp(-alpha * v)); break;
        default: v += (double)skip[i]; break;
        }
        y[i] = (float)v;
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ SkipLayerNormalization */

/* s = input + skip (+ bias); LayerNorm (or RMS norm: Simplified) of s over the last axis,
 * times gamma (+ beta). Outputs: y, mean, inv_std_var ([..., 1]), s. */
static oq_status infer_skipln(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, oq_rt_tensor *out,
                              size_t n_out)
{
    oq_status st = oq_k_infer_like_input0(k, in, n_in, out, n_out);
    if (st != OQ_OK || k->deferred)
        return st;
    int64_t d[OQ_RT_MAX_RANK];
    for (size_t i = 0; i < in[0]->rank; i++)
        d[i] = i + 1 == in[0]->rank ? 1 : in[0]->dims[i];
    for (size_t o = 1; st == OQ_OK && o < n_out && o < 3; o++)
        st = oq_k_set_out(k, &out[o], in[0]->dtype, d, in[0]->rank);
    if (st == OQ_OK && n_out > 3)
        st = oq_k_set_out(k, &out[3], in[0]->dtype, in[0]->dims, in[0]->rank);
    return st;
}

static oq_status run_skipln(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, oq_rt_tensor *out,
                            size_t n_out)
{
    bool simplified = strstr(k->node->op_type, "Simplified") != NULL;
    const oq_rt_tensor *x = in[0], *sk = n_in > 1 ? in[1] : NULL;
    if (!sk || x->rank < 1)
        return oq_k_error(k, OQ_ERR_INVALID, "input and skip are required");
    int64_t n = oq_rt_tensor_numel(x), C = x->dims[x->rank - 1], ns = oq_rt_tensor_numel(sk);
    if (C < 1 || ns < 1 || n % ns != 0 || ns % C != 0)
        return oq_k_error(k, OQ_ERR_INVALID, "skip must have the input's shape (or broadcast over its leading axes)");
    const float *gamma, *beta = NULL, *bias = NULL;
    oq_status st = last_axis(k, x, n_in > 2 ? in[2] : NULL, "gamma", &gamma);
    if (st == OQ_OK && !simplified)
        st = last_axis(k, x, n_in > 3 ? in[3] : NULL, "beta", &beta);
    if (st == OQ_OK)
        st = last_axis(k, x, n_in > (simplified ? 3u : 4u) ? in[simplified ? 3 : 4] : NULL, "bias", &bias);
    if (st != OQ_OK)
        return st;
    if (!gamma)
        return oq_k_error(k, OQ_ERR_INVALID, "gamma is required");
    double eps = oq_node_attr_float(k->node, "epsilon", 1e-12f);
    const float *xd = x->data, *sd = sk->data;
    float *y = out[0].data, *ssum = n_out > 3 && out[3].data ? out[3].data : NULL;
    for (int64_t r = 0; r < n / C; r++) {
        const float *xr = xd + r * C, *sr = sd + (r * C) % ns;
        double mean = 0, sq = 0;
        for (int64_t c = 0; c < C; c++) {
            float v = xr[c] + sr[c] + (bias ? bias[c] : 0.0f);
            mean += v;
            sq += (double)v * v;
        }
        mean /= (double)C;
        double var = simplified ? sq / (double)C : sq / (double)C - mean * mean;
        double inv = 1.0 / sqrt((var > 0 ? var : 0) + eps);
        for (int64_t c = 0; c < C; c++) {
            float v = xr[c] + sr[c] + (bias ? bias[c] : 0.0f);
            if (ssum)
                ssum[r * C + c] = v;
            double z = simplified ? v * inv : (v - mean) * inv;
            y[r * C + c] = (float)(z * gamma[c] + (beta ? beta[c] : 0.0));
        }
        if (n_out > 1 && out[1].data)
            ((float *)out[1].data)[r] = (float)(simplified ? 0.0 : mean);
        if (n_out > 2 && out[2].data)
            ((float *)out[2].data)[r] = (float)inv;
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ FusedMatMul --- */

/* alpha * op(A) op(B) with op a transpose of the last two axes (transA, transB), numpy
 * broadcasting of the batch axes; transBatchA / transBatchB are refused */
static oq_status fm_dims(oq_kctx *k, const oq_rt_tensor *a, const oq_rt_tensor *b, int64_t *d, size_t *r,
                         int64_t *M, int64_t *K, int64_t *N)
{
    bool ta = oq_node_attr_int(k->node, "transA", 0) != 0, tb = oq_node_attr_int(k->node, "transB", 0) != 0;
    if (oq_node_attr_int(k->node, "transBatchA", 0) || oq_node_attr_int(k->node, "transBatchB", 0))
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "transBatchA / transBatchB");
    if (a->rank < 2 || b->rank < 2)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "FusedMatMul of a 1-D input");
    *M = a->dims[a->rank - (ta ? 1 : 2)];
    *K = a->dims[a->rank - (ta ? 2 : 1)];
    int64_t kb = b->dims[b->rank - (tb ? 1 : 2)];
    *N = b->dims[b->rank - (tb ? 2 : 1)];
    if (kb != *K)
        return oq_k_error(k, OQ_ERR_INVALID, "inner dimensions %lld and %lld differ", (long long)*K, (long long)kb);
    size_t ra = a->rank - 2, rb = b->rank - 2;
    *r = (ra > rb ? ra : rb) + 2;
    for (size_t i = 0; i + 2 < *r; i++) {
        int64_t da = i + ra >= *r - 2 ? a->dims[i + ra - (*r - 2)] : 1, db = i + rb >= *r - 2 ? b->dims[i + rb - (*r - 2)] : 1;
        if (da != db && da != 1 && db != 1)
            return oq_k_error(k, OQ_ERR_INVALID, "batch axes do not broadcast");
        d[i] = da > db ? da : db;
    }
    d[*r - 2] = *M;
    d[*r - 1] = *N;
    return OQ_OK;
}

static oq_status infer_fusedmm(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, oq_rt_tensor *out,
                               size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, n_in < 2 ? n_in : 2))
        return oq_k_defer(k, out, n_out);
    int64_t d[OQ_RT_MAX_RANK], M, K, N;
    size_t r;
    oq_status st = fm_dims(k, in[0], in[1], d, &r, &M, &K, &N);
    return st ? st : oq_k_set_out(k, &out[0], in[0]->dtype, d, r);
}

static oq_status run_fusedmm(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, oq_rt_tensor *out,
                             size_t n_out)
{
    (void)n_in, (void)n_out;
    const oq_rt_tensor *a = in[0], *b = in[1];
    int64_t d[OQ_RT_MAX_RANK], M, K, N;
    size_t r;
    oq_status st = fm_dims(k, a, b, d, &r, &M, &K, &N);
    if (st != OQ_OK)
        return st;
    bool ta = oq_node_attr_int(k->node, "transA", 0) != 0, tb = oq_node_attr_int(k->node, "transB", 0) != 0;
    float alpha = oq_node_attr_float(k->node, "alpha", 1.0f);
    int64_t batch = 1;
    for (size_t i = 0; i + 2 < r; i++)
        batch *= d[i];
    size_t ra = a->rank - 2, rb = b->rank - 2;
    for (int64_t bi = 0; bi < batch; bi++) {
        /* the batch index in a and in b (broadcast axes of size 1 stay at 0) */
        int64_t rem = bi, oa = 0, ob = 0, sa = 1, sb = 1;
        for (size_t i = r - 2; i-- > 0;) {
            int64_t idx = rem % d[i];
            rem /= d[i];
            if (i + ra >= r - 2) {
                int64_t da = a->dims[i + ra - (r - 2)];
                oa += (da == 1 ? 0 : idx) * sa;
                sa *= da;
            }
            if (i + rb >= r - 2) {
                int64_t db = b->dims[i + rb - (r - 2)];
                ob += (db == 1 ? 0 : idx) * sb;
                sb *= db;
            }
        }
        st = oq_k_sgemm(k, ta, tb, M, N, K, alpha, (const float *)a->data + oa * M * K, ta ? M : K,
                        (const float *)b->data + ob * K * N, tb ? K : N, 0.0f, (float *)out[0].data + bi * M * N, N);
        if (st != OQ_OK)
            return st;
    }
    return OQ_OK;
}

const oq_kernel oq_kernels_contrib[] = {
    {MS, "QLinearAdd", 1, 0, 0, OQ_T(UINT8) | OQ_T(INT8), NULL, NULL, infer_qlbin, run_qlbin, NULL, 7},
    {MS, "QLinearMul", 1, 0, 0, OQ_T(UINT8) | OQ_T(INT8), NULL, NULL, infer_qlbin, run_qlbin, NULL, 7},
    {MS, "MatMulNBits", 1, 0, 0, OQ_T(FLOAT) | OQ_T(FLOAT16), NULL, NULL, infer_nbits, run_nbits, NULL, 3},
    {MS, "Gelu", 1, 0, 0, OQ_T(FLOAT), NULL, NULL, oq_k_infer_like_input0, run_gelu_family, NULL, 1},
    {MS, "BiasGelu", 1, 0, 0, OQ_T(FLOAT), NULL, NULL, oq_k_infer_like_input0, run_gelu_family, NULL, 2},
    {MS, "FastGelu", 1, 0, 0, OQ_T(FLOAT), NULL, NULL, oq_k_infer_like_input0, run_gelu_family, NULL, 1},
    {MS, "QuickGelu", 1, 0, 0, OQ_T(FLOAT), NULL, NULL, oq_k_infer_like_input0, run_gelu_family, NULL, 1},
    {MS, "BiasAdd", 1, 0, 0, OQ_T(FLOAT), NULL, NULL, oq_k_infer_like_input0, run_gelu_family, NULL, 3},
    {MS, "SkipLayerNormalization", 1, 0, 0, OQ_T(FLOAT), NULL, NULL, infer_skipln, run_skipln, NULL, 3},
    {MS, "SkipSimplifiedLayerNormalization", 1, 0, 0, OQ_T(FLOAT), NULL, NULL, infer_skipln, run_skipln, NULL, 3},
    {MS, "FusedMatMul", 1, 0, 0, OQ_T(FLOAT), NULL, NULL, infer_fusedmm, run_fusedmm, NULL, 2},
};
OQ_KERNEL_TABLE_END(contrib);
