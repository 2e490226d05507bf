/* Index and layout operators: Trilu CumSum DepthToSpace SpaceToDepth EyeLike OneHot
 * GatherND ScatterND ScatterElements Scatter Compress NonZero TopK. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernel.h"

static int64_t numel(const oq_rt_tensor *t) { return oq_rt_tensor_numel(t); }

static void strides_of(const int64_t *dims, size_t r, int64_t *st)
{
    int64_t s = 1;
    for (size_t i = r; i-- > 0;) {
        st[i] = s;
        s *= dims[i];
    }
}

static oq_status infer_like0(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                             oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    return oq_k_set_out(k, &out[0], in[0]->dtype, in[0]->dims, in[0]->rank);
}

/* ------------------------------------------------------------------ Trilu -------- */

static oq_status run_trilu(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    if (x->rank < 2)
        return oq_k_error(k, OQ_ERR_INVALID, "input rank below 2");
    int64_t kk = n_in > 1 && in[1] ? oq_k_get_int(in[1], 0) : 0;
    bool upper = oq_node_attr_int(k->node, "upper", 1) != 0;
    int64_t R = x->dims[x->rank - 2], C = x->dims[x->rank - 1], n = numel(x);
    size_t es = oq_k_elsize(x->dtype);
    memcpy(out[0].data, x->data, (size_t)x->nbytes);
    for (int64_t i = 0; i < n; i++) {
        int64_t c = i % C, r = (i / C) % R;
        bool keep = upper ? c - r >= kk : c - r <= kk;
        if (!keep)
            memset((char *)out[0].data + (size_t)i * es, 0, es);
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ CumSum ------- */

static oq_status run_cumsum(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    int64_t axis = oq_k_axis(oq_k_get_int(in[1], 0), x->rank);
    if (axis < 0)
        return oq_k_error(k, OQ_ERR_INVALID, "axis out of range");
    bool excl = oq_node_attr_int(k->node, "exclusive", 0), rev = oq_node_attr_int(k->node, "reverse", 0);
    int64_t st[OQ_RT_MAX_RANK];
    strides_of(x->dims, x->rank, st);
    int64_t len = x->dims[axis], s = st[axis], n = numel(x);
    bool isint = !oq_dtype_is_float(x->dtype);
    for (int64_t base = 0; base < n; base++) {
        if ((base / s) % len != 0)
            continue;
        double acc = 0;
        int64_t iacc = 0;
        for (int64_t t = 0; t < len; t++) {
            int64_t j = rev ? len - 1 - t : t, off = base + j * s;
            double v = oq_k_get_f64(x, off);
            int64_t iv = isint ? oq_k_get_int(x, off) : 0;
            if (excl) {
                if (isint && x->dtype == OQ_DTYPE_INT64) ((int64_t *)out[0].data)[off] = iacc;
                else if (isint && x->dtype == OQ_DTYPE_INT32) ((int32_t *)out[0].data)[off] = (int32_t)iacc;
                else oq_k_set_f64(&out[0], off, acc);
            }
            acc += v;
            iacc += iv;
            if (!excl) {
                if (isint && x->dtype == OQ_DTYPE_INT64) ((int64_t *)out[0].data)[off] = iacc;
                else if (isint && x->dtype == OQ_DTYPE_INT32) ((int32_t *)out[0].data)[off] = (int32_t)iacc;
                else oq_k_set_f64(&out[0], off, x->dtype == OQ_DTYPE_FLOAT ? (double)(float)acc : acc);
            }
        }
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ Depth/Space -- */

static oq_status infer_d2s(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    const oq_rt_tensor *x = in[0];
    int64_t b = oq_node_attr_int(k->node, "blocksize", 0);
    if (x->rank != 4 || b <= 0)
        return oq_k_error(k, OQ_ERR_INVALID, "needs a 4-D input and a positive blocksize");
    int64_t d[4] = {x->dims[0], x->dims[1], x->dims[2], x->dims[3]};
    if (strcmp(k->node->op_type, "DepthToSpace") == 0) {
        if (d[1] % (b * b))
            return oq_k_error(k, OQ_ERR_INVALID, "channels not divisible by blocksize^2");
        d[1] /= b * b;
        d[2] *= b;
        d[3] *= b;
    } else {
        if (d[2] % b || d[3] % b)
            return oq_k_error(k, OQ_ERR_INVALID, "spatial dims not divisible by blocksize");
        d[1] *= b * b;
        d[2] /= b;
        d[3] /= b;
    }
    return oq_k_set_out(k, &out[0], x->dtype, d, 4);
}

static oq_status run_d2s(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    int64_t b = oq_node_attr_int(k->node, "blocksize", 0);
    bool d2s = strcmp(k->node->op_type, "DepthToSpace") == 0;
    bool crd = strcmp(oq_node_attr_string(k->node, "mode", "DCR"), "CRD") == 0;
    size_t es = oq_k_elsize(x->dtype);
    /* iterate over the output (d2s) or the input (s2d) in the big layout */
    const int64_t *big = d2s ? out[0].dims : x->dims;
    int64_t N = big[0], C = big[1], H = big[2], W = big[3];
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++) {
                    int64_t bh = h % b, bw = w % b;
                    int64_t sc = crd ? (c * b * b + bh * b + bw) : ((bh * b + bw) * C + c);
                    int64_t small = ((n * C * b * b + sc) * (H / b) + h / b) * (W / b) + w / b;
                    int64_t large = ((n * C + c) * H + h) * W + w;
                    if (d2s)
                        memcpy((char *)out[0].data + (size_t)large * es,
                               (const char *)x->data + (size_t)small * es, es);
                    else
                        memcpy((char *)out[0].data + (size_t)small * es,
                               (const char *)x->data + (size_t)large * es, es);
                }
    return OQ_OK;
}

/* ------------------------------------------------------------------ EyeLike ------ */

static oq_status infer_eyelike(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                               oq_rt_tensor *out, size_t n_out)
{
    int64_t dt = oq_node_attr_int(k->node, "dtype", 0);
    out[0].dtype = dt ? (int32_t)dt : in[0]->dtype;
    if (!oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    if (in[0]->rank != 2)
        return oq_k_error(k, OQ_ERR_INVALID, "input must be 2-D");
    return oq_k_set_out(k, &out[0], out[0].dtype, in[0]->dims, 2);
}

static oq_status run_eyelike(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                             oq_rt_tensor *out, size_t n_out)
{
    int64_t kk = oq_node_attr_int(k->node, "k", 0), R = out[0].dims[0], C = out[0].dims[1];
    memset(out[0].data, 0, (size_t)out[0].nbytes);
    for (int64_t r = 0; r < R; r++)
        if (r + kk >= 0 && r + kk < C)
            oq_k_set_f64(&out[0], r * C + r + kk, 1);
    return OQ_OK;
}

/* ------------------------------------------------------------------ OneHot ------- */

static oq_status infer_onehot(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                              oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[2]->dtype;
    if (!in[1]->data || !oq_k_shapes_known(in, 3))
        return oq_k_defer(k, out, n_out);
    size_t r = in[0]->rank + 1;
    int64_t axis = oq_k_axis(oq_node_attr_int(k->node, "axis", -1), r);
    int64_t depth = oq_k_get_int(in[1], 0);
    if (axis < 0 || depth <= 0 || r > OQ_RT_MAX_RANK)
        return oq_k_error(k, OQ_ERR_INVALID, "bad axis or depth");
    int64_t d[OQ_RT_MAX_RANK];
    for (size_t i = 0, j = 0; i < r; i++)
        d[i] = (int64_t)i == axis ? depth : in[0]->dims[j++];
    return oq_k_set_out(k, &out[0], out[0].dtype, d, r);
}

static oq_status run_onehot(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    size_t r = out[0].rank;
    int64_t axis = oq_k_axis(oq_node_attr_int(k->node, "axis", -1), r);
    int64_t depth = out[0].dims[axis], inner = 1, outer = 1;
    for (size_t i = 0; i < r; i++)
        if ((int64_t)i > axis)
            inner *= out[0].dims[i];
        else if ((int64_t)i < axis)
            outer *= out[0].dims[i];
    size_t es = oq_k_elsize(out[0].dtype);
    const char *off = in[2]->data, *on = (const char *)in[2]->data + es;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t d = 0; d < depth; d++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t idx = oq_k_get_int(in[0], o * inner + i);
                if (idx < 0)
                    idx += depth;
                memcpy((char *)out[0].data + (size_t)((o * depth + d) * inner + i) * es,
                       idx == d ? on : off, es);
            }
    return OQ_OK;
}

/* ------------------------------------------------------------------ GatherND ----- */

static oq_status infer_gnd(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, 2))
        return oq_k_defer(k, out, n_out);
    int64_t bd = oq_node_attr_int(k->node, "batch_dims", 0);
    size_t r = in[0]->rank, q = in[1]->rank;
    int64_t last = q ? in[1]->dims[q - 1] : 0;
    if (q < 1 || last < 1 || (size_t)(last + bd) > r)
        return oq_k_error(k, OQ_ERR_INVALID, "bad indices shape");
    int64_t d[OQ_RT_MAX_RANK];
    size_t n = 0;
    for (size_t i = 0; i + 1 < q; i++)
        d[n++] = in[1]->dims[i];
    for (size_t i = (size_t)(bd + last); i < r; i++)
        d[n++] = in[0]->dims[i];
    return oq_k_set_out(k, &out[0], in[0]->dtype, d, n);
}

static oq_status run_gnd(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0], *ix = in[1];
    int64_t bd = oq_node_attr_int(k->node, "batch_dims", 0);
    size_t r = x->rank, q = ix->rank, es = oq_k_elsize(x->dtype);
    int64_t last = ix->dims[q - 1], st[OQ_RT_MAX_RANK];
    strides_of(x->dims, r, st);
    int64_t slice = 1, batch = 1;
    for (size_t i = (size_t)(bd + last); i < r; i++)
        slice *= x->dims[i];
    for (int64_t i = 0; i < bd; i++)
        batch *= x->dims[i];
    int64_t tuples = numel(ix) / last, per_batch = tuples / (batch ? batch : 1);
    for (int64_t t = 0; t < tuples; t++) {
        int64_t b = per_batch ? t / per_batch : 0;
        int64_t off = b * (bd ? st[bd - 1] : 0);
        for (int64_t j = 0; j < last; j++) {
            int64_t v = oq_k_get_int(ix, t * last + j), dim = x->dims[bd + j];
            if (v < -dim || v >= dim)
                return oq_k_error(k, OQ_ERR_INVALID, "index %lld out of range", (long long)v);
            off += (v < 0 ? v + dim : v) * st[bd + j];
        }
        memcpy((char *)out[0].data + (size_t)(t * slice) * es, (const char *)x->data + (size_t)off * es,
               (size_t)slice * es);
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ Scatter* ----- */

typedef enum red { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN } red;

static red reduction(const oq_kctx *k)
{
    const char *s = oq_node_attr_string(k->node, "reduction", "none");
    return strcmp(s, "add") == 0 ? RED_ADD : strcmp(s, "mul") == 0 ? RED_MUL
         : strcmp(s, "max") == 0 ? RED_MAX : strcmp(s, "min") == 0 ? RED_MIN : RED_NONE;
}

static void scatter_one(oq_rt_tensor *o, int64_t dst, const oq_rt_tensor *u, int64_t src, red rd)
{
    size_t es = oq_k_elsize(o->dtype);
    if (rd == RED_NONE) {
        memcpy((char *)o->data + (size_t)dst * es, (const char *)u->data + (size_t)src * es, es);
        return;
    }
    double a = oq_k_get_f64(o, dst), b = oq_k_get_f64(u, src);
    double v = rd == RED_ADD ? a + b : rd == RED_MUL ? a * b : rd == RED_MAX ? (a > b ? a : b)
                                                                             : (a < b ? a : b);
    oq_k_set_f64(o, dst, v);
}

static oq_status run_snd(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0], *ix = in[1], *up = in[2];
    memcpy(out[0].data, x->data, (size_t)x->nbytes);
    size_t r = x->rank, q = ix->rank;
    int64_t last = ix->dims[q - 1], st[OQ_RT_MAX_RANK];
    strides_of(x->dims, r, st);
    int64_t slice = 1;
    for (size_t i = (size_t)last; i < r; i++)
        slice *= x->dims[i];
    red rd = reduction(k);
    int64_t tuples = numel(ix) / last;
    for (int64_t t = 0; t < tuples; t++) {
        int64_t off = 0;
        for (int64_t j = 0; j < last; j++) {
            int64_t v = oq_k_get_int(ix, t * last + j), dim = x->dims[j];
            if (v < -dim || v >= dim)
                return oq_k_error(k, OQ_ERR_INVALID, "index %lld out of range", (long long)v);
            off += (v < 0 ? v + dim : v) * st[j];
        }
        for (int64_t e = 0; e < slice; e++)
            scatter_one(&out[0], off + e, up, t * slice + e, rd);
    }
    return OQ_OK;
}

static oq_status run_sel(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0], *ix = in[1], *up = in[2];
    memcpy(out[0].data, x->data, (size_t)x->nbytes);
    size_t r = x->rank;
    int64_t axis = oq_k_axis(oq_node_attr_int(k->node, "axis", 0), r);
    if (axis < 0 || ix->rank != r)
        return oq_k_error(k, OQ_ERR_INVALID, "bad axis or indices rank");
    int64_t st[OQ_RT_MAX_RANK], idx[OQ_RT_MAX_RANK] = {0};
    strides_of(x->dims, r, st);
    red rd = reduction(k);
    int64_t n = numel(ix);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = oq_k_get_int(ix, i), dim = x->dims[axis];
        if (v < -dim || v >= dim)
            return oq_k_error(k, OQ_ERR_INVALID, "index %lld out of range", (long long)v);
        int64_t off = 0;
        for (size_t a = 0; a < r; a++)
            off += ((int64_t)a == axis ? (v < 0 ? v + dim : v) : idx[a]) * st[a];
        scatter_one(&out[0], off, up, i, rd);
        for (size_t a = r; a-- > 0;) {
            if (++idx[a] < ix->dims[a])
                break;
            idx[a] = 0;
        }
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ Compress/NonZero */

static oq_status infer_compress(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                                oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!in[1]->data || !oq_k_shapes_known(in, 2))
        return oq_k_defer(k, out, n_out);
    int64_t cnt = 0, nc = numel(in[1]);
    oq_attr *a = oq_node_attr(k->node, "axis");
    int64_t limit = a ? in[0]->dims[oq_k_axis(a->i, in[0]->rank) < 0 ? 0 : oq_k_axis(a->i, in[0]->rank)]
                      : numel(in[0]);
    for (int64_t i = 0; i < nc && i < limit; i++)
        cnt += ((const uint8_t *)in[1]->data)[i] != 0;
    if (!a)
        return oq_k_set_out(k, &out[0], in[0]->dtype, &cnt, 1);
    int64_t axis = oq_k_axis(a->i, in[0]->rank);
    if (axis < 0)
        return oq_k_error(k, OQ_ERR_INVALID, "axis out of range");
    int64_t d[OQ_RT_MAX_RANK];
    memcpy(d, in[0]->dims, in[0]->rank * 8);
    d[axis] = cnt;
    return oq_k_set_out(k, &out[0], in[0]->dtype, d, in[0]->rank);
}

