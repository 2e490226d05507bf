/* The integer kernel of a fused QDQ group (src/exec/qgroup.h): QLinearConv,
 * QLinearMatMul and QGemm as onnxruntime 1.30's x86 CPU kernels compute them.
 *
 * For an output element, with raw operands a (uint8 activations; an int8 activation is
 * seen as a = x + 128, onnxruntime's QDQS8ToU8Transformer) and w (the int8 or uint8
 * weights as stored), K the reduction length in onnxruntime's order (Conv: (kh, kw, c)
 * within the group, the NHWC im2col of qlinearconv.cc, padding = the x zero point;
 * Gemm/MatMul: natural k):
 *
 *   acc  = sum over pairs (2j, 2j+1) of P_j,   P_j = a[2j] w[2j] + a[2j+1] w[2j+1]
 *          (OQ_ARITH_AVX2 with int8 weights, not depthwise: P_j saturated to int16, the
 *          vpmaddubsw of QgemmU8X8KernelAvx2.S / ConvSymKernelAvx2.S; an odd K is padded
 *          with a zero)
 *   acc -= wzp * sum(a) + xzp * sum(w) - K * xzp * wzp        (exact, int32 wrap-around)
 *   acc += bias
 *   y    = clamp(nearbyint((float)acc * scale), qmin - yzp, qmax - yzp) + yzp
 *          scale = x_scale * w_scale[n] / y_scale in float (Gemm: alpha * x_scale * ...)
 *          (MlasRequantizeOutput, quantize.cpp; the ConvSym kernels' post-processing)
 *
 * Results do not depend on the thread count (work is split over output rows/pixels).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernel.h"
#include "exec/qgroup.h"

#define MAXS 3

typedef struct qstate {
    oq_qgroup_kind kind;
    bool sat;              /* int16 saturation of product pairs */
    bool x_s8;             /* x is int8 (read as x + 128) */
    bool y_s8;
    int32_t xzp;           /* in the raw (uint8) domain */
    int32_t yzp;           /* in the output's own dtype */
    float fmin, fmax;      /* qmin - yzp, qmax - yzp */
    int64_t N;             /* output channels / columns */
    int64_t K;             /* reduction length (per group for Conv) */
    int16_t *w;            /* [N][K] raw weights in reduction order */
    int32_t *wzp;          /* [N] */
    int32_t *wsum;         /* [N] sum of raw w over K */
    int32_t *bias;         /* [N] or NULL */
    float *scale;          /* [N] */
    /* Conv */
    size_t ns;
    int64_t group, cg, kdim[MAXS], stride[MAXS], dil[MAXS], pads[2 * MAXS];
    char auto_pad[16];
    bool depthwise;
    /* Gemm */
    bool trans_a;
    int32_t out_dtype;
} qstate;

static void qstate_free(void *p)
{
    qstate *s = p;
    if (!s)
        return;
    free(s->w);
    free(s->wzp);
    free(s->wsum);
    free(s->bias);
    free(s->scale);
    free(s);
}

static const void *tdata(oq_value *v, oq_tensor **t)
{
    *t = oq_value_const_tensor(v);
    return *t ? oq_tensor_data(*t, NULL) : NULL;
}

static int32_t zp_at(const oq_tensor *t, const void *d, int64_t i)
{
    return t->dtype == OQ_DTYPE_INT8 ? ((const int8_t *)d)[i] : ((const uint8_t *)d)[i];
}

