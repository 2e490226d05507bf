/* Conv and ConvTranspose (1-3 spatial dims, groups, dilations, pads, auto_pad):
 * im2col + the blocked GEMM, a direct loop for depthwise convolutions, and
 * GEMM + col2im for the transposed convolution. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernel.h"

#define MAXS 3

typedef struct conv_geo {
    size_t ns;                      /* spatial dims */
    int64_t N, C, M, group;
    int64_t in[MAXS], k[MAXS], out[MAXS], stride[MAXS], dil[MAXS], pb[MAXS], pe[MAXS];
    int64_t outpad[MAXS];
} conv_geo;

static oq_status read_attr_list(oq_kctx *k, const char *name, size_t n, int64_t dflt, int64_t *v)
{
    const int64_t *a;
    int64_t c = oq_node_attr_ints(k->node, name, &a);
    for (size_t i = 0; i < n; i++)
        v[i] = dflt;
    if (c < 0)
        return OQ_OK;
    if ((size_t)c != n)
        return oq_k_error(k, OQ_ERR_INVALID, "%s has %lld entries, expected %zu", name,
                          (long long)c, n);
    memcpy(v, a, n * sizeof(int64_t));
    return OQ_OK;
}

/* Geometry of a convolution (transposed: ConvTranspose). */
static oq_status conv_geometry(oq_kctx *k, const oq_rt_tensor *x, const oq_rt_tensor *w,
                               bool transposed, conv_geo *g)
{
    memset(g, 0, sizeof *g);
    if (x->rank < 3 || x->rank > 2 + MAXS || w->rank != x->rank)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "input rank %zu, weight rank %zu (1-3 spatial "
                          "dims supported)", x->rank, w->rank);
    g->ns = x->rank - 2;
    g->N = x->dims[0];
    g->C = x->dims[1];
    g->group = oq_node_attr_int(k->node, "group", 1);
    if (g->group <= 0 || g->C % g->group)
        return oq_k_error(k, OQ_ERR_INVALID, "group %lld does not divide %lld channels",
                          (long long)g->group, (long long)g->C);
    if (transposed) {
        if (w->dims[0] != g->C)
            return oq_k_error(k, OQ_ERR_INVALID, "weight has %lld input channels, X has %lld",
                              (long long)w->dims[0], (long long)g->C);
        g->M = w->dims[1] * g->group;
    } else {
        g->M = w->dims[0];
        if (w->dims[1] * g->group != g->C || g->M % g->group)
            return oq_k_error(k, OQ_ERR_INVALID, "weight %lldx%lld does not match %lld channels "
                              "in %lld groups", (long long)w->dims[0], (long long)w->dims[1],
                              (long long)g->C, (long long)g->group);
    }
    int64_t ks[MAXS], pads[2 * MAXS];
    oq_status st;
    if ((st = read_attr_list(k, "kernel_shape", g->ns, 0, ks)) ||
        (st = read_attr_list(k, "strides", g->ns, 1, g->stride)) ||
        (st = read_attr_list(k, "dilations", g->ns, 1, g->dil)) ||
        (st = read_attr_list(k, "pads", 2 * g->ns, 0, pads)) ||
        (st = read_attr_list(k, "output_padding", g->ns, 0, g->outpad)))
        return st;
    const char *ap = oq_node_attr_string(k->node, "auto_pad", "NOTSET");
    const int64_t *oshape = NULL;
    int64_t n_oshape = transposed ? oq_node_attr_ints(k->node, "output_shape", &oshape) : -1;
    for (size_t i = 0; i < g->ns; i++) {
        g->in[i] = x->dims[2 + i];
        g->k[i] = w->dims[2 + i];
        if (ks[i] && ks[i] != g->k[i])
            return oq_k_error(k, OQ_ERR_INVALID, "kernel_shape differs from the weight");
        if (g->stride[i] <= 0 || g->dil[i] <= 0)
            return oq_k_error(k, OQ_ERR_INVALID, "strides and dilations must be positive");
        int64_t ke = (g->k[i] - 1) * g->dil[i] + 1;
        g->pb[i] = pads[i];
        g->pe[i] = pads[i + g->ns];
        if (!transposed) {
            if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
                int64_t o = (g->in[i] + g->stride[i] - 1) / g->stride[i];
                int64_t tot = (o - 1) * g->stride[i] + ke - g->in[i];
                if (tot < 0)
                    tot = 0;
                g->pb[i] = ap[5] == 'U' ? tot / 2 : tot - tot / 2;
                g->pe[i] = tot - g->pb[i];
            } else if (strcmp(ap, "VALID") == 0) {
                g->pb[i] = g->pe[i] = 0;
            }
            int64_t span = g->in[i] + g->pb[i] + g->pe[i] - ke;
            if (span < 0)
                return oq_k_error(k, OQ_ERR_INVALID, "kernel larger than the padded input");
            g->out[i] = span / g->stride[i] + 1;
        } else {
            if (n_oshape > 0) {
                int64_t want = oshape[n_oshape == (int64_t)g->ns ? i : i + 2];
                int64_t tot = g->stride[i] * (g->in[i] - 1) + g->outpad[i] + ke - want;
                if (tot < 0)
                    tot = 0;
                bool upper = strcmp(ap, "SAME_UPPER") == 0;
                g->pb[i] = upper ? tot / 2 : tot - tot / 2;
                g->pe[i] = tot - g->pb[i];
                g->out[i] = want;
            } else {
                if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
                    int64_t want = g->in[i] * g->stride[i];
                    int64_t tot = g->stride[i] * (g->in[i] - 1) + g->outpad[i] + ke - want;
                    if (tot < 0)
                        tot = 0;
                    g->pb[i] = ap[5] == 'U' ? tot / 2 : tot - tot / 2;
                    g->pe[i] = tot - g->pb[i];
                } else if (strcmp(ap, "VALID") == 0) {
                    g->pb[i] = g->pe[i] = 0;
                }
                g->out[i] = g->stride[i] * (g->in[i] - 1) + g->outpad[i] + ke - g->pb[i] - g->pe[i];
            }
            if (g->out[i] < 0)
                return oq_k_error(k, OQ_ERR_INVALID, "negative output size");
        }
    }
    return OQ_OK;
}

static oq_status infer_conv_common(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                                   oq_rt_tensor *out, size_t n_out, bool transposed)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, n_in))
        return oq_k_defer(k, out, n_out);
    conv_geo g;
    oq_status st = conv_geometry(k, in[0], in[1], transposed, &g);
    if (st)
        return st;
    if (n_in > 2 && in[2] && (in[2]->rank != 1 || in[2]->dims[0] != g.M))
        return oq_k_error(k, OQ_ERR_INVALID, "bias must be 1-D of size %lld", (long long)g.M);
    int64_t d[2 + MAXS] = {g.N, g.M};
    for (size_t i = 0; i < g.ns; i++)
        d[2 + i] = g.out[i];
    return oq_k_set_out(k, &out[0], in[0]->dtype, d, 2 + g.ns);
}

static oq_status infer_conv(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    return infer_conv_common(k, in, n_in, out, n_out, false);
}

static oq_status infer_convt(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                             oq_rt_tensor *out, size_t n_out)
{
    return infer_conv_common(k, in, n_in, out, n_out, true);
}

/* expand geometry to 3 spatial dims (leading 1s) */
static void geo3(const conv_geo *g, int64_t *in, int64_t *kk, int64_t *out, int64_t *st,
                 int64_t *dl, int64_t *pb)
{
    size_t off = MAXS - g->ns;
    for (size_t i = 0; i < MAXS; i++) {
        bool real = i >= off;
        in[i] = real ? g->in[i - off] : 1;
        kk[i] = real ? g->k[i - off] : 1;
        out[i] = real ? g->out[i - off] : 1;
        st[i] = real ? g->stride[i - off] : 1;
        dl[i] = real ? g->dil[i - off] : 1;
        pb[i] = real ? g->pb[i - off] : 0;
    }
}

/* im2col on the fly: one K x NR panel of the column matrix of one group of one image
 * (rows: (c, kd, kh, kw); columns: output positions), produced while the GEMM needs it,
 * so the whole column matrix is never stored. */
typedef struct im2col_ctx {
    const float *x;         /* one group of one image: Cg x in[] */
    int64_t Cg;
    int64_t in[3], k[3], out[3], st[3], dl[3], pb[3];
} im2col_ctx;

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define OQ_HAVE_IM2COL_AVX2 1
/* dst[q] = x[2q] for q < 16, reading only x[0 .. 30] (the last 8 with a masked load):
 * the even elements picked with shuffles (a gather is slow on AMD CPUs) */
__attribute__((target("avx2"))) static void gather16_s2(float *dst, const float *x)
{
    const __m256i perm = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    const __m256i m7 = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, -1, 0);
    __m256 e0 = _mm256_shuffle_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8), 0x88);
    __m256 e1 = _mm256_shuffle_ps(_mm256_loadu_ps(x + 16), _mm256_maskload_ps(x + 24, m7), 0x88);
    _mm256_storeu_ps(dst, _mm256_castsi256_ps(
                              _mm256_permutevar8x32_epi32(_mm256_castps_si256(e0), perm)));
    _mm256_storeu_ps(dst + 8, _mm256_castsi256_ps(
                                  _mm256_permutevar8x32_epi32(_mm256_castps_si256(e1), perm)));
}
#endif

/* The body is compiled twice: plain x86-64, and for AVX-512 machines with
 * target("avx512f"), where the 64-byte copies and clears of a panel row become one
 * register move each (the same values either way). */