static oq_status run_compress(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                              oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    const uint8_t *c = in[1]->data;
    int64_t nc = numel(in[1]);
    size_t es = oq_k_elsize(x->dtype);
    oq_attr *a = oq_node_attr(k->node, "axis");
    if (!a) {
        int64_t j = 0, n = numel(x);
        for (int64_t i = 0; i < n && i < nc; i++)
            if (c[i])
                memcpy((char *)out[0].data + (size_t)(j++) * es, (const char *)x->data + (size_t)i * es, es);
        return OQ_OK;
    }
    int64_t axis = oq_k_axis(a->i, x->rank), outer = 1, inner = 1, len = x->dims[axis];
    for (int64_t i = 0; i < axis; i++)
        outer *= x->dims[i];
    for (size_t i = (size_t)axis + 1; i < x->rank; i++)
        inner *= x->dims[i];
    int64_t olen = out[0].dims[axis];
    for (int64_t o = 0; o < outer; o++) {
        int64_t j = 0;
        for (int64_t t = 0; t < len && t < nc; t++)
            if (c[t])
                memcpy((char *)out[0].data + (size_t)((o * olen + j++) * inner) * es,
                       (const char *)x->data + (size_t)((o * len + t) * inner) * es,
                       (size_t)inner * es);
    }
    return OQ_OK;
}

