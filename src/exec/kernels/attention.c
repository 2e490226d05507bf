/* The opset-23 transformer operators: Attention (23, 24: nonpad_kv_seqlen),
 * RMSNormalization (23) and RotaryEmbedding (23). float32. torch's dynamo exporter writes
 * Attention for scaled_dot_product_attention from opset 23 on. Semantics as the ONNX
 * reference implementation (onnx/reference/ops/op_attention.py and friends). */
#include <math.h>
#include <string.h>

#include "exec/kernel.h"

/* ------------------------------------------------------------------ Attention ---- */

typedef struct att_dims {
    int64_t B, Hq, Hkv, Sq, Skv, P, T, D, Dv; /* T = P + Skv */
    bool three_d;
} att_dims;

static oq_status att_shape(oq_kctx *k, const oq_rt_tensor *const *in, att_dims *a)
{
    const oq_rt_tensor *q = in[0], *kk = in[1], *v = in[2], *pk = in[4], *pv = in[5];
    memset(a, 0, sizeof *a);
    if (q->rank != kk->rank || q->rank != v->rank || (q->rank != 3 && q->rank != 4))
        return oq_k_error(k, OQ_ERR_INVALID, "Q, K and V must all be 3-D or all 4-D (ranks %zu, %zu, %zu)",
                          q->rank, kk->rank, v->rank);
    a->B = q->dims[0];
    if (kk->dims[0] != a->B || v->dims[0] != a->B)
        return oq_k_error(k, OQ_ERR_INVALID, "Q, K and V have different batch sizes");
    if (q->rank == 3) {
        a->three_d = true;
        a->Hq = oq_node_attr_int(k->node, "q_num_heads", 0);
        a->Hkv = oq_node_attr_int(k->node, "kv_num_heads", 0);
        if (a->Hq <= 0 || a->Hkv <= 0)
            return oq_k_error(k, OQ_ERR_INVALID, "3-D inputs need the q_num_heads and kv_num_heads attributes");
        if (q->dims[2] % a->Hq || kk->dims[2] % a->Hkv || v->dims[2] % a->Hkv)
            return oq_k_error(k, OQ_ERR_INVALID, "hidden sizes are not multiples of the head counts");
        a->Sq = q->dims[1];
        a->Skv = kk->dims[1];
        a->D = q->dims[2] / a->Hq;
        a->Dv = v->dims[2] / a->Hkv;
        if (kk->dims[2] / a->Hkv != a->D || v->dims[1] != a->Skv)
            return oq_k_error(k, OQ_ERR_INVALID, "K's head size or V's sequence length does not match");
    } else {
        a->Hq = q->dims[1];
        a->Hkv = kk->dims[1];
        a->Sq = q->dims[2];
        a->Skv = kk->dims[2];
        a->D = q->dims[3];
        a->Dv = v->dims[3];
        if (kk->dims[3] != a->D || v->dims[1] != a->Hkv || v->dims[2] != a->Skv)
            return oq_k_error(k, OQ_ERR_INVALID, "K or V does not match Q's head size or K's shape");
    }
    if (a->Hkv <= 0 || a->Hq % a->Hkv)
        return oq_k_error(k, OQ_ERR_INVALID, "q heads (%lld) not a multiple of kv heads (%lld)", (long long)a->Hq,
                          (long long)a->Hkv);
    if ((pk != NULL) != (pv != NULL))
        return oq_k_error(k, OQ_ERR_INVALID, "past_key and past_value go together");
    if (pk) {
        if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != a->B || pk->dims[1] != a->Hkv || pk->dims[3] != a->D ||
            pv->dims[0] != a->B || pv->dims[1] != a->Hkv || pv->dims[2] != pk->dims[2] || pv->dims[3] != a->Dv)
            return oq_k_error(k, OQ_ERR_INVALID, "past_key / past_value shapes do not match K and V");
        a->P = pk->dims[2];
    }
    a->T = a->P + a->Skv;
    return OQ_OK;
}