#if defined(__GNUC__)
#define OQ_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define OQ_ALWAYS_INLINE inline
#endif
static OQ_ALWAYS_INLINE void im2col_pack_body(const void *ctx, int64_t n0, int64_t nv,
                                              float *dst, bool avx2)
{
    const im2col_ctx *j = ctx;
#ifndef OQ_HAVE_IM2COL_AVX2
    (void)avx2;
#endif
    const int64_t ID = j->in[0], IH = j->in[1], IW = j->in[2];
    const int64_t isz = ID * IH * IW;
    int64_t bd[OQ_SGEMM_NR], bh[OQ_SGEMM_NR], bw[OQ_SGEMM_NR];
    int64_t ow = n0 % j->out[2], oh = (n0 / j->out[2]) % j->out[1], od = n0 / (j->out[2] * j->out[1]);
    for (int64_t q = 0; q < nv; q++) {
        bd[q] = od * j->st[0] - j->pb[0];
        bh[q] = oh * j->st[1] - j->pb[1];
        bw[q] = ow * j->st[2] - j->pb[2];
        if (++ow == j->out[2]) {
            ow = 0;
            if (++oh == j->out[1]) {
                oh = 0;
                od++;
            }
        }
    }
    /* one output row: a tap reads nv inputs sw apart in one input row */
    bool row = nv == OQ_SGEMM_NR && bd[0] == bd[nv - 1] && bh[0] == bh[nv - 1];
    /* otherwise: segments [seg[s], seg[s+1]) of columns in one output row each */
    int64_t seg[OQ_SGEMM_NR + 1], n_seg = 0;
    seg[0] = 0;
    for (int64_t q = 1; q <= nv; q++)
        if (q == nv || bd[q] != bd[q - 1] || bh[q] != bh[q - 1])
            seg[++n_seg] = q;
    const int64_t sw = j->st[2];
    for (int64_t c = 0; c < j->Cg; c++) {
        const float *xc = j->x + c * isz;
        for (int64_t kd = 0; kd < j->k[0]; kd++)
            for (int64_t kh = 0; kh < j->k[1]; kh++) {
                int64_t id0 = bd[0] + kd * j->dl[0], ih0 = bh[0] + kh * j->dl[1];
                for (int64_t kw = 0; kw < j->k[2]; kw++, dst += OQ_SGEMM_NR) {
                    int64_t kwo = kw * j->dl[2];
                    if (row) {
                        int64_t iw0 = bw[0] + kwo;
                        if (id0 < 0 || id0 >= ID || ih0 < 0 || ih0 >= IH) {
                            memset(dst, 0, OQ_SGEMM_NR * sizeof(float));
                            continue;
                        }
                        const float *xr = xc + (id0 * IH + ih0) * IW;
                        if (iw0 >= 0 && iw0 + (OQ_SGEMM_NR - 1) * sw < IW) {
                            if (sw == 1)
                                memcpy(dst, xr + iw0, OQ_SGEMM_NR * sizeof(float));
#ifdef OQ_HAVE_IM2COL_AVX2
                            else if (sw == 2 && avx2)
                                gather16_s2(dst, xr + iw0);
#endif
                            else
                                for (int64_t q = 0; q < OQ_SGEMM_NR; q++)
                                    dst[q] = xr[iw0 + q * sw];
                            continue;
                        }
                        /* iw = iw0 + q * sw is in [0, IW) for q in [lo, hi) */
                        int64_t lo = iw0 >= 0 ? 0 : (-iw0 + sw - 1) / sw;
                        int64_t hi = IW - 1 - iw0 < 0 ? 0 : (IW - 1 - iw0) / sw + 1;
                        if (hi > OQ_SGEMM_NR)
                            hi = OQ_SGEMM_NR;
                        if (lo > hi)
                            lo = hi;
                        for (int64_t q = 0; q < lo; q++)
                            dst[q] = 0.0f;
                        for (int64_t q = lo; q < hi; q++)
                            dst[q] = xr[iw0 + q * sw];
                        for (int64_t q = hi; q < OQ_SGEMM_NR; q++)
                            dst[q] = 0.0f;
                        continue;
                    }
                    /* the panel spans several output rows: one segment per row, each
                       read like a row above (the same values as element by element) */
                    for (int64_t sg = 0; sg < n_seg; sg++) {
                        int64_t q0 = seg[sg], q1 = seg[sg + 1];
                        int64_t id = bd[q0] + kd * j->dl[0], ih = bh[q0] + kh * j->dl[1];
                        if (id < 0 || id >= ID || ih < 0 || ih >= IH) {
                            memset(dst + q0, 0, (size_t)(q1 - q0) * sizeof(float));
                            continue;
                        }
                        const float *xr = xc + (id * IH + ih) * IW;
                        /* iw = iw0 + (q - q0) * sw is in [0, IW) for q in [lo, hi) */
                        int64_t iw0 = bw[q0] + kwo;
                        int64_t lo = iw0 >= 0 ? q0 : q0 + (-iw0 + sw - 1) / sw;
                        int64_t hi = IW - 1 - iw0 < 0 ? q0 : q0 + (IW - 1 - iw0) / sw + 1;
                        if (hi > q1)
                            hi = q1;
                        if (lo > hi)
                            lo = hi;
                        for (int64_t q = q0; q < lo; q++)
                            dst[q] = 0.0f;
                        if (sw == 1)
                            memcpy(dst + lo, xr + iw0 + (lo - q0), (size_t)(hi - lo) * sizeof(float));
                        else
                            for (int64_t q = lo; q < hi; q++)
                                dst[q] = xr[iw0 + (q - q0) * sw];
                        for (int64_t q = hi; q < q1; q++)
                            dst[q] = 0.0f;
                    }
                    for (int64_t q = nv; q < OQ_SGEMM_NR; q++)
                        dst[q] = 0.0f;
                }
            }
    }
}

static void im2col_pack_plain(const void *ctx, int64_t n0, int64_t nv, float *dst)
{
    im2col_pack_body(ctx, n0, nv, dst, oq_k_cpu_avx2());
}

#ifdef OQ_HAVE_IM2COL_AVX2
__attribute__((target("avx512f"))) static void im2col_pack_avx512(const void *ctx, int64_t n0,
                                                                  int64_t nv, float *dst)
{
    im2col_pack_body(ctx, n0, nv, dst, true);
}
#endif

/* the im2col pack function for this CPU */
static void (*im2col_pack_fn(void))(const void *, int64_t, int64_t, float *)
{
#ifdef OQ_HAVE_IM2COL_AVX2
    const char *env = getenv("ONNXQ_SGEMM_ISA");
    if (oq_k_cpu_avx2() && (!env || strcmp(env, "avx2") != 0) &&
        __builtin_cpu_supports("avx512f"))
        return im2col_pack_avx512;
#endif
    return im2col_pack_plain;
}

typedef struct dw_job {
    const float *x, *w, *bias;
    float *y;
    int64_t C, in[3], k[3], out[3], st[3], dl[3], pb[3];
    const oq_k_post *post;   /* applied to each channel once computed (may be NULL) */
    bool avx512;             /* 2-D rows with AVX-512F (the same sums) */
    int ort;                 /* DW_REF (onnxq's sums), DW_NCHWC (onnxruntime's NCHWc
                                kernel, kernel.h OQ_K_ORT_DW_NCHWC: set only on CPUs with
                                AVX2 and FMA, oq_k_ort_nchwc_block) or DW_M1 (its Conv
                                kernel's SGEMM with one row, OQ_K_ORT_DW_M1) */
    bool has_bias;           /* DW_M1: no bias, no final add (bias is 0 then) */
    int64_t stride_k;        /* DW_M1: MLAS' slice of the reduction (dw_m1_stride_k) */
} dw_job;

enum { DW_REF = 0, DW_NCHWC = 1, DW_M1 = 2, DW_M1T = 3 };

/* onnxruntime's float Conv kernel (Conv<float>, MLAS convolve.cpp) for a depthwise
 * convolution it does not rewrite to NCHWc: per channel, im2col rows in (kd, kh, kw) order
 * with zeros in the padding, then MlasSgemmOperation with M = 1, which x86 MLAS runs with
 * MlasSgemmKernelM1Avx (SgemmKernelM1Avx.S, on every CPU with AVX), then
 * MlasActivation's bias add. MlasConvOperation hands the GEMM the reduction in slices of
 * StrideK; the kernel takes each slice four products at a time, t = ((p0 + p1) + p2) + p3
 * (each product rounded, no fused multiply-add), c = t + c (c = t + 0 in the first group
 * of the first slice), then two and one left over the same way; y = c + bias when there
 * is a bias. */
static int64_t dw_m1_stride_k(int64_t osz, int64_t K)
{
    int64_t sn = 128, sk = 128; /* MLAS_SGEMM_STRIDEN, MLAS_SGEMM_STRIDEK */
    if (osz >= K) {
        while (sk / 2 >= K) {
            sn *= 2;
            sk /= 2;
        }
    } else {
        while (sn > 16 && sn / 2 >= osz) {
            sk *= 2;
            sn /= 2;
        }
    }
    return sk;
}

/* MlasConvPrepare's one depthwise case that does not reach MlasSgemmKernelM1Avx: a 1-D or
 * 2-D convolution with unit strides and dilations, no padding, more than one tap and a
 * kernel as wide as the input runs the GEMM on the input in place with B transposed
 * (MlasSgemmKernelM1TransposeBAvx, DW_M1T: dw_m1t_generic) */
static bool dw_m1_transposed(const conv_geo *g)
{
    if (g->ns < 1 || g->ns > 2)
        return false;
    int64_t taps = 1;
    for (size_t i = 0; i < g->ns; i++) {
        if (g->stride[i] != 1 || g->dil[i] != 1 || g->pb[i] != 0 || g->pe[i] != 0)
            return false;
        taps *= g->k[i];
    }
    return taps > 1 && g->k[g->ns - 1] == g->in[g->ns - 1];
}

/* tap k (in (kd, kh, kw) order) of output (od, oh, ow) times its weight: w * 0 in the
 * padding, as im2col's zero gives */
static inline float dw_m1_tap(const dw_job *j, const float *x, const float *w, int64_t od,
                              int64_t oh, int64_t ow, int64_t k)
{
    int64_t kw = k % j->k[2], kh = k / j->k[2] % j->k[1], kd = k / (j->k[2] * j->k[1]);
    int64_t id = od * j->st[0] - j->pb[0] + kd * j->dl[0];
    int64_t ih = oh * j->st[1] - j->pb[1] + kh * j->dl[1];
    int64_t iw = ow * j->st[2] - j->pb[2] + kw * j->dl[2];
    float xv = id < 0 || id >= j->in[0] || ih < 0 || ih >= j->in[1] || iw < 0 || iw >= j->in[2]
                   ? 0.0f
                   : x[(id * j->in[1] + ih) * j->in[2] + iw];
    return w[k] * xv;
}

/* DW_M1T: MlasSgemmKernelM1TransposeBAvx on one channel. Output n (one column: the
 * kernel is as wide as the input) is the dot product of the K = KH * IW weights with the
 * K contiguous inputs from row n. Eight lanes sum the products of k = l, l + 8, ... in
 * order from +0 (each product rounded, no fused multiply-add); the lanes are then added
 * in a tree that depends on where n falls in the kernel's blocks of 4, 2 and 1 output
 * columns, then bias (when there is one). */
static void dw_m1t_generic(const dw_job *j, const float *x, const float *w, float bias,
                           float *y)
{
    const int64_t K = j->k[1] * j->k[2], N = j->out[1] * j->out[2], n4 = N / 4 * 4;
    for (int64_t n = 0; n < N; n++) {
        const float *xr = x + n * j->in[2];
        float a[8] = {0};
        for (int64_t k = 0; k < K; k++)
            a[k % 8] = a[k % 8] + w[k] * xr[k];
        float c;
        if (n < n4) /* 4 columns: lanes 0..3 and 4..7 by vaddps of the transposed rows */
            c = ((a[0] + a[1]) + a[2]) + a[3] + (((a[4] + a[5]) + a[6]) + a[7]);
        else if ((N & 2) && n < n4 + 2) /* 2 columns: unpck, add halves, movhlps */
            c = ((a[2] + a[0]) + (a[6] + a[4])) + ((a[3] + a[1]) + (a[7] + a[5]));
        else /* 1 column: two vhaddps, then the halves */
            c = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
        c = c + 0.0f; /* beta 0: the masked C */
        y[n] = j->has_bias ? c + bias : c;
    }
}

static void dw_m1_generic(const dw_job *j, const float *x, const float *w, float bias, float *y)
{
    const int64_t K = j->k[0] * j->k[1] * j->k[2], sk = j->stride_k;
    for (int64_t od = 0; od < j->out[0]; od++)
        for (int64_t oh = 0; oh < j->out[1]; oh++)
            for (int64_t ow = 0; ow < j->out[2]; ow++) {
                float c = 0.0f;
                for (int64_t s = 0; s < K; s += sk) {
                    int64_t n = K - s < sk ? K - s : sk, k = s;
                    bool first = s == 0;
                    for (; n >= 4; n -= 4, k += 4) {
                        float t = dw_m1_tap(j, x, w, od, oh, ow, k) +
                                  dw_m1_tap(j, x, w, od, oh, ow, k + 1);
                        t = t + dw_m1_tap(j, x, w, od, oh, ow, k + 2);
                        t = t + dw_m1_tap(j, x, w, od, oh, ow, k + 3);
                        c = t + (first ? 0.0f : c);
                        first = false;
                    }
                    if (n & 2) {
                        c = (dw_m1_tap(j, x, w, od, oh, ow, k) +
                             dw_m1_tap(j, x, w, od, oh, ow, k + 1)) +
                            (first ? 0.0f : c);
                        first = false;
                        k += 2;
                    }
                    if (n & 1)
                        c = dw_m1_tap(j, x, w, od, oh, ow, k) + (first ? 0.0f : c);
                }
                y[(od * j->out[1] + oh) * j->out[2] + ow] = j->has_bias ? c + bias : c;
            }
}

