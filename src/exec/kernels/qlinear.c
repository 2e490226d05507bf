/* The integer kernel of a fused QDQ group (src/exec/qgroup.h): QLinearConv,
 * QLinearMatMul (constant or run-time B), QGemm and QLinearSoftmax as onnxruntime 1.30's
 * x86 CPU kernels compute them (docs/run.md "Arithmetic targets").
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
 *   y    = nearbyint(clamp((float)acc * scale, qmin - yzp, qmax - yzp)) + yzp
 *          scale = x_scale * w_scale[n] / y_scale in float (Gemm: alpha * x_scale * ...)
 *          (MlasRequantizeOutput, quantize.cpp; the ConvSym kernels' post-processing)
 *
 * Results do not depend on the thread count (work is split over output rows/pixels).
 */
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernel.h"
#include "exec/qgemm8.h"
#include "exec/qgroup.h"

#define MAXS 3
#define QL_KBLOCK 32 /* rows of a and w are zero padded to a multiple of this */

static int64_t kpad(int64_t K)
{
    return (K + QL_KBLOCK - 1) / QL_KBLOCK * QL_KBLOCK;
}

typedef int64_t (*dot_fn)(const int16_t *a, const int16_t *w, int64_t Kp, bool sat);
/* four dot products of a with the rows w, w + ldw, w + 2 ldw, w + 3 ldw */
typedef void (*dot4_fn)(const int16_t *a, const int16_t *w, int64_t ldw, int64_t Kp, bool sat,
                        int64_t *out);
static dot_fn pick_dot(void);
static dot4_fn pick_dot4(void);

typedef struct qstate {
    oq_qgroup_kind kind;
    bool sat;              /* int16 saturation of product pairs */
    bool x_s8;             /* x is int8 (read as x + 128) */
    bool y_s8;
    bool float_out;        /* no Q: y = float(acc) * scale (QGemm without y_scale,
                            * MatMulIntegerToFloat) */
    int32_t xzp;           /* in the raw (uint8) domain */
    int32_t yzp;           /* in the output's own dtype */
    float fmin, fmax;      /* qmin - yzp, qmax - yzp */
    int64_t N;             /* output channels / columns */
    int64_t K;             /* reduction length (per group for Conv) */
    int64_t Kp;            /* K rounded up to QL_KBLOCK (zero padded) */
    int16_t *w;            /* [N][Kp] raw weights in reduction order */
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
    /* MatMul of two activations: B [..., K, N] read at run time */
    bool dyn_b, b_s8, b_u8w;
    int32_t bzp;           /* raw domain (+128 when B is int8 run as uint8) */
    int32_t b_add;         /* 128 when B's int8 values are read as uint8 */
    /* Softmax */
    int64_t sm_axis, sm_opset;
    float sm_xscale, sm_yscale;
    dot_fn dot;            /* the dot product variant (pick_dot) */
    dot4_fn dot4;
    int16_t *wdw;          /* depthwise: [kernel position][channel] w - w_zp */
    /* the uint8 x int8 micro-kernels (src/exec/qgemm8.h), when q8 != OQ_Q8_NONE: */
    oq_q8_isa q8;
    int8_t *wp;            /* per group: packed panels of w - wshift */
    int32_t wshift;        /* 128 for uint8 weights (run as int8 w - 128), else 0 */
    int64_t npanel;        /* panels per group */
    oq_q8_out q8o;         /* requantization constants per column (N + OQ_Q8_NR; the
                            * scale is `scale`, allocated that long) */
    int32_t *colm, *colc;
    bool need_rowsum;      /* some colm != 0 (asymmetric or uint8 weights) */
    uint8_t lut[256];      /* OQ_QG_LUT: output byte by input byte */
    bool lut_vbmi;         /* look it up with AVX-512 VBMI */
    /* OQ_QG_BIN: y = Q(DQ(a) op DQ(b)) */
    bool bin_mul;
    bool bin_ort;          /* onnxruntime's QLinearAdd / QLinearMul (bin_ort_row) */
    int32_t ob_sh_a, ob_sh_b, ob_sh_y; /* 128: that int8 pair runs as uint8 */
    float ob_ra, ob_rb, ob_fixed, ob_fixed_ba; /* Add: sa / sc, sb / sc, the fixed part with
                                          a (ob_fixed) or b (ob_fixed_ba) as MLAS' A; Mul:
                                          the ratio in ob_ra, (float) zc in ob_fixed */
    int32_t ob_lo, ob_hi;  /* the run type's range */
    float bs_a, bs_b, bs_y;
    int32_t bz_a, bz_b, bz_y, bdt_a, bdt_b;
    int64_t *kofs;         /* [kernel position][spatial dim] kernel index * dilation */
} qstate;

