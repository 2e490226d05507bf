/* Pooling: MaxPool AveragePool (1-3D, pads, auto_pad, ceil_mode, dilations,
 * count_include_pad), GlobalAveragePool, GlobalMaxPool. float32. */
#include <math.h>
#include <string.h>

#include "exec/kernel.h"

typedef struct pool_geo {
    size_t ns;
    int64_t N, C, in[3], k[3], out[3], st[3], dl[3], pb[3], pe[3];
    bool is_max, include_pad, is_lp;
    double p;
} pool_geo;

static oq_status pool_geometry(oq_kctx *k, const oq_rt_tensor *x, pool_geo *g)
{
    memset(g, 0, sizeof *g);
    if (x->rank < 3 || x->rank > 5)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "input rank %zu (1-3 spatial dims)", x->rank);
    g->ns = x->rank - 2;
    g->N = x->dims[0];
    g->C = x->dims[1];
    g->is_max = strcmp(k->node->op_type, "MaxPool") == 0;
    g->is_lp = strcmp(k->node->op_type, "LpPool") == 0;
    g->p = (double)oq_node_attr_int(k->node, "p", 2);
    g->include_pad = oq_node_attr_int(k->node, "count_include_pad", 0) != 0;
    const int64_t *ks, *st, *dl, *pads;
    int64_t nk = oq_node_attr_ints(k->node, "kernel_shape", &ks);
    int64_t nst = oq_node_attr_ints(k->node, "strides", &st);
    int64_t ndl = oq_node_attr_ints(k->node, "dilations", &dl);
    int64_t np = oq_node_attr_ints(k->node, "pads", &pads);
    if (nk != (int64_t)g->ns || (nst >= 0 && nst != nk) || (ndl >= 0 && ndl != nk) ||
        (np >= 0 && np != 2 * nk))
        return oq_k_error(k, OQ_ERR_INVALID, "kernel_shape/strides/dilations/pads do not match "
                          "the input rank");
    bool ceil_mode = oq_node_attr_int(k->node, "ceil_mode", 0) != 0;
    const char *ap = oq_node_attr_string(k->node, "auto_pad", "NOTSET");
    for (size_t i = 0; i < g->ns; i++) {
        g->in[i] = x->dims[2 + i];
        g->k[i] = ks[i];
        g->st[i] = nst >= 0 ? st[i] : 1;
        g->dl[i] = ndl >= 0 ? dl[i] : 1;
        g->pb[i] = np >= 0 ? pads[i] : 0;
        g->pe[i] = np >= 0 ? pads[i + g->ns] : 0;
        if (g->k[i] <= 0 || g->st[i] <= 0 || g->dl[i] <= 0)
            return oq_k_error(k, OQ_ERR_INVALID, "bad kernel/stride/dilation");
        int64_t ke = (g->k[i] - 1) * g->dl[i] + 1;
        if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
            int64_t o = (g->in[i] + g->st[i] - 1) / g->st[i];
            int64_t tot = (o - 1) * g->st[i] + ke - g->in[i];
            if (tot < 0)
                tot = 0;
            g->pb[i] = ap[5] == 'U' ? tot / 2 : tot - tot / 2;
            g->pe[i] = tot - g->pb[i];
            g->out[i] = o;
            continue;
        }
        if (strcmp(ap, "VALID") == 0) {
            g->pb[i] = g->pe[i] = 0;
            g->out[i] = (g->in[i] - ke) / g->st[i] + 1;
            if (ceil_mode) /* as onnxruntime: partial windows, each starting inside the input */
                g->out[i] = (g->in[i] - ke + g->st[i] - 1) / g->st[i] + 1;
            if (ceil_mode && (g->out[i] - 1) * g->st[i] >= g->in[i])
                g->out[i]--;
            continue;
        }
        int64_t span = g->in[i] + g->pb[i] + g->pe[i] - ke;
        if (span < 0)
            return oq_k_error(k, OQ_ERR_INVALID, "kernel larger than the padded input");
        g->out[i] = (ceil_mode ? (span + g->st[i] - 1) / g->st[i] : span / g->st[i]) + 1;
        /* the last window must start inside the input or the left padding */
        if (ceil_mode && (g->out[i] - 1) * g->st[i] >= g->in[i] + g->pb[i])
            g->out[i]--;
    }
    return OQ_OK;
}