/* depthwise: one input and one output channel per group; item = (n, c). Each output
 * starts at the bias and adds the taps in (kd, kh, kw) order; for every tap the valid
 * output columns are computed once, so the inner loop has no bounds checks. */
/* y[i] += w * x[i * sw] for i < n: multiply, then add, in every path */
static void dw_row_generic(float *y, const float *x, float w, int64_t n, int64_t sw)
{
    if (sw == 1)
        for (int64_t i = 0; i < n; i++)
            y[i] += w * x[i];
    else
        for (int64_t i = 0; i < n; i++)
            y[i] += w * x[i * sw];
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define OQ_HAVE_DW_AVX2 1
__attribute__((target("avx2"))) static void dw_row_avx2(float *y, const float *x, float w,
                                                        int64_t n, int64_t sw)
{
    __m256 wv = _mm256_set1_ps(w);
    int64_t i = 0;
    if (sw == 1) {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i),
                                                  _mm256_mul_ps(wv, _mm256_loadu_ps(x + i))));
    } else if (sw == 2) {
        const __m256i perm = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
        /* x[2i .. 2i+15] holds 8 wanted values; 2i + 16 <= 2n - 1 + 1 keeps the loads in
         * the row (the last wanted element is x[2(n-1)], so stop one vector early) */
        for (; i + 9 <= n; i += 8) {
            __m256 lo = _mm256_loadu_ps(x + 2 * i), hi = _mm256_loadu_ps(x + 2 * i + 8);
            __m256 ev = _mm256_shuffle_ps(lo, hi, 0x88); /* a0 a2 b0 b2 | a4 a6 b4 b6 */
            ev = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(_mm256_castps_si256(ev), perm));
            _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(wv, ev)));
        }
    }
    for (; i < n; i++)
        y[i] += w * x[i * sw];
}

/* Copy an IH x IW plane into a zero-padded PH x PW one, the input starting at row ph,
 * column pw (PW >= pw + IW). */
static void pad_plane(const float *x, int64_t IH, int64_t IW, int64_t ph, int64_t pw, int64_t PH,
                      int64_t PW, float *dst)
{
    for (int64_t r = 0; r < PH; r++, dst += PW) {
        int64_t ih = r - ph;
        if (ih < 0 || ih >= IH) {
            memset(dst, 0, (size_t)PW * sizeof(float));
            continue;
        }
        memset(dst, 0, (size_t)pw * sizeof(float));
        memcpy(dst + pw, x + ih * IW, (size_t)IW * sizeof(float));
        memset(dst + pw + IW, 0, (size_t)(PW - pw - IW) * sizeof(float));
    }
}

/* The input rows of pad_plane alone, for a plane whose padding is zero already (the
 * depthwise rows only read it: one zeroing serves every channel of a job) */
static void pad_plane_rows(const float *x, int64_t IH, int64_t IW, int64_t ph, int64_t pw,
                           int64_t PH, int64_t PW, float *dst)
{
    for (int64_t ih = ph < 0 ? -ph : 0; ih < IH && ih + ph < PH; ih++)
        memcpy(dst + (ih + ph) * PW + pw, x + ih * IW, (size_t)IW * sizeof(float));
}

/* One 2-D depthwise channel with AVX2: the channel is first copied into a zero-padded
 * plane (pad), so every output needs no bounds checks and 8 output columns are
 * computed at once with all taps in registers: acc = bias, then acc + w * x for every
 * tap in (kh, kw) order. Taps falling in the padding add w * 0, so against the generic
 * path (which skips them) only the sign of a zero result can differ; the thread count
 * does not matter either way. Unit or stride 2 along the row; undilated rows two output
 * rows and up to 32 columns at a time (dw_blk_avx2). pad must hold dw2d_pad_size()
 * floats. */
static int64_t dw2d_pad_w(const dw_job *j)
{
    int64_t owr = (j->out[2] + 7) / 8 * 8;
    int64_t need = (owr - 1) * j->st[2] + (j->k[2] - 1) * j->dl[2] + 16 + 1;
    int64_t base = j->pb[2] + j->in[2];
    return need > base ? need : base;
}

static int64_t dw2d_pad_size(const dw_job *j)
{
    return ((j->out[1] - 1) * j->st[1] + (j->k[1] - 1) * j->dl[1] + 1) * dw2d_pad_w(j);
}

/* 8 row values x[0], x[s], ..., x[7 s] for s = 1 or 2 (s = 2 reads x[0 .. 15]) */
__attribute__((target("avx2"))) static inline __m256 dw_load8(const float *x, int64_t s)
{
    if (s == 1)
        return _mm256_loadu_ps(x);
    const __m256i perm = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    __m256 ev = _mm256_shuffle_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8), 0x88);
    return _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(_mm256_castps_si256(ev), perm));
}

/* the first min(n, 8) lanes of v to y */
__attribute__((target("avx2"))) static inline void dw_store8(float *y, __m256 v, int64_t n)
{
    float tail[8];
    if (n >= 8) {
        _mm256_storeu_ps(y, v);
    } else {
        _mm256_storeu_ps(tail, v);
        memcpy(y, tail, (size_t)n * sizeof(float));
    }
}

/* one output row of dw2d_avx2, any kernel width, stride 1 or 2 along the row */
__attribute__((target("avx2"))) static void dw2d_row_any(float *yr, const float *prow,
                                                         const float *w, float bias,
                                                         int64_t OW, int64_t KH, int64_t KW,
                                                         int64_t rstep, int64_t sw,
                                                         int64_t dw)
{
    for (int64_t ow = 0; ow < OW; ow += 8) {
        __m256 acc = _mm256_set1_ps(bias);
        for (int64_t kh = 0; kh < KH; kh++) {
            const float *xr = prow + kh * rstep + ow * sw, *wr = w + kh * KW;
            for (int64_t kw = 0; kw < KW; kw++)
                acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(wr[kw]),
                                                       dw_load8(xr + kw * dw, sw)));
        }
        dw_store8(yr + ow, acc, OW - ow);
    }
}

/* AVX-512F, unit stride and dilation, kernel width 3 or 5: 16 columns per register, the
 * same acc + w * x per tap in the same order as dw2d_row_any (no fused multiply-add);
 * the last columns with masked loads and a masked store, so nothing past the row is
 * touched */
__attribute__((target("avx512f"))) static void dw2d_row_k512(float *yr, const float *prow,
                                                             const float *w, float bias,
                                                             int64_t OW, int64_t KH,
                                                             int64_t rstep, const int KW)
{
    int64_t ow = 0;
    for (; ow + 32 <= OW; ow += 32) {
        __m512 a0 = _mm512_set1_ps(bias), a1 = a0;
        for (int64_t kh = 0; kh < KH; kh++) {
            const float *xr = prow + kh * rstep + ow, *wr = w + kh * KW;
            for (int kw = 0; kw < KW; kw++) {
                __m512 wv = _mm512_set1_ps(wr[kw]);
                a0 = _mm512_add_ps(a0, _mm512_mul_ps(wv, _mm512_loadu_ps(xr + kw)));
                a1 = _mm512_add_ps(a1, _mm512_mul_ps(wv, _mm512_loadu_ps(xr + kw + 16)));
            }
        }
        _mm512_storeu_ps(yr + ow, a0);
        _mm512_storeu_ps(yr + ow + 16, a1);
    }
    for (; ow < OW; ow += 16) {
        __mmask16 m = OW - ow >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (OW - ow)) - 1);
        __m512 acc = _mm512_set1_ps(bias);
        for (int64_t kh = 0; kh < KH; kh++) {
            const float *xr = prow + kh * rstep + ow, *wr = w + kh * KW;
            for (int kw = 0; kw < KW; kw++)
                acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps(wr[kw]),
                                                       _mm512_maskz_loadu_ps(m, xr + kw)));
        }
        _mm512_mask_storeu_ps(yr + ow, m, acc);
    }
}

#endif

/* onnxruntime's NCHWc depthwise arithmetic (MLAS MlasConvDepthwiseFloatKernel*, the same
 * per output for every block size): acc = +0, acc = fma(w, x, acc) for each tap inside
 * the input in (kd, kh, kw) order, then acc + bias. The generic path skips the taps in
 * the padding as MLAS does; the vector rows below read a zero-padded plane instead.
 * That gives the same bits: acc starts at +0 and never becomes -0 (an exact zero sum is
 * +0 unless both addends are -0), so fma(w, 0, acc) = acc for every finite w. */
static void dw_ort_generic(const dw_job *j, const float *x, const float *w, float bias,
                           float *y)
{
    for (int64_t od = 0; od < j->out[0]; od++)
        for (int64_t oh = 0; oh < j->out[1]; oh++)
            for (int64_t ow = 0; ow < j->out[2]; ow++) {
                float acc = 0.0f;
                for (int64_t kd = 0; kd < j->k[0]; kd++) {
                    int64_t id = od * j->st[0] - j->pb[0] + kd * j->dl[0];
                    if (id < 0 || id >= j->in[0])
                        continue;
                    for (int64_t kh = 0; kh < j->k[1]; kh++) {
                        int64_t ih = oh * j->st[1] - j->pb[1] + kh * j->dl[1];
                        if (ih < 0 || ih >= j->in[1])
                            continue;
                        for (int64_t kw = 0; kw < j->k[2]; kw++) {
                            int64_t iw = ow * j->st[2] - j->pb[2] + kw * j->dl[2];
                            if (iw < 0 || iw >= j->in[2])
                                continue;
                            acc = fmaf(w[(kd * j->k[1] + kh) * j->k[2] + kw],
                                       x[(id * j->in[1] + ih) * j->in[2] + iw], acc);
                        }
                    }
                }
                y[(od * j->out[1] + oh) * j->out[2] + ow] = acc + bias;
            }
}

#ifdef OQ_HAVE_DW_AVX2
/* one output row from the padded plane, 8 columns at a time, unit or stride 2 */
__attribute__((target("avx2,fma"))) static void dw_ort_row_avx2(float *yr, const float *prow,
                                                                const float *w, float bias,
                                                                int64_t OW, int64_t KH,
                                                                int64_t KW, int64_t rstep,
                                                                int64_t sw, int64_t dw)
{
    for (int64_t ow = 0; ow < OW; ow += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t kh = 0; kh < KH; kh++) {
            const float *xr = prow + kh * rstep + ow * sw, *wr = w + kh * KW;
            for (int64_t kw = 0; kw < KW; kw++)
                acc = _mm256_fmadd_ps(_mm256_set1_ps(wr[kw]), dw_load8(xr + kw * dw, sw), acc);
        }
        dw_store8(yr + ow, _mm256_add_ps(acc, _mm256_set1_ps(bias)), OW - ow);
    }
}

/* the same with AVX-512F for unit stride and dilation: 32 columns in two sums, the
 * last ones with masked loads and store */