static void qstate_free(void *p)
{
    qstate *s = p;
    if (!s)
        return;
    free(s->w);
    free(s->wdw);
    free(s->wp);
    free(s->colm);
    free(s->colc);
    free(s->kofs);
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

/* the packed weights of group g, in that group's columns */
typedef struct packsrc {
    const qstate *s;
    int64_t n0;
} packsrc;

static int8_t pack_at(const void *ctx, int64_t k, int64_t n)
{
    const packsrc *p = ctx;
    return (int8_t)(p->s->w[(p->n0 + n) * p->s->Kp + k] - p->s->wshift);
}

/* Use the uint8 x int8 micro-kernels when they compute exactly this arithmetic: VNNI
 * (exact) unless pairs saturate; AVX2's vpmaddubsw when they saturate (onnxruntime's own
 * instruction) or provably cannot. Otherwise the int16 dot products below. */
static oq_status q8_prepare(qstate *s, bool w_s8)
{
    s->q8 = OQ_Q8_NONE;
    if ((s->kind == OQ_QG_CONV && s->depthwise) || s->kind == OQ_QG_SOFTMAX || s->dyn_b)
        return OQ_OK;
    oq_q8_isa isa = oq_q8_cpu();
    if (isa == OQ_Q8_NONE)
        return OQ_OK;
    s->wshift = w_s8 ? 0 : 128;
    int64_t groups = s->kind == OQ_QG_CONV ? s->group : 1, npg = s->N / groups;
    int64_t per = oq_q8_packed_size(s->K, npg);
    s->npanel = (npg + OQ_Q8_NR - 1) / OQ_Q8_NR;
    s->wp = malloc((size_t)(groups * per + 1));
    if (!s->wp)
        return OQ_ERR_NOMEM;
    bool safe = true;
    for (int64_t g = 0; g < groups; g++) {
        packsrc src = {s, g * npg};
        oq_q8_pack(s->wp + g * per, s->K, npg, pack_at, &src);
        safe = safe && oq_q8_pairs_safe(s->wp + g * per, s->K, npg);
    }
    if (isa == OQ_Q8_VNNI && !s->sat)
        s->q8 = OQ_Q8_VNNI;
    else if (s->sat || safe)
        s->q8 = OQ_Q8_AVX2;
    if (s->q8 == OQ_Q8_NONE) {
        free(s->wp);
        s->wp = NULL;
        return OQ_OK;
    }
    /* emit()'s accumulator as colm * rowsum + colc added to the dot product, modulo 2^32 */
    size_t nc = (size_t)(s->N + OQ_Q8_NR);
    s->colm = calloc(nc, sizeof *s->colm);
    s->colc = calloc(nc, sizeof *s->colc);
    if (!s->colm || !s->colc)
        return OQ_ERR_NOMEM;
    for (int64_t n = 0; n < s->N; n++) {
        uint32_t xzp = (uint32_t)s->xzp, wzp = (uint32_t)s->wzp[n];
        s->colm[n] = (int32_t)((uint32_t)s->wshift - wzp);
        s->colc[n] = (int32_t)((uint32_t)s->K * xzp * wzp - xzp * (uint32_t)s->wsum[n] +
                               (s->bias ? (uint32_t)s->bias[n] : 0u));
        s->need_rowsum = s->need_rowsum || s->colm[n] != 0;
    }
    s->q8o = (oq_q8_out){s->colm, s->colc, s->scale, s->fmin, s->fmax, s->yzp, s->y_s8, s->float_out};
    return OQ_OK;
}

/* The table of a DQ -> chain -> Q group: the nodes evaluated one by one, by the kernels
 * a plan would run (oq_exec_eval_node), on the 256 values of the input type. */
static oq_status lut_prepare(oq_kctx *k, const oq_qgroup *grp, qstate *s)
{
    /* the chain's values on the 256 bytes (the nodes' own kernels), then the Q node's */
    oq_rt_tensor chain, q8;
    memset(&q8, 0, sizeof q8);
    oq_status st = oq_qgroup_eval_table(k, grp, &chain);
    if (st != OQ_OK)
        return st;
    const oq_node *q = grp->q;
    const oq_rt_tensor *ins[3] = {&chain, NULL, NULL};
    oq_rt_tensor cst[3];
    memset(cst, 0, sizeof cst);
    for (size_t i = 1; i < q->n_inputs && i < 3 && st == OQ_OK; i++) {
        oq_tensor *t = q->inputs[i] ? oq_value_const_tensor(q->inputs[i]) : NULL;
        const void *d = t ? oq_tensor_data(t, NULL) : NULL;
        if (!q->inputs[i])
            continue;
        if (!d || oq_rt_tensor_borrow(&cst[i], t->dtype, t->dims, t->rank, (void *)d) != OQ_OK)
            st = oq_k_error(k, OQ_ERR_INVALID, "table: input %zu of \"%s\" unreadable", i, q->name ? q->name : "");
        else
            ins[i] = &cst[i];
    }
    if (st == OQ_OK && q->n_inputs > 3)
        st = oq_k_error(k, OQ_ERR_UNSUPPORTED, "table: node with %zu inputs", q->n_inputs);
    if (st == OQ_OK)
        st = oq_exec_eval_node_arith(grp->model, q, ins, q->n_inputs, -1, &q8, 1, k->diag,
                                     oq_k_arith(k));
    if (st == OQ_OK && (oq_rt_tensor_numel(&q8) != 256 || oq_k_elsize(q8.dtype) != 1))
        st = oq_k_error(k, OQ_ERR_INVALID, "table: \"%s\" changed the shape", q->name ? q->name : "");
    if (st == OQ_OK) {
        memcpy(s->lut, q8.data, 256);
        s->out_dtype = q8.dtype;
    }
#if defined(__GNUC__) && defined(__x86_64__) /* (QL_HAVE_X86 is defined further down) */
    s->lut_vbmi = oq_q8_cpu() == OQ_Q8_VNNI && __builtin_cpu_supports("avx512vbmi");
#endif
    oq_rt_tensor_release(&chain);
    oq_rt_tensor_release(&q8);
    return st;
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
    s->dot = pick_dot();
    s->dot4 = pick_dot4();
    if (s->kind == OQ_QG_LUT)
        return lut_prepare(k, grp, s);
    if (s->kind == OQ_QG_BIN) {
        oq_tensor *t[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
        static const float one = 1.0f;
        static const uint8_t zero = 0;
        const float *sa = tdata(grp->dq_x->inputs[1], &t[0]);
        const float *sb = grp->dq_w ? tdata(grp->dq_w->inputs[1], &t[1]) : &one;
        const float *sy = tdata(grp->q->inputs[1], &t[2]);
        const void *za = tdata(grp->dq_x->inputs[2], &t[3]);
        const void *zb = grp->dq_w ? tdata(grp->dq_w->inputs[2], &t[4]) : &zero;
        const void *zy = tdata(grp->q->inputs[2], &t[5]);
        if (!sa || !sb || !sy || !za || !zb || !zy)
            return oq_k_error(k, OQ_ERR_INVALID, "fused group: constant data unreadable");
        s->bin_mul = strcmp(grp->anchor->op_type, "Mul") == 0;
        s->bs_a = sa[0], s->bs_b = sb[0], s->bs_y = sy[0];
        s->bz_a = zp_at(t[3], za, 0), s->bz_y = zp_at(t[5], zy, 0);
        s->bz_b = grp->dq_w ? zp_at(t[4], zb, 0) : 0;
        s->bdt_a = t[3]->dtype, s->out_dtype = t[5]->dtype;
        s->bdt_b = grp->dq_w ? t[4]->dtype : OQ_DTYPE_FLOAT; /* a float operand as it is */
        if (grp->ort_bin) {
            /* MLAS qladd.cpp / qlmul.cpp (the SSE2 kernels x86 onnxruntime 1.30 runs) on
             * the values of the run type: an int8 pair converted to uint8 adds 128 to the
             * values and the zero point */
            s->bin_ort = true;
            s->ob_sh_a = grp->bin_shift[0] ? 128 : 0;
            s->ob_sh_b = grp->bin_shift[1] ? 128 : 0;
            s->ob_sh_y = grp->bin_shift[2] ? 128 : 0;
            bool u8 = s->bdt_a == OQ_DTYPE_UINT8 || s->ob_sh_a;
            s->ob_lo = u8 ? 0 : -128;
            s->ob_hi = u8 ? 255 : 127;
            int32_t za2 = s->bz_a + s->ob_sh_a, zb2 = s->bz_b + s->ob_sh_b, zy2 = s->bz_y + s->ob_sh_y;
            if (s->bin_mul) {
                s->ob_ra = s->bs_a * s->bs_b / s->bs_y;
                s->ob_fixed = (float)zy2;
            } else {
                /* the compiler fuses ratio_A * zp_A + (ratio_B * zp_B): one fma */
                s->ob_ra = s->bs_a / s->bs_y;
                s->ob_rb = s->bs_b / s->bs_y;
                s->ob_fixed = (float)zy2 - fmaf(s->ob_ra, (float)za2, s->ob_rb * (float)zb2);
                s->ob_fixed_ba = (float)zy2 - fmaf(s->ob_rb, (float)zb2, s->ob_ra * (float)za2);
            }
            s->bz_a = za2, s->bz_b = zb2, s->bz_y = zy2;
        }
        return OQ_OK;
    }
    oq_tensor *t_xs, *t_xz, *t_ys = NULL, *t_yz = NULL, *t_w = NULL, *t_ws, *t_wz = NULL, *t_b = NULL;
    const float *xs = tdata(grp->dq_x->inputs[1], &t_xs);
    const void *xz = tdata(grp->dq_x->inputs[2], &t_xz);
    /* a float output has no y scale: 1 (the rest of the code divides by it) */
    static const float one = 1.0f;
    static const uint8_t zero = 0;
    const float *ys = grp->q ? tdata(grp->q->inputs[1], &t_ys) : &one;
    const void *yz = grp->q ? tdata(grp->q->inputs[2], &t_yz) : &zero;
    s->float_out = !grp->q;
    if (s->kind == OQ_QG_SOFTMAX) {
        if (!xs || !xz || !ys || !yz)
            return oq_k_error(k, OQ_ERR_INVALID, "fused group: constant data unreadable");
        /* QLinearSoftmax: the x zero point drops out (only differences to the row
         * maximum matter); int8 whose Q/DQ pairs were converted runs as uint8 */
        s->out_dtype = t_yz->dtype;
        s->y_s8 = t_yz->dtype == OQ_DTYPE_INT8;
        s->x_s8 = s->y_s8 && !grp->x_shift;   /* the int8 algorithm */
        s->xzp = s->y_s8 && grp->x_shift ? 128 : 0; /* added to x (and to y's zero point) */
        s->yzp = zp_at(t_yz, yz, 0) + s->xzp;
        s->sm_opset = oq_node_opset(grp->anchor);
        s->sm_axis = oq_node_attr_int(k->node, "axis", s->sm_opset < 13 ? 1 : -1);
        s->sm_xscale = xs[0];
        s->sm_yscale = floorf(1.0f / ys[0]);
        return OQ_OK;
    }
    const void *w = grp->dyn_b ? NULL : tdata(grp->dq_w->inputs[0], &t_w);
    const float *ws = tdata(grp->dq_w->inputs[1], &t_ws);
    const void *wz = grp->dq_w->n_inputs > 2 && grp->dq_w->inputs[2]
                         ? tdata(grp->dq_w->inputs[2], &t_wz) : NULL;
    const int32_t *b = grp->dq_b ? tdata(grp->dq_b->inputs[0], &t_b) : NULL;
    if (!xs || !xz || !ys || !yz || (!w && !grp->dyn_b) || !ws || (grp->dq_b && !b) ||
        (grp->dyn_b && !wz))
        return oq_k_error(k, OQ_ERR_INVALID, "fused group: constant data unreadable");
    s->x_s8 = t_xz->dtype == OQ_DTYPE_INT8;
    s->y_s8 = !s->float_out && t_yz->dtype == OQ_DTYPE_INT8;
    s->out_dtype = s->float_out ? OQ_DTYPE_FLOAT : t_yz->dtype;
    s->xzp = zp_at(t_xz, xz, 0) + (s->x_s8 ? 128 : 0);
    s->yzp = s->float_out ? 0 : zp_at(t_yz, yz, 0);
    s->fmin = (float)((s->y_s8 ? -128 : 0) - s->yzp);
    s->fmax = (float)((s->y_s8 ? 127 : 255) - s->yzp);
    if (grp->dyn_b) {
        /* QLinearMatMul of two activations: per-tensor B, signed B saturates as weights do
         * unless its Q/DQ pair was converted to uint8 */
        s->dyn_b = true;
        s->b_s8 = t_wz->dtype == OQ_DTYPE_INT8;
        s->b_add = s->b_s8 && grp->b_shift ? 128 : 0;
        s->b_u8w = !s->b_s8 || grp->b_shift;
        s->bzp = zp_at(t_wz, wz, 0) + s->b_add;
        s->sat = grp->arith == OQ_ARITH_AVX2 && !s->b_u8w;
        s->scale = malloc(sizeof *s->scale);
        if (!s->scale)
            return OQ_ERR_NOMEM;
        s->scale[0] = s->float_out ? xs[0] * ws[0] : xs[0] * ws[0] / ys[0];
        return OQ_OK;
    }
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
    s->Kp = kpad(K);
    s->sat = grp->arith == OQ_ARITH_AVX2 && w_s8 && !s->depthwise;
    s->w = calloc((size_t)(N * s->Kp + 1), sizeof *s->w);
    s->wzp = malloc((size_t)(N + 1) * sizeof *s->wzp);
    s->wsum = malloc((size_t)(N + 1) * sizeof *s->wsum);
    s->scale = calloc((size_t)(N + OQ_Q8_NR), sizeof *s->scale); /* padded: q8o reads panels */
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
            s->w[n * s->Kp + kk] = v;
            sum += v;
        }
        s->wsum[n] = (int32_t)sum;
        s->wzp[n] = wz ? zp_at(t_wz, wz, oq_tensor_numel(t_wz) == 1 ? 0 : n) : 0;
        float wsn = ws[ns_scale == 1 ? 0 : n];
        /* qlinearconv.cc / quantize_linear_matmul.cc: X_scale * W_scale / Y_scale;
         * quant_gemm.cc: alpha * a_scale * b_scale, then / y_scale */
        float sc = s->kind == OQ_QG_GEMM ? alpha * xs[0] * wsn : xs[0] * wsn;
        s->scale[n] = s->float_out ? sc : sc / ys[0];
        if (b)
            s->bias[n] = b[oq_tensor_numel(t_b) == 1 ? 0 : n];
    }
    if (s->kind == OQ_QG_CONV) {
        int64_t kprod = K / s->cg;
        s->kofs = malloc((size_t)(kprod * (int64_t)s->ns + 1) * sizeof *s->kofs);
        if (!s->kofs)
            return OQ_ERR_NOMEM;
        for (int64_t kp = 0; kp < kprod; kp++) {
            int64_t r = kp;
            for (size_t i = s->ns; i-- > 0;) {
                s->kofs[kp * (int64_t)s->ns + (int64_t)i] = (r % s->kdim[i]) * s->dil[i];
                r /= s->kdim[i];
            }
        }
    }
    if (s->kind == OQ_QG_CONV && s->depthwise) {
        s->wdw = malloc((size_t)(N * K + 1) * sizeof *s->wdw);
        if (!s->wdw)
            return OQ_ERR_NOMEM;
        for (int64_t n = 0; n < N; n++)
            for (int64_t kk = 0; kk < K; kk++)
                s->wdw[kk * N + n] = (int16_t)(s->w[n * s->Kp + kk] - s->wzp[n]);
    }
    return q8_prepare(s, w_s8);
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
    if (s->kind == OQ_QG_BIN) {
        oq_status st = oq_k_broadcast(k, in, 2, d, &r);
        if (st != OQ_OK)
            return st;
    } else if (s->kind == OQ_QG_LUT) {
        r = x->rank;
        memcpy(d, x->dims, r * sizeof(int64_t));
    } else if (s->kind == OQ_QG_SOFTMAX) {
        r = x->rank;
        memcpy(d, x->dims, r * sizeof(int64_t));
        if (oq_k_axis(s->sm_axis, r) < 0)
            return oq_k_error(k, OQ_ERR_INVALID, "axis %lld out of range", (long long)s->sm_axis);
    } else if (s->kind == OQ_QG_CONV) {
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
    } else if (s->dyn_b) {
        const oq_rt_tensor *bt = in[1];
        if (x->rank < 2 || bt->rank < 2 || x->dims[x->rank - 1] != bt->dims[bt->rank - 2])
            return oq_k_error(k, OQ_ERR_INVALID, "MatMul of %zu-D and %zu-D tensors: need 2-D or "
                              "more with matching K", x->rank, bt->rank);
        r = x->rank > bt->rank ? x->rank : bt->rank;
        for (size_t i = 0; i + 2 < r; i++) {
            int64_t da = i + x->rank >= r ? x->dims[i + x->rank - r] : 1;
            int64_t db = i + bt->rank >= r ? bt->dims[i + bt->rank - r] : 1;
            if (da != db && da != 1 && db != 1)
                return oq_k_error(k, OQ_ERR_INVALID, "batch dims do not broadcast");
            d[i] = da == 1 ? db : da;
        }
        d[r - 2] = x->dims[x->rank - 2];
        d[r - 1] = bt->dims[bt->rank - 1];
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

/* Sum of a[k] w[k] over Kp (a multiple of QL_KBLOCK, zero padded: a pad pair is 0,
 * as MLAS pads an odd K), adjacent pairs saturated to int16 when sat. The sum wraps
 * modulo 2^32 like MLAS's int32 accumulators (emit() only uses it modulo 2^32). */
static int64_t dot_generic(const int16_t *a, const int16_t *w, int64_t Kp, bool sat)
{
    uint32_t acc = 0;
    for (int64_t k = 0; k < Kp; k += 2) {
        int32_t p = (int32_t)a[k] * w[k] + (int32_t)a[k + 1] * w[k + 1];
        if (sat)
            p = p > 32767 ? 32767 : p < -32768 ? -32768 : p;
        acc += (uint32_t)p;
    }
    return (int32_t)acc;
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define QL_HAVE_X86 1
/* vpmaddwd gives the pair sums a[2j] w[2j] + a[2j+1] w[2j+1] exactly in int32 (|a|, |w|
 * <= 255); the saturation is then a clamp of each lane */
__attribute__((target("avx2"))) static int64_t dot_avx2(const int16_t *a, const int16_t *w,
                                                        int64_t Kp, bool sat)
{
    __m256i acc = _mm256_setzero_si256(), acc2 = _mm256_setzero_si256();
    if (sat) {
        const __m256i lo = _mm256_set1_epi32(-32768), hi = _mm256_set1_epi32(32767);
        for (int64_t k = 0; k < Kp; k += 32) {
            __m256i p = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(a + k)),
                                          _mm256_loadu_si256((const __m256i *)(w + k)));
            __m256i q = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(a + k + 16)),
                                          _mm256_loadu_si256((const __m256i *)(w + k + 16)));
            acc = _mm256_add_epi32(acc, _mm256_min_epi32(_mm256_max_epi32(p, lo), hi));
            acc2 = _mm256_add_epi32(acc2, _mm256_min_epi32(_mm256_max_epi32(q, lo), hi));
        }
    } else {
        for (int64_t k = 0; k < Kp; k += 32) {
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(a + k)),
                                                          _mm256_loadu_si256((const __m256i *)(w + k))));
            acc2 = _mm256_add_epi32(acc2, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(a + k + 16)),
                                                            _mm256_loadu_si256((const __m256i *)(w + k + 16))));
        }
    }
    acc = _mm256_add_epi32(acc, acc2);
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    return _mm_cvtsi128_si32(s4);
}