static oq_status infer_pool(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (n_out > 1)
        out[1].dtype = OQ_DTYPE_INT64;
    if (!oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    pool_geo g;
    oq_status st = pool_geometry(k, in[0], &g);
    if (st)
        return st;
    int64_t d[5] = {g.N, g.C};
    for (size_t i = 0; i < g.ns; i++)
        d[2 + i] = g.out[i];
    st = oq_k_set_out(k, &out[0], in[0]->dtype, d, 2 + g.ns);
    if (st == OQ_OK && n_out > 1)
        st = oq_k_set_out(k, &out[1], OQ_DTYPE_INT64, d, 2 + g.ns);
    return st;
}

typedef struct pool_job {
    pool_geo g3;           /* 3-D form */
    const float *x;
    float *y;
    int64_t *idx;          /* MaxPool indices or NULL */
    int64_t storage_order;
} pool_job;

/* The taps kk in [0, k) of one axis whose input position start + kk * dil lies in
 * [0, in): kk in [*lo, *hi), empty when *lo >= *hi. */
static void tap_range(int64_t start, int64_t dil, int64_t in, int64_t k, int64_t *lo, int64_t *hi)
{
    *lo = start >= 0 ? 0 : (-start + dil - 1) / dil;
    *hi = in - start <= 0 ? 0 : (in - start - 1) / dil + 1;
    if (*hi > k)
        *hi = k;
}

static void pool_items(void *arg, int64_t b, int64_t e, int w)
{
    const pool_job *j = arg;
    const pool_geo *g = &j->g3;
    (void)w;
    int64_t isz = g->in[0] * g->in[1] * g->in[2], osz = g->out[0] * g->out[1] * g->out[2];
    /* 2-D MaxPool without indices: the in-range taps form a rectangle, visited in the
     * same (kh, kw) order without per-tap checks; the first one starts the maximum
     * (a NaN there stays, as in the general loop below) */
    bool max2d = g->is_max && !j->idx && g->k[0] == 1 && g->in[0] == 1 && g->out[0] == 1 &&
                 g->st[0] == 1 && g->pb[0] == 0;
    for (int64_t it = b; max2d && it < e; it++) {
        const float *x = j->x + it * isz;
        float *y = j->y + it * osz;
        const int64_t IH = g->in[1], IW = g->in[2];
        for (int64_t oh = 0; oh < g->out[1]; oh++) {
            int64_t h0 = oh * g->st[1] - g->pb[1], dh = g->dl[1], khl, khh;
            tap_range(h0, dh, IH, g->k[1], &khl, &khh);
            for (int64_t ow = 0; ow < g->out[2]; ow++) {
                int64_t w0 = ow * g->st[2] - g->pb[2], dw = g->dl[2], kwl, kwh;
                tap_range(w0, dw, IW, g->k[2], &kwl, &kwh);
                float best = -INFINITY;
                if (khl < khh && kwl < kwh) {
                    best = x[(h0 + khl * dh) * IW + w0 + kwl * dw];
                    for (int64_t kh = khl; kh < khh; kh++) {
                        const float *xr = x + (h0 + kh * dh) * IW + w0;
                        for (int64_t kw = kh == khl ? kwl + 1 : kwl; kw < kwh; kw++) {
                            float v = xr[kw * dw];
                            best = v > best ? v : best;
                        }
                    }
                }
                y[oh * g->out[2] + ow] = best;
            }
        }
    }
    /* 2-D AveragePool whose windows all lie inside the input (no padding, none past
     * the end in ceil mode): the same sum in (kh, kw) order from 0, divided by the tap
     * count, without the per-tap checks of the general loop */
    bool avg2d = !max2d && !g->is_max && !g->is_lp && g->k[0] == 1 && g->in[0] == 1 &&
                 g->out[0] == 1 && g->pb[0] == 0 && g->pe[0] == 0 && g->pb[1] == 0 &&
                 g->pb[2] == 0 && g->out[1] > 0 && g->out[2] > 0 && g->k[1] > 0 &&
                 g->k[2] > 0 &&
                 (g->out[1] - 1) * g->st[1] + (g->k[1] - 1) * g->dl[1] < g->in[1] &&
                 (g->out[2] - 1) * g->st[2] + (g->k[2] - 1) * g->dl[2] < g->in[2];
    for (int64_t it = b; avg2d && it < e; it++) {
        const float *x = j->x + it * isz;
        float *y = j->y + it * osz;
        const int64_t IW = g->in[2], KH = g->k[1], KW = g->k[2], dh = g->dl[1], dw = g->dl[2];
        const float den = (float)(KH * KW);
        for (int64_t oh = 0; oh < g->out[1]; oh++)
            for (int64_t ow = 0; ow < g->out[2]; ow++) {
                const float *xw = x + oh * g->st[1] * IW + ow * g->st[2];
                float sum = 0.0f;
                for (int64_t kh = 0; kh < KH; kh++)
                    for (int64_t kw = 0; kw < KW; kw++)
                        sum += xw[kh * dh * IW + kw * dw];
                y[oh * g->out[2] + ow] = sum / den;
            }
    }
    for (int64_t it = b; !max2d && !avg2d && it < e; it++) {
        const float *x = j->x + it * isz;
        float *y = j->y + it * osz;
        for (int64_t od = 0; od < g->out[0]; od++)
            for (int64_t oh = 0; oh < g->out[1]; oh++)
                for (int64_t ow = 0; ow < g->out[2]; ow++) {
                    float best = -INFINITY, sum = 0.0f;
                    double lp = 0;
                    int64_t bidx = -1, cnt = 0, pad_cnt = 0;
                    for (int64_t kd = 0; kd < g->k[0]; kd++) {
                        int64_t id = od * g->st[0] - g->pb[0] + kd * g->dl[0];
                        for (int64_t kh = 0; kh < g->k[1]; kh++) {
                            int64_t ih = oh * g->st[1] - g->pb[1] + kh * g->dl[1];
                            for (int64_t kw = 0; kw < g->k[2]; kw++) {
                                int64_t iw = ow * g->st[2] - g->pb[2] + kw * g->dl[2];
                                bool inside = id >= 0 && id < g->in[0] && ih >= 0 &&
                                              ih < g->in[1] && iw >= 0 && iw < g->in[2];
                                if (!inside) {
                                    /* positions in the explicit padding count for
                                       count_include_pad; beyond it (ceil_mode) do not */
                                    if (id >= -g->pb[0] && id < g->in[0] + g->pe[0] &&
                                        ih >= -g->pb[1] && ih < g->in[1] + g->pe[1] &&
                                        iw >= -g->pb[2] && iw < g->in[2] + g->pe[2])
                                        pad_cnt++;
                                    continue;
                                }
                                int64_t off = (id * g->in[1] + ih) * g->in[2] + iw;
                                float v = x[off];
                                if (v > best || bidx < 0) {
                                    if (v > best || (bidx < 0 && !(v <= best)))
                                        best = v, bidx = off;
                                }
                                sum += v;
                                if (g->is_lp)
                                    lp += pow(fabs((double)v), g->p);
                                cnt++;
                            }
                        }
                    }
                    int64_t o = (od * g->out[1] + oh) * g->out[2] + ow;
                    if (g->is_max) {
                        y[o] = best;
                        if (j->idx) {
                            int64_t gi = it * isz + (bidx < 0 ? 0 : bidx);
                            if (j->storage_order && bidx >= 0) {
                                int64_t hh = bidx / g->in[2], ww = bidx % g->in[2];
                                gi = it * isz + ww * g->in[1] + hh;
                            }
                            j->idx[it * osz + o] = gi;
                        }
                    } else if (g->is_lp) {
                        y[o] = (float)pow(lp, 1.0 / g->p);
                    } else {
                        int64_t den = g->include_pad ? cnt + pad_cnt : cnt;
                        y[o] = den ? sum / (float)den : 0.0f;
                    }
                }
    }
}

static oq_status run_pool(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    pool_geo g;
    oq_status st = pool_geometry(k, in[0], &g);
    if (st)
        return st;
    pool_job j;
    memset(&j, 0, sizeof j);
    size_t off = 3 - g.ns;
    j.g3 = g;
    for (size_t i = 0; i < 3; i++) {
        bool real = i >= off;
        j.g3.in[i] = real ? g.in[i - off] : 1;
        j.g3.k[i] = real ? g.k[i - off] : 1;
        j.g3.out[i] = real ? g.out[i - off] : 1;
        j.g3.st[i] = real ? g.st[i - off] : 1;
        j.g3.dl[i] = real ? g.dl[i - off] : 1;
        j.g3.pb[i] = real ? g.pb[i - off] : 0;
        j.g3.pe[i] = real ? g.pe[i - off] : 0;
    }
    j.x = in[0]->data;
    j.y = out[0].data;
    j.idx = n_out > 1 ? out[1].data : NULL;
    j.storage_order = oq_node_attr_int(k->node, "storage_order", 0);
    bool conv = in[0]->dtype != OQ_DTYPE_FLOAT; /* 8-bit MaxPool: exact in float */
    int64_t ni = oq_rt_tensor_numel(in[0]), no = oq_rt_tensor_numel(&out[0]);
    float *tmp = NULL;
    if (conv) {
        tmp = oq_k_scratch(k, (size_t)(ni + no + 1) * sizeof(float));
        if (!tmp)
            return OQ_ERR_NOMEM;
        for (int64_t i = 0; i < ni; i++)
            tmp[i] = (float)oq_k_get_f64(in[0], i);
        j.x = tmp;
        j.y = tmp + ni;
    }
    int64_t per = no / (g.N * g.C > 0 ? g.N * g.C : 1) + 1;
    oq_k_parallel_for(k, g.N * g.C, per >= 4096 ? 1 : 4096 / per, pool_items, &j);
    if (conv)
        for (int64_t i = 0; i < no; i++)
            oq_k_set_f64(&out[0], i, tmp[ni + i]);
    return OQ_OK;
}

/* ------------------------------------------------------------------ Global* ------ */

static oq_status infer_global(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                              oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    if (in[0]->rank < 2)
        return oq_k_error(k, OQ_ERR_INVALID, "input rank below 2");
    int64_t d[OQ_RT_MAX_RANK];
    for (size_t i = 0; i < in[0]->rank; i++)
        d[i] = i < 2 ? in[0]->dims[i] : 1;
    return oq_k_set_out(k, &out[0], in[0]->dtype, d, in[0]->rank);
}

typedef struct gjob {
    const float *x;
    float *y;
    int64_t sz;
    bool is_max;
    int ort;      /* OQ_K_ORT_GAP: 1 MLAS' global kernel, 2 its NCHWc pooling (ort_mean) */
} gjob;

/* onnxruntime's GlobalAveragePool (x86): MlasPoolGlobalKernel (pool.cpp) keeps four
 * running sums l0..l3 of x[4i + l], adds them as (l0 + l2) + (l1 + l3)
 * (MlasReduceAddFloat32x4), then the last n % 4 values in order, and divides by n; after
 * the NchwcTransformer (C a multiple of the CPU's block) MlasNchwcPool sums each channel
 * in order from 0, then divides (plan.c decides which input onnxruntime keeps NCHWc). Each step one float rounding, as measured against
 * onnxruntime 1.30 with and without optimizations. */
static float ort_mean(const float *x, int64_t n, int mode)
{
    float s;
    int64_t i = 0;
    if (mode == 2) {
        s = 0.0f;
    } else {
        float l[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (; i + 4 <= n; i += 4)
            for (int q = 0; q < 4; q++)
                l[q] = l[q] + x[i + q];
        s = (l[0] + l[2]) + (l[1] + l[3]);
    }
    for (; i < n; i++)
        s = s + x[i];
    return s / (float)n;
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
/* sum of n floats: 32 running sums (4 vectors), added up in a fixed order, then the
 * tail in order. The order depends only on n, never on the thread count; it differs
 * from the portable one-by-one sum (float rounding), like the FMA GEMM does. */
__attribute__((target("avx2"))) static float sum_avx2(const float *x, int64_t n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + i + 24));
    }
    __m256 t = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    float lane[8];
    _mm256_storeu_ps(lane, t);
    float s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    for (; i < n; i++)
        s += x[i];
    return s;
}
#endif

