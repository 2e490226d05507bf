/* Normalisation and softmax: BatchNormalization (inference), InstanceNormalization,
 * LayerNormalization, Softmax LogSoftmax Hardmax (opset < 13: flatten to 2-D at axis;
 * opset >= 13: along one axis). float32. */
#include <math.h>
#include <string.h>

#include "exec/kernel.h"

/* ------------------------------------------------------------------ BatchNorm ---- */

static bool bn_training(const oq_kctx *k)
{
    return k->opset >= 14 && oq_node_attr_int(k->node, "training_mode", 0) != 0;
}

static oq_status infer_bn(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    if (n_out > 1 && k->node->outputs[1] && !bn_training(k))
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "BatchNormalization with saved mean/variance "
                          "outputs (opset < 14 training) is not supported");
    if (bn_training(k)) {
        for (size_t i = 0; i < n_out; i++)
            out[i].dtype = in[0]->dtype;
        if (!oq_k_shapes_known(in, n_in))
            return oq_k_defer(k, out, n_out);
        oq_status st = oq_k_set_out(k, &out[0], in[0]->dtype, in[0]->dims, in[0]->rank);
        for (size_t i = 1; st == OQ_OK && i < n_out && i < 3; i++)
            st = oq_k_set_out(k, &out[i], in[0]->dtype, &in[0]->dims[1], 1);
        return st;
    }
    if (n_in < 5)
        return oq_k_error(k, OQ_ERR_INVALID, "needs 5 inputs");
    if (k->opset < 9 && oq_node_attr_int(k->node, "spatial", 1) != 1)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "spatial=0 is not supported");
    return oq_k_infer_like_input0(k, in, n_in, out, 1);
}

typedef struct bn_job {
    const float *x;
    float *y;
    const float *a, *b;   /* per channel scale and shift */
    int64_t C, sz;
} bn_job;

/* y = x * a + b: multiply, then add, in both paths */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx2"))) static void bn_row_avx2(float *y, const float *x, float a,
                                                        float b, int64_t n)
{
    __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), va), vb));
    for (; i < n; i++)
        y[i] = x[i] * a + b;
}
#endif

static void bn_items(void *arg, int64_t s, int64_t e, int w)
{
    const bn_job *j = arg;
    (void)w;
    for (int64_t it = s; it < e; it++) {
        int64_t c = it % j->C;
        const float *x = j->x + it * j->sz;
        float *y = j->y + it * j->sz;
        float a = j->a[c], b = j->b[c];
#if defined(__GNUC__) && defined(__x86_64__)
        if (oq_k_cpu_avx2()) {
            bn_row_avx2(y, x, a, b, j->sz);
            continue;
        }
#endif
        for (int64_t i = 0; i < j->sz; i++)
            y[i] = x[i] * a + b;
    }
}

static oq_status run_bn(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                        oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    if (x->rank < 2)
        return oq_k_error(k, OQ_ERR_INVALID, "input rank below 2");
    int64_t C = x->dims[1], sz = 1;
    for (size_t i = 2; i < x->rank; i++)
        sz *= x->dims[i];
    for (int i = 1; i < 5; i++)
        if (oq_rt_tensor_numel(in[i]) != C || in[i]->dtype != OQ_DTYPE_FLOAT)
            return oq_k_error(k, OQ_ERR_INVALID, "input %d must hold %lld floats", i, (long long)C);
    float eps = oq_node_attr_float(k->node, "epsilon", 1e-5f);
    float *ab = oq_k_scratch(k, (size_t)(4 * C) * sizeof(float));
    if (!ab)
        return OQ_ERR_NOMEM;
    const float *sc = in[1]->data, *bi = in[2]->data, *mu = in[3]->data, *var = in[4]->data;
    if (bn_training(k)) {
        /* batch statistics (population variance); running stats blended by momentum */
        float mom = oq_node_attr_float(k->node, "momentum", 0.9f);
        float *bm = ab + 2 * C, *bv = ab + 3 * C;
        const float *xd = x->data;
        int64_t N = x->dims[0];
        for (int64_t c = 0; c < C; c++) {
            double m = 0, v = 0;
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < sz; i++)
                    m += xd[(n * C + c) * sz + i];
            m /= (double)(N * sz);
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < sz; i++) {
                    double dv = xd[(n * C + c) * sz + i] - m;
                    v += dv * dv;
                }
            v /= (double)(N * sz);
            bm[c] = (float)m;
            bv[c] = (float)v;
            if (n_out > 1 && k->node->outputs[1])
                ((float *)out[1].data)[c] = mu[c] * mom + bm[c] * (1 - mom);
            if (n_out > 2 && k->node->outputs[2])
                ((float *)out[2].data)[c] = var[c] * mom + bv[c] * (1 - mom);
        }
        mu = bm;
        var = bv;
    }
    for (int64_t c = 0; c < C; c++) {
        float a = sc[c] / sqrtf(var[c] + eps);
        ab[c] = a;
        ab[C + c] = bi[c] - mu[c] * a;
    }
    bn_job j = {x->data, out[0].data, ab, ab + C, C, sz};
    oq_k_parallel_for(k, x->dims[0] * C, sz >= 16384 ? 1 : 16384 / (sz ? sz : 1), bn_items, &j);
    return OQ_OK;
}