/* AVX-512 VNNI: vpdpwssd adds the exact int16 pair sums; the saturating form clamps
 * vpmaddwd's lanes first */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static int64_t
dot_avx512(const int16_t *a, const int16_t *w, int64_t Kp, bool sat)
{
    __m512i acc = _mm512_setzero_si512();
    if (sat) {
        const __m512i lo = _mm512_set1_epi32(-32768), hi = _mm512_set1_epi32(32767);
        for (int64_t k = 0; k < Kp; k += 32) {
            __m512i p = _mm512_madd_epi16(_mm512_loadu_si512(a + k), _mm512_loadu_si512(w + k));
            acc = _mm512_add_epi32(acc, _mm512_min_epi32(_mm512_max_epi32(p, lo), hi));
        }
    } else {
        for (int64_t k = 0; k < Kp; k += 32)
            acc = _mm512_dpwssd_epi32(acc, _mm512_loadu_si512(a + k), _mm512_loadu_si512(w + k));
    }
    return _mm512_reduce_add_epi32(acc);
}
#endif

/* Chosen once: ONNXQ_QGEMM_ISA=generic|avx2|avx512 forces a variant (tests); every
 * variant computes the same numbers. */
static void dot4_generic(const int16_t *a, const int16_t *w, int64_t ldw, int64_t Kp, bool sat,
                         int64_t *out)
{
    for (int r = 0; r < 4; r++)
        out[r] = dot_generic(a, w + r * ldw, Kp, sat);
}

#ifdef QL_HAVE_X86
/* four 8-lane int32 accumulators to four sums (wrapping) */
__attribute__((target("avx2"))) static void hsum4_avx2(__m256i a0, __m256i a1, __m256i a2,
                                                       __m256i a3, int64_t *out)
{
    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
    __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    out[0] = _mm_extract_epi32(q, 0);
    out[1] = _mm_extract_epi32(q, 1);
    out[2] = _mm_extract_epi32(q, 2);
    out[3] = _mm_extract_epi32(q, 3);
}

__attribute__((target("avx2"))) static void dot4_avx2(const int16_t *a, const int16_t *w,
                                                      int64_t ldw, int64_t Kp, bool sat,
                                                      int64_t *out)
{
    __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                      _mm256_setzero_si256()};
    const __m256i lo = _mm256_set1_epi32(-32768), hi = _mm256_set1_epi32(32767);
    for (int64_t k = 0; k < Kp; k += 16) {
        __m256i av = _mm256_loadu_si256((const __m256i *)(a + k));
        for (int r = 0; r < 4; r++) {
            __m256i p = _mm256_madd_epi16(av, _mm256_loadu_si256((const __m256i *)(w + r * ldw + k)));
            if (sat)
                p = _mm256_min_epi32(_mm256_max_epi32(p, lo), hi);
            acc[r] = _mm256_add_epi32(acc[r], p);
        }
    }
    hsum4_avx2(acc[0], acc[1], acc[2], acc[3], out);
}

__attribute__((target("avx512f,avx512bw,avx512vnni,avx2"))) static void
dot4_avx512(const int16_t *a, const int16_t *w, int64_t ldw, int64_t Kp, bool sat, int64_t *out)
{
    __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                      _mm512_setzero_si512()};
    if (sat) {
        const __m512i lo = _mm512_set1_epi32(-32768), hi = _mm512_set1_epi32(32767);
        for (int64_t k = 0; k < Kp; k += 32) {
            __m512i av = _mm512_loadu_si512(a + k);
            for (int r = 0; r < 4; r++) {
                __m512i p = _mm512_madd_epi16(av, _mm512_loadu_si512(w + r * ldw + k));
                acc[r] = _mm512_add_epi32(acc[r], _mm512_min_epi32(_mm512_max_epi32(p, lo), hi));
            }
        }
    } else {
        for (int64_t k = 0; k < Kp; k += 32) {
            __m512i av = _mm512_loadu_si512(a + k);
            for (int r = 0; r < 4; r++)
                acc[r] = _mm512_dpwssd_epi32(acc[r], av, _mm512_loadu_si512(w + r * ldw + k));
        }
    }
    __m256i h[4];
    for (int r = 0; r < 4; r++)
        h[r] = _mm256_add_epi32(_mm512_castsi512_si256(acc[r]), _mm512_extracti64x4_epi64(acc[r], 1));
    hsum4_avx2(h[0], h[1], h[2], h[3], out);
}
#endif

static dot4_fn pick_dot4(void)
{
    dot_fn d = pick_dot();
#ifdef QL_HAVE_X86
    if (d == dot_avx512)
        return dot4_avx512;
    if (d == dot_avx2)
        return dot4_avx2;
#endif
    (void)d;
    return dot4_generic;
}

static dot_fn pick_dot(void)
{
#ifdef QL_HAVE_X86
    __builtin_cpu_init();
    const char *env = getenv("ONNXQ_QGEMM_ISA");
    bool want512 = !env || strcmp(env, "avx512") == 0, want2 = !env || strcmp(env, "avx2") == 0;
    if (want512 && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw"))
        return dot_avx512;
    if ((want2 || want512) && __builtin_cpu_supports("avx2"))
        return dot_avx2;
#endif
    return dot_generic;
}

static inline int32_t requant_acc(const qstate *s, int64_t acc, float scale);
static inline void store(const qstate *s, void *y, int64_t i, int32_t v);

/* output element i from the raw dot product and the row's sum of a: requantized, or
 * for a float output float(acc) * scale (MLAS_QGEMM_SCALE_BIAS_OUTPUT_PROCESSOR) */
static inline void emit(const qstate *s, void *y, int64_t i, int64_t K, int64_t n, int64_t dot,
                        int64_t rowsum, int32_t wzp, int32_t wsum, float scale)
{
    int64_t acc = dot - (int64_t)wzp * rowsum - (int64_t)s->xzp * wsum + K * (int64_t)s->xzp * wzp;
    if (s->bias)
        acc += s->bias[n];
    if (s->float_out)
        ((float *)y)[i] = (float)(int32_t)(uint32_t)(uint64_t)acc * scale;
    else
        store(s, y, i, requant_acc(s, acc, scale));
}

/* the requantization of a finished accumulator (bias included) */
static inline int32_t requant_acc(const qstate *s, int64_t acc, float scale)
{
    int32_t a32 = (int32_t)(uint32_t)(uint64_t)acc; /* int32 arithmetic wraps in MLAS */
    float f = (float)a32 * scale;
    f = f < s->fmin ? s->fmin : f;
    f = f > s->fmax ? s->fmax : f;
#ifdef QL_HAVE_X86
    return _mm_cvtss_si32(_mm_set_ss(f)) + s->yzp; /* nearest even, as vcvtps2dq */
#else
    return (int32_t)nearbyintf(f) + s->yzp;
#endif
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
    int16_t *scratch;      /* per worker: Kp values */
    /* matrix: rows of a, M rows */
    int64_t M, K, Kp, N;
    const int16_t *w;      /* [N][Kp] */
    const int32_t *wsum;   /* [N] */
    int32_t wzp1;          /* dynamic B: its zero point */
    /* conv */
    int64_t C, in[MAXS], out[MAXS], pb[MAXS], opix, img;
    const uint8_t *xt;     /* the image, [pixel][C] raw values */
    const int16_t *wdw;    /* depthwise: [kernel position][C] of w - w_zp */
    bool avx2;             /* the AVX2 depthwise loop (not with ONNXQ_QGEMM_ISA=generic) */
} job;

static void run_rows(void *arg, int64_t begin, int64_t end, int worker)
{
    const job *j = arg;
    const qstate *s = j->s;
    int64_t K = j->K, Kp = j->Kp, N = j->N;
    int16_t *a = j->scratch + (size_t)worker * (size_t)Kp;
    for (int64_t kk = K; kk < Kp; kk++)
        a[kk] = 0;
    for (int64_t m = begin; m < end; m++) {
        int64_t rowsum = 0;
        for (int64_t kk = 0; kk < K; kk++) {
            int64_t src = s->trans_a ? kk * j->M + m : m * K + kk;
            a[kk] = raw(s, j->x, src);
            rowsum += a[kk];
        }
        int64_t n = 0, d4[4];
        for (; n < N; n++) {
            int64_t d;
            if (n % 4 == 0 && n + 4 <= N)
                s->dot4(a, j->w + n * Kp, Kp, Kp, s->sat, d4);
            d = n + 4 - n % 4 <= N ? d4[n % 4] : s->dot(a, j->w + n * Kp, Kp, s->sat);
            if (s->dyn_b)
                emit(s, j->y, m * N + n, K, n, d, rowsum, j->wzp1, j->wsum[n], s->scale[0]);
            else
                emit(s, j->y, m * N + n, K, n, d, rowsum, s->wzp[n], s->wsum[n], s->scale[n]);
        }
    }
}

/* input position (flat, in the image) of kernel position kp at output pixel oc, or -1 in
 * the padding */
static inline int64_t conv_src(const qstate *s, const job *j, const int64_t *oc, int64_t kp)
{
    int64_t off = 0;
    const int64_t *ko = s->kofs + kp * (int64_t)s->ns;
    for (size_t i = 0; i < s->ns; i++) {
        int64_t pos = oc[i] * s->stride[i] - j->pb[i] + ko[i];
        if (pos < 0 || pos >= j->in[i])
            return -1;
        off = off * j->in[i] + pos;
    }
    return off;
}

static inline void pixel_coords(const qstate *s, const job *j, int64_t p, int64_t *oc)
{
    for (size_t i = s->ns; i-- > 0;) {
        oc[i] = p % j->out[i];
        p /= j->out[i];
    }
}

/* one range of output pixels of image j->img; j->xt is the image as [pixel][C] raw
 * int16 values (NHWC, onnxruntime's layout), so an im2col row is cg-long copies. Pixels
 * go in blocks of QL_PBLOCK: each weight row is used for the whole block and the
 * outputs of a channel are written contiguously. */
#define QL_PBLOCK 16
static void run_conv(void *arg, int64_t begin, int64_t end, int worker)
{
    const job *j = arg;
    const qstate *s = j->s;
    int64_t Kp = s->Kp;
    int16_t *rows = j->scratch + (size_t)worker * (size_t)(QL_PBLOCK * Kp);
    int64_t rowsum[QL_PBLOCK];
    for (int64_t i = 0; i < QL_PBLOCK; i++)
        for (int64_t kk = s->K; kk < Kp; kk++)
            rows[i * Kp + kk] = 0;
    int64_t kprod = s->K / s->cg, C = j->C, cg = s->cg;
    int64_t npg = s->N / s->group;
    for (int64_t p0 = begin; p0 < end; p0 += QL_PBLOCK) {
        int64_t nb = end - p0 < QL_PBLOCK ? end - p0 : QL_PBLOCK;
        for (int64_t g = 0; g < s->group; g++) {
            for (int64_t i = 0; i < nb; i++) {
                int64_t oc[MAXS], sum = 0;
                pixel_coords(s, j, p0 + i, oc);
                int16_t *a = rows + i * Kp;
                for (int64_t kp = 0; kp < kprod; kp++) {
                    int64_t off = conv_src(s, j, oc, kp);
                    int16_t *ak = a + kp * cg;
                    if (off < 0) {
                        for (int64_t c = 0; c < cg; c++)
                            ak[c] = (int16_t)s->xzp;
                        sum += cg * s->xzp;
                    } else {
                        const uint8_t *src = j->xt + off * C + g * cg;
                        for (int64_t c = 0; c < cg; c++) {
                            ak[c] = src[c];
                            sum += src[c];
                        }
                    }
                }
                rowsum[i] = sum;
            }
            int64_t n = g * npg, nend = (g + 1) * npg;
            for (; n + 4 <= nend; n += 4) {
                const int16_t *wn = s->w + n * Kp;
                int64_t ybase = (j->img * s->N + n) * j->opix + p0;
                for (int64_t i = 0; i < nb; i++) {
                    int64_t d4[4];
                    s->dot4(rows + i * Kp, wn, Kp, Kp, s->sat, d4);
                    for (int r = 0; r < 4; r++)
                        emit(s, j->y, ybase + r * j->opix + i, s->K, n + r, d4[r], rowsum[i],
                             s->wzp[n + r], s->wsum[n + r], s->scale[n + r]);
                }
            }
            for (; n < nend; n++) {
                const int16_t *wn = s->w + n * Kp;
                int64_t ybase = (j->img * s->N + n) * j->opix + p0;
                for (int64_t i = 0; i < nb; i++)
                    emit(s, j->y, ybase + i, s->K, n, s->dot(rows + i * Kp, wn, Kp, s->sat),
                         rowsum[i], s->wzp[n], s->wsum[n], s->scale[n]);
            }
        }
    }
}

/* acc[c] += (src[c] - xzp) * wk[c]: exact in int32 (|src - xzp|, |wk| <= 255) */
#ifdef QL_HAVE_X86
__attribute__((target("avx2"))) static void dw_acc_avx2(int32_t *acc, const uint8_t *src,
                                                        const int16_t *wk, int64_t C, int32_t xzp)
{
    const __m256i z = _mm256_set1_epi32(xzp);
    int64_t c = 0;
    for (; c + 8 <= C; c += 8) {
        __m256i x = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(src + c))), z);
        __m256i w = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)(wk + c)));
        __m256i a = _mm256_loadu_si256((const __m256i *)(acc + c));
        _mm256_storeu_si256((__m256i *)(acc + c), _mm256_add_epi32(a, _mm256_mullo_epi32(x, w)));
    }
    for (; c < C; c++)
        acc[c] += (int32_t)(src[c] - xzp) * wk[c];
}
#endif