static oq_status q_prepare(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in)
{
    (void)in;
    (void)n_in;
    const oq_qgroup *grp = (const oq_qgroup *)k->node;
    qstate *s = calloc(1, sizeof *s);
    if (!s)
        return OQ_ERR_NOMEM;
    k->state = s;
    s->kind = grp->kind;
    oq_tensor *t_xs, *t_xz, *t_ys, *t_yz, *t_w, *t_ws, *t_wz = NULL, *t_b = NULL;
    const float *xs = tdata(grp->dq_x->inputs[1], &t_xs);
    const void *xz = tdata(grp->dq_x->inputs[2], &t_xz);
    const float *ys = tdata(grp->q->inputs[1], &t_ys);
    const void *yz = tdata(grp->q->inputs[2], &t_yz);
    const void *w = tdata(grp->dq_w->inputs[0], &t_w);
    const float *ws = tdata(grp->dq_w->inputs[1], &t_ws);
    const void *wz = grp->dq_w->n_inputs > 2 && grp->dq_w->inputs[2]
                         ? tdata(grp->dq_w->inputs[2], &t_wz) : NULL;
    const int32_t *b = grp->dq_b ? tdata(grp->dq_b->inputs[0], &t_b) : NULL;
    if (!xs || !xz || !ys || !yz || !w || !ws || (grp->dq_b && !b))
        return oq_k_error(k, OQ_ERR_INVALID, "fused group: constant data unreadable");
    s->x_s8 = t_xz->dtype == OQ_DTYPE_INT8;
    s->y_s8 = t_yz->dtype == OQ_DTYPE_INT8;
    s->out_dtype = t_yz->dtype;
    s->xzp = zp_at(t_xz, xz, 0) + (s->x_s8 ? 128 : 0);
    s->yzp = zp_at(t_yz, yz, 0);
    s->fmin = (float)((s->y_s8 ? -128 : 0) - s->yzp);
    s->fmax = (float)((s->y_s8 ? 127 : 255) - s->yzp);
    bool w_s8 = t_w->dtype == OQ_DTYPE_INT8;
    int64_t ns_scale = oq_tensor_numel(t_ws);
    float alpha = 1.0f;
    int64_t N, K;
    /* index of w[n][kk] in the stored tensor */
    const int64_t *wd = t_w->dims;
    if (s->kind == OQ_QG_CONV) {
        N = wd[0];
        s->ns = t_w->rank - 2;
        s->group = oq_node_attr_int(k->node, "group", 1);
        if (s->group <= 0 || N % s->group)
            return oq_k_error(k, OQ_ERR_INVALID, "group %lld does not divide %lld output channels",
                              (long long)s->group, (long long)N);
        s->cg = wd[1];
        int64_t kprod = 1;
        for (size_t i = 0; i < s->ns; i++) {
            s->kdim[i] = wd[2 + i];
            kprod *= wd[2 + i];
        }
        K = s->cg * kprod;
        const int64_t *a;
        int64_t c;
        for (size_t i = 0; i < s->ns; i++) {
            s->stride[i] = 1;
            s->dil[i] = 1;
            s->pads[i] = s->pads[i + s->ns] = 0;
        }
        if ((c = oq_node_attr_ints(k->node, "strides", &a)) == (int64_t)s->ns)
            memcpy(s->stride, a, s->ns * sizeof(int64_t));
        if ((c = oq_node_attr_ints(k->node, "dilations", &a)) == (int64_t)s->ns)
            memcpy(s->dil, a, s->ns * sizeof(int64_t));
        if ((c = oq_node_attr_ints(k->node, "pads", &a)) == 2 * (int64_t)s->ns)
            memcpy(s->pads, a, 2 * s->ns * sizeof(int64_t));
        snprintf(s->auto_pad, sizeof s->auto_pad, "%s",
                 oq_node_attr_string(k->node, "auto_pad", "NOTSET"));
        for (size_t i = 0; i < s->ns; i++)
            if (s->stride[i] <= 0 || s->dil[i] <= 0)
                return oq_k_error(k, OQ_ERR_INVALID, "strides and dilations must be positive");
        /* onnxruntime's depthwise kernels (MlasConvDepthwise, ConvSymDepthwise) widen
         * to 16/32 bits: exact */
        s->depthwise = s->cg == 1 && N / s->group == 1;
    } else {
        bool tb = s->kind == OQ_QG_GEMM && oq_node_attr_int(k->node, "transB", 0) != 0;
        N = tb ? wd[0] : wd[1];
        K = tb ? wd[1] : wd[0];
        if (s->kind == OQ_QG_GEMM) {
            s->trans_a = oq_node_attr_int(k->node, "transA", 0) != 0;
            alpha = oq_node_attr_float(k->node, "alpha", 1.0f);
        }
    }
    s->N = N;
    s->K = K;
    s->sat = grp->arith == OQ_ARITH_AVX2 && w_s8 && !s->depthwise;
    s->w = malloc((size_t)(N * K + 1) * sizeof *s->w);
    s->wzp = malloc((size_t)(N + 1) * sizeof *s->wzp);
    s->wsum = malloc((size_t)(N + 1) * sizeof *s->wsum);
    s->scale = malloc((size_t)(N + 1) * sizeof *s->scale);
    if (b)
        s->bias = malloc((size_t)(N + 1) * sizeof *s->bias);
    if (!s->w || !s->wzp || !s->wsum || !s->scale || (b && !s->bias))
        return OQ_ERR_NOMEM;
    bool tb = s->kind == OQ_QG_GEMM && oq_node_attr_int(k->node, "transB", 0) != 0;
    for (int64_t n = 0; n < N; n++) {
        int64_t sum = 0;
        for (int64_t kk = 0; kk < K; kk++) {
            int64_t src;
            if (s->kind == OQ_QG_CONV) {
                int64_t kprod = K / s->cg, kpos = kk / s->cg, c = kk % s->cg;
                src = (n * s->cg + c) * kprod + kpos;
            } else {
                src = tb ? n * K + kk : kk * N + n;
            }
            int16_t v = w_s8 ? ((const int8_t *)w)[src] : ((const uint8_t *)w)[src];
            s->w[n * K + kk] = v;
            sum += v;
        }
        s->wsum[n] = (int32_t)sum;
        s->wzp[n] = wz ? zp_at(t_wz, wz, oq_tensor_numel(t_wz) == 1 ? 0 : n) : 0;
        float wsn = ws[ns_scale == 1 ? 0 : n];
        /* qlinearconv.cc / quantize_linear_matmul.cc: X_scale * W_scale / Y_scale;
         * quant_gemm.cc: alpha * a_scale * b_scale, then / y_scale */
        float sc = s->kind == OQ_QG_GEMM ? alpha * xs[0] * wsn : xs[0] * wsn;
        s->scale[n] = sc / ys[0];
        if (b)
            s->bias[n] = b[oq_tensor_numel(t_b) == 1 ? 0 : n];
    }
    return OQ_OK;
}