static oq_status infer_att(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, oq_rt_tensor *out,
                           size_t n_out)
{
    for (size_t i = 0; i < n_out; i++)
        out[i].dtype = in[0]->dtype;
    size_t need = 3;
    for (size_t i = 3; i < n_in && i < 7; i++)
        if (in[i])
            need = i + 1;
    if (!oq_k_shapes_known(in, need))
        return oq_k_defer(k, out, n_out);
    att_dims a;
    oq_status st = att_shape(k, in, &a);
    if (st)
        return st;
    int64_t y3[3] = {a.B, a.Sq, a.Hq * a.Dv}, y4[4] = {a.B, a.Hq, a.Sq, a.Dv};
    st = a.three_d ? oq_k_set_out(k, &out[0], in[0]->dtype, y3, 3) : oq_k_set_out(k, &out[0], in[0]->dtype, y4, 4);
    int64_t pk[4] = {a.B, a.Hkv, a.T, a.D}, pv[4] = {a.B, a.Hkv, a.T, a.Dv}, qk[4] = {a.B, a.Hq, a.Sq, a.T};
    if (!st && n_out > 1)
        st = oq_k_set_out(k, &out[1], in[0]->dtype, pk, 4);
    if (!st && n_out > 2)
        st = oq_k_set_out(k, &out[2], in[0]->dtype, pv, 4);
    if (!st && n_out > 3)
        st = oq_k_set_out(k, &out[3], in[0]->dtype, qk, 4);
    return st;
}

/* element (b, h, s, d) of a 3-D [B, S, H*Dh] or 4-D [B, H, S, Dh] tensor */
static inline int64_t att_at(bool three_d, int64_t H, int64_t S, int64_t Dh, int64_t b, int64_t h, int64_t s,
                             int64_t d)
{
    return three_d ? ((b * S + s) * H + h) * Dh + d : ((b * H + h) * S + s) * Dh + d;
}

/* Masked positions get the lowest float, not -inf, as onnxruntime's CPU kernel does (its
 * qk_matmul_output shows them so, and a row masked everywhere becomes uniform, not NaN). */
#define MASKED (-3.402823466e+38f)

/* The mask's additive value at (b, h, i, j): a mask of rank r is broadcast against
 * [B, Hq, Sq, T] from the right; its last dim may be shorter than T (the rest is masked). */
static float mask_at(const oq_rt_tensor *m, int64_t b, int64_t h, int64_t i, int64_t j)
{
    int64_t idx4[4] = {b, h, i, j}, off = 0, stride = 1;
    size_t r = m->rank;
    if (j >= m->dims[r - 1])
        return MASKED;
    for (size_t a = r; a-- > 0;) {
        int64_t c = idx4[4 - r + a], n = m->dims[a];
        off += (n == 1 ? 0 : c) * stride;
        stride *= n;
    }
    if (m->dtype == OQ_DTYPE_BOOL)
        return ((const uint8_t *)m->data)[off] ? 0.0f : MASKED;
    return ((const float *)m->data)[off];
}