static inline void dw_accumulate(int32_t *acc, const uint8_t *src, const int16_t *wk, int64_t C,
                                 int32_t xzp, bool avx2)
{
#ifdef QL_HAVE_X86
    if (avx2) {
        dw_acc_avx2(acc, src, wk, C, xzp);
        return;
    }
#endif
    (void)avx2;
    for (int64_t c = 0; c < C; c++)
        acc[c] += (int32_t)(src[c] - xzp) * wk[c];
}

/* depthwise (one input and one output channel per group): exact in onnxruntime, so
 * sum (a - x_zp)(w - w_zp) directly, all channels of a pixel at once */
static void run_depthwise(void *arg, int64_t begin, int64_t end, int worker)
{
    const job *j = arg;
    const qstate *s = j->s;
    int64_t C = j->C, kprod = s->K;
    int32_t *acc = (int32_t *)(void *)(j->scratch + (size_t)worker * (size_t)s->Kp);
    for (int64_t p = begin; p < end; p++) {
        int64_t oc[MAXS];
        pixel_coords(s, j, p, oc);
        for (int64_t c = 0; c < C; c++)
            acc[c] = 0;
        for (int64_t kp = 0; kp < kprod; kp++) {
            int64_t off = conv_src(s, j, oc, kp);
            if (off < 0)
                continue; /* padding is the zero point: contributes 0 */
            const uint8_t *src = j->xt + off * C;
            const int16_t *wk = j->wdw + kp * C;
            dw_accumulate(acc, src, wk, C, s->xzp, j->avx2);
        }
        for (int64_t c = 0; c < C; c++) {
            int64_t v = acc[c];
            if (s->bias)
                v += s->bias[c];
            store(s, j->y, (j->img * s->N + c) * j->opix + p, requant_acc(s, v, s->scale[c]));
        }
    }
}

/* ---- depthwise 2-D convolution on the NCHW image, a channel at a time -------------
 * (no channels-last copy; the same exact sums as run_depthwise). The channel's rows are
 * copied once into a plane with the padding (x zero point) around them; for stride s > 1
 * each row is also split into s phase rows, so every tap reads a contiguous run of bytes
 * and the multiply-adds go 16 (AVX2) or 32 (AVX-512) output pixels per step. */
typedef struct dwjob {
    const qstate *s;
    const uint8_t *x;      /* image j.img, [C][H][W] as stored */
    void *y;
    uint8_t *scratch;
    size_t per_worker;     /* bytes of scratch per worker */
    int64_t C, H, W, OH, OW, pt, pl, PW, PH, img; /* PH: rows of the padded plane */
    uint8_t flip;          /* 0x80: int8 read as x + 128 */
    bool avx2, avx512;
} dwjob;

#define DW2_MAXTAPS 64
/* scratch bytes per plane row: the padded row and its phase rows, each with 32 bytes of
 * slack for the vector loads of a last partial block of outputs */
#define DW2_PSTRIDE(plen) (((plen) + 31) / 32 * 32)
#define DW2_PADBYTES(PW) (((PW) + 32 + 63) / 64 * 64)
#define DW2_ROWBYTES(PW, sw, plen) \
    (DW2_PADBYTES(PW) + ((sw) > 1 ? ((sw) * DW2_PSTRIDE(plen) + 32 + 63) / 64 * 64 : 0))

#ifdef QL_HAVE_X86
/* a row of outputs, 16 at a time: the sum over tap pairs of t0 w0 + t1 w1 (vpmaddwd,
 * exact: |t| <= 255, |w| <= 255), plus `add` (bias - xzp sum w), requantized */
__attribute__((target("avx2"))) static int64_t dw2_row_avx2(const qstate *s, const uint8_t *const *tap,
                                                            const int32_t *wpair, int64_t npair,
                                                            int64_t OW, int32_t add, float scale,
                                                            uint8_t *y)
{
    const __m256i b = _mm256_set1_epi32(add), zp = _mm256_set1_epi32(s->yzp);
    const __m256 sc = _mm256_set1_ps(scale), lo = _mm256_set1_ps(s->fmin), hi = _mm256_set1_ps(s->fmax);
    const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                          0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    uint8_t out[16];
    int64_t i = 0;
    for (; i < OW; i += 16) {
        __m256i a = _mm256_setzero_si256(), c = _mm256_setzero_si256();
        for (int64_t p = 0; p < npair; p++) {
            __m256i t0 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(tap[2 * p] + i)));
            __m256i t1 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(tap[2 * p + 1] + i)));
            __m256i w = _mm256_set1_epi32(wpair[p]);
            a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_unpacklo_epi16(t0, t1), w));
            c = _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_unpackhi_epi16(t0, t1), w));
        }
        /* a: outputs 0-3 | 8-11, c: 4-7 | 12-15 */
        __m256i r[2] = {_mm256_permute2x128_si256(a, c, 0x20), _mm256_permute2x128_si256(a, c, 0x31)};
        for (int h = 0; h < 2; h++) {
            __m256 f = _mm256_cvtepi32_ps(_mm256_add_epi32(r[h], b));
            f = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(f, sc), lo), hi);
            __m256i v = _mm256_shuffle_epi8(_mm256_add_epi32(_mm256_cvtps_epi32(f), zp), pick);
            int32_t w0 = _mm_cvtsi128_si32(_mm256_castsi256_si128(v));
            int32_t w1 = _mm_cvtsi128_si32(_mm256_extracti128_si256(v, 1));
            memcpy(out + 8 * h, &w0, 4);
            memcpy(out + 8 * h + 4, &w1, 4);
        }
        /* the last block reads past OW within the rows' slack; those lanes are dropped */
        memcpy(y + i, out, (size_t)(OW - i < 16 ? OW - i : 16));
    }
    return OW;
}
#endif

#ifdef QL_HAVE_X86
/* the same with AVX-512 VNNI: 32 outputs per step, vpdpwssd on the tap pairs */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static int64_t
dw2_row_avx512(const qstate *s, const uint8_t *const *tap, const int32_t *wpair, int64_t npair,
               int64_t OW, int32_t add, float scale, uint8_t *y)
{
    const __m512i b = _mm512_set1_epi32(add), zp = _mm512_set1_epi32(s->yzp);
    const __m512 sc = _mm512_set1_ps(scale), lo = _mm512_set1_ps(s->fmin), hi = _mm512_set1_ps(s->fmax);
    /* a: outputs 0-3, 8-11, 16-19, 24-27; c: 4-7, 12-15, 20-23, 28-31 */
    const __m512i i0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const __m512i i1 = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    uint8_t out[32];
    for (int64_t i = 0; i < OW; i += 32) {
        __m512i a = _mm512_setzero_si512(), c = _mm512_setzero_si512();
        for (int64_t p = 0; p < npair; p++) {
            __m512i t0 = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(tap[2 * p] + i)));
            __m512i t1 = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(tap[2 * p + 1] + i)));
            __m512i w = _mm512_set1_epi32(wpair[p]);
            a = _mm512_dpwssd_epi32(a, _mm512_unpacklo_epi16(t0, t1), w);
            c = _mm512_dpwssd_epi32(c, _mm512_unpackhi_epi16(t0, t1), w);
        }
        __m512i r[2] = {_mm512_permutex2var_epi32(a, i0, c), _mm512_permutex2var_epi32(a, i1, c)};
        for (int h = 0; h < 2; h++) {
            __m512 f = _mm512_cvtepi32_ps(_mm512_add_epi32(r[h], b));
            f = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(f, sc), lo), hi);
            __m512i v = _mm512_add_epi32(_mm512_cvtps_epi32(f), zp);
            _mm_storeu_si128((__m128i *)(out + 16 * h), _mm512_cvtepi32_epi8(v));
        }
        memcpy(y + i, out, (size_t)(OW - i < 32 ? OW - i : 32));
    }
    return OW;
}