static oq_status infer_nonzero(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                               oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = OQ_DTYPE_INT64;
    if (!in[0]->data || !oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    int64_t cnt = 0, n = numel(in[0]);
    for (int64_t i = 0; i < n; i++)
        cnt += oq_k_get_f64(in[0], i) != 0;
    int64_t d[2] = {(int64_t)in[0]->rank, cnt};
    return oq_k_set_out(k, &out[0], OQ_DTYPE_INT64, d, 2);
}

static oq_status run_nonzero(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                             oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    int64_t n = numel(x), cnt = out[0].dims[1], j = 0, idx[OQ_RT_MAX_RANK] = {0};
    for (int64_t i = 0; i < n; i++) {
        if (oq_k_get_f64(x, i) != 0) {
            for (size_t a = 0; a < x->rank; a++)
                ((int64_t *)out[0].data)[(int64_t)a * cnt + j] = idx[a];
            j++;
        }
        for (size_t a = x->rank; a-- > 0;) {
            if (++idx[a] < x->dims[a])
                break;
            idx[a] = 0;
        }
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ TopK --------- */

static int64_t topk_k(const oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, bool *need)
{
    *need = false;
    if (k->opset < 10)
        return oq_node_attr_int(k->node, "k", 0);
    if (!in[1])
        return -1;
    if (!in[1]->data) {
        *need = true;
        return 0;
    }
    return oq_k_get_int(in[1], 0);
}

static oq_status infer_topk(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    out[1].dtype = OQ_DTYPE_INT64;
    bool need;
    int64_t kk = topk_k(k, in, n_in, &need);
    if (need || !oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    int64_t axis = oq_k_axis(oq_node_attr_int(k->node, "axis", -1), in[0]->rank);
    if (axis < 0 || kk < 0 || kk > in[0]->dims[axis])
        return oq_k_error(k, OQ_ERR_INVALID, "bad axis or k (K is required from opset 10)");
    int64_t d[OQ_RT_MAX_RANK];
    memcpy(d, in[0]->dims, in[0]->rank * 8);
    d[axis] = kk;
    oq_status st = oq_k_set_out(k, &out[0], in[0]->dtype, d, in[0]->rank);
    return st ? st : oq_k_set_out(k, &out[1], OQ_DTYPE_INT64, d, in[0]->rank);
}

typedef struct tk_item {
    double v;
    int64_t i;
} tk_item;

static int tk_largest(const void *a, const void *b)
{
    const tk_item *x = a, *y = b;
    if (x->v != y->v)
        return x->v > y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int tk_smallest(const void *a, const void *b)
{
    const tk_item *x = a, *y = b;
    if (x->v != y->v)
        return x->v < y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static oq_status run_topk(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    int64_t axis = oq_k_axis(oq_node_attr_int(k->node, "axis", -1), x->rank);
    bool largest = oq_node_attr_int(k->node, "largest", 1) != 0;
    int64_t len = x->dims[axis], kk = out[0].dims[axis], inner = 1, outer = 1;
    for (int64_t i = 0; i < axis; i++)
        outer *= x->dims[i];
    for (size_t i = (size_t)axis + 1; i < x->rank; i++)
        inner *= x->dims[i];
    tk_item *items = oq_k_scratch(k, (size_t)(len ? len : 1) * sizeof(tk_item));
    if (!items)
        return OQ_ERR_NOMEM;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            for (int64_t t = 0; t < len; t++) {
                items[t].v = oq_k_get_f64(x, (o * len + t) * inner + i);
                items[t].i = t;
            }
            qsort(items, (size_t)len, sizeof(tk_item), largest ? tk_largest : tk_smallest);
            for (int64_t t = 0; t < kk; t++) {
                int64_t dst = (o * kk + t) * inner + i;
                size_t es = oq_k_elsize(x->dtype);
                memcpy((char *)out[0].data + (size_t)dst * es,
                       (const char *)x->data + (size_t)((o * len + items[t].i) * inner + i) * es, es);
                ((int64_t *)out[1].data)[dst] = items[t].i;
            }
        }
    return OQ_OK;
}

/* ------------------------------------------------------------------ ReverseSequence */

static oq_status run_revseq(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    const oq_rt_tensor *x = in[0];
    int64_t ta = oq_node_attr_int(k->node, "time_axis", 0), ba = oq_node_attr_int(k->node, "batch_axis", 1);
    if (x->rank < 2 || (ta != 0 && ta != 1) || ba != 1 - ta)
        return oq_k_error(k, OQ_ERR_INVALID, "time_axis/batch_axis must be 0/1");
    int64_t st[OQ_RT_MAX_RANK], idx[OQ_RT_MAX_RANK] = {0}, n = numel(x);
    strides_of(x->dims, x->rank, st);
    size_t es = oq_k_elsize(x->dtype);
    for (int64_t i = 0; i < n; i++) {
        int64_t len = oq_k_get_int(in[1], idx[ba]), t = idx[ta];
        int64_t src = i;
        if (t < len)
            src = i + (len - 1 - 2 * t) * st[ta];
        memcpy((char *)out[0].data + (size_t)i * es, (const char *)x->data + (size_t)src * es, es);
        for (size_t a = x->rank; a-- > 0;) {
            if (++idx[a] < x->dims[a])
                break;
            idx[a] = 0;
        }
    }
    return OQ_OK;
}

#define ANY OQ_T_ALL
#define R(op, since, types, inf, rn, mn) {"", op, since, 0, 0, types, NULL, NULL, inf, rn, NULL, mn}
const oq_kernel oq_kernels_index_ops[] = {
    R("Trilu", 14, ANY, infer_like0, run_trilu, 1),
    R("CumSum", 11, OQ_T_NUMERIC, infer_like0, run_cumsum, 2),
    R("DepthToSpace", 1, ANY, infer_d2s, run_d2s, 1),
    R("SpaceToDepth", 1, ANY, infer_d2s, run_d2s, 1),
    R("EyeLike", 9, ANY, infer_eyelike, run_eyelike, 1),
    R("OneHot", 9, OQ_T_NUMERIC, infer_onehot, run_onehot, 3),
    R("GatherND", 11, ANY, infer_gnd, run_gnd, 2),
    R("ScatterND", 11, ANY, infer_like0, run_snd, 3),
    R("ScatterElements", 11, ANY, infer_like0, run_sel, 3),
    R("Scatter", 9, ANY, infer_like0, run_sel, 3),
    R("Compress", 9, ANY, infer_compress, run_compress, 2),
    R("NonZero", 9, ANY, infer_nonzero, run_nonzero, 1),
    R("TopK", 1, OQ_T_NUMERIC, infer_topk, run_topk, 1),
    R("ReverseSequence", 10, ANY, infer_like0, run_revseq, 2),
};
OQ_KERNEL_TABLE_END(index_ops);