static oq_status run_att(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, oq_rt_tensor *out,
                         size_t n_out)
{
    att_dims a;
    oq_status st = att_shape(k, in, &a);
    if (st)
        return st;
    const oq_rt_tensor *mask = n_in > 3 ? in[3] : NULL, *pkt = in[4], *pvt = in[5];
    const oq_rt_tensor *nonpad = k->opset >= 24 && n_in > 6 ? in[6] : NULL;
    if (mask && (mask->rank < 1 || mask->rank > 4 || (mask->dtype != OQ_DTYPE_BOOL && mask->dtype != OQ_DTYPE_FLOAT)))
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "attn_mask must be bool or float32 of rank 1 to 4");
    if (mask)
        for (size_t i = 0; i + 1 < mask->rank; i++) {
            int64_t want = (int64_t[4]){a.B, a.Hq, a.Sq, a.T}[4 - mask->rank + i];
            if (mask->dims[i] != 1 && mask->dims[i] != want)
                return oq_k_error(k, OQ_ERR_INVALID, "attn_mask does not broadcast to [B, q_heads, q_len, total_len]");
        }
    if (mask && mask->dims[mask->rank - 1] > a.T)
        return oq_k_error(k, OQ_ERR_INVALID, "attn_mask's last dimension exceeds the total sequence length");
    if (nonpad && (nonpad->dtype != OQ_DTYPE_INT64 || oq_rt_tensor_numel(nonpad) != a.B))
        return oq_k_error(k, OQ_ERR_INVALID, "nonpad_kv_seqlen must be int64 [batch]");
    bool causal = oq_node_attr_int(k->node, "is_causal", 0) != 0;
    int64_t mode = oq_node_attr_int(k->node, "qk_matmul_output_mode", 0);
    float softcap = oq_node_attr_float(k->node, "softcap", 0.0f);
    float scale = oq_node_attr(k->node, "scale") ? oq_node_attr_float(k->node, "scale", 1.0f)
                                                  : 1.0f / sqrtf((float)a.D);
    float rs = sqrtf(scale); /* Q and K are each scaled by sqrt(scale) */
    const float *Q = in[0]->data, *K = in[1]->data, *V = in[2]->data;
    const float *PK = pkt ? pkt->data : NULL, *PV = pvt ? pvt->data : NULL;
    float *Y = out[0].data;
    float *PKo = n_out > 1 ? out[1].data : NULL, *PVo = n_out > 2 ? out[2].data : NULL;
    float *QK = n_out > 3 ? out[3].data : NULL;
    /* present_key / present_value: past then the new keys, [B, Hkv, T, D] */
    for (int64_t b = 0; b < a.B; b++)
        for (int64_t h = 0; h < a.Hkv; h++)
            for (int64_t t = 0; t < a.T; t++) {
                for (int64_t d = 0; d < a.D && PKo; d++)
                    PKo[((b * a.Hkv + h) * a.T + t) * a.D + d] =
                        t < a.P ? PK[((b * a.Hkv + h) * a.P + t) * a.D + d]
                                : K[att_at(a.three_d, a.Hkv, a.Skv, a.D, b, h, t - a.P, d)];
                for (int64_t d = 0; d < a.Dv && PVo; d++)
                    PVo[((b * a.Hkv + h) * a.T + t) * a.Dv + d] =
                        t < a.P ? PV[((b * a.Hkv + h) * a.P + t) * a.Dv + d]
                                : V[att_at(a.three_d, a.Hkv, a.Skv, a.Dv, b, h, t - a.P, d)];
            }
    float *row = oq_k_scratch(k, (size_t)(2 * a.T + a.D) * sizeof(float));
    if (!row)
        return oq_k_error(k, OQ_ERR_NOMEM, "out of memory");
    float *qs = row + 2 * a.T, *raw = row + a.T;
    int64_t rep = a.Hq / a.Hkv;
    for (int64_t b = 0; b < a.B; b++) {
        int64_t off = a.P; /* causal frontier: key j allowed iff j <= i + off */
        if (nonpad && !pkt)
            off = ((const int64_t *)nonpad->data)[b] - a.Sq;
        int64_t valid = nonpad ? ((const int64_t *)nonpad->data)[b] : a.T;
        for (int64_t h = 0; h < a.Hq; h++) {
            int64_t hk = h / rep;
            for (int64_t i = 0; i < a.Sq; i++) {
                for (int64_t d = 0; d < a.D; d++)
                    qs[d] = Q[att_at(a.three_d, a.Hq, a.Sq, a.D, b, h, i, d)] * rs;
                float mx = -INFINITY;
                for (int64_t j = 0; j < a.T; j++) {
                    float s = 0.0f;
                    for (int64_t d = 0; d < a.D; d++) {
                        float kv = j < a.P ? PK[((b * a.Hkv + hk) * a.P + j) * a.D + d]
                                           : K[att_at(a.three_d, a.Hkv, a.Skv, a.D, b, hk, j - a.P, d)];
                        s += qs[d] * (kv * rs);
                    }
                    if (softcap > 0.0f)
                        s = softcap * tanhf(s / softcap);
                    raw[j] = s;
                    float bias = mask ? mask_at(mask, b, h, i, j) : 0.0f;
                    row[j] = (causal && j > i + off) || j >= valid || bias == MASKED ? MASKED : s + bias;
                    if (row[j] > mx)
                        mx = row[j];
                }
                float *qko = QK ? QK + ((b * a.Hq + h) * a.Sq + i) * a.T : NULL;
                if (qko && mode <= 1)
                    memcpy(qko, raw, (size_t)a.T * sizeof(float));
                else if (qko && mode == 2)
                    memcpy(qko, row, (size_t)a.T * sizeof(float));
                double sum = 0.0;
                for (int64_t j = 0; j < a.T; j++) {
                    row[j] = expf(row[j] - mx);
                    sum += row[j];
                }
                for (int64_t j = 0; j < a.T; j++)
                    row[j] = (float)(row[j] / sum);
                if (qko && mode == 3)
                    memcpy(qko, row, (size_t)a.T * sizeof(float));
                for (int64_t d = 0; d < a.Dv; d++) {
                    float acc = 0.0f;
                    for (int64_t j = 0; j < a.T; j++)
                        acc += row[j] * (j < a.P ? PV[((b * a.Hkv + hk) * a.P + j) * a.Dv + d]
                                                 : V[att_at(a.three_d, a.Hkv, a.Skv, a.Dv, b, hk, j - a.P, d)]);
                    Y[att_at(a.three_d, a.Hq, a.Sq, a.Dv, b, h, i, d)] = acc;
                }
            }
        }
    }
    return OQ_OK;
}