__attribute__((target("avx512f"))) static void dw_ort_row_512(float *yr, const float *prow,
                                                              const float *w, float bias,
                                                              int64_t OW, int64_t KH,
                                                              int64_t KW, int64_t rstep)
{
    const __m512 bv = _mm512_set1_ps(bias);
    int64_t ow = 0;
    for (; ow + 32 <= OW; ow += 32) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0;
        for (int64_t kh = 0; kh < KH; kh++) {
            const float *xr = prow + kh * rstep + ow, *wr = w + kh * KW;
            for (int64_t kw = 0; kw < KW; kw++) {
                __m512 wv = _mm512_set1_ps(wr[kw]);
                a0 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xr + kw), a0);
                a1 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xr + kw + 16), a1);
            }
        }
        _mm512_storeu_ps(yr + ow, _mm512_add_ps(a0, bv));
        _mm512_storeu_ps(yr + ow + 16, _mm512_add_ps(a1, bv));
    }
    for (; ow < OW; ow += 16) {
        __mmask16 m = OW - ow >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (OW - ow)) - 1);
        __m512 acc = _mm512_setzero_ps();
        for (int64_t kh = 0; kh < KH; kh++) {
            const float *xr = prow + kh * rstep + ow, *wr = w + kh * KW;
            for (int64_t kw = 0; kw < KW; kw++)
                acc = _mm512_fmadd_ps(_mm512_set1_ps(wr[kw]), _mm512_maskz_loadu_ps(m, xr + kw),
                                      acc);
        }
        _mm512_mask_storeu_ps(yr + ow, m, _mm512_add_ps(acc, bv));
    }
}

/* DW_M1 (dw_m1_generic) on one output row from the padded plane, 8 columns at a time,
 * unit or stride 2; off[k] is tap k's offset in the plane from the output column's
 * first tap (zeros in the padding, as im2col) */
#define DW_M1_MAX_TAPS 64
__attribute__((target("avx2"))) static void dw_m1_row_avx2(float *yr, const float *prow,
                                                           const float *w, const int64_t *off,
                                                           int64_t K, int64_t sk, float bias,
                                                           bool has_bias, int64_t OW,
                                                           int64_t sw)
{
#define P8(k) _mm256_mul_ps(_mm256_set1_ps(w[k]), dw_load8(xr + off[k], sw))
    for (int64_t ow = 0; ow < OW; ow += 8) {
        const float *xr = prow + ow * sw;
        __m256 c = _mm256_setzero_ps();
        for (int64_t s = 0; s < K; s += sk) {
            int64_t n = K - s < sk ? K - s : sk, k = s;
            bool first = s == 0;
            for (; n >= 4; n -= 4, k += 4) {
                __m256 t = _mm256_add_ps(P8(k), P8(k + 1));
                t = _mm256_add_ps(t, P8(k + 2));
                t = _mm256_add_ps(t, P8(k + 3));
                c = _mm256_add_ps(t, first ? _mm256_setzero_ps() : c);
                first = false;
            }
            if (n & 2) {
                c = _mm256_add_ps(_mm256_add_ps(P8(k), P8(k + 1)),
                                  first ? _mm256_setzero_ps() : c);
                first = false;
                k += 2;
            }
            if (n & 1)
                c = _mm256_add_ps(P8(k), first ? _mm256_setzero_ps() : c);
        }
        if (has_bias)
            c = _mm256_add_ps(c, _mm256_set1_ps(bias));
        dw_store8(yr + ow, c, OW - ow);
    }
#undef P8
}

/* the same with AVX-512F for unit stride, 16 columns at a time, the last ones with
 * masked loads and store */
__attribute__((target("avx512f"))) static void dw_m1_row_512(float *yr, const float *prow,
                                                             const float *w, const int64_t *off,
                                                             int64_t K, int64_t sk, float bias,
                                                             bool has_bias, int64_t OW)
{
#define P16(k) _mm512_mul_ps(_mm512_set1_ps(w[k]), _mm512_maskz_loadu_ps(m, xr + off[k]))
    for (int64_t ow = 0; ow < OW; ow += 16) {
        __mmask16 m = OW - ow >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (OW - ow)) - 1);
        const float *xr = prow + ow;
        __m512 c = _mm512_setzero_ps();
        for (int64_t s = 0; s < K; s += sk) {
            int64_t n = K - s < sk ? K - s : sk, k = s;
            bool first = s == 0;
            for (; n >= 4; n -= 4, k += 4) {
                __m512 t = _mm512_add_ps(P16(k), P16(k + 1));
                t = _mm512_add_ps(t, P16(k + 2));
                t = _mm512_add_ps(t, P16(k + 3));
                c = _mm512_add_ps(t, first ? _mm512_setzero_ps() : c);
                first = false;
            }
            if (n & 2) {
                c = _mm512_add_ps(_mm512_add_ps(P16(k), P16(k + 1)),
                                  first ? _mm512_setzero_ps() : c);
                first = false;
                k += 2;
            }
            if (n & 1)
                c = _mm512_add_ps(P16(k), first ? _mm512_setzero_ps() : c);
        }
        if (has_bias)
            c = _mm512_add_ps(c, _mm512_set1_ps(bias));
        _mm512_mask_storeu_ps(yr + ow, m, c);
    }
#undef P16
}

/* Unit dilation, column stride SW = 1 or 2, both arithmetics (ort: onnxruntime's, as
 * dw_ort_row_avx2; else onnxq's, as dw2d_row_any): R output rows (1 or 2, rows ostep
 * apart in the padded plane) times NV vectors of 8 columns at once, so that up to 8
 * independent sums hide the add or fused multiply-add latency. Every output is the
 * same chain of operations in the same tap order as in the one-row kernels; only the
 * interleaving differs. The last vector stores its first nlast columns. */
#define DW_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline
DW_INLINE void dw_blk_avx2(float *y, int64_t OW, const float *prow, int64_t ostep,
                           const float *w, float bias, int64_t KH, int64_t rstep,
                           const int KW, const int SW, const int R, const int NV,
                           int64_t nlast, const bool ort)
{
    __m256 acc[2][4];
    const __m256 bv = _mm256_set1_ps(bias);
#pragma GCC unroll 2
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            acc[r][v] = ort ? _mm256_setzero_ps() : bv;
    for (int64_t kh = 0; kh < KH; kh++) {
        const float *wr = w + kh * KW;
#pragma GCC unroll 5
        for (int kw = 0; kw < KW; kw++) {
            __m256 wv = _mm256_set1_ps(wr[kw]);
#pragma GCC unroll 2
            for (int r = 0; r < R; r++) {
                const float *xr = prow + r * ostep + kh * rstep + kw;
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) {
                    __m256 xv = SW == 1 ? _mm256_loadu_ps(xr + 8 * v) : dw_load8(xr + 16 * v, 2);
                    acc[r][v] = ort ? _mm256_fmadd_ps(wv, xv, acc[r][v])
                                    : _mm256_add_ps(acc[r][v], _mm256_mul_ps(wv, xv));
                }
            }
        }
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            __m256 o = ort ? _mm256_add_ps(acc[r][v], bv) : acc[r][v];
            if (v + 1 < NV || nlast == 8)
                _mm256_storeu_ps(y + r * OW + 8 * v, o);
            else
                dw_store8(y + r * OW + 8 * v, o, nlast);
        }
}

/* R rows of OW outputs: 32 columns at a time, then the rest in one block */
DW_INLINE void dw_rows_avx2(float *y, int64_t OW, const float *prow, int64_t ostep,
                            const float *w, float bias, int64_t KH, int64_t rstep,
                            const int KW, const int SW, const int R, const bool ort)
{
    int64_t ow = 0;
    for (; ow + 32 <= OW; ow += 32)
        dw_blk_avx2(y + ow, OW, prow + ow * SW, ostep, w, bias, KH, rstep, KW, SW, R, 4, 8,
                    ort);
    int64_t rem = OW - ow, nv = (rem + 7) / 8, nlast = rem - (nv - 1) * 8;
    const float *p = prow + ow * SW;
    if (nv == 1)
        dw_blk_avx2(y + ow, OW, p, ostep, w, bias, KH, rstep, KW, SW, R, 1, nlast, ort);
    else if (nv == 2)
        dw_blk_avx2(y + ow, OW, p, ostep, w, bias, KH, rstep, KW, SW, R, 2, nlast, ort);
    else if (nv == 3)
        dw_blk_avx2(y + ow, OW, p, ostep, w, bias, KH, rstep, KW, SW, R, 3, nlast, ort);
    else if (nv == 4)
        dw_blk_avx2(y + ow, OW, p, ostep, w, bias, KH, rstep, KW, SW, R, 4, nlast, ort);
}

/* one instance per kernel width (3, 5 unrolled; other widths not), column stride (1,
 * 2), row count and arithmetic */
#define DW_ROWS_FN(NAME, KWC, SWC, RC, ORT)                                                 \
    __attribute__((target("avx2,fma"))) static void NAME(                                 \
        float *y, int64_t OW, const float *prow, int64_t ostep, const float *w, float bias, \
        int64_t KH, int64_t rstep, int64_t KW)                                              \
    {                                                                                       \
        (void)KW;                                                                           \
        dw_rows_avx2(y, OW, prow, ostep, w, bias, KH, rstep, KWC, SWC, RC, ORT);            \
    }