/* even and odd bytes of pad [0, 2 plen) (reads up to 31 bytes past, writes up to 15) */
__attribute__((target("avx2"))) static void dw2_split2_avx2(const uint8_t *pad, int64_t plen,
                                                            uint8_t *ev, uint8_t *od)
{
    const __m256i sh = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                        0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    for (int64_t i = 0; i < plen; i += 16) {
        __m256i v = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(pad + 2 * i)), sh);
        v = _mm256_permute4x64_epi64(v, 0xd8); /* even 0-15 | odd 0-15 */
        _mm_storeu_si128((__m128i *)(ev + i), _mm256_castsi256_si128(v));
        _mm_storeu_si128((__m128i *)(od + i), _mm256_extracti128_si256(v, 1));
    }
}
#endif

/* one channel at a time: its padded plane (every input row an output row reads, the
 * padding rows and columns the zero point, stride-2 rows split into phases) built once;
 * the taps are then fixed offsets into it for every output row, and the zero point
 * drops out as xzp * sum(w) (a padding value t = xzp adds t w, taken off with the rest) */
static void run_dw2(void *arg, int64_t begin, int64_t end, int worker)
{
    const dwjob *j = arg;
    const qstate *s = j->s;
    int64_t KH = s->kdim[0], KW = s->kdim[1], sh = s->stride[0], sw = s->stride[1];
    int64_t dh = s->dil[0], dw = s->dil[1], OW = j->OW, PW = j->PW, W = j->W;
    int64_t plen = (PW + sw - 1) / sw, pst = DW2_PSTRIDE(plen); /* a phase row's length, stride */
    int64_t rowbytes = DW2_ROWBYTES(PW, sw, plen), PH = j->PH;
    uint8_t *base = j->scratch + (size_t)worker * j->per_worker;
    const uint8_t *tap[DW2_MAXTAPS + 1];
    int64_t toff[DW2_MAXTAPS + 1];
    int16_t wt[DW2_MAXTAPS + 1];
    int32_t wpair[DW2_MAXTAPS / 2 + 1];
    int64_t lo = j->pl < PW ? j->pl : PW, hi = j->pl + W < PW ? j->pl + W : PW;
    if (hi < lo)
        hi = lo;
    for (int64_t c = begin; c < end; c++) {
        for (int64_t r = 0; r < PH; r++) {
            int64_t ih = r - j->pt;
            uint8_t *pad = base + r * rowbytes, *ph = pad + DW2_PADBYTES(PW);
            if (ih < 0 || ih >= j->H) {
                memset(pad, s->xzp, (size_t)PW);
            } else {
                const uint8_t *row = j->x + (c * j->H + ih) * W;
                memset(pad, s->xzp, (size_t)lo);
                if (j->flip)
                    for (int64_t i = lo; i < hi; i++)
                        pad[i] = row[i - j->pl] ^ j->flip;
                else
                    memcpy(pad + lo, row + (lo - j->pl), (size_t)(hi - lo));
                memset(pad + hi, s->xzp, (size_t)(PW - hi));
            }
            /* phase rows (entries past PW are only read for outputs past OW) */
#ifdef QL_HAVE_X86
            if (sw == 2 && j->avx2)
                dw2_split2_avx2(pad, plen, ph, ph + pst);
            else
#endif
            if (sw > 1)
                for (int64_t q = 0; q < sw; q++)
                    for (int64_t i = 0; i < plen; i++)
                        ph[q * pst + i] = i * sw + q < PW ? pad[i * sw + q] : (uint8_t)s->xzp;
        }
        int64_t nt = 0, wsum = 0;
        for (int64_t kh = 0; kh < KH; kh++)
            for (int64_t kw = 0; kw < KW; kw++) {
                int16_t wv = s->wdw[(kh * KW + kw) * s->N + c];
                if (wv == 0)
                    continue;
                int64_t off = kw * dw;
                toff[nt] = kh * dh * rowbytes +
                           (sw == 1 ? off : DW2_PADBYTES(PW) + (off % sw) * pst + off / sw);
                wt[nt++] = wv;
                wsum += wv;
            }
        if (nt % 2) { /* a pair needs two taps: the last one again, with weight 0 */
            toff[nt] = nt ? toff[nt - 1] : 0;
            wt[nt++] = 0;
        }
        for (int64_t p = 0; p < nt / 2; p++)
            wpair[p] = (int32_t)(((uint32_t)(uint16_t)wt[2 * p + 1] << 16) | (uint16_t)wt[2 * p]);
        int32_t add = (s->bias ? s->bias[c] : 0) - s->xzp * (int32_t)wsum;
        for (int64_t oh = 0; oh < j->OH; oh++) {
            const uint8_t *rb = base + oh * sh * rowbytes;
            for (int64_t t = 0; t < nt; t++)
                tap[t] = rb + toff[t];
            uint8_t *y = (uint8_t *)j->y + ((j->img * s->N + c) * j->OH + oh) * OW;
            int64_t i = 0;
#ifdef QL_HAVE_X86
            if (j->avx512)
                i = dw2_row_avx512(s, tap, wpair, nt / 2, OW, add, s->scale[c], y);
            else if (j->avx2)
                i = dw2_row_avx2(s, tap, wpair, nt / 2, OW, add, s->scale[c], y);
#endif
            for (; i < OW; i++) {
                int32_t a = 0;
                for (int64_t t = 0; t < nt; t++)
                    a += (int32_t)tap[t][i] * wt[t];
                y[i] = (uint8_t)requant_acc(s, (int64_t)a + add, s->scale[c]);
            }
        }
    }
}

/* MatMul of two activations: numpy broadcasting of the batch dims of A [..., M, K] and
 * B [..., K, N]; each B matrix is transposed to [N][K] raw values once. */
static oq_status run_dyn(oq_kctx *k, const qstate *s, const oq_rt_tensor *x,
                         const oq_rt_tensor *bt, oq_rt_tensor *y, job *j)
{
    size_t r = y->rank;
    int64_t M = x->dims[x->rank - 2], K = x->dims[x->rank - 1], N = bt->dims[bt->rank - 1];
    int64_t nb = 1;
    for (size_t i = 0; i + 2 < r; i++)
        nb *= y->dims[i];
    int64_t Kp = kpad(K);
    int16_t *w = calloc((size_t)(N * Kp + 1), sizeof *w);
    int32_t *wsum = malloc((size_t)(N + 1) * sizeof *wsum);
    if (!w || !wsum) {
        free(w);
        free(wsum);
        return OQ_ERR_NOMEM;
    }
    j->M = M;
    j->K = K;
    j->Kp = Kp;
    j->N = N;
    j->w = w;
    j->wsum = wsum;
    j->wzp1 = s->bzp;
    const void *x0 = j->x;
    void *y0 = j->y;
    for (int64_t bi = 0; bi < nb; bi++) {
        /* offsets of this batch entry in A and B (broadcast dims repeat) */
        int64_t rem = bi, xo = 0, bo = 0, xst = 1, bst = 1;
        for (size_t i = r - 2; i-- > 0;) {
            int64_t idx = rem % y->dims[i];
            rem /= y->dims[i];
            size_t xi = i + x->rank - r, bi2 = i + bt->rank - r;
            if (i + x->rank >= r) {
                if (x->dims[xi] != 1)
                    xo += idx * xst;
                xst *= x->dims[xi];
            }
            if (i + bt->rank >= r) {
                if (bt->dims[bi2] != 1)
                    bo += idx * bst;
                bst *= bt->dims[bi2];
            }
        }
        for (int64_t n = 0; n < N; n++) {
            int64_t sum = 0;
            for (int64_t kk = 0; kk < K; kk++) {
                int64_t src = bo * K * N + kk * N + n;
                int16_t v = s->b_s8 ? (int16_t)(((const int8_t *)bt->data)[src] + s->b_add)
                                    : ((const uint8_t *)bt->data)[src];
                w[n * Kp + kk] = v;
                sum += v;
            }
            wsum[n] = (int32_t)sum;
        }
        j->x = (const uint8_t *)x0 + xo * M * K;
        j->y = (uint8_t *)y0 + bi * M * N * (s->float_out ? (int64_t)sizeof(float) : 1);
        int64_t work = (K * N) | 1;
        oq_k_parallel_for(k, M, (65536 + work - 1) / work, run_rows, j);
    }
    free(w);
    free(wsum);
    return OQ_OK;
}

/* QLinearSoftmax (contrib_ops/cpu/quantization/qlinear_softmax.cc): a table of
 * exp((i - 255 + shift) * x_scale) in float (shift = max(0, logf(FLT_MAX / D) - 5) /
 * x_scale, the logarithm in float), a float sum in element order along the
 * axis, y = nearbyint(e * floor(1 / y_scale) / sum) + y_zp. */
static oq_status run_softmax(oq_kctx *k, const qstate *s, const oq_rt_tensor *x, oq_rt_tensor *y)
{
    (void)k;
    int64_t axis = oq_k_axis(s->sm_axis, x->rank), outer = 1, D = 1, inner = 1;
    for (size_t i = 0; i < x->rank; i++) {
        if ((int64_t)i < axis)
            outer *= x->dims[i];
        else if ((int64_t)i == axis || s->sm_opset < 13)
            D *= x->dims[i];
        else
            inner *= x->dims[i];
    }
    if (D <= 0)
        return OQ_OK;
    float table[256];
    /* onnxruntime's log(numeric_limits<float>::max() / reduce_len) has a float argument,
       so C++ calls the float log: logf, not log (a different table for some D and x
       scales: PaddleOCR rec's attention, D = 40, measured) */
    double shift = (double)logf(FLT_MAX / (float)D);
    shift = (shift - 5 > 0 ? shift - 5 : 0) / s->sm_xscale;
    for (int i = 0; i < 256; i++) {
        double e = exp(((double)i - 255 + shift) * (double)s->sm_xscale);
        table[(uint8_t)(s->x_s8 ? i - 128 : i)] = (float)e;
    }
    const float ysc = s->sm_yscale;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in0 = 0; in0 < inner; in0++) {
            int64_t base = o * D * inner + in0;
            /* the raw values along the axis */
            int32_t xmax = -1000;
            for (int64_t d = 0; d < D; d++) {
                int64_t i = base + d * inner;
                int32_t v = s->x_s8 ? ((const int8_t *)x->data)[i]
                                    : (int32_t)(uint8_t)(((const uint8_t *)x->data)[i] + s->xzp);
                xmax = v > xmax ? v : xmax;
            }
            int32_t adj = s->x_s8 ? 127 - xmax : 255 - xmax;
            float sum = 0;
            for (int64_t d = 0; d < D; d++) {
                int64_t i = base + d * inner;
                int32_t v = s->x_s8 ? ((const int8_t *)x->data)[i]
                                    : (int32_t)(uint8_t)(((const uint8_t *)x->data)[i] + s->xzp);
                sum += table[(uint8_t)(v + adj)];
            }
            if (sum == 0)
                return OQ_OK; /* onnxruntime returns from the whole range here */
            for (int64_t d = 0; d < D; d++) {
                int64_t i = base + d * inner;
                int32_t v = s->x_s8 ? ((const int8_t *)x->data)[i]
                                    : (int32_t)(uint8_t)(((const uint8_t *)x->data)[i] + s->xzp);
                float t = table[(uint8_t)(v + adj)];
                if (s->x_s8) {
                    int32_t q = (int32_t)nearbyintf(t * ysc / sum) + s->yzp;
                    ((int8_t *)y->data)[i] = (int8_t)(q > 255 ? 255 : q);
                } else {
                    uint32_t q = (uint32_t)nearbyintf(t * ysc / sum) + (uint32_t)s->yzp;
                    uint8_t u = q > 255 ? 255 : (uint8_t)q;
                    if (s->y_s8)
                        ((int8_t *)y->data)[i] = (int8_t)(u - 128);
                    else
                        ((uint8_t *)y->data)[i] = u;
                }
            }
        }
    return OQ_OK;
}