/* output spatial sizes and effective begin pads of the convolution of x */
static oq_status conv_out(const oq_kctx *k, const qstate *s, const oq_rt_tensor *x, int64_t *out,
                          int64_t *pb)
{
    if (x->rank != s->ns + 2 || x->dims[1] != s->cg * s->group)
        return oq_k_error(k, OQ_ERR_INVALID, "input %zu-D with %lld channels does not match the "
                          "weight (%lld per group, %lld groups)", x->rank, (long long)x->dims[1],
                          (long long)s->cg, (long long)s->group);
    for (size_t i = 0; i < s->ns; i++) {
        int64_t in = x->dims[2 + i], ke = (s->kdim[i] - 1) * s->dil[i] + 1;
        int64_t b = s->pads[i], e = s->pads[i + s->ns];
        if (strcmp(s->auto_pad, "SAME_UPPER") == 0 || strcmp(s->auto_pad, "SAME_LOWER") == 0) {
            int64_t o = (in + s->stride[i] - 1) / s->stride[i];
            int64_t tot = (o - 1) * s->stride[i] + ke - in;
            if (tot < 0)
                tot = 0;
            b = s->auto_pad[5] == 'U' ? tot / 2 : tot - tot / 2;
            e = tot - b;
        } else if (strcmp(s->auto_pad, "VALID") == 0) {
            b = e = 0;
        }
        int64_t span = in + b + e - ke;
        if (span < 0)
            return oq_k_error(k, OQ_ERR_INVALID, "kernel larger than the padded input");
        out[i] = span / s->stride[i] + 1;
        pb[i] = b;
    }
    return OQ_OK;
}