#define DW_ROWS_FNS(PRE, SWC, ORT)                                                          \
    DW_ROWS_FN(PRE##_k3r1, 3, SWC, 1, ORT)                                                  \
    DW_ROWS_FN(PRE##_k3r2, 3, SWC, 2, ORT)                                                  \
    DW_ROWS_FN(PRE##_k5r1, 5, SWC, 1, ORT)                                                  \
    DW_ROWS_FN(PRE##_k5r2, 5, SWC, 2, ORT)                                                  \
    DW_ROWS_FN(PRE##_kar1, (int)KW, SWC, 1, ORT)                                            \
    DW_ROWS_FN(PRE##_kar2, (int)KW, SWC, 2, ORT)
DW_ROWS_FNS(dw_rows_s1, 1, false)
DW_ROWS_FNS(dw_rows_s2, 2, false)
DW_ROWS_FNS(dw_ort_rows_s1, 1, true)
DW_ROWS_FNS(dw_ort_rows_s2, 2, true)
#undef DW_ROWS_FNS
#undef DW_ROWS_FN

typedef void (*dw_rows_fn)(float *, int64_t, const float *, int64_t, const float *, float,
                           int64_t, int64_t, int64_t);

__attribute__((target("avx2"))) static void dw2d_avx2(const dw_job *j, const float *x,
                                                      const float *w, float bias, float *y,
                                                      float *pad)
{
    const int64_t IH = j->in[1], IW = j->in[2], OH = j->out[1], OW = j->out[2];
    const int64_t KH = j->k[1], KW = j->k[2], sh = j->st[1], sw = j->st[2];
    const int64_t dh = j->dl[1], dw = j->dl[2], ph = j->pb[1], pw = j->pb[2];
    const int64_t PW = dw2d_pad_w(j), PH = (OH - 1) * sh + (KH - 1) * dh + 1;
    pad_plane_rows(x, IH, IW, ph, pw, PH, PW, pad); /* dw_items zeroed the padding */
    if (j->ort == DW_M1) { /* onnxruntime's one-row SGEMM (dw_m1_generic) */
        int64_t off[DW_M1_MAX_TAPS], K = KH * KW; /* dw_items checks K */
        for (int64_t kh = 0, q = 0; kh < KH; kh++)
            for (int64_t kw = 0; kw < KW; kw++)
                off[q++] = kh * dh * PW + kw * dw;
        for (int64_t oh = 0; oh < OH; oh++) {
            float *yr = y + oh * OW;
            const float *prow = pad + oh * sh * PW;
            if (sw == 1 && j->avx512)
                dw_m1_row_512(yr, prow, w, off, K, j->stride_k, bias, j->has_bias, OW);
            else
                dw_m1_row_avx2(yr, prow, w, off, K, j->stride_k, bias, j->has_bias, OW, sw);
        }
        return;
    }
    if ((sw == 1 || sw == 2) && dw == 1 && !(sw == 1 && j->avx512)) {
        /* two output rows at a time (dw_blk_avx2) */
#define DW_ROW_SET(PRE)                                                                     \
    {{PRE##_k3r1, PRE##_k3r2}, {PRE##_k5r1, PRE##_k5r2}, {PRE##_kar1, PRE##_kar2}}
        static const dw_rows_fn fns[2][2][3][2] = {
            {DW_ROW_SET(dw_rows_s1), DW_ROW_SET(dw_rows_s2)},
            {DW_ROW_SET(dw_ort_rows_s1), DW_ROW_SET(dw_ort_rows_s2)}};
#undef DW_ROW_SET
        const dw_rows_fn *f = fns[j->ort ? 1 : 0][sw - 1][KW == 3 ? 0 : KW == 5 ? 1 : 2];
        for (int64_t oh = 0; oh < OH; oh += 2)
            f[OH - oh >= 2](y + oh * OW, OW, pad + oh * sh * PW, sh * PW, w, bias, KH, dh * PW,
                            KW);
        return;
    }
    for (int64_t oh = 0; oh < OH; oh++) {
        float *yr = y + oh * OW;
        const float *prow = pad + oh * sh * PW;
        if (j->ort && sw == 1 && dw == 1 && j->avx512) /* onnxruntime's sums (above) */
            dw_ort_row_512(yr, prow, w, bias, OW, KH, KW, dh * PW);
        else if (j->ort)
            dw_ort_row_avx2(yr, prow, w, bias, OW, KH, KW, dh * PW, sw, dw);
        /* the common kernel widths with the taps unrolled (same order, same sums) */
        else if (sw == 1 && dw == 1 && (KW == 3 || KW == 5) && j->avx512)
            dw2d_row_k512(yr, prow, w, bias, OW, KH, dh * PW, (int)KW);
        else
            dw2d_row_any(yr, prow, w, bias, OW, KH, KW, dh * PW, sw, dw);
    }
}
#endif

static void dw_items(void *arg, int64_t b, int64_t e, int wk)
{
    const dw_job *j = arg;
    (void)wk;
    void (*row)(float *, const float *, float, int64_t, int64_t) = dw_row_generic;
#ifdef OQ_HAVE_DW_AVX2
    if (oq_k_cpu_avx2())
        row = dw_row_avx2;
#endif
    int64_t isz = j->in[0] * j->in[1] * j->in[2], osz = j->out[0] * j->out[1] * j->out[2];
    int64_t ksz = j->k[0] * j->k[1] * j->k[2];
    const int64_t IW = j->in[2], OW = j->out[2], sw = j->st[2];
#ifdef OQ_HAVE_DW_AVX2
    bool two_d = j->k[0] == 1 && j->in[0] == 1 && j->out[0] == 1 && j->st[0] == 1 &&
                 j->pb[0] == 0 && (j->st[2] == 1 || j->st[2] == 2) && row == dw_row_avx2 &&
                 j->out[1] > 0 && j->out[2] > 0 &&
                 (j->ort != DW_M1 || j->k[1] * j->k[2] <= DW_M1_MAX_TAPS) && j->ort != DW_M1T;
    /* zeroed once: each channel's rows overwrite the same interior (pad_plane_rows) */
    float *pad = two_d ? calloc((size_t)dw2d_pad_size(j), sizeof(float)) : NULL;
    if (!pad)
        two_d = false; /* the generic path needs no buffer */
#endif
    for (int64_t it = b; it < e; it++) {
        int64_t c = it % j->C;
        const float *x = j->x + it * isz, *w = j->w + c * ksz;
        float *y = j->y + it * osz;
        float bias = j->bias ? j->bias[c] : 0.0f;
        if (j->ort == DW_M1T) {
            dw_m1t_generic(j, x, w, bias, y);
            if (j->post)
                j->post->fn(j->post->ctx, y, osz, c);
            continue;
        }
#ifdef OQ_HAVE_DW_AVX2
        if (two_d) { /* both arithmetics (dw2d_avx2 picks the rows) */
            dw2d_avx2(j, x, w, bias, y, pad);
            if (j->post)
                j->post->fn(j->post->ctx, y, osz, c);
            continue;
        }
#endif
        if (j->ort) {
            if (j->ort == DW_M1)
                dw_m1_generic(j, x, w, bias, y);
            else
                dw_ort_generic(j, x, w, bias, y);
            if (j->post)
                j->post->fn(j->post->ctx, y, osz, c);
            continue;
        }
        for (int64_t p = 0; p < osz; p++)
            y[p] = bias;
        for (int64_t kd = 0; kd < j->k[0]; kd++)
            for (int64_t kh = 0; kh < j->k[1]; kh++)
                for (int64_t kw = 0; kw < j->k[2]; kw++) {
                    float wv = w[(kd * j->k[1] + kh) * j->k[2] + kw];
                    int64_t off = kw * j->dl[2] - j->pb[2];
                    /* valid ow: 0 <= ow*sw + off < IW */
                    int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
                    int64_t hi = IW - off <= 0 ? 0 : (IW - off - 1) / sw + 1;
                    if (hi > OW)
                        hi = OW;
                    if (lo >= hi)
                        continue;
                    for (int64_t od = 0; od < j->out[0]; od++) {
                        int64_t id = od * j->st[0] - j->pb[0] + kd * j->dl[0];
                        if (id < 0 || id >= j->in[0])
                            continue;
                        for (int64_t oh = 0; oh < j->out[1]; oh++) {
                            int64_t ih = oh * j->st[1] - j->pb[1] + kh * j->dl[1];
                            if (ih < 0 || ih >= j->in[1])
                                continue;
                            const float *xr = x + (id * j->in[1] + ih) * IW + off;
                            float *yr = y + (od * j->out[1] + oh) * OW;
                            row(yr + lo, xr + lo * sw, wv, hi - lo, sw);
                        }
                    }
                }
        if (j->post)
            j->post->fn(j->post->ctx, y, osz, c);
    }
#ifdef OQ_HAVE_DW_AVX2
    free(pad);
#endif
}

/* A constant weight packed once for the GEMM (per group), so runs do not repack it */
typedef struct conv_packed {
    const void *src;        /* the weight data it was packed from */
    int64_t group, Mg, K;
    size_t per;             /* floats per group */
    bool ort_nchwc;         /* laid out for conv_ort_nchwc (ort_conv_pack), not for the GEMM */
    float data[];
} conv_packed;

#define ORT_CONV_MB 8 /* conv_ort_nchwc: output channels per item: the weights of one tap for
                         all of them are applied to one load of the input */
static void ort_conv_pack(const float *w, int64_t M, int64_t CKK, float *wp);

/* weights above this stay unpacked (packing per call): a second copy of a huge model's
 * weights is not worth a few per cent */
#define CONV_PACK_MAX_BYTES ((size_t)64 << 20)

static oq_status prepare_conv(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in)
{
    const oq_rt_tensor *w = n_in > 1 ? in[1] : NULL;
    if (!w || !w->data || w->dtype != OQ_DTYPE_FLOAT || w->rank < 3 || w->rank > 2 + MAXS)
        return OQ_OK;
    int64_t group = oq_node_attr_int(k->node, "group", 1);
    if (group <= 0 || w->dims[0] % group)
        return OQ_OK; /* run reports it */
    int64_t Mg = w->dims[0] / group, K = w->dims[1];
    for (size_t i = 2; i < w->rank; i++)
        K *= w->dims[i];
    if (Mg <= 0 || K <= 0 || (w->dims[1] == 1 && Mg == 1))
        return OQ_OK; /* empty, or depthwise (no GEMM) */
    bool ort = (k->ort & OQ_K_ORT_CONV_NCHWC) && group == 1 && w->rank == 4;
    size_t per = ort ? (size_t)((Mg + ORT_CONV_MB - 1) / ORT_CONV_MB * ORT_CONV_MB) * (size_t)K : oq_k_sgemm_packed_a_floats(Mg, K);
    if (per > CONV_PACK_MAX_BYTES / sizeof(float) / (size_t)group)
        return OQ_OK;
    conv_packed *cp = malloc(sizeof *cp + per * (size_t)group * sizeof(float));
    if (!cp)
        return OQ_OK; /* packing per call still works */
    cp->src = w->data;
    cp->group = group;
    cp->Mg = Mg;
    cp->K = K;
    cp->per = per;
    cp->ort_nchwc = ort;
    if (ort)
        ort_conv_pack(w->data, Mg, K, cp->data);
    else
        for (int64_t gr = 0; gr < group; gr++)
            oq_k_sgemm_pack_a(Mg, K, (const float *)w->data + gr * Mg * K, K, cp->data + gr * per);
    k->state = cp;
    return OQ_OK;
}

/* A stride-1 2-D convolution reads its taps in place from a zero-padded copy of the
 * input instead of building im2col panels: tap (c, kh, kw) of output row oh, columns
 * ow.. is the run of the padded input at row oh + kh*dh, columns ow + kw*dw.., so the
 * GEMM reads B row k at a fixed offset off[k] from where the output row starts. The
 * padded copy is one pass over the input; im2col wrote k*k floats per input float. The
 * sums are the same (the same products in the same k order, zeros where im2col put
 * zeros). */
typedef struct pad_job {
    const float *x;          /* Cg channels of IH x IW */
    float *xp;               /* Cg channels of IHp x IWp */
    int64_t IH, IW, IHp, IWp, ph, pw;
} pad_job;

static void pad_channels(void *arg, int64_t b, int64_t e, int w)
{
    const pad_job *j = arg;
    (void)w;
    for (int64_t c = b; c < e; c++)
        pad_plane(j->x + c * j->IH * j->IW, j->IH, j->IW, j->ph, j->pw, j->IHp, j->IWp,
                  j->xp + c * j->IHp * j->IWp);
}

/* Panels of a stride-1 2-D convolution from its input padded once (pad_channels): column
 * n (output row n / OW, column n % OW) of row k is xp[pos(n) + off[k]], pos(n) = (n / OW) *
 * IWp + n % OW, every tap in bounds. The same values as im2col_pack_body's, with one
 * 64-byte copy per row of a panel within an output row (three for one that crosses into the
 * next), where im2col checks the bounds of every tap: its packing took a quarter of a 3x3
 * convolution's time. xp has OQ_SGEMM_NR floats to spare at its end: a copy of the second
 * row may read past the last row, into values it does not use. */
typedef struct padpack_ctx {
    const float *xp;
    const int64_t *off;
    int64_t K, IWp, OW;
} padpack_ctx;

static OQ_ALWAYS_INLINE void padpack_body(const void *ctx, int64_t n0, int64_t nv, float *dst)
{
    enum { NR = OQ_SGEMM_NR };
    const padpack_ctx *j = ctx;
    const float *xp = j->xp;
    const int64_t *off = j->off;
    int64_t oh = n0 / j->OW, ow = n0 % j->OW, first = j->OW - ow, base = oh * j->IWp + ow;
    if (nv == NR && first >= NR) {
        for (int64_t k = 0; k < j->K; k++)
            memcpy(dst + k * NR, xp + base + off[k], NR * sizeof(float));
        return;
    }
    if (nv == NR && first + j->OW >= NR) { /* the first columns, then the rest from the next row */
        int64_t base2 = (oh + 1) * j->IWp;
        float tmp[2 * NR];
        for (int64_t k = 0; k < j->K; k++) {
            memcpy(tmp, xp + base + off[k], NR * sizeof(float));
            memcpy(tmp + first, xp + base2 + off[k], NR * sizeof(float));
            memcpy(dst + k * NR, tmp, NR * sizeof(float));
        }
        return;
    }
    int64_t pos[NR];
    for (int64_t q = 0; q < nv; q++) {
        pos[q] = oh * j->IWp + ow;
        if (++ow == j->OW) {
            ow = 0;
            oh++;
        }
    }
    for (int64_t k = 0; k < j->K; k++, dst += NR) {
        for (int64_t q = 0; q < nv; q++)
            dst[q] = xp[pos[q] + off[k]];
        for (int64_t q = nv; q < NR; q++)
            dst[q] = 0.0f;
    }
}

static void padpack_plain(const void *ctx, int64_t n0, int64_t nv, float *dst)
{
    padpack_body(ctx, n0, nv, dst);
}

#ifdef OQ_HAVE_IM2COL_AVX2
__attribute__((target("avx2"))) static void padpack_avx2(const void *ctx, int64_t n0, int64_t nv, float *dst)
{
    padpack_body(ctx, n0, nv, dst); /* the copies as register moves */
}
#endif

/* onnxruntime's NCHWc float convolution for a Conv with one group (kernel.h
 * OQ_K_ORT_CONV_NCHWC; measured against onnxruntime 1.30 on AVX2 with FMA, block 8): MLAS
 * computes each output as a sum of partial sums, each partial from +0 by fused
 * multiply-adds in a fixed order, out = partial for the first and out + partial for the
 * next, then out + bias. The partials, by MLAS algorithm (snchwc.cpp):
 *   - fewer input channels than a block (NCHW input: a stem on the image): one per input
 *     channel, over (kh, kw);
 *   - a 1x1 kernel without padding (pointwise): one per batch of 128 input channels, over
 *     the channels in order;
 *   - otherwise (NCHWc): one per block of 8 input channels, over (kh, kw, channel).
 * Taps outside the input add nothing. Each output row is computed at once, lanes of a
 * row independent (the same per-element order as a scalar loop). */
typedef struct ort_conv_job {
    const float *x, *w, *bias;
    float *y;
    int64_t C, M, IH, IW, KH, KW, OH, OW, sh, sw, dh, dw, ph, pw;
    int64_t per_part;    /* input channels per partial */
    bool chan_inner;     /* within a partial: (kh, kw, c) (NCHWc) rather than (c, kh, kw) */
    const float *wpack;  /* ort_conv_pack's layout, or NULL: one element at a time */
} ort_conv_job;

/* w [M, CKK] as blocks of ORT_CONV_MB output channels, each wp[(b CKK + r) 8 + mo] (the
 * last block's missing channels repeat its first: computed, not stored) */
static void ort_conv_pack(const float *w, int64_t M, int64_t CKK, float *wp)
{
    for (int64_t m0 = 0; m0 < M; m0 += ORT_CONV_MB)
        for (int64_t r = 0; r < CKK; r++)
            for (int mo = 0; mo < ORT_CONV_MB; mo++)
                *wp++ = w[(m0 + (m0 + mo < M ? mo : 0)) * CKK + r];
}
#define ORT_CONV_TW 8 /* output columns per tile (one vector) */

/* The reduction of partial [c0, c1) in its order, as (c, kh, kw) triples: calls body. */
#define ORT_CONV_FOR_TAPS(j, c0, c1, ...)                                                      \
    do {                                                                                        \
        if ((j)->chan_inner) {                                                                  \
            for (int64_t kh = 0; kh < (j)->KH; kh++)                                            \
                for (int64_t kw = 0; kw < (j)->KW; kw++)                                        \
                    for (int64_t c = (c0); c < (c1); c++) {                                     \
                        __VA_ARGS__;                                                            \
                    }                                                                           \
        } else {                                                                                \
            for (int64_t c = (c0); c < (c1); c++)                                               \
                for (int64_t kh = 0; kh < (j)->KH; kh++)                                        \
                    for (int64_t kw = 0; kw < (j)->KW; kw++) {                                  \
                        __VA_ARGS__;                                                            \
                    }                                                                           \
        }                                                                                       \
    } while (0)

/* One tile of output columns [ow0, ow1) of row oh for output channels [m0, m0 + nm), one
 * element at a time (edges, where some taps fall outside the input). */
#ifdef OQ_HAVE_DW_AVX2
__attribute__((target("fma"))) /* only on CPUs with FMA: oq_k_ort_nchwc_block */
#endif
static void ort_conv_tile_scalar(const ort_conv_job *j, const float *x, int64_t m0, int nm, int64_t oh,
                                 int64_t ow0, int64_t ow1, float *y)
{
    int64_t KK = j->KH * j->KW;
    for (int mo = 0; mo < nm; mo++) {
        const float *w = j->w + (m0 + mo) * j->C * KK;
        for (int64_t ow = ow0; ow < ow1; ow++) {
            float out = 0.0f;
            for (int64_t c0 = 0; c0 < j->C; c0 += j->per_part) {
                int64_t c1 = c0 + j->per_part < j->C ? c0 + j->per_part : j->C;
                float acc = 0.0f;
                ORT_CONV_FOR_TAPS(j, c0, c1, {
                    int64_t ih = oh * j->sh - j->ph + kh * j->dh, iw = ow * j->sw - j->pw + kw * j->dw;
                    if (ih >= 0 && ih < j->IH && iw >= 0 && iw < j->IW)
                        acc = fmaf(x[(c * j->IH + ih) * j->IW + iw], w[c * KK + kh * j->KW + kw], acc);
                });
                out = c0 == 0 ? acc : out + acc;
            }
            y[(m0 + mo) * j->OH * j->OW + oh * j->OW + ow] = j->bias ? out + j->bias[m0 + mo] : out;
        }
    }
}

#ifdef OQ_HAVE_DW_AVX2
/* The same for ORT_CONV_TW columns from ow0 whose taps all fall inside the input columns
 * (rows outside the input are skipped, as MLAS skips them): eight output channels at a
 * time (a missing one computes channel m0 again and is not stored), each lane the same
 * fused multiply-adds in the same order as the scalar loop. */
#define ORT_CONV_FMA8(xv, wofs)                                                                 \
    do {                                                                                        \
        const float *wt_ = wp + (wofs) * ORT_CONV_MB;                                           \
        _Pragma("GCC unroll 8") for (int mo = 0; mo < ORT_CONV_MB; mo++) acc[mo] =               \
            _mm256_fmadd_ps((xv), _mm256_broadcast_ss(wt_ + mo), acc[mo]);                       \
    } while (0)

__attribute__((target("avx2,fma"))) static void ort_conv_tile_avx2(const ort_conv_job *j, const float *x,
                                                                   const float *wp, int64_t m0, int nm, int64_t oh,
                                                                   int64_t ow0, float *y)
{
    /* wp: the weights of the eight channels interleaved, wp[(c KK + kh KW + kw) 8 + mo] */
    const int64_t KK = j->KH * j->KW, plane = j->IH * j->IW, sw = j->sw;
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)sw));
    const float *xb = x + ow0 * sw - j->pw;
    __m256 out[ORT_CONV_MB], acc[ORT_CONV_MB];
    for (int64_t c0 = 0; c0 < j->C; c0 += j->per_part) {
        int64_t c1 = c0 + j->per_part < j->C ? c0 + j->per_part : j->C;
        _Pragma("GCC unroll 8") for (int mo = 0; mo < ORT_CONV_MB; mo++) acc[mo] = _mm256_setzero_ps();
        if (KK == 1 && sw == 1) { /* 1x1: one row per channel */
            int64_t ih = oh * j->sh - j->ph;
            if (ih >= 0 && ih < j->IH) {
                const float *xr = xb + ih * j->IW + c0 * plane;
                for (int64_t c = c0; c < c1; c++, xr += plane)
                    ORT_CONV_FMA8(_mm256_loadu_ps(xr), c);
            }
        } else if (j->chan_inner) {
            for (int64_t kh = 0; kh < j->KH; kh++) {
                int64_t ih = oh * j->sh - j->ph + kh * j->dh;
                if (ih < 0 || ih >= j->IH)
                    continue;
                for (int64_t kw = 0; kw < j->KW; kw++) {
                    const float *xk = xb + ih * j->IW + kw * j->dw;
                    int64_t wo = kh * j->KW + kw;
                    for (int64_t c = c0; c < c1; c++) {
                        const float *xr = xk + c * plane;
                        __m256 xv = sw == 1 ? _mm256_loadu_ps(xr) : _mm256_i32gather_ps(xr, idx, 4);
                        ORT_CONV_FMA8(xv, c * KK + wo);
                    }
                }
            }
        } else {
            for (int64_t c = c0; c < c1; c++)
                for (int64_t kh = 0; kh < j->KH; kh++) {
                    int64_t ih = oh * j->sh - j->ph + kh * j->dh;
                    if (ih < 0 || ih >= j->IH)
                        continue;
                    const float *xr = xb + c * plane + ih * j->IW;
                    for (int64_t kw = 0; kw < j->KW; kw++) {
                        __m256 xv = sw == 1 ? _mm256_loadu_ps(xr + kw * j->dw)
                                            : _mm256_i32gather_ps(xr + kw * j->dw, idx, 4);
                        ORT_CONV_FMA8(xv, c * KK + kh * j->KW + kw);
                    }
                }
        }
        _Pragma("GCC unroll 8") for (int mo = 0; mo < ORT_CONV_MB; mo++) out[mo] =
            c0 == 0 ? acc[mo] : _mm256_add_ps(out[mo], acc[mo]);
    }
    for (int mo = 0; mo < nm; mo++) {
        __m256 v = j->bias ? _mm256_add_ps(out[mo], _mm256_set1_ps(j->bias[m0 + mo])) : out[mo];
        _mm256_storeu_ps(y + (m0 + mo) * j->OH * j->OW + oh * j->OW + ow0, v);
    }
}
#endif

#ifdef OQ_HAVE_DW_AVX2
/* One output column ow of row oh for the eight channels at once (lanes: channels), taps
 * outside the input skipped: the edge columns the tiles above do not cover. */
__attribute__((target("avx2,fma"))) static void ort_conv_pixel_avx2(const ort_conv_job *j, const float *x,
                                                                    const float *wp, int64_t m0, int nm, int64_t oh,
                                                                    int64_t ow, float *y)
{
    const int64_t KK = j->KH * j->KW, plane = j->IH * j->IW;
    __m256 out = _mm256_setzero_ps();
    for (int64_t c0 = 0; c0 < j->C; c0 += j->per_part) {
        int64_t c1 = c0 + j->per_part < j->C ? c0 + j->per_part : j->C;
        __m256 acc = _mm256_setzero_ps();
        ORT_CONV_FOR_TAPS(j, c0, c1, {
            int64_t ih = oh * j->sh - j->ph + kh * j->dh, iw = ow * j->sw - j->pw + kw * j->dw;
            if (ih >= 0 && ih < j->IH && iw >= 0 && iw < j->IW)
                acc = _mm256_fmadd_ps(_mm256_set1_ps(x[c * plane + ih * j->IW + iw]),
                                      _mm256_loadu_ps(wp + (c * KK + kh * j->KW + kw) * ORT_CONV_MB), acc);
        });
        out = c0 == 0 ? acc : _mm256_add_ps(out, acc);
    }
    float v[ORT_CONV_MB];
    _mm256_storeu_ps(v, out);
    for (int mo = 0; mo < nm; mo++)
        y[(m0 + mo) * j->OH * j->OW + oh * j->OW + ow] = j->bias ? v[mo] + j->bias[m0 + mo] : v[mo];
}
#endif

static void ort_conv_items(void *arg, int64_t b, int64_t e, int wk)
{
    const ort_conv_job *j = arg;
    (void)wk;
    int64_t nmb = (j->M + ORT_CONV_MB - 1) / ORT_CONV_MB;
    /* output columns whose taps all fall inside the input: iw = ow sw - pw + kw dw */
    int64_t lo = 0, hi = j->OW;
    while (lo < hi && lo * j->sw - j->pw < 0)
        lo++;
    while (hi > lo && (hi - 1) * j->sw - j->pw + (j->KW - 1) * j->dw >= j->IW)
        hi--;
    for (int64_t it = b; it < e; it++) {
        int64_t n = it / nmb, m0 = (it % nmb) * ORT_CONV_MB;
        int nm = (int)(j->M - m0 < ORT_CONV_MB ? j->M - m0 : ORT_CONV_MB);
        const float *x = j->x + n * j->C * j->IH * j->IW;
        float *y = j->y + n * j->M * j->OH * j->OW;
        for (int64_t oh = 0; oh < j->OH; oh++) {
            int64_t ow = 0;
#ifdef OQ_HAVE_DW_AVX2
            if (j->wpack) {
                const float *wp = j->wpack + (it % nmb) * j->C * j->KH * j->KW * ORT_CONV_MB;
                for (; ow < lo && ow < j->OW; ow++)
                    ort_conv_pixel_avx2(j, x, wp, m0, nm, oh, ow, y);
                for (; ow + ORT_CONV_TW <= hi; ow += ORT_CONV_TW)
                    ort_conv_tile_avx2(j, x, wp, m0, nm, oh, ow, y);
                for (; ow < j->OW; ow++)
                    ort_conv_pixel_avx2(j, x, wp, m0, nm, oh, ow, y);
            }
#endif
            if (ow < j->OW)
                ort_conv_tile_scalar(j, x, m0, nm, oh, ow, j->OW, y);
        }
    }
}

static void conv_ort_nchwc(oq_kctx *k, const conv_geo *g, const float *x, const float *w, const float *bias,
                           float *y, const int64_t *i3, const int64_t *k3, const int64_t *o3, const int64_t *s3,
                           const int64_t *d3, const int64_t *p3)
{
    int block = oq_k_ort_nchwc_block();
    ort_conv_job j = {x, w, bias, y, g->C, g->M, i3[1], i3[2], k3[1], k3[2], o3[1], o3[2],
                      s3[1], s3[2], d3[1], d3[2], p3[1], p3[2], 1, false, NULL};
    /* the weights as the vector tiles read them: packed once in prepare, else for this run */
    int64_t CKK = g->C * k3[1] * k3[2];
    const conv_packed *cp = k->state;
    float *own = NULL;
#ifdef OQ_HAVE_DW_AVX2
    if (oq_k_cpu_avx2()) {
        if (cp && cp->ort_nchwc && cp->src == w && cp->Mg == g->M && cp->K == CKK)
            j.wpack = cp->data;
        else if ((own = malloc((size_t)((g->M + ORT_CONV_MB - 1) / ORT_CONV_MB * ORT_CONV_MB) * (size_t)CKK *
                               sizeof(float))) != NULL) {
            ort_conv_pack(w, g->M, CKK, own);
            j.wpack = own;
        }
    }
#else
    (void)cp;
#endif
    bool pointwise = k3[1] == 1 && k3[2] == 1 && p3[1] == 0 && p3[2] == 0 && g->pe[0] == 0 && g->pe[1] == 0;
    if (g->C < block)
        j.per_part = 1; /* NCHW algorithm */
    else if (pointwise)
        j.per_part = 128;
    else {
        j.per_part = block;
        j.chan_inner = true;
    }
    int64_t per = ORT_CONV_MB * g->C * k3[1] * k3[2] * o3[1] * o3[2];
    oq_k_parallel_for(k, g->N * ((g->M + ORT_CONV_MB - 1) / ORT_CONV_MB),
                      per >= 32768 ? 1 : 32768 / (per > 0 ? per : 1), ort_conv_items, &j);
    free(own);
}

static oq_status run_conv(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    conv_geo g;
    oq_status st = conv_geometry(k, in[0], in[1], false, &g);
    if (st)
        return st;
    const float *x = in[0]->data, *w = in[1]->data;
    const float *bias = n_in > 2 && in[2] ? in[2]->data : NULL;
    float *y = out[0].data;
    int64_t i3[3], k3[3], o3[3], s3[3], d3[3], p3[3];
    geo3(&g, i3, k3, o3, s3, d3, p3);
    int64_t isz = i3[0] * i3[1] * i3[2], osz = o3[0] * o3[1] * o3[2], ksz = k3[0] * k3[1] * k3[2];
    int64_t Cg = g.C / g.group, Mg = g.M / g.group;
    if ((k->ort & OQ_K_ORT_CONV_NCHWC) && g.group == 1 && g.ns == 2) {
        conv_ort_nchwc(k, &g, x, w, bias, y, i3, k3, o3, s3, d3, p3);
        return OQ_OK;
    }
    if (Cg == 1 && Mg == 1) {
        dw_job j = {x, w, bias, y, g.C, {0}, {0}, {0}, {0}, {0}, {0}, k->post, false,
                    DW_REF, bias != NULL, 0};
        if (k->ort & OQ_K_ORT_DW_NCHWC)
            j.ort = DW_NCHWC;
        else if (k->ort & OQ_K_ORT_DW_M1)
            j.ort = dw_m1_transposed(&g) ? DW_M1T : DW_M1;
        j.stride_k = dw_m1_stride_k(osz, ksz);
#ifdef OQ_HAVE_DW_AVX2
        {
            const char *env = getenv("ONNXQ_SGEMM_ISA"); /* avx2, generic: no AVX-512 */
            j.avx512 = oq_k_cpu_avx2() && (!env || strcmp(env, "avx2") != 0) &&
                       __builtin_cpu_supports("avx512f");
        }
#endif
        geo3(&g, j.in, j.k, j.out, j.st, j.dl, j.pb);
        k->post_done = k->post != NULL;
        /* at least ~32k multiply-adds per range: smaller ones cost more to dispatch */
        int64_t per = osz * ksz > 0 ? osz * ksz : 1;
        oq_k_parallel_for(k, g.N * g.C, per >= 32768 ? 1 : 32768 / per, dw_items, &j);
        return OQ_OK;
    }
    const conv_packed *cp = k->state;
    if (cp && (cp->ort_nchwc || cp->src != in[1]->data || cp->group != g.group || cp->Mg != Mg ||
               cp->K != Cg * ksz))
        cp = NULL;
    /* a 1x1, stride-1, unpadded convolution is a plain GEMM on the input */
    bool pointwise = ksz == 1 && s3[0] == 1 && s3[1] == 1 && s3[2] == 1 && p3[0] == 0 &&
                     p3[1] == 0 && p3[2] == 0 && osz == isz;
    /* a stride-1 2-D (or 1-D) convolution reads its input padded once: its taps in place
     * (above), or copied into panels (padpack_body). In place saves the copy, but a panel's
     * K rows are scattered over the input (a cache line each, read again for every block of
     * output channels) and it does not cross output rows (a row of 20 fills 20 of 32
     * columns); a packed panel is one copy, shared by every block of output channels.
     * Measured on the Zen 3, 3x3 convolutions of 8..512 channels, widths 20..240: in place
     * is faster with K <= 160 (up to 40 %), and with fewer than 64 output channels, K < 1024
     * and rows that fill their panels to 10 % (up to 10 %); packed up to 40 % faster
     * elsewhere. */
    int64_t IHp = o3[1] + (k3[1] - 1) * d3[1], IWp = o3[2] + (k3[2] - 1) * d3[2];
    int64_t row_cols = (o3[2] + OQ_SGEMM_NR - 1) / OQ_SGEMM_NR * OQ_SGEMM_NR, Kc = Cg * ksz;
    /* measured with the AVX2 kernels (6 rows a block) only: the AVX-512 ones (12 rows, two
       panels of 16 read in place at once) keep reading in place wherever the geometry allows */
    bool place_pays = oq_k_sgemm_mr() > 6 || Kc <= 160 || (Mg < 64 && Kc < 1024 && row_cols * 10 <= o3[2] * 11);
    bool padded = !pointwise && ksz > 1 && s3[0] == 1 && s3[1] == 1 && s3[2] == 1 && k3[0] == 1 &&
                  i3[0] == 1 && o3[0] == 1 && p3[0] == 0 && o3[1] > 0 && o3[2] > 0 && IHp >= p3[1] + i3[1] &&
                  IWp >= p3[2] + i3[2];
    bool in_place = padded && place_pays; /* else panels packed from the padded input */
    int64_t *off = NULL;
    float *xp = NULL;
    padpack_ctx pp = {NULL, NULL, Cg * ksz, IWp, o3[2]};
    if (padded) {
        size_t n_off = (size_t)(Cg * ksz), n_xp = (size_t)(Cg * IHp * IWp) + OQ_SGEMM_NR;
        size_t off_bytes = (n_off * sizeof(int64_t) + 63) / 64 * 64;
        unsigned char *mem = oq_k_scratch(k, off_bytes + n_xp * sizeof(float));
        if (!mem)
            return OQ_ERR_NOMEM;
        off = (int64_t *)mem;
        xp = (float *)(mem + off_bytes);
        for (int64_t c = 0, q = 0; c < Cg; c++)
            for (int64_t kh = 0; kh < k3[1]; kh++)
                for (int64_t kw = 0; kw < k3[2]; kw++)
                    off[q++] = (c * IHp + kh * d3[1]) * IWp + kw * d3[2];
    }
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t gr = 0; gr < g.group; gr++) {
            const float *xg = x + (n * g.C + gr * Cg) * isz;
            float *yg = y + (n * g.M + gr * Mg) * osz;
            im2col_ctx j = {xg, Cg, {0}, {0}, {0}, {0}, {0}, {0}};
            geo3(&g, j.in, j.k, j.out, j.st, j.dl, j.pb);
            oq_sgemm_ex ge;
            memset(&ge, 0, sizeof ge);
            ge.M = Mg;
            ge.N = osz;
            ge.K = Cg * ksz;
            ge.A = w + gr * Mg * Cg * ksz;
            ge.lda = Cg * ksz;
            if (cp)
                ge.A_packed = cp->data + gr * cp->per;
            if (pointwise) {
                ge.B = xg;
                ge.ldb = osz;
            } else if (padded) {
                pad_job pj = {xg, xp, i3[1], i3[2], IHp, IWp, p3[1], p3[2]};
                int64_t ch = IHp * IWp > 0 ? IHp * IWp : 1;
                oq_k_parallel_for(k, Cg, ch >= 16384 ? 1 : 16384 / ch, pad_channels, &pj);
                if (in_place) {
                    ge.B = xp;
                    ge.b_off = off;
                    ge.b_rows = o3[1];
                    ge.b_row_w = o3[2];
                    ge.b_ldrow = IWp;
                } else {
                    pp.xp = xp;
                    pp.off = off;
#ifdef OQ_HAVE_IM2COL_AVX2
                    ge.pack = oq_k_cpu_avx2() ? padpack_avx2 : padpack_plain;
#else
                    ge.pack = padpack_plain;
#endif
                    ge.pack_ctx = &pp;
                }
            } else {
                ge.pack = im2col_pack_fn();
                ge.pack_ctx = &j;
            }
            ge.C = yg;
            ge.ldc = osz;
            ge.bias = bias ? bias + gr * Mg : NULL; /* y = bias + sum, as before */
            ge.post = k->post;
            ge.post_row0 = gr * Mg;
            st = oq_k_sgemm_ex(k, &ge);
            if (st)
                return st;
        }
    k->post_done = k->post != NULL;
    return OQ_OK;
}

/* ------------------------------------------------------------------ ConvTranspose */

typedef struct col2im_job {
    const float *col;      /* (Mg*ksz) x isz */
    float *y;              /* Mg x osz */
    int64_t in[3], k[3], out[3], st[3], dl[3], pb[3];
} col2im_job;

static void col2im_channels(void *arg, int64_t b, int64_t e, int w)
{
    const col2im_job *j = arg;
    (void)w;
    int64_t ksz = j->k[0] * j->k[1] * j->k[2];
    int64_t isz = j->in[0] * j->in[1] * j->in[2], osz = j->out[0] * j->out[1] * j->out[2];
    for (int64_t m = b; m < e; m++) {
        float *ym = j->y + m * osz;
        for (int64_t kr = 0; kr < ksz; kr++) {
            int64_t kd = kr / (j->k[1] * j->k[2]), kh = (kr / j->k[2]) % j->k[1], kw = kr % j->k[2];
            const float *c = j->col + (m * ksz + kr) * isz;
            for (int64_t id = 0; id < j->in[0]; id++) {
                int64_t od = id * j->st[0] - j->pb[0] + kd * j->dl[0];
                if (od < 0 || od >= j->out[0])
                    continue;
                for (int64_t ih = 0; ih < j->in[1]; ih++) {
                    int64_t oh = ih * j->st[1] - j->pb[1] + kh * j->dl[1];
                    if (oh < 0 || oh >= j->out[1])
                        continue;
                    const float *crow = c + (id * j->in[1] + ih) * j->in[2];
                    float *yrow = ym + (od * j->out[1] + oh) * j->out[2];
                    /* the columns iw in [lo, hi) land inside the output: ow = iw * st + off */
                    int64_t sw = j->st[2], off = kw * j->dl[2] - j->pb[2];
                    int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
                    int64_t hi = j->out[2] - 1 - off < 0 ? 0 : (j->out[2] - 1 - off) / sw + 1;
                    hi = hi < j->in[2] ? hi : j->in[2];
                    float *yo = yrow + off;
                    if (sw == 1)
                        for (int64_t iw = lo; iw < hi; iw++)
                            yo[iw] += crow[iw];
                    else
                        for (int64_t iw = lo; iw < hi; iw++)
                            yo[iw * sw] += crow[iw];
                }
            }
        }
    }
}

static oq_status run_convt(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    conv_geo g;
    oq_status st = conv_geometry(k, in[0], in[1], true, &g);
    if (st)
        return st;
    const float *x = in[0]->data, *w = in[1]->data;
    const float *bias = n_in > 2 && in[2] ? in[2]->data : NULL;
    float *y = out[0].data;
    int64_t i3[3], k3[3], o3[3], s3[3], d3[3], p3[3];
    geo3(&g, i3, k3, o3, s3, d3, p3);
    int64_t isz = i3[0] * i3[1] * i3[2], osz = o3[0] * o3[1] * o3[2], ksz = k3[0] * k3[1] * k3[2];
    int64_t Cg = g.C / g.group, Mg = g.M / g.group;
    float *col = oq_k_scratch(k, (size_t)(Mg * ksz * isz) * sizeof(float));
    if (!col)
        return OQ_ERR_NOMEM;
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t gr = 0; gr < g.group; gr++) {
            const float *xg = x + (n * g.C + gr * Cg) * isz;
            float *yg = y + (n * g.M + gr * Mg) * osz;
            /* col[Mg*ksz, isz] = W_g^T [Mg*ksz, Cg] x X_g [Cg, isz] */
            st = oq_k_sgemm(k, true, false, Mg * ksz, isz, Cg, 1.0f, w + gr * Cg * Mg * ksz,
                            Mg * ksz, xg, isz, 0.0f, col, isz);
            if (st)
                return st;
            for (int64_t m = 0; m < Mg; m++)
                for (int64_t p = 0; p < osz; p++)
                    yg[m * osz + p] = bias ? bias[gr * Mg + m] : 0.0f;
            col2im_job j = {col, yg, {0}, {0}, {0}, {0}, {0}, {0}};
            geo3(&g, j.in, j.k, j.out, j.st, j.dl, j.pb);
            oq_k_parallel_for(k, Mg, 1, col2im_channels, &j);
        }
    return OQ_OK;
}

/* ------------------------------------------------------------------ integer ----- */

static int64_t ival(const oq_rt_tensor *t, int64_t i)
{
    return t->dtype == OQ_DTYPE_INT8 ? ((const int8_t *)t->data)[i]
         : t->dtype == OQ_DTYPE_UINT8 ? ((const uint8_t *)t->data)[i]
                                      : oq_k_get_int(t, i);
}

/* acc[N, M, out] = sum (x - xzp) * (w - wzp[m]) over the window (exact, int64) */
static oq_status int_conv(oq_kctx *k, const oq_rt_tensor *x, const oq_rt_tensor *w,
                          const oq_rt_tensor *xzp, const oq_rt_tensor *wzp, int64_t *acc,
                          conv_geo *g)
{
    oq_status st = conv_geometry(k, x, w, false, g);
    if (st)
        return st;
    int64_t i3[3], k3[3], o3[3], s3[3], d3[3], p3[3];
    geo3(g, i3, k3, o3, s3, d3, p3);
    int64_t isz = i3[0] * i3[1] * i3[2], osz = o3[0] * o3[1] * o3[2], ksz = k3[0] * k3[1] * k3[2];
    int64_t Cg = g->C / g->group, Mg = g->M / g->group;
    int64_t xz = xzp && oq_rt_tensor_numel(xzp) ? ival(xzp, 0) : 0;
    int64_t nwz = wzp ? oq_rt_tensor_numel(wzp) : 0;
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t m = 0; m < g->M; m++) {
            int64_t gr = m / Mg, wz = nwz == 0 ? 0 : ival(wzp, nwz == 1 ? 0 : m);
            for (int64_t od = 0; od < o3[0]; od++)
                for (int64_t oh = 0; oh < o3[1]; oh++)
                    for (int64_t ow = 0; ow < o3[2]; ow++) {
                        int64_t a = 0;
                        for (int64_t c = 0; c < Cg; c++)
                            for (int64_t kd = 0; kd < k3[0]; kd++)
                                for (int64_t kh = 0; kh < k3[1]; kh++)
                                    for (int64_t kw = 0; kw < k3[2]; kw++) {
                                        int64_t id = od * s3[0] - p3[0] + kd * d3[0];
                                        int64_t ih = oh * s3[1] - p3[1] + kh * d3[1];
                                        int64_t iw = ow * s3[2] - p3[2] + kw * d3[2];
                                        int64_t xv = xz; /* padding is the zero point */
                                        if (id >= 0 && id < i3[0] && ih >= 0 && ih < i3[1] &&
                                            iw >= 0 && iw < i3[2])
                                            xv = ival(x, (n * g->C + gr * Cg + c) * isz +
                                                             (id * i3[1] + ih) * i3[2] + iw);
                                        int64_t wv = ival(w, (m * Cg + c) * ksz +
                                                                 (kd * k3[1] + kh) * k3[2] + kw);
                                        a += (xv - xz) * (wv - wz);
                                    }
                        acc[(n * g->M + m) * osz + (od * o3[1] + oh) * o3[2] + ow] = a;
                    }
        }
    return OQ_OK;
}

static oq_status infer_convint(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                               oq_rt_tensor *out, size_t n_out)
{
    oq_status st = infer_conv_common(k, in, 2, out, n_out, false);
    out[0].dtype = OQ_DTYPE_INT32;
    return st;
}

static oq_status run_convint(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                             oq_rt_tensor *out, size_t n_out)
{
    int64_t n = oq_rt_tensor_numel(&out[0]);
    int64_t *acc = oq_k_scratch(k, (size_t)(n ? n : 1) * sizeof(int64_t));
    conv_geo g;
    if (!acc)
        return OQ_ERR_NOMEM;
    oq_status st = int_conv(k, in[0], in[1], n_in > 2 ? in[2] : NULL, n_in > 3 ? in[3] : NULL,
                            acc, &g);
    if (st)
        return st;
    for (int64_t i = 0; i < n; i++)
        ((int32_t *)out[0].data)[i] = (int32_t)acc[i];
    return OQ_OK;
}

/* QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B) */
static oq_status infer_qlconv(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                              oq_rt_tensor *out, size_t n_out)
{
    if (n_in < 8)
        return oq_k_error(k, OQ_ERR_INVALID, "needs 8 or 9 inputs");
    const oq_rt_tensor *xw[2] = {in[0], in[3]};
    oq_status st = infer_conv_common(k, xw, 2, out, n_out, false);
    out[0].dtype = in[7]->dtype;
    return st;
}

static oq_status run_qlconv(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    int64_t n = oq_rt_tensor_numel(&out[0]);
    int64_t *acc = oq_k_scratch(k, (size_t)(n ? n : 1) * sizeof(int64_t));
    conv_geo g;
    if (!acc)
        return OQ_ERR_NOMEM;
    oq_status st = int_conv(k, in[0], in[3], in[2], in[5], acc, &g);
    if (st)
        return st;
    int64_t osz = n / (g.N * g.M);
    float xs = ((const float *)in[1]->data)[0], ys = ((const float *)in[6]->data)[0];
    int64_t nws = oq_rt_tensor_numel(in[4]);
    int64_t yz = ival(in[7], 0);
    double lo = in[7]->dtype == OQ_DTYPE_INT8 ? -128 : 0, hi = in[7]->dtype == OQ_DTYPE_INT8 ? 127 : 255;
    const oq_rt_tensor *b = n_in > 8 ? in[8] : NULL;
    for (int64_t i = 0; i < n; i++) {
        int64_t m = (i / osz) % g.M;
        float ws = ((const float *)in[4]->data)[nws == 1 ? 0 : m];
        int64_t a = acc[i] + (b ? oq_k_get_int(b, m) : 0);
        float v = (float)a * (xs * ws / ys);
        double r = nearbyint((double)v) + (double)yz;
        r = r < lo ? lo : r > hi ? hi : r;
        if (in[7]->dtype == OQ_DTYPE_INT8)
            ((int8_t *)out[0].data)[i] = (int8_t)r;
        else
            ((uint8_t *)out[0].data)[i] = (uint8_t)r;
    }
    return OQ_OK;
}

const oq_kernel oq_kernels_conv[] = {
    {"", "Conv", 1, 0, 0, OQ_T(FLOAT), NULL, prepare_conv, infer_conv, run_conv, free, 2},
    {"", "ConvTranspose", 1, 0, 0, OQ_T(FLOAT), NULL, NULL, infer_convt, run_convt, NULL, 2},
    {"", "ConvInteger", 10, 0, 0, OQ_T(INT8) | OQ_T(UINT8), NULL, NULL, infer_convint, run_convint,
     NULL, 2},
    {"", "QLinearConv", 10, 0, 0, OQ_T(INT8) | OQ_T(UINT8), NULL, NULL, infer_qlconv, run_qlconv,
     NULL, 8},
};
OQ_KERNEL_TABLE_END(conv);