/* ------------------------------------------------------------ RMSNormalization ---- */

/* Output 0 like input 0, once `bad` (may be NULL) finds nothing wrong with input 0: it
 * returns an error message or NULL. */
static oq_status infer_like_input(oq_kctx *k, const oq_rt_tensor *const *in, oq_rt_tensor *out, size_t n_out,
                                  const char *(*bad)(const oq_kctx *k, const oq_rt_tensor *x))
{
    for (size_t i = 0; i < n_out; i++)
        out[i].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    const char *why = bad ? bad(k, in[0]) : NULL;
    if (why)
        return oq_k_error(k, OQ_ERR_INVALID, "%s", why);
    return oq_k_set_out(k, &out[0], in[0]->dtype, in[0]->dims, in[0]->rank);
}

static const char *rms_bad(const oq_kctx *k, const oq_rt_tensor *x)
{
    return oq_k_axis(oq_node_attr_int(k->node, "axis", -1), x->rank) < 0 ? "axis out of range" : NULL;
}

static oq_status infer_rms(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, oq_rt_tensor *out,
                           size_t n_out)
{
    (void)n_in;
    return infer_like_input(k, in, out, n_out, rms_bad);
}

static oq_status run_rms(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, oq_rt_tensor *out,
                         size_t n_out)
{
    (void)n_in;
    (void)n_out;
    const oq_rt_tensor *x = in[0], *s = in[1];
    int64_t axis = oq_k_axis(oq_node_attr_int(k->node, "axis", -1), x->rank);
    float eps = oq_node_attr_float(k->node, "epsilon", 1e-5f);
    int64_t outer = 1, inner = 1, ns = oq_rt_tensor_numel(s);
    for (int64_t i = 0; i < (int64_t)x->rank; i++)
        *(i < axis ? &outer : &inner) *= x->dims[i];
    if (ns < 1 || inner % ns)
        return oq_k_error(k, OQ_ERR_INVALID, "scale has %lld elements, not a divisor of the normalized size %lld",
                          (long long)ns, (long long)inner);
    const float *xd = x->data, *sd = s->data;
    float *y = out[0].data;
    for (int64_t o = 0; o < outer; o++) {
        const float *xp = xd + o * inner;
        double m2 = 0.0;
        for (int64_t i = 0; i < inner; i++)
            m2 += (double)xp[i] * xp[i];
        float r = 1.0f / sqrtf((float)(m2 / (double)inner) + eps);
        for (int64_t i = 0; i < inner; i++)
            y[o * inner + i] = xp[i] * r * sd[i % ns];
    }
    return OQ_OK;
}

/* ------------------------------------------------------------- RotaryEmbedding ---- */

static const char *rope_bad(const oq_kctx *k, const oq_rt_tensor *x)
{
    (void)k;
    return x->rank != 3 && x->rank != 4 ? "input must be 3-D or 4-D" : NULL;
}