/* ------------------------------------------------------------------ InstanceNorm - */

static oq_status run_in(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                        oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    int64_t N = x->dims[0], C = x->dims[1], sz = 1;
    for (size_t i = 2; i < x->rank; i++)
        sz *= x->dims[i];
    float eps = oq_node_attr_float(k->node, "epsilon", 1e-5f);
    const float *sc = in[1]->data, *bi = in[2]->data, *xd = x->data;
    float *y = out[0].data;
    for (int64_t it = 0; it < N * C; it++) {
        int64_t c = it % C;
        const float *xp = xd + it * sz;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < sz; i++)
            mean += xp[i];
        mean /= (double)sz;
        for (int64_t i = 0; i < sz; i++)
            var += (xp[i] - mean) * (xp[i] - mean);
        var /= (double)sz;
        float inv = (float)(1.0 / sqrt(var + eps));
        for (int64_t i = 0; i < sz; i++)
            y[it * sz + i] = (float)(xp[i] - mean) * inv * sc[c] + bi[c];
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ LayerNorm ---- */

static oq_status infer_ln(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    oq_status st = oq_k_infer_like_input0(k, in, n_in, out, n_out);
    if (st || k->deferred)
        return st;
    int64_t axis = oq_k_axis(oq_node_attr_int(k->node, "axis", -1), in[0]->rank);
    if (axis < 0)
        return oq_k_error(k, OQ_ERR_INVALID, "axis out of range");
    int64_t d[OQ_RT_MAX_RANK];
    for (size_t i = 0; i < in[0]->rank; i++)
        d[i] = (int64_t)i < axis ? in[0]->dims[i] : 1;
    for (size_t o = 1; o < n_out && o < 3; o++) {
        st = oq_k_set_out(k, &out[o], OQ_DTYPE_FLOAT, d, in[0]->rank);
        if (st)
            return st;
    }
    return OQ_OK;
}

static oq_status run_ln(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                        oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    int64_t axis = oq_k_axis(oq_node_attr_int(k->node, "axis", -1), x->rank);
    float eps = oq_node_attr_float(k->node, "epsilon", 1e-5f);
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < (int64_t)x->rank; i++)
        *(i < axis ? &outer : &inner) *= x->dims[i];
    const oq_rt_tensor *s = in[1], *b = n_in > 2 ? in[2] : NULL;
    int64_t ns = oq_rt_tensor_numel(s), nb = b ? oq_rt_tensor_numel(b) : 0;
    const float *xd = x->data, *sd = s->data, *bd = b ? b->data : NULL;
    float *y = out[0].data;
    for (int64_t o = 0; o < outer; o++) {
        const float *xp = xd + o * inner;
        float mean = 0, var = 0;
        for (int64_t i = 0; i < inner; i++)
            mean += xp[i];
        mean /= (float)inner;
        for (int64_t i = 0; i < inner; i++)
            var += (xp[i] - mean) * (xp[i] - mean);
        var /= (float)inner;
        float inv = 1.0f / sqrtf(var + eps);
        for (int64_t i = 0; i < inner; i++)
            y[o * inner + i] = (xp[i] - mean) * inv * sd[ns == inner ? i : i % ns] +
                               (bd ? bd[nb == inner ? i : i % nb] : 0.0f);
        if (n_out > 1 && k->node->outputs[1])
            ((float *)out[1].data)[o] = mean;
        if (n_out > 2 && k->node->outputs[2])
            ((float *)out[2].data)[o] = inv;
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ Softmax ------ */

typedef struct sm_job {
    const float *x;
    float *y;
    int64_t n, inner;      /* reduce over n with stride inner */
    int kind;              /* 0 softmax, 1 log softmax, 2 hardmax */
} sm_job;

static void sm_items(void *arg, int64_t b, int64_t e, int w)
{
    const sm_job *j = arg;
    (void)w;
    for (int64_t it = b; it < e; it++) {
        int64_t o = it / j->inner, i = it % j->inner;
        const float *x = j->x + o * j->n * j->inner + i;
        float *y = j->y + o * j->n * j->inner + i;
        float m = -INFINITY;
        int64_t am = 0;
        for (int64_t t = 0; t < j->n; t++)
            if (x[t * j->inner] > m) {
                m = x[t * j->inner];
                am = t;
            }
        if (j->kind == 2) {
            for (int64_t t = 0; t < j->n; t++)
                y[t * j->inner] = t == am ? 1.0f : 0.0f;
            continue;
        }
        float s = 0;
        if (j->kind == 1) {
            for (int64_t t = 0; t < j->n; t++)
                s += expf(x[t * j->inner] - m);
            float ls = logf(s);
            for (int64_t t = 0; t < j->n; t++)
                y[t * j->inner] = x[t * j->inner] - m - ls;
        } else {
            /* each exponential once: kept in y, then divided by the sum */
            for (int64_t t = 0; t < j->n; t++) {
                float ev = expf(x[t * j->inner] - m);
                y[t * j->inner] = ev;
                s += ev;
            }
            if (j->inner == 1) {
                for (int64_t t = 0; t < j->n; t++)
                    y[t] = y[t] / s;
            } else {
                for (int64_t t = 0; t < j->n; t++)
                    y[t * j->inner] = y[t * j->inner] / s;
            }
        }
    }
}

static oq_status run_softmax(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                             oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    if (x->dtype == OQ_DTYPE_FLOAT16)
        return oq_k_run_widened(k, run_softmax, in, n_in, out, n_out);
    bool old = k->opset < 13;
    int64_t axis = oq_k_axis(oq_node_attr_int(k->node, "axis", old ? 1 : -1),
                             x->rank ? x->rank : 1);
    if (axis < 0)
        return oq_k_error(k, OQ_ERR_INVALID, "axis out of range");
    sm_job j = {x->data, out[0].data, 1, 1, 0};
    const char *op = k->node->op_type;
    j.kind = strcmp(op, "LogSoftmax") == 0 ? 1 : strcmp(op, "Hardmax") == 0 ? 2 : 0;
    int64_t outer = 1;
    for (int64_t i = 0; i < (int64_t)x->rank; i++) {
        int64_t d = x->dims[i];
        if (i < axis)
            outer *= d;
        else if (old || i == axis)
            j.n *= d;
        else
            j.inner *= d;
    }
    oq_k_parallel_for(k, outer * j.inner, 16, sm_items, &j);
    return OQ_OK;
}

/* ------------------------------------------------------------------ GroupNorm ---- */

/* GroupNormalization: opset 18 scale/bias per group, opset 21 per channel. */
static oq_status run_gn(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                        oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    int64_t G = oq_node_attr_int(k->node, "num_groups", 0);
    if (x->rank < 2 || G <= 0 || x->dims[1] % G)
        return oq_k_error(k, OQ_ERR_INVALID, "num_groups must divide the channels");
    float eps = oq_node_attr_float(k->node, "epsilon", 1e-5f);
    int64_t N = x->dims[0], C = x->dims[1], sz = 1, cg = C / G;
    for (size_t i = 2; i < x->rank; i++)
        sz *= x->dims[i];
    int64_t ns = oq_rt_tensor_numel(in[1]);
    bool per_channel = ns == C && !(k->opset < 21 && ns == G && G != C);
    const float *xd = x->data, *sc = in[1]->data, *bi = in[2]->data;
    float *y = out[0].data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            const float *xp = xd + (n * C + g * cg) * sz;
            int64_t cnt = cg * sz;
            double mean = 0, var = 0;
            for (int64_t i = 0; i < cnt; i++)
                mean += xp[i];
            mean /= (double)cnt;
            for (int64_t i = 0; i < cnt; i++)
                var += (xp[i] - mean) * (xp[i] - mean);
            var /= (double)cnt;
            double inv = 1.0 / sqrt(var + eps);
            for (int64_t c = 0; c < cg; c++) {
                int64_t si = per_channel ? g * cg + c : g;
                for (int64_t p = 0; p < sz; p++) {
                    int64_t i = c * sz + p;
                    y[(n * C + g * cg) * sz + i] = (float)((xp[i] - mean) * inv * sc[si] + bi[si]);
                }
            }
        }
    return OQ_OK;
}

/* ------------------------------------------------------------------ MVN ---------- */

/* Element e moved by idx along the reduced axes (strides st). */
static int64_t mvn_offset(int64_t e, const int64_t *idx, const int64_t *st, const bool *red,
                          size_t r)
{
    int64_t off = e;
    for (size_t i = 0; i < r; i++)
        if (red[i])
            off += idx[i] * st[i];
    return off;
}

/* Steps idx over the reduced axes (last fastest); false once past the last index. */
static bool mvn_next(int64_t *idx, const int64_t *dims, const bool *red, size_t r)
{
    size_t i = r;
    while (i-- > 0) {
        if (!red[i])
            continue;
        if (++idx[i] < dims[i])
            return true;
        idx[i] = 0;
    }
    return false;
}

/* MeanVarianceNormalization: (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9) over axes */
static oq_status run_mvn(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    size_t r = x->rank;
    bool red[OQ_RT_MAX_RANK] = {false};
    const int64_t *ax;
    int64_t na = oq_node_attr_ints(k->node, "axes", &ax);
    if (na < 0) {
        static const int64_t dflt[3] = {0, 2, 3};
        ax = dflt;
        na = 3;
    }
    for (int64_t i = 0; i < na; i++) {
        int64_t a = oq_k_axis(ax[i], r);
        if (a < 0)
            return oq_k_error(k, OQ_ERR_INVALID, "axis %lld out of range", (long long)ax[i]);
        red[a] = true;
    }
    int64_t n = oq_rt_tensor_numel(x), st[OQ_RT_MAX_RANK], s = 1;
    for (size_t i = r; i-- > 0;) {
        st[i] = s;
        s *= x->dims[i];
    }
    const float *xd = x->data;
    float *y = out[0].data;
    /* one pass per group, found from its representative: the element whose reduced
       coordinates are all 0 */
    for (int64_t e = 0; e < n; e++) {
        bool rep = true;
        for (size_t i = 0; i < r && rep; i++)
            if (red[i] && (e / st[i]) % x->dims[i] != 0)
                rep = false;
        if (!rep)
            continue;
        double m = 0, m2 = 0;
        int64_t cnt = 0, idx[OQ_RT_MAX_RANK] = {0};
        do {
            int64_t off = mvn_offset(e, idx, st, red, r);
            m += xd[off];
            m2 += (double)xd[off] * xd[off];
            cnt++;
        } while (mvn_next(idx, x->dims, red, r));
        m /= (double)cnt;
        m2 /= (double)cnt;
        double sd = sqrt(m2 - m * m);
        memset(idx, 0, sizeof idx);
        do {
            int64_t off = mvn_offset(e, idx, st, red, r);
            y[off] = (float)((xd[off] - m) / (sd + 1e-9));
        } while (mvn_next(idx, x->dims, red, r));
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ LRN ---------- */

static oq_status run_lrn(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    if (x->rank < 2)
        return oq_k_error(k, OQ_ERR_INVALID, "input rank below 2");
    int64_t size = oq_node_attr_int(k->node, "size", 0);
    if (size <= 0)
        return oq_k_error(k, OQ_ERR_INVALID, "size must be positive");
    double alpha = oq_node_attr_float(k->node, "alpha", 1e-4f);
    double beta = oq_node_attr_float(k->node, "beta", 0.75f);
    double bias = oq_node_attr_float(k->node, "bias", 1.0f);
    int64_t N = x->dims[0], C = x->dims[1], sz = 1;
    for (size_t i = 2; i < x->rank; i++)
        sz *= x->dims[i];
    const float *xd = x->data;
    float *y = out[0].data;
    int64_t lo_off = (size - 1) / 2, hi_off = (size - 1) - lo_off;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < sz; p++) {
                double sq = 0;
                for (int64_t cc = c - lo_off; cc <= c + hi_off; cc++)
                    if (cc >= 0 && cc < C) {
                        double v = xd[(n * C + cc) * sz + p];
                        sq += v * v;
                    }
                int64_t i = (n * C + c) * sz + p;
                y[i] = (float)(xd[i] / pow(bias + alpha / (double)size * sq, beta));
            }
    return OQ_OK;
}

/* LpNormalization: x / ||x||_p along `axis` (default -1), p 1 or 2 (default 2), in double;
 * a zero norm gives 0, as onnxruntime */
static oq_status run_lpnorm(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, oq_rt_tensor *out,
                            size_t n_out)
{
    (void)n_in, (void)n_out;
    const oq_rt_tensor *x = in[0];
    int64_t pe = oq_node_attr_int(k->node, "p", 2), axis = oq_node_attr_int(k->node, "axis", -1);
    int64_t r = (int64_t)x->rank;
    if (pe != 1 && pe != 2)
        return oq_k_error(k, OQ_ERR_INVALID, "p must be 1 or 2");
    if (axis < -r || axis >= r)
        return oq_k_error(k, OQ_ERR_INVALID, "axis %lld out of range", (long long)axis);
    if (axis < 0)
        axis += r;
    int64_t outer = 1, len = x->dims[axis], inner = 1;
    for (int64_t i = 0; i < axis; i++)
        outer *= x->dims[i];
    for (int64_t i = axis + 1; i < r; i++)
        inner *= x->dims[i];
    const float *xd = x->data;
    float *y = out[0].data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in_ = 0; in_ < inner; in_++) {
            const float *xp = xd + o * len * inner + in_;
            float *yp = y + o * len * inner + in_;
            double s = 0;
            for (int64_t j = 0; j < len; j++)
                s += pe == 1 ? fabs((double)xp[j * inner]) : (double)xp[j * inner] * xp[j * inner];
            double nrm = pe == 1 ? s : sqrt(s);
            for (int64_t j = 0; j < len; j++)
                yp[j * inner] = nrm > 0 ? (float)(xp[j * inner] / nrm) : 0.0f;
        }
    return OQ_OK;
}

#define F OQ_T(FLOAT)
const oq_kernel oq_kernels_norm[] = {
    {"", "BatchNormalization", 1, 0, 0, F, NULL, NULL, infer_bn, run_bn, NULL, 5},
    {"", "InstanceNormalization", 6, 0, 0, F, NULL, NULL, oq_k_infer_like_input0, run_in, NULL, 3},
    {"", "LayerNormalization", 17, 0, 0, F, NULL, NULL, infer_ln, run_ln, NULL, 2},
    {"", "Softmax", 1, 0, 0, F | OQ_T(FLOAT16), NULL, NULL, oq_k_infer_like_input0, run_softmax, NULL, 1},
    {"", "LogSoftmax", 1, 0, 0, F, NULL, NULL, oq_k_infer_like_input0, run_softmax, NULL, 1},
    {"", "Hardmax", 1, 0, 0, F, NULL, NULL, oq_k_infer_like_input0, run_softmax, NULL, 1},
    {"", "MeanVarianceNormalization", 9, 0, 0, F, NULL, NULL, oq_k_infer_like_input0, run_mvn, NULL, 1},
    {"", "LRN", 1, 0, 0, F, NULL, NULL, oq_k_infer_like_input0, run_lrn, NULL, 1},
    {"", "LpNormalization", 1, 0, 0, F, NULL, NULL, oq_k_infer_like_input0, run_lpnorm, NULL, 1},
    {"", "GroupNormalization", 18, 0, 0, F, NULL, NULL, oq_k_infer_like_input0, run_gn, NULL, 3},
};
OQ_KERNEL_TABLE_END(norm);