static oq_status q_infer(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    const qstate *s = k->state;
    out[0].dtype = s->out_dtype;
    if (!oq_k_shapes_known(in, n_in))
        return oq_k_defer(k, out, n_out);
    const oq_rt_tensor *x = in[0];
    int64_t d[OQ_RT_MAX_RANK];
    size_t r;
    if (s->kind == OQ_QG_CONV) {
        int64_t o[MAXS], pb[MAXS];
        oq_status st = conv_out(k, s, x, o, pb);
        if (st)
            return st;
        d[0] = x->dims[0];
        d[1] = s->N;
        for (size_t i = 0; i < s->ns; i++)
            d[2 + i] = o[i];
        r = s->ns + 2;
    } else if (s->kind == OQ_QG_GEMM) {
        if (x->rank != 2 || x->dims[s->trans_a ? 0 : 1] != s->K)
            return oq_k_error(k, OQ_ERR_INVALID, "A must be 2-D with %lld columns",
                              (long long)s->K);
        d[0] = x->dims[s->trans_a ? 1 : 0];
        d[1] = s->N;
        r = 2;
    } else {
        if (x->rank < 1 || x->dims[x->rank - 1] != s->K)
            return oq_k_error(k, OQ_ERR_INVALID, "A's last dimension must be %lld",
                              (long long)s->K);
        r = x->rank;
        memcpy(d, x->dims, r * sizeof(int64_t));
        d[r - 1] = s->N;
    }
    return oq_k_set_out(k, &out[0], s->out_dtype, d, r);
}

/* ---- the arithmetic ------------------------------------------------------------- */

/* sum of a[k] w[k] with the int16 pair saturation when sat */
static int64_t dot_raw(const uint8_t *a, const int16_t *w, int64_t K, bool sat)
{
    int64_t acc = 0, k = 0;
    if (sat) {
        for (; k + 1 < K; k += 2) {
            int32_t p = (int32_t)a[k] * w[k] + (int32_t)a[k + 1] * w[k + 1];
            acc += p > 32767 ? 32767 : p < -32768 ? -32768 : p;
        }
    } else {
        for (; k + 1 < K; k += 2)
            acc += (int32_t)a[k] * w[k] + (int32_t)a[k + 1] * w[k + 1];
    }
    if (k < K)
        acc += (int32_t)a[k] * w[k];
    return acc;
}

/* one output element from the raw dot product and the row's sum of a */
static inline int32_t requant(const qstate *s, int64_t n, int64_t dot, int64_t rowsum)
{
    int64_t acc = dot - (int64_t)s->wzp[n] * rowsum - (int64_t)s->xzp * s->wsum[n] +
                  s->K * (int64_t)s->xzp * s->wzp[n];
    if (s->bias)
        acc += s->bias[n];
    int32_t a32 = (int32_t)(uint32_t)(uint64_t)acc; /* int32 arithmetic wraps in MLAS */
    float f = (float)a32 * s->scale[n];
    f = f < s->fmin ? s->fmin : f;
    f = f > s->fmax ? s->fmax : f;
    return (int32_t)nearbyintf(f) + s->yzp;
}

static inline void store(const qstate *s, void *y, int64_t i, int32_t v)
{
    if (s->y_s8)
        ((int8_t *)y)[i] = (int8_t)v;
    else
        ((uint8_t *)y)[i] = (uint8_t)v;
}

/* row of a in the raw uint8 domain */
static inline uint8_t raw(const qstate *s, const void *x, int64_t i)
{
    return s->x_s8 ? (uint8_t)(((const int8_t *)x)[i] + 128) : ((const uint8_t *)x)[i];
}

typedef struct job {
    const qstate *s;
    const void *x;
    void *y;
    uint8_t *scratch;      /* per worker: K bytes */
    /* matrix: rows of a, M rows */
    int64_t M;
    /* conv */
    int64_t C, in[MAXS], out[MAXS], pb[MAXS], opix;
} job;

static void run_rows(void *arg, int64_t begin, int64_t end, int worker)
{
    const job *j = arg;
    const qstate *s = j->s;
    uint8_t *a = j->scratch + (size_t)worker * (size_t)(s->K + 1);
    for (int64_t m = begin; m < end; m++) {
        int64_t rowsum = 0;
        for (int64_t kk = 0; kk < s->K; kk++) {
            int64_t src = s->trans_a ? kk * j->M + m : m * s->K + kk;
            a[kk] = raw(s, j->x, src);
            rowsum += a[kk];
        }
        for (int64_t n = 0; n < s->N; n++)
            store(s, j->y, m * s->N + n,
                  requant(s, n, dot_raw(a, s->w + n * s->K, s->K, s->sat), rowsum));
    }
}