static void global_items(void *arg, int64_t b, int64_t e, int w)
{
    const gjob *j = arg;
    (void)w;
    for (int64_t it = b; it < e; it++) {
        const float *x = j->x + it * j->sz;
        if (j->is_max) {
            float m = -INFINITY;
            for (int64_t i = 0; i < j->sz; i++)
                m = x[i] > m ? x[i] : m;
            j->y[it] = m;
        } else if (j->ort) {
            j->y[it] = ort_mean(x, j->sz, j->ort);
        } else {
            float s = 0.0f;
#if defined(__GNUC__) && defined(__x86_64__)
            if (oq_k_cpu_avx2()) {
                j->y[it] = sum_avx2(x, j->sz) / (float)j->sz;
                continue;
            }
#endif
            for (int64_t i = 0; i < j->sz; i++)
                s += x[i];
            j->y[it] = s / (float)j->sz;
        }
    }
}

/* GlobalLpPool: (sum |x|^p)^(1/p) over the spatial axes (attribute p, default 2), in double */
static oq_status run_global_lp(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, oq_rt_tensor *out,
                               size_t n_out)
{
    (void)n_in, (void)n_out;
    int64_t pe = oq_node_attr_int(k->node, "p", 2);
    if (pe <= 0)
        return oq_k_error(k, OQ_ERR_INVALID, "p must be positive");
    int64_t sz = 1, items = in[0]->dims[0] * in[0]->dims[1];
    for (size_t i = 2; i < in[0]->rank; i++)
        sz *= in[0]->dims[i];
    const float *x = in[0]->data;
    float *y = out[0].data;
    for (int64_t it = 0; it < items; it++) {
        double s = 0;
        for (int64_t i = 0; i < sz; i++)
            s += pe == 2 ? (double)x[it * sz + i] * x[it * sz + i] : pow(fabs((double)x[it * sz + i]), (double)pe);
        y[it] = (float)(pe == 2 ? sqrt(s) : pe == 1 ? s : pow(s, 1.0 / (double)pe));
    }
    return OQ_OK;
}