/* image b of x [C][pixels] to [pixel][C] raw uint8 (int8 + 128: the sign bit flipped),
 * in blocks of pixels that stay in cache */
#ifdef QL_HAVE_X86
/* 16 rows of 16 bytes (src, stride ss) to 16 columns (dst, stride ds), bytes ^ flip */
static void tr16(const uint8_t *src, int64_t ss, uint8_t *dst, int64_t ds, uint8_t flip)
{
    __m128i a[16], b[16], f = _mm_set1_epi8((char)flip);
    for (int i = 0; i < 16; i++)
        a[i] = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(src + i * ss)), f);
    for (int i = 0; i < 8; i++) {
        b[2 * i] = _mm_unpacklo_epi8(a[2 * i], a[2 * i + 1]);
        b[2 * i + 1] = _mm_unpackhi_epi8(a[2 * i], a[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        a[4 * i] = _mm_unpacklo_epi16(b[4 * i], b[4 * i + 2]);
        a[4 * i + 1] = _mm_unpackhi_epi16(b[4 * i], b[4 * i + 2]);
        a[4 * i + 2] = _mm_unpacklo_epi16(b[4 * i + 1], b[4 * i + 3]);
        a[4 * i + 3] = _mm_unpackhi_epi16(b[4 * i + 1], b[4 * i + 3]);
    }
    for (int j = 0; j < 2; j++)
        for (int q = 0; q < 4; q++) {
            b[8 * j + 2 * q] = _mm_unpacklo_epi32(a[8 * j + q], a[8 * j + 4 + q]);
            b[8 * j + 2 * q + 1] = _mm_unpackhi_epi32(a[8 * j + q], a[8 * j + 4 + q]);
        }
    for (int m = 0; m < 8; m++) {
        _mm_storeu_si128((__m128i *)(dst + 2 * m * ds), _mm_unpacklo_epi64(b[m], b[8 + m]));
        _mm_storeu_si128((__m128i *)(dst + (2 * m + 1) * ds), _mm_unpackhi_epi64(b[m], b[8 + m]));
    }
}
#endif

#ifdef QL_HAVE_X86
/* to_nhwc for C <= 4 channels: 16 pixels at a time, output byte t of the block being
 * channel t % C of pixel t / C (pshufb of each channel row); returns the pixels done */
static inline __attribute__((target("avx2"), always_inline)) int64_t
nhwc_small_c(uint8_t *xt, const uint8_t *x, const int64_t C, int64_t ipix, uint8_t flip)
{
    __m128i m[4][4], f = _mm_set1_epi8((char)flip);
    for (int64_t o = 0; o < C; o++)
        for (int64_t c = 0; c < C; c++) {
            uint8_t b[16];
            for (int64_t i = 0; i < 16; i++)
                b[i] = (16 * o + i) % C == c ? (uint8_t)((16 * o + i) / C) : 0x80;
            m[o][c] = _mm_loadu_si128((const __m128i *)b);
        }
    int64_t q = 0;
    for (; q + 16 <= ipix; q += 16) {
        __m128i v[4];
        for (int64_t c = 0; c < C; c++)
            v[c] = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(x + c * ipix + q)), f);
        for (int64_t o = 0; o < C; o++) {
            __m128i r = _mm_shuffle_epi8(v[0], m[o][0]);
            for (int64_t c = 1; c < C; c++)
                r = _mm_or_si128(r, _mm_shuffle_epi8(v[c], m[o][c]));
            _mm_storeu_si128((__m128i *)(xt + q * C + 16 * o), r);
        }
    }
    return q;
}

__attribute__((target("avx2"))) static int64_t nhwc_small_avx2(uint8_t *xt, const uint8_t *x,
                                                               int64_t C, int64_t ipix, uint8_t flip)
{
    switch (C) {
    case 1:
        return nhwc_small_c(xt, x, 1, ipix, flip);
    case 2:
        return nhwc_small_c(xt, x, 2, ipix, flip);
    case 3:
        return nhwc_small_c(xt, x, 3, ipix, flip);
    case 4:
        return nhwc_small_c(xt, x, 4, ipix, flip);
    default:
        return 0;
    }
}

/* 8 rows of 16 bytes (src, stride ss) to 16 pixels of 8 channels (dst), bytes ^ flip */
static void tr8x16(const uint8_t *src, int64_t ss, uint8_t *dst, uint8_t flip)
{
    __m128i r[8], a[8], b[8], f = _mm_set1_epi8((char)flip);
    for (int i = 0; i < 8; i++)
        r[i] = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(src + i * ss)), f);
    for (int i = 0; i < 4; i++) {
        a[2 * i] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) { /* channels 0-3, then 4-7 */
        b[4 * h] = _mm_unpacklo_epi16(a[4 * h], a[4 * h + 2]);
        b[4 * h + 1] = _mm_unpackhi_epi16(a[4 * h], a[4 * h + 2]);
        b[4 * h + 2] = _mm_unpacklo_epi16(a[4 * h + 1], a[4 * h + 3]);
        b[4 * h + 3] = _mm_unpackhi_epi16(a[4 * h + 1], a[4 * h + 3]);
    }
    for (int i = 0; i < 4; i++) { /* pixels 4i .. 4i + 3 */
        _mm_storeu_si128((__m128i *)(dst + 32 * i), _mm_unpacklo_epi32(b[i], b[4 + i]));
        _mm_storeu_si128((__m128i *)(dst + 32 * i + 16), _mm_unpackhi_epi32(b[i], b[4 + i]));
    }
}
#endif

/* simd: the x86 code (AVX2 CPU, not ONNXQ_QGEMM_ISA=generic); the same bytes either way */
static void to_nhwc(uint8_t *xt, const uint8_t *x, int64_t C, int64_t ipix, bool s8, bool simd)
{
    uint8_t flip = s8 ? 0x80 : 0;
    int64_t C16 = 0, P16 = 0, Ps = 0;
#ifdef QL_HAVE_X86
    C16 = C / 16 * 16;
    P16 = ipix / 16 * 16;
    int64_t Cr = C - C16;
    if (simd && C <= 4) {
        Ps = nhwc_small_avx2(xt, x, C, ipix, flip);
        Cr = 0;
    } else if (C == 8) {
        for (int64_t q0 = 0; q0 < P16; q0 += 16)
            tr8x16(x + q0, ipix, xt + q0 * 8, flip);
        Ps = P16;
        Cr = 0;
    } else if (Cr) {
        Ps = P16;
    }
    uint8_t tmp[16 * 16] = {0};
    for (int64_t q0 = 0; q0 < P16; q0 += 16) {
        /* the last Cr channels: 16 bytes a pixel from a copy of their rows, each pixel's
         * write spilling 16 - Cr bytes into the next pixel's first channels, written next
         * (by the next pixel or the tr16 below; the last pixel's spill: past P16, written
         * by the loop below, or into the Q8_SLACK bytes of xt) */
        if (Cr) {
            for (int64_t r = 0; r < Cr; r++)
                memcpy(tmp + 16 * r, x + (C16 + r) * ipix + q0, 16);
            tr16(tmp, 16, xt + q0 * C + C16, C, flip);
        }
        for (int64_t c0 = 0; c0 < C16; c0 += 16)
            tr16(x + c0 * ipix + q0, ipix, xt + q0 * C + c0, C, flip);
    }
#endif
    (void)simd;
    /* the rest: pixels past P16 of every channel, channels past C16 of the pixels from Ps
     * (0 without SIMD) */
    for (int64_t c = 0; c < C; c++) {
        const uint8_t *src = x + c * ipix;
        for (int64_t q = c < C16 ? P16 : Ps; q < ipix; q++)
            xt[q * C + c] = src[q] ^ flip;
    }
}

/* the results of one tile: rows p (pixels or matrix rows), OQ_Q8_NR columns from n0 */
static inline void emit_tile(const qstate *s, void *y, const int32_t *acc, int mr, int64_t n0,
                             int64_t nend, const int64_t *rowsum, int64_t ybase, int64_t rstride,
                             int64_t cstride)
{
    union {
        uint8_t b[OQ_Q8_MR * OQ_Q8_NR];
        float f[OQ_Q8_MR * OQ_Q8_NR];
    } t;
    oq_q8_requant(s->q8, acc, mr, rowsum, &s->q8o, n0, &t);
    int64_t nc = nend - n0 < OQ_Q8_NR ? nend - n0 : OQ_Q8_NR;
    if (mr == 8 && rstride == 1 && !s->float_out) { /* 8 contiguous outputs per column */
        uint8_t tt[OQ_Q8_MR * OQ_Q8_NR];
        oq_q8_transpose8(t.b, tt);
        for (int64_t c = 0; c < nc; c++)
            memcpy((uint8_t *)y + ybase + c * cstride, tt + 8 * c, 8);
        return;
    }
    for (int64_t c = 0; c < nc; c++)
        for (int r = 0; r < mr; r++) {
            int64_t i = ybase + r * rstride + c * cstride;
            if (s->float_out)
                ((float *)y)[i] = t.f[r * OQ_Q8_NR + c];
            else
                ((uint8_t *)y)[i] = t.b[r * OQ_Q8_NR + c];
        }
}

/* bytes of slack after each worker's im2col rows and after the channels-last image:
 * copy_run writes (and reads) up to 31 bytes past a run */
#define Q8_SLACK 64

/* n (> 0) bytes from src to dst, in 16-byte pieces when n <= 32: up to 31 bytes past
 * dst + n are overwritten (and read past src + n) */
static inline void copy_run(uint8_t *dst, const uint8_t *src, int64_t n)
{
    if (n <= 16) {
        memcpy(dst, src, 16);
    } else if (n <= 32) {
        memcpy(dst, src, 16);
        memcpy(dst + 16, src + 16, 16);
    } else {
        memcpy(dst, src, (size_t)n);
    }
}

/* im2col rows of nb pixels from p0 of a 2-D convolution with one group and no horizontal
 * dilation: the kw * C bytes of a kernel row are contiguous in the channels-last image,
 * so each kernel row is one copy when it lies inside the image (row i's copies spill
 * into row i + 1, written next, or into the Q8_SLACK bytes) */
static void im2col_runs(const qstate *s, const job *j, int64_t p0, int64_t nb, uint8_t *rows,
                        int64_t K4)
{
    int64_t C = j->C, KH = s->kdim[0], KW = s->kdim[1], H = j->in[0], W = j->in[1];
    int64_t OW = j->out[1], L = KW * C, K = s->K;
    int64_t sh = s->stride[0], sw = s->stride[1], dh = s->dil[0], pt = j->pb[0], pl = j->pb[1];
    uint8_t zp = (uint8_t)s->xzp;
    int64_t oh = p0 / OW, ow = p0 % OW;
    for (int64_t i = 0; i < nb; i++) {
        uint8_t *a = rows + i * K4;
        int64_t iw = ow * sw - pl, ih0 = oh * sh - pt;
        bool inside = iw >= 0 && iw + KW <= W;
        for (int64_t kh = 0; kh < KH; kh++) {
            int64_t ih = ih0 + kh * dh;
            uint8_t *d = a + kh * L;
            if (ih < 0 || ih >= H) {
                memset(d, zp, (size_t)L);
            } else if (inside) {
                copy_run(d, j->xt + (ih * W + iw) * C, L);
            } else {
                for (int64_t kw = 0; kw < KW; kw++) {
                    int64_t w = iw + kw;
                    if (w < 0 || w >= W) {
                        for (int64_t c = 0; c < C; c++)
                            d[kw * C + c] = zp;
                    } else {
                        const uint8_t *src = j->xt + (ih * W + w) * C;
                        for (int64_t c = 0; c < C; c++)
                            d[kw * C + c] = src[c];
                    }
                }
            }
        }
        for (int64_t k = K; k < K4; k++)
            a[k] = 0;
        if (++ow == OW) {
            ow = 0;
            oh++;
        }
    }
}