/* one range of output pixels over all images: index = b * opix + p */
static void run_conv(void *arg, int64_t begin, int64_t end, int worker)
{
    const job *j = arg;
    const qstate *s = j->s;
    uint8_t *a = j->scratch + (size_t)worker * (size_t)(s->K + 1);
    int64_t kprod = s->K / s->cg, ipix = 1;
    for (size_t i = 0; i < s->ns; i++)
        ipix *= j->in[i];
    int64_t npg = s->N / s->group;
    for (int64_t idx = begin; idx < end; idx++) {
        int64_t b = idx / j->opix, p = idx % j->opix;
        int64_t oc[MAXS], rem = p;
        for (size_t i = s->ns; i-- > 0;) {
            oc[i] = rem % j->out[i];
            rem /= j->out[i];
        }
        for (int64_t g = 0; g < s->group; g++) {
            int64_t rowsum = 0;
            for (int64_t kp = 0; kp < kprod; kp++) {
                /* input position of kernel position kp */
                int64_t kc[MAXS], r2 = kp, off = 0;
                bool inside = true;
                for (size_t i = s->ns; i-- > 0;) {
                    kc[i] = r2 % s->kdim[i];
                    r2 /= s->kdim[i];
                }
                for (size_t i = 0; i < s->ns; i++) {
                    int64_t pos = oc[i] * s->stride[i] - j->pb[i] + kc[i] * s->dil[i];
                    if (pos < 0 || pos >= j->in[i])
                        inside = false;
                    off = off * j->in[i] + pos;
                }
                uint8_t *ak = a + kp * s->cg;
                for (int64_t c = 0; c < s->cg; c++) {
                    uint8_t v = inside ? raw(s, j->x, (b * j->C + g * s->cg + c) * ipix + off)
                                       : (uint8_t)s->xzp;
                    ak[c] = v;
                    rowsum += v;
                }
            }
            for (int64_t n = g * npg; n < (g + 1) * npg; n++)
                store(s, j->y, (b * s->N + n) * j->opix + p,
                      requant(s, n, dot_raw(a, s->w + n * s->K, s->K, s->sat), rowsum));
        }
    }
}

static oq_status q_run(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                       oq_rt_tensor *out, size_t n_out)
{
    (void)n_in;
    (void)n_out;
    const qstate *s = k->state;
    const oq_rt_tensor *x = in[0];
    if (oq_rt_tensor_numel(&out[0]) == 0)
        return OQ_OK;
    int threads = oq_k_threads(k);
    uint8_t *scratch = oq_k_scratch(k, (size_t)threads * (size_t)(s->K + 1));
    if (!scratch)
        return OQ_ERR_NOMEM;
    job j;
    memset(&j, 0, sizeof j);
    j.s = s;
    j.x = x->data;
    j.y = out[0].data;
    j.scratch = scratch;
    if (s->kind == OQ_QG_CONV) {
        oq_status st = conv_out(k, s, x, j.out, j.pb);
        if (st)
            return st;
        j.C = x->dims[1];
        j.opix = 1;
        for (size_t i = 0; i < s->ns; i++) {
            j.in[i] = x->dims[2 + i];
            j.opix *= j.out[i];
        }
        int64_t work = (s->K * s->N) | 1;
        oq_k_parallel_for(k, x->dims[0] * j.opix, (65536 + work - 1) / work, run_conv, &j);
    } else {
        j.M = oq_rt_tensor_numel(x) / s->K;
        int64_t work = (s->K * s->N) | 1;
        oq_k_parallel_for(k, j.M, (65536 + work - 1) / work, run_rows, &j);
    }
    return OQ_OK;
}

const oq_kernel oq_kernels_qlinear[] = {
    {OQ_QGROUP_DOMAIN, OQ_QGROUP_OP, 0, 0, 0, OQ_T(UINT8) | OQ_T(INT8), NULL, q_prepare, q_infer,
     q_run, qstate_free, 1},
};
OQ_KERNEL_TABLE_END(qlinear);