static oq_status run_global(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    gjob j = {in[0]->data, out[0].data, 1, strcmp(k->node->op_type, "GlobalMaxPool") == 0, 0};
    for (size_t i = 2; i < in[0]->rank; i++)
        j.sz *= in[0]->dims[i];
    if ((k->ort & OQ_K_ORT_GAP) && !j.is_max && j.sz > 0) {
        int block = oq_k_ort_nchwc_block();
        j.ort = (k->ort & OQ_K_ORT_GAP_NCHWC) && block > 0 && in[0]->rank == 4 &&
                        in[0]->dims[1] % block == 0
                    ? 2
                    : 1;
    }
    oq_k_parallel_for(k, in[0]->dims[0] * in[0]->dims[1], j.sz >= 16384 ? 1 : 16384 / (j.sz ? j.sz : 1),
                      global_items, &j);
    return OQ_OK;
}

/* ------------------------------------------------------------------ MaxUnpool ---- */

static oq_status infer_unpool(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                              oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    const oq_rt_tensor *os = n_in > 2 ? in[2] : NULL;
    if ((os && !os->data) || !oq_k_shapes_known(in, 2))
        return oq_k_defer(k, out, n_out);
    const oq_rt_tensor *x = in[0];
    int64_t d[OQ_RT_MAX_RANK];
    if (os) {
        int64_t n = oq_rt_tensor_numel(os);
        if (n != (int64_t)x->rank)
            return oq_k_error(k, OQ_ERR_INVALID, "output_shape has %lld entries", (long long)n);
        for (int64_t i = 0; i < n; i++)
            d[i] = oq_k_get_int(os, i);
        return oq_k_set_out(k, &out[0], x->dtype, d, x->rank);
    }
    const int64_t *ks, *st, *pads;
    int64_t nk = oq_node_attr_ints(k->node, "kernel_shape", &ks);
    int64_t nst = oq_node_attr_ints(k->node, "strides", &st);
    int64_t np = oq_node_attr_ints(k->node, "pads", &pads);
    size_t ns = x->rank - 2;
    if (x->rank < 3 || nk != (int64_t)ns)
        return oq_k_error(k, OQ_ERR_INVALID, "kernel_shape does not match the input rank");
    d[0] = x->dims[0];
    d[1] = x->dims[1];
    for (size_t i = 0; i < ns; i++)
        d[2 + i] = (x->dims[2 + i] - 1) * (nst > 0 ? st[i] : 1) + ks[i] -
                   (np > 0 ? pads[i] + pads[i + ns] : 0);
    return oq_k_set_out(k, &out[0], x->dtype, d, x->rank);
}