static oq_status infer_rope(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, oq_rt_tensor *out,
                            size_t n_out)
{
    (void)n_in;
    return infer_like_input(k, in, out, n_out, rope_bad);
}

static oq_status run_rope(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, oq_rt_tensor *out,
                          size_t n_out)
{
    (void)n_out;
    const oq_rt_tensor *x = in[0], *cc = in[1], *sc = in[2], *pos = n_in > 3 ? in[3] : NULL;
    bool inter = oq_node_attr_int(k->node, "interleaved", 0) != 0;
    int64_t B = x->dims[0], S, H, Dh;
    bool four = x->rank == 4;
    if (four) { /* [B, H, S, Dh] */
        H = x->dims[1];
        S = x->dims[2];
        Dh = x->dims[3];
    } else { /* [B, S, H*Dh] */
        H = oq_node_attr_int(k->node, "num_heads", 0);
        S = x->dims[1];
        if (H <= 0 || x->dims[2] % H)
            return oq_k_error(k, OQ_ERR_INVALID, "3-D input needs num_heads dividing the hidden size");
        Dh = x->dims[2] / H;
    }
    int64_t R = oq_node_attr_int(k->node, "rotary_embedding_dim", 0);
    if (R == 0)
        R = Dh;
    if (R < 2 || R > Dh || R % 2)
        return oq_k_error(k, OQ_ERR_INVALID, "rotary_embedding_dim %lld invalid for head size %lld", (long long)R,
                          (long long)Dh);
    int64_t half = R / 2, cd = cc->dims[cc->rank - 1];
    if (cd != half || sc->dims[sc->rank - 1] != half)
        return oq_k_error(k, OQ_ERR_INVALID, "cos/sin caches' last dimension must be rotary_embedding_dim / 2");
    if (pos && (pos->dtype != OQ_DTYPE_INT64 || pos->rank != 2 || cc->rank != 2))
        return oq_k_error(k, OQ_ERR_INVALID, "position_ids must be int64 [batch, seq] with 2-D caches");
    if (!pos && (cc->rank != 3 || cc->dims[0] != B || cc->dims[1] != S))
        return oq_k_error(k, OQ_ERR_INVALID, "without position_ids the caches must be [batch, seq, rotary_dim / 2]");
    int64_t npos = pos ? cc->dims[0] : 0;
    const float *xd = x->data, *cd_ = cc->data, *sd = sc->data;
    float *y = out[0].data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++) {
            int64_t row = b * S + s;
            if (pos) {
                row = ((const int64_t *)pos->data)[b * pos->dims[1] + s];
                if (row < 0 || row >= npos)
                    return oq_k_error(k, OQ_ERR_INVALID, "position id %lld outside the caches' %lld rows",
                                      (long long)row, (long long)npos);
            }
            const float *cr = cd_ + row * half, *sr = sd + row * half;
            for (int64_t h = 0; h < H; h++) {
                int64_t base = four ? ((b * H + h) * S + s) * Dh : ((b * S + s) * H + h) * Dh;
                const float *xp = xd + base;
                float *yp = y + base;
                for (int64_t i = 0; i < half; i++) {
                    int64_t i1 = inter ? 2 * i : i, i2 = inter ? 2 * i + 1 : i + half;
                    float x1 = xp[i1], x2 = xp[i2];
                    yp[i1] = cr[i] * x1 - sr[i] * x2;
                    yp[i2] = sr[i] * x1 + cr[i] * x2;
                }
                for (int64_t i = R; i < Dh; i++)
                    yp[i] = xp[i];
            }
        }
    return OQ_OK;
}

#define F OQ_T(FLOAT)
const oq_kernel oq_kernels_attention[] = {
    {"", "Attention", 23, 0, 0, F, NULL, NULL, infer_att, run_att, NULL, 3},
    {"", "RMSNormalization", 23, 0, 0, F, NULL, NULL, infer_rms, run_rms, NULL, 2},
    {"", "RotaryEmbedding", 23, 0, 0, F, NULL, NULL, infer_rope, run_rope, NULL, 3},
};
OQ_KERNEL_TABLE_END(attention);