/* run_conv with the micro-kernels: blocks of Q8_PBLOCK output pixels as uint8 im2col
 * rows (a 1x1, stride 1, unpadded convolution whose K is a multiple of 4 reads the image
 * rows directly) */
#define Q8_PBLOCK 32
static void run_conv_q8(void *arg, int64_t begin, int64_t end, int worker)
{
    const job *j = arg;
    const qstate *s = j->s;
    int64_t K = s->K, K4 = oq_q8_k4(K), C = j->C, cg = s->cg, kprod = K / cg;
    int64_t npg = s->N / s->group, per = s->npanel * K4 * OQ_Q8_NR;
    uint8_t *rows = (uint8_t *)j->scratch + (size_t)worker * (size_t)(2 * QL_PBLOCK * s->Kp + Q8_SLACK);
    int64_t rowsum[Q8_PBLOCK];
    int32_t acc[OQ_Q8_MR * OQ_Q8_NR];
    bool direct = K == K4 && kprod == 1;
    for (size_t i = 0; i < s->ns && direct; i++)
        direct = s->stride[i] == 1 && j->pb[i] == 0 && j->in[i] == j->out[i];
    bool runs = !direct && s->ns == 2 && s->group == 1 && s->dil[1] == 1;
    for (int64_t p0 = begin; p0 < end; p0 += Q8_PBLOCK) {
        int64_t nb = end - p0 < Q8_PBLOCK ? end - p0 : Q8_PBLOCK;
        for (int64_t g = 0; g < s->group; g++) {
            const uint8_t *A;
            int64_t lda;
            if (direct) {
                A = j->xt + p0 * C + g * cg;
                lda = C;
                for (int64_t i = 0; i < nb; i++)
                    rowsum[i] = s->need_rowsum ? oq_q8_sum(A + i * C, K) : 0;
            } else {
                A = rows;
                lda = K4;
                if (runs) {
                    im2col_runs(s, j, p0, nb, rows, K4);
                    for (int64_t i = 0; i < nb; i++)
                        rowsum[i] = s->need_rowsum ? oq_q8_sum(rows + i * K4, K) : 0;
                }
                for (int64_t i = 0; i < nb && !runs; i++) {
                    int64_t oc[MAXS];
                    pixel_coords(s, j, p0 + i, oc);
                    uint8_t *a = rows + i * K4;
                    for (int64_t kp = 0; kp < kprod; kp++) {
                        int64_t off = conv_src(s, j, oc, kp);
                        if (off < 0)
                            memset(a + kp * cg, s->xzp, (size_t)cg);
                        else
                            memcpy(a + kp * cg, j->xt + off * C + g * cg, (size_t)cg);
                    }
                    for (int64_t k = K; k < K4; k++)
                        a[k] = 0;
                    rowsum[i] = s->need_rowsum ? oq_q8_sum(a, K) : 0;
                }
            }
            for (int64_t pn = 0; pn < s->npanel; pn++) {
                const int8_t *panel = s->wp + g * per + pn * K4 * OQ_Q8_NR;
                int64_t n0 = g * npg + pn * OQ_Q8_NR;
                for (int64_t i0 = 0; i0 < nb; i0 += OQ_Q8_MR) {
                    int mr = (int)(nb - i0 < OQ_Q8_MR ? nb - i0 : OQ_Q8_MR);
                    oq_q8_tile(s->q8, A + i0 * lda, lda, mr, panel, K4, acc);
                    emit_tile(s, j->y, acc, mr, n0, (g + 1) * npg, rowsum + i0,
                              (j->img * s->N + n0) * j->opix + p0 + i0, 1, j->opix);
                }
            }
        }
    }
}

/* run_rows with the micro-kernels: OQ_Q8_MR rows at a time */
static void run_rows_q8(void *arg, int64_t begin, int64_t end, int worker)
{
    const job *j = arg;
    const qstate *s = j->s;
    int64_t K = j->K, K4 = oq_q8_k4(K), N = j->N;
    uint8_t *rows = (uint8_t *)(j->scratch + (size_t)worker * (size_t)(OQ_Q8_MR * s->Kp));
    int64_t rowsum[OQ_Q8_MR];
    int32_t acc[OQ_Q8_MR * OQ_Q8_NR];
    bool direct = !s->trans_a && !s->x_s8 && K == K4;
    for (int64_t m0 = begin; m0 < end; m0 += OQ_Q8_MR) {
        int mr = (int)(end - m0 < OQ_Q8_MR ? end - m0 : OQ_Q8_MR);
        const uint8_t *A;
        if (direct) {
            A = (const uint8_t *)j->x + m0 * K;
            for (int r = 0; r < mr; r++)
                rowsum[r] = s->need_rowsum ? oq_q8_sum(A + r * K, K) : 0;
        } else {
            A = rows;
            for (int r = 0; r < mr; r++) {
                uint8_t *a = rows + r * K4;
                for (int64_t kk = 0; kk < K; kk++)
                    a[kk] = raw(s, j->x, s->trans_a ? kk * j->M + m0 + r : (m0 + r) * K + kk);
                memset(a + K, 0, (size_t)(K4 - K));
                rowsum[r] = s->need_rowsum ? oq_q8_sum(a, K) : 0;
            }
        }
        for (int64_t pn = 0; pn < s->npanel; pn++) {
            oq_q8_tile(s->q8, A, direct ? K : K4, mr, s->wp + pn * K4 * OQ_Q8_NR, K4, acc);
            emit_tile(s, j->y, acc, mr, pn * OQ_Q8_NR, N, rowsum, m0 * N + pn * OQ_Q8_NR, N, 1);
        }
    }
}

/* ---- DQ(a), DQ(b) -> Add | Mul -> Q ----------------------------------------------
 * Over the rows of oq_k_bcast_apply, in pieces of BIN_PIECE: the DQ rows of a and b (a
 * broadcast value dequantized once; a float b as it is), the float op, the Q row. */
#define BIN_PIECE 256

/* n values of an operand from src, `step` elements apart (0: broadcast) */
static void bin_piece(const uint8_t *src, int32_t dt, int64_t step, int64_t n, int32_t zp, float sc,
                      float *out)
{
    if (dt == OQ_DTYPE_FLOAT) {
        const float *f = (const float *)(const void *)src;
        for (int64_t i = 0; i < n; i++)
            out[i] = f[i * step];
    } else if (step == 1) {
        oq_k_dq_row(src, dt, n, zp, sc, out);
    } else {
        for (int64_t i = 0; i < n; i++)
            oq_k_dq_row(src + i * step, dt, 1, zp, sc, &out[i]);
    }
}

static void bin_row(const void *state, void *out, const void *const *in, const int64_t *inc,
                    int64_t count)
{
    const qstate *s = state;
    size_t bsize = oq_k_elsize(s->bdt_b);
    float fa[BIN_PIECE], fb[BIN_PIECE];
    for (int64_t p = 0; p < count; p += BIN_PIECE) {
        int64_t n = count - p < BIN_PIECE ? count - p : BIN_PIECE;
        bin_piece((const uint8_t *)in[0] + p * inc[0], s->bdt_a, inc[0], n, s->bz_a, s->bs_a, fa);
        bin_piece((const uint8_t *)in[1] + (size_t)(p * inc[1]) * bsize, s->bdt_b, inc[1], n, s->bz_b,
                  s->bs_b, fb);
        if (s->bin_mul)
            for (int64_t i = 0; i < n; i++)
                fa[i] = fa[i] * fb[i];
        else
            for (int64_t i = 0; i < n; i++)
                fa[i] = fa[i] + fb[i];
        oq_k_q_row(fa, n, s->bs_y, s->bz_y, s->out_dtype, (uint8_t *)out + p);
    }
}

/* onnxruntime's QLinearAdd / QLinearMul (contrib_ops/cpu/quantization/qlinear_binary_op.cc
 * calling MlasQLinearAdd / MlasQLinearMul(A, B, IsScalarB) per broadcast span), on raw
 * values v of the run type (uint8 for a converted int8 pair: v + 128, zero point + 128):
 *   Add (MlasQLinearAddKernelAvx2Helper, qladd_avx2.cpp, on every CPU with AVX2):
 *        rA = sA / sc, rB = sB / sc, fixed = (float)zc - fma(rA, zA, rB * zB) (the
 *        compiler contracts the scalar expression), y = cvt(fma(A, rA, fma(B, rB, fixed)))
 *        (also IsScalarB: fixed + B * rB is contracted the same way). MLAS' A is input 0
 *        unless input 0 is the span's one broadcast value: then onnxruntime swaps them;
 *   Mul (qlmul.cpp, SSE2): y = cvt((float)((a - za) * (b - zb)) * (sa * sb / sc) + zc);
 * cvt rounds to nearest even (_mm256_cvtps_epi32: INT32_MIN out of range), then the value
 * is saturated to int16 and to the 8-bit type (packs_epi32, packus / packs_epi16). A row
 * of oq_k_bcast_apply is such a span: inc 0 is a broadcast operand. */
static inline int32_t bin_raw(const uint8_t *p, int32_t dt)
{
    return dt == OQ_DTYPE_INT8 ? (int32_t)(int8_t)*p : (int32_t)*p;
}

static inline int32_t bin_cvt(float t)
{
    return t >= -2147483648.0f && t < 2147483648.0f ? (int32_t)nearbyintf(t) : INT32_MIN;
}

#ifdef QL_HAVE_X86
/* 8 raw values of an operand (inc 1) or one repeated (inc 0), as int32 */
static inline __attribute__((target("avx2"), always_inline)) __m256i
bin_raw8(const uint8_t *p, int64_t inc, int32_t dt)
{
    if (!inc)
        return _mm256_set1_epi32(bin_raw(p, dt));
    __m128i v = _mm_loadl_epi64((const __m128i *)p);
    return dt == OQ_DTYPE_INT8 ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v);
}

/* bin_ort_row 8 elements at a time (inc 0 or 1): the same operations (int32 products
 * converted to float, the same fused multiply-adds, vcvtps2dq: nearest even, INT32_MIN
 * out of range, as bin_cvt); returns the elements done */