static oq_status run_unpool(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0], *ix = in[1];
    int64_t n = oq_rt_tensor_numel(x), total = oq_rt_tensor_numel(&out[0]);
    /* the indices are flat positions in the MaxPool input, whose spatial shape is the
       default unpooled shape; re-encode them in the (possibly larger) output shape */
    const oq_rt_tensor *none[2] = {x, ix};
    oq_rt_tensor dflt;
    memset(&dflt, 0, sizeof dflt);
    oq_status st = infer_unpool(k, none, 2, &dflt, 1);
    if (st)
        return st;
    size_t ns = x->rank - 2;
    int64_t in_sp = 1, out_sp = 1;
    for (size_t i = 0; i < ns; i++) {
        in_sp *= dflt.dims[2 + i];
        out_sp *= out[0].dims[2 + i];
    }
    memset(out[0].data, 0, (size_t)out[0].nbytes);
    for (int64_t i = 0; i < n; i++) {
        int64_t idx = oq_k_get_int(ix, i);
        if (idx < 0)
            return oq_k_error(k, OQ_ERR_INVALID, "index %lld out of range", (long long)idx);
        int64_t nc = idx / in_sp, p = idx % in_sp, dst = 0, mul = 1;
        for (size_t a = ns; a-- > 0;) {
            int64_t c = p % dflt.dims[2 + a];
            p /= dflt.dims[2 + a];
            dst += c * mul;
            mul *= out[0].dims[2 + a];
        }
        dst += nc * out_sp;
        if (dst >= total)
            return oq_k_error(k, OQ_ERR_INVALID, "index %lld out of range", (long long)idx);
        ((float *)out[0].data)[dst] = ((const float *)x->data)[i];
    }
    return OQ_OK;
}

const oq_kernel oq_kernels_pool[] = {
    {"", "MaxUnpool", 9, 0, 0, OQ_T(FLOAT), NULL, NULL, infer_unpool, run_unpool, NULL, 2},
    {"", "MaxPool", 1, 0, 0, OQ_T(FLOAT) | OQ_T(INT8) | OQ_T(UINT8), NULL, NULL, infer_pool,
     run_pool, NULL, 1},
    {"", "AveragePool", 1, 0, 0, OQ_T(FLOAT), NULL, NULL, infer_pool, run_pool, NULL, 1},
    {"", "LpPool", 2, 0, 0, OQ_T(FLOAT), NULL, NULL, infer_pool, run_pool, NULL, 1},
    {"", "GlobalAveragePool", 1, 0, 0, OQ_T(FLOAT), NULL, NULL, infer_global, run_global, NULL, 1},
    {"", "GlobalMaxPool", 1, 0, 0, OQ_T(FLOAT), NULL, NULL, infer_global, run_global, NULL, 1},
    {"", "GlobalLpPool", 2, 0, 0, OQ_T(FLOAT), NULL, NULL, infer_global, run_global_lp, NULL, 1},
};
OQ_KERNEL_TABLE_END(pool);