__attribute__((target("avx2,fma"))) static int64_t
bin_ort_avx2(const qstate *s, const uint8_t *a, const uint8_t *b, const int64_t *inc, bool swap,
             uint8_t *y, int64_t count)
{
    const __m256i sha = _mm256_set1_epi32(s->ob_sh_a), shb = _mm256_set1_epi32(s->ob_sh_b);
    const __m256i za = _mm256_set1_epi32(s->bz_a), zb = _mm256_set1_epi32(s->bz_b);
    const __m256i lo = _mm256_set1_epi32(s->ob_lo), hi = _mm256_set1_epi32(s->ob_hi);
    const __m256i i16lo = _mm256_set1_epi32(-32768), i16hi = _mm256_set1_epi32(32767);
    const __m256i shy = _mm256_set1_epi32(s->ob_sh_y), byte = _mm256_set1_epi32(0xFF);
    const __m256 ra = _mm256_set1_ps(s->ob_ra), rb = _mm256_set1_ps(s->ob_rb);
    const __m256 fx = _mm256_set1_ps(s->ob_fixed), fxba = _mm256_set1_ps(s->ob_fixed_ba);
    int64_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m256i va = _mm256_add_epi32(bin_raw8(a + i * inc[0], inc[0], s->bdt_a), sha);
        __m256i vb = _mm256_add_epi32(bin_raw8(b + i * inc[1], inc[1], s->bdt_b), shb);
        __m256 t;
        if (s->bin_mul) {
            __m256i p = _mm256_mullo_epi32(_mm256_sub_epi32(va, za), _mm256_sub_epi32(vb, zb));
            t = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(p), ra), fx);
        } else if (swap) {
            t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(vb), rb,
                                _mm256_fmadd_ps(_mm256_cvtepi32_ps(va), ra, fxba));
        } else {
            t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(va), ra,
                                _mm256_fmadd_ps(_mm256_cvtepi32_ps(vb), rb, fx));
        }
        __m256i r = _mm256_cvtps_epi32(t);
        r = _mm256_max_epi32(_mm256_min_epi32(r, i16hi), i16lo);
        r = _mm256_max_epi32(_mm256_min_epi32(r, hi), lo);
        r = _mm256_and_si256(_mm256_sub_epi32(r, shy), byte);
        __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storel_epi64((__m128i *)(y + i), _mm_packus_epi16(w, w));
    }
    return i;
}

static bool bin_ort_simd(void)
{
    static _Atomic int ok = -1; /* racing writers store the same value */
    int v = atomic_load_explicit(&ok, memory_order_relaxed);
    if (v < 0) {
        __builtin_cpu_init();
        const char *env = getenv("ONNXQ_QGEMM_ISA"); /* generic: portable code only */
        v = (!env || strcmp(env, "generic") != 0) && __builtin_cpu_supports("avx2") &&
            __builtin_cpu_supports("fma");
        atomic_store_explicit(&ok, v, memory_order_relaxed);
    }
    return v == 1;
}
#endif

static void bin_ort_row(const void *state, void *out, const void *const *in, const int64_t *inc,
                        int64_t count)
{
    const qstate *s = state;
    const uint8_t *a = in[0], *b = in[1];
    uint8_t *y = out;
    bool swap = inc[0] == 0 && inc[1] != 0; /* input 0 broadcast: MLAS' B */
    int64_t i0 = 0;
#ifdef QL_HAVE_X86
    if (inc[0] >= 0 && inc[0] <= 1 && inc[1] >= 0 && inc[1] <= 1 && bin_ort_simd())
        i0 = bin_ort_avx2(s, a, b, inc, swap, y, count);
#endif
    for (int64_t i = i0; i < count; i++) {
        int32_t va = bin_raw(a + i * inc[0], s->bdt_a) + s->ob_sh_a;
        int32_t vb = bin_raw(b + i * inc[1], s->bdt_b) + s->ob_sh_b;
        float t;
        if (s->bin_mul) {
            float pr = (float)((va - s->bz_a) * (vb - s->bz_b)) * s->ob_ra;
            t = pr + s->ob_fixed;
        } else if (swap) {
            t = fmaf((float)vb, s->ob_rb, fmaf((float)va, s->ob_ra, s->ob_fixed_ba));
        } else {
            t = fmaf((float)va, s->ob_ra, fmaf((float)vb, s->ob_rb, s->ob_fixed));
        }
        int32_t r = bin_cvt(t);
        r = r < -32768 ? -32768 : r > 32767 ? 32767 : r;
        r = r < s->ob_lo ? s->ob_lo : r > s->ob_hi ? s->ob_hi : r;
        y[i] = (uint8_t)(r - s->ob_sh_y); /* int8 output: the byte of r - 128 */
    }
}

static oq_status run_bin(oq_kctx *k, const qstate *s, const oq_rt_tensor *a, const oq_rt_tensor *b,
                         oq_rt_tensor *y)
{
    if (b->dtype != s->bdt_b)
        return oq_k_error(k, OQ_ERR_INVALID, "fused group: operand of type %s", oq_dtype_name(b->dtype));
    const oq_rt_tensor *in[2] = {a, b};
    oq_k_bcast_apply(k, in, 2, y, s->bin_ort ? bin_ort_row : bin_row, s);
    return OQ_OK;
}

typedef struct lutjob {
    const qstate *s;
    const uint8_t *x;
    uint8_t *y;
} lutjob;

#ifdef QL_HAVE_X86
/* 64 bytes at a time: two 128-entry vpermi2b lookups, chosen by the index's top bit */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static int64_t
lut_vbmi(const uint8_t *t, const uint8_t *x, uint8_t *y, int64_t n)
{
    __m512i t0 = _mm512_loadu_si512(t), t1 = _mm512_loadu_si512(t + 64);
    __m512i t2 = _mm512_loadu_si512(t + 128), t3 = _mm512_loadu_si512(t + 192);
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512i v = _mm512_loadu_si512(x + i);
        __m512i lo = _mm512_permutex2var_epi8(t0, v, t1), hi = _mm512_permutex2var_epi8(t2, v, t3);
        _mm512_storeu_si512(y + i, _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), lo, hi));
    }
    return i;
}
#endif

static void run_lut(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const lutjob *j = arg;
    const uint8_t *t = j->s->lut;
    int64_t i = begin;
#ifdef QL_HAVE_X86
    if (j->s->lut_vbmi)
        i += lut_vbmi(t, j->x + begin, j->y + begin, end - begin);
#endif
    for (; i < end; i++)
        j->y[i] = t[j->x[i]];
}

/* the 2-D depthwise convolution of run_dw2 (its own scratch, no channels-last copy) */
static bool dw2_path(const qstate *s)
{
    return s->depthwise && s->ns == 2 && !s->float_out && s->kdim[0] * s->kdim[1] <= DW2_MAXTAPS;
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
    if (s->kind == OQ_QG_SOFTMAX)
        return run_softmax(k, s, x, &out[0]);
    if (s->kind == OQ_QG_BIN)
        return run_bin(k, s, x, in[1], &out[0]);
    if (s->kind == OQ_QG_LUT) {
        lutjob lj = {s, x->data, out[0].data};
        oq_k_parallel_for(k, oq_rt_tensor_numel(x), 65536, run_lut, &lj);
        return OQ_OK;
    }
    int threads = oq_k_threads(k);
    int64_t kr = s->dyn_b ? kpad(x->dims[x->rank - 1]) : s->Kp;
    if (s->kind == OQ_QG_CONV && !s->depthwise) /* a block of im2col rows (run_conv_q8: */
        kr = kr * QL_PBLOCK + Q8_SLACK / 2; /* Q8_PBLOCK rows of bytes and Q8_SLACK bytes) */
    if (s->kind != OQ_QG_CONV && s->q8)
        kr *= OQ_Q8_MR; /* run_rows_q8: OQ_Q8_MR rows of bytes, and int32 results */
    if (s->kind == OQ_QG_CONV && s->depthwise && kr < 2 * x->dims[1] + 2)
        kr = 2 * x->dims[1] + 2; /* int32 accumulators per channel */
    /* a convolution other than the 2-D depthwise path copies its image channels-last
     * (xt) into the same scratch, after the workers' rows: no allocation per run (a
     * fresh one of megabytes costs its page faults every run: 5 % of det at 640x640) */
    int64_t ipix = 1; /* a convolution's input pixels per image */
    for (size_t i = 0; s->kind == OQ_QG_CONV && i < s->ns; i++)
        ipix *= x->dims[2 + i];
    size_t rows_bytes = ((size_t)threads * (size_t)kr * sizeof(int16_t) + 63) & ~(size_t)63, xt_bytes = 0;
    if (s->kind == OQ_QG_CONV && !dw2_path(s))
        xt_bytes = (size_t)(ipix * x->dims[1]) + Q8_SLACK;
    int16_t *scratch = oq_k_scratch(k, rows_bytes + xt_bytes);
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
        if (dw2_path(s)) {
            dwjob d;
            memset(&d, 0, sizeof d);
            d.s = s;
            d.y = out[0].data;
            d.C = j.C;
            d.H = j.in[0];
            d.W = j.in[1];
            d.OH = j.out[0];
            d.OW = j.out[1];
            d.pt = j.pb[0];
            d.pl = j.pb[1];
            d.PW = (d.OW - 1) * s->stride[1] + (s->kdim[1] - 1) * s->dil[1] + 1;
            d.flip = s->x_s8 ? 0x80 : 0;
            d.avx2 = s->dot != dot_generic;
            d.avx512 = s->dot == dot_avx512; /* AVX-512 BW + VNNI, not forced off */
            int64_t plen = (d.PW + s->stride[1] - 1) / s->stride[1];
            d.PH = (d.OH - 1) * s->stride[0] + (s->kdim[0] - 1) * s->dil[0] + 1;
            d.per_worker = (size_t)(d.PH * DW2_ROWBYTES(d.PW, s->stride[1], plen) + 64);
            uint8_t *sc = oq_k_scratch(k, (size_t)threads * d.per_worker);
            if (!sc)
                return OQ_ERR_NOMEM;
            d.scratch = sc;
            int64_t work = (d.OH * d.OW * s->K) | 1;
            for (int64_t b = 0; b < x->dims[0]; b++) {
                d.x = (const uint8_t *)x->data + b * j.C * ipix;
                d.img = b;
                oq_k_parallel_for(k, d.C, (16384 + work - 1) / work, run_dw2, &d);
            }
            return OQ_OK;
        }
        uint8_t *xt = (uint8_t *)scratch + rows_bytes;
        memset(xt + ipix * j.C, 0, Q8_SLACK);
        j.xt = xt;
        j.wdw = s->wdw;
        j.avx2 = s->dot != dot_generic;
        int64_t work = (s->K * (s->depthwise ? 1 : s->N / s->group) * (s->depthwise ? 1 : s->group)) | 1;
        for (int64_t b = 0; b < x->dims[0]; b++) {
            to_nhwc(xt, (const uint8_t *)x->data + b * j.C * ipix, j.C, ipix, s->x_s8, j.avx2);
            j.img = b;
            oq_k_parallel_for(k, j.opix, (65536 + work - 1) / work,
                              s->depthwise ? run_depthwise : s->q8 ? run_conv_q8 : run_conv, &j);
        }
    } else if (!s->dyn_b) {
        j.M = oq_rt_tensor_numel(x) / s->K;
        j.K = s->K;
        j.Kp = s->Kp;
        j.N = s->N;
        j.w = s->w;
        j.wsum = s->wsum;
        int64_t work = (s->K * s->N) | 1;
        oq_k_parallel_for(k, j.M, (65536 + work - 1) / work, s->q8 ? run_rows_q8 : run_rows, &j);
    } else {
        return run_dyn(k, s, x, in[1], &out[0], &j);
    }
    return OQ_OK;
}

const oq_kernel oq_kernels_qlinear[] = {
    {OQ_QGROUP_DOMAIN, OQ_QGROUP_OP, 0, 0, 0, OQ_T(UINT8) | OQ_T(INT8), NULL, q_prepare, q_infer,
     q_run, qstate_free, 1},
};
OQ_KERNEL_TABLE_END(qlinear);
