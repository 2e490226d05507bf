/* Shape and data movement operators: Shape Size Reshape Flatten Squeeze Unsqueeze
 * Identity Dropout Transpose Concat Split Slice Gather GatherElements Expand Tile
 * ConstantOfShape Range Pad. Data is moved as bytes, so every fixed-size dtype works. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernel.h"

#define DEFER_UNLESS_KNOWN(k, in, n_in, out, n_out)           \
    do {                                                       \
        if (!oq_k_shapes_known((in), (n_in)))                  \
            return oq_k_defer((k), (out), (n_out));            \
    } while (0)

static int64_t numel(const oq_rt_tensor *t) { return oq_rt_tensor_numel(t); }

static oq_status copy_run(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    if (in[0]->nbytes && out[0].data != in[0]->data)
        memcpy(out[0].data, in[0]->data, (size_t)in[0]->nbytes);
    return OQ_OK;
}

/* Read the ints of a 1-D (or scalar) int tensor; returns count or -1. */
static int64_t read_ints(const oq_rt_tensor *t, int64_t *v, int64_t max)
{
    int64_t n = numel(t);
    if (n < 0 || n > max || (t->dtype != OQ_DTYPE_INT64 && t->dtype != OQ_DTYPE_INT32))
        return -1;
    for (int64_t i = 0; i < n; i++)
        v[i] = oq_k_get_int(t, i);
    return n;
}

/* ------------------------------------------------------------------ Shape/Size --- */

static oq_status infer_shape(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                             oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = OQ_DTYPE_INT64;
    DEFER_UNLESS_KNOWN(k, in, 1, out, n_out);
    int64_t r = (int64_t)in[0]->rank;
    int64_t start = oq_node_attr_int(k->node, "start", 0), end = oq_node_attr_int(k->node, "end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    int64_t n = end > start ? end - start : 0;
    return oq_k_set_out(k, &out[0], OQ_DTYPE_INT64, &n, 1);
}

static oq_status run_shape(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    int64_t r = (int64_t)in[0]->rank;
    int64_t start = oq_node_attr_int(k->node, "start", 0);
    if (start < 0) start += r;
    start = start < 0 ? 0 : start > r ? r : start;
    for (int64_t i = 0; i < out[0].dims[0]; i++)
        ((int64_t *)out[0].data)[i] = in[0]->dims[start + i];
    return OQ_OK;
}

static oq_status infer_size(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    return oq_k_set_out(k, &out[0], OQ_DTYPE_INT64, NULL, 0);
}

static oq_status run_size(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    *(int64_t *)out[0].data = numel(in[0]);
    return OQ_OK;
}

/* ------------------------------------------------------------------ Reshape ------ */

static oq_status infer_reshape(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                               oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    int64_t shape[OQ_RT_MAX_RANK];
    int64_t n;
    if (k->opset < 5) {
        const int64_t *v;
        n = oq_node_attr_ints(k->node, "shape", &v);
        if (n < 0 || n > OQ_RT_MAX_RANK)
            return oq_k_error(k, OQ_ERR_INVALID, "bad shape attribute");
        memcpy(shape, v, (size_t)n * sizeof(int64_t));
    } else {
        if (n_in < 2 || !in[1])
            return oq_k_error(k, OQ_ERR_INVALID, "missing shape input");
        if (!oq_k_data_known(in + 1, 1) || !oq_k_shapes_known(in, 2))
            return oq_k_defer(k, out, n_out);
        n = read_ints(in[1], shape, OQ_RT_MAX_RANK);
        if (n < 0)
            return oq_k_error(k, OQ_ERR_INVALID, "bad shape input");
    }
    DEFER_UNLESS_KNOWN(k, in, 1, out, n_out);
    bool allowzero = oq_node_attr_int(k->node, "allowzero", 0) != 0;
    int64_t known = 1, infer_at = -1;
    for (int64_t i = 0; i < n; i++) {
        if (shape[i] == 0 && !allowzero) {
            if ((size_t)i >= in[0]->rank)
                return oq_k_error(k, OQ_ERR_INVALID, "shape[%lld] = 0 copies a missing dim",
                                  (long long)i);
            shape[i] = in[0]->dims[i];
        }
        if (shape[i] == -1) {
            if (infer_at >= 0)
                return oq_k_error(k, OQ_ERR_INVALID, "more than one -1 in the shape");
            infer_at = i;
        } else if (shape[i] < 0) {
            return oq_k_error(k, OQ_ERR_INVALID, "negative dim %lld in the shape",
                              (long long)shape[i]);
        } else {
            known *= shape[i];
        }
    }
    int64_t total = numel(in[0]);
    if (infer_at >= 0) {
        if (known == 0 || total % known)
            return oq_k_error(k, OQ_ERR_INVALID, "cannot reshape %lld elements", (long long)total);
        shape[infer_at] = total / known;
    } else if (known != total) {
        char a[128];
        return oq_k_error(k, OQ_ERR_INVALID, "cannot reshape %s to %lld elements",
                          oq_rt_tensor_describe(in[0], a, sizeof a), (long long)known);
    }
    return oq_k_set_out(k, &out[0], in[0]->dtype, shape, (size_t)n);
}

static oq_status infer_flatten(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                               oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    DEFER_UNLESS_KNOWN(k, in, 1, out, n_out);
    int64_t r = (int64_t)in[0]->rank;
    int64_t axis = oq_node_attr_int(k->node, "axis", 1);
    if (axis < 0)
        axis += r;
    if (axis < 0 || axis > r)
        return oq_k_error(k, OQ_ERR_INVALID, "axis out of range");
    int64_t d[2] = {1, 1};
    for (int64_t i = 0; i < r; i++)
        d[i < axis ? 0 : 1] *= in[0]->dims[i];
    return oq_k_set_out(k, &out[0], in[0]->dtype, d, 2);
}

/* axes from the attribute (old opsets) or the second input */
static int64_t get_axes(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, int64_t attr_until,
                        int64_t *axes, bool *need_data)
{
    *need_data = false;
    if (k->opset <= attr_until) {
        const int64_t *v;
        int64_t n = oq_node_attr_ints(k->node, "axes", &v);
        if (n > OQ_RT_MAX_RANK)
            return -2;
        if (n > 0)
            memcpy(axes, v, (size_t)n * sizeof(int64_t));
        return n;
    }
    if (n_in < 2 || !in[1])
        return -1;
    if (!in[1]->data) {
        *need_data = true;
        return -1;
    }
    return read_ints(in[1], axes, OQ_RT_MAX_RANK);
}

static oq_status infer_squeeze(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                               oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    int64_t axes[OQ_RT_MAX_RANK];
    bool need;
    int64_t na = get_axes(k, in, n_in, 12, axes, &need);
    if (need || !oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    size_t r = in[0]->rank;
    bool drop[OQ_RT_MAX_RANK] = {false};
    if (na < 0) {
        for (size_t i = 0; i < r; i++)
            drop[i] = in[0]->dims[i] == 1;
    } else {
        for (int64_t i = 0; i < na; i++) {
            int64_t a = oq_k_axis(axes[i], r);
            if (a < 0 || in[0]->dims[a] != 1)
                return oq_k_error(k, OQ_ERR_INVALID, "cannot squeeze axis %lld", (long long)axes[i]);
            drop[a] = true;
        }
    }
    int64_t d[OQ_RT_MAX_RANK];
    size_t nr = 0;
    for (size_t i = 0; i < r; i++)
        if (!drop[i])
            d[nr++] = in[0]->dims[i];
    return oq_k_set_out(k, &out[0], in[0]->dtype, d, nr);
}

static oq_status infer_unsqueeze(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                                 oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    int64_t axes[OQ_RT_MAX_RANK];
    bool need;
    int64_t na = get_axes(k, in, n_in, 12, axes, &need);
    if (need || !oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    if (na < 0)
        return oq_k_error(k, OQ_ERR_INVALID, "missing axes");
    size_t r = in[0]->rank + (size_t)na;
    if (r > OQ_RT_MAX_RANK)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "rank too large");
    bool ins[OQ_RT_MAX_RANK] = {false};
    for (int64_t i = 0; i < na; i++) {
        int64_t a = oq_k_axis(axes[i], r);
        if (a < 0 || ins[a])
            return oq_k_error(k, OQ_ERR_INVALID, "bad axis %lld", (long long)axes[i]);
        ins[a] = true;
    }
    int64_t d[OQ_RT_MAX_RANK];
    size_t j = 0;
    for (size_t i = 0; i < r; i++)
        d[i] = ins[i] ? 1 : in[0]->dims[j++];
    return oq_k_set_out(k, &out[0], in[0]->dtype, d, r);
}

static oq_status infer_identity(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                                oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (n_out > 1)
        out[1].dtype = OQ_DTYPE_BOOL; /* Dropout mask */
    DEFER_UNLESS_KNOWN(k, in, 1, out, n_out);
    oq_status st = oq_k_set_out(k, &out[0], in[0]->dtype, in[0]->dims, in[0]->rank);
    if (st == OQ_OK && n_out > 1)
        st = oq_k_set_out(k, &out[1], OQ_DTYPE_BOOL, in[0]->dims, in[0]->rank);
    return st;
}

static oq_status run_dropout(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                             oq_rt_tensor *out, size_t n_out)
{
    if (k->opset >= 12 && n_in > 2 && in[2] && ((const uint8_t *)in[2]->data)[0]) {
        /* training mode drops at random; only ratio 0 (keep everything) is exact */
        double ratio = n_in > 1 && in[1] ? oq_k_get_f64(in[1], 0) : 0.5;
        if (ratio != 0)
            return oq_k_error(k, OQ_ERR_UNSUPPORTED, "Dropout in training mode (random) with "
                              "ratio %g", ratio);
    }
    copy_run(k, in, n_in, out, n_out);
    if (n_out > 1)
        memset(out[1].data, 1, (size_t)numel(&out[1]));
    return OQ_OK;
}

/* ------------------------------------------------------------------ Transpose ---- */

static oq_status get_perm(oq_kctx *k, size_t r, int64_t *perm)
{
    const int64_t *v;
    int64_t n = oq_node_attr_ints(k->node, "perm", &v);
    if (n < 0) {
        for (size_t i = 0; i < r; i++)
            perm[i] = (int64_t)(r - 1 - i);
        return OQ_OK;
    }
    if ((size_t)n != r)
        return oq_k_error(k, OQ_ERR_INVALID, "perm has %lld entries for rank %zu", (long long)n, r);
    bool seen[OQ_RT_MAX_RANK] = {false};
    for (size_t i = 0; i < r; i++) {
        int64_t a = oq_k_axis(v[i], r);
        if (a < 0 || seen[a])
            return oq_k_error(k, OQ_ERR_INVALID, "perm is not a permutation");
        seen[a] = true;
        perm[i] = a;
    }
    return OQ_OK;
}

static oq_status infer_transpose(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                                 oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    DEFER_UNLESS_KNOWN(k, in, 1, out, n_out);
    int64_t perm[OQ_RT_MAX_RANK], d[OQ_RT_MAX_RANK];
    oq_status st = get_perm(k, in[0]->rank, perm);
    if (st)
        return st;
    for (size_t i = 0; i < in[0]->rank; i++)
        d[i] = in[0]->dims[perm[i]];
    return oq_k_set_out(k, &out[0], in[0]->dtype, d, in[0]->rank);
}

/* Copy src (dims sdims, rank r) into dst where dst index i maps to source strides
 * `sstr` (element strides in the source for each dst axis): rows [b, e) of dst's innermost
 * axis. */
typedef struct strided_job {
    char *dst;
    const char *src;
    const int64_t *odims, *sstr;
    size_t r, es;
} strided_job;

static void strided_rows(void *arg, int64_t b, int64_t e, int worker)
{
    (void)worker;
    const strided_job *j = arg;
    const int64_t *odims = j->odims, *sstr = j->sstr;
    size_t r = j->r, es = j->es;
    int64_t inner = odims[r - 1], is = sstr[r - 1];
    int64_t idx[OQ_RT_MAX_RANK] = {0}, off = 0, rest = b;
    for (size_t a = r - 1; a-- > 0;) { /* row b's index on the outer axes */
        idx[a] = rest % odims[a];
        rest /= odims[a];
        off += idx[a] * sstr[a];
    }
    for (int64_t row = b; row < e; row++) {
        int64_t o = row * inner;
        if (es == 4) {
            const uint32_t *s = (const uint32_t *)(const void *)j->src;
            uint32_t *dd = (uint32_t *)(void *)j->dst + o;
            for (int64_t t = 0; t < inner; t++)
                dd[t] = s[off + t * is];
        } else {
            for (int64_t t = 0; t < inner; t++)
                memcpy(j->dst + (size_t)(o + t) * es, j->src + (size_t)(off + t * is) * es, es);
        }
        oq_k_index_next(idx, odims, sstr, r - 1, &off);
    }
}

/* ... all of dst; rows split over the threads when there are over 256 KiB to copy (a copy,
 * so the bytes are the same for any split) */
static void strided_copy(const oq_kctx *k, char *dst, const char *src, const int64_t *odims, const int64_t *sstr,
                         size_t r, size_t es)
{
    if (r == 0) {
        memcpy(dst, src, es);
        return;
    }
    int64_t n = oq_dims_numel(odims, r), inner = odims[r - 1];
    if (n <= 0 || inner <= 0)
        return;
    strided_job j = {dst, src, odims, sstr, r, es};
    int64_t rows = n / inner;
    if (k && oq_k_threads(k) > 1 && (double)n * (double)es > 262144.0 && rows > 1)
        oq_k_parallel_for(k, rows, (rows + 4 * oq_k_threads(k) - 1) / (4 * oq_k_threads(k)), strided_rows, &j);
    else
        strided_rows(&j, 0, rows, 0);
}

static void contiguous_strides(const int64_t *dims, size_t r, int64_t *st)
{
    int64_t s = 1;
    for (size_t i = r; i-- > 0;) {
        st[i] = s;
        s *= dims[i];
    }
}

static oq_status run_transpose(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                               oq_rt_tensor *out, size_t n_out)
{
    int64_t perm[OQ_RT_MAX_RANK], st[OQ_RT_MAX_RANK], sstr[OQ_RT_MAX_RANK];
    size_t r = in[0]->rank;
    get_perm(k, r, perm);
    contiguous_strides(in[0]->dims, r, st);
    for (size_t i = 0; i < r; i++)
        sstr[i] = st[perm[i]];
    if (numel(in[0]) > 0)
        strided_copy(k, out[0].data, in[0]->data, out[0].dims, sstr, r, oq_k_elsize(in[0]->dtype));
    return OQ_OK;
}

/* ------------------------------------------------------------------ Concat ------- */

static oq_status infer_concat(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                              oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    DEFER_UNLESS_KNOWN(k, in, n_in, out, n_out);
    size_t r = in[0]->rank;
    int64_t axis = oq_k_axis(oq_node_attr_int(k->node, "axis", k->opset < 4 ? 1 : 0), r);
    if (axis < 0)
        return oq_k_error(k, OQ_ERR_INVALID, "axis out of range");
    int64_t d[OQ_RT_MAX_RANK];
    memcpy(d, in[0]->dims, r * sizeof(int64_t));
    d[axis] = 0;
    for (size_t i = 0; i < n_in; i++) {
        if (!in[i])
            continue;
        if (in[i]->rank != r || in[i]->dtype != in[0]->dtype)
            return oq_k_error(k, OQ_ERR_INVALID, "inputs differ in rank or dtype");
        for (size_t j = 0; j < r; j++)
            if ((int64_t)j != axis && in[i]->dims[j] != in[0]->dims[j])
                return oq_k_error(k, OQ_ERR_INVALID, "input %zu dim %zu differs", i, j);
        d[axis] += in[i]->dims[axis];
    }
    return oq_k_set_out(k, &out[0], in[0]->dtype, d, r);
}

static oq_status run_concat(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    size_t r = in[0]->rank;
    int64_t axis = oq_k_axis(oq_node_attr_int(k->node, "axis", k->opset < 4 ? 1 : 0), r);
    size_t es = oq_k_elsize(in[0]->dtype);
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; i++)
        outer *= out[0].dims[i];
    for (size_t i = (size_t)axis + 1; i < r; i++)
        inner *= out[0].dims[i];
    int64_t orow = out[0].dims[axis] * inner;
    int64_t off = 0;
    for (size_t i = 0; i < n_in; i++) {
        if (!in[i])
            continue;
        int64_t row = in[i]->dims[axis] * inner;
        for (int64_t o = 0; o < outer && row; o++)
            memcpy((char *)out[0].data + (size_t)(o * orow + off) * es,
                   (const char *)in[i]->data + (size_t)(o * row) * es, (size_t)row * es);
        off += row;
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ Split -------- */

static oq_status split_sizes(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, size_t n_out,
                             int64_t axis, int64_t *sizes, bool *need)
{
    *need = false;
    int64_t total = in[0]->dims[axis];
    const int64_t *v = NULL;
    int64_t n = -1;
    int64_t buf[64];
    if (k->opset < 13) {
        n = oq_node_attr_ints(k->node, "split", &v);
    } else if (n_in > 1 && in[1]) {
        if (!in[1]->data) {
            *need = true;
            return OQ_OK;
        }
        n = read_ints(in[1], buf, 64);
        v = buf;
    }
    if (n >= 0) {
        if ((size_t)n != n_out)
            return oq_k_error(k, OQ_ERR_INVALID, "split has %lld entries for %zu outputs",
                              (long long)n, n_out);
        int64_t s = 0;
        for (int64_t i = 0; i < n; i++) {
            sizes[i] = v[i];
            s += v[i];
        }
        if (s != total)
            return oq_k_error(k, OQ_ERR_INVALID, "split sums to %lld, axis has %lld",
                              (long long)s, (long long)total);
        return OQ_OK;
    }
    int64_t parts = (int64_t)n_out;
    int64_t each = (total + parts - 1) / parts;
    if (k->opset < 18 && total % parts)
        return oq_k_error(k, OQ_ERR_INVALID, "axis of %lld does not split in %lld",
                          (long long)total, (long long)parts);
    for (int64_t i = 0; i < parts; i++) {
        int64_t rem = total - i * each;
        sizes[i] = rem < 0 ? 0 : rem < each ? rem : each;
    }
    return OQ_OK;
}

static oq_status infer_split(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                             oq_rt_tensor *out, size_t n_out)
{
    for (size_t i = 0; i < n_out; i++)
        out[i].dtype = in[0]->dtype;
    DEFER_UNLESS_KNOWN(k, in, 1, out, n_out);
    if (n_out > 64)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "more than 64 outputs");
    size_t r = in[0]->rank;
    int64_t axis = oq_k_axis(oq_node_attr_int(k->node, "axis", 0), r);
    if (axis < 0)
        return oq_k_error(k, OQ_ERR_INVALID, "axis out of range");
    int64_t sizes[64];
    bool need;
    oq_status st = split_sizes(k, in, n_in, n_out, axis, sizes, &need);
    if (st)
        return st;
    if (need)
        return oq_k_defer(k, out, n_out);
    for (size_t i = 0; i < n_out; i++) {
        int64_t d[OQ_RT_MAX_RANK];
        memcpy(d, in[0]->dims, r * sizeof(int64_t));
        d[axis] = sizes[i];
        st = oq_k_set_out(k, &out[i], in[0]->dtype, d, r);
        if (st)
            return st;
    }
    return OQ_OK;
}

static oq_status run_split(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    size_t r = in[0]->rank;
    int64_t axis = oq_k_axis(oq_node_attr_int(k->node, "axis", 0), r);
    size_t es = oq_k_elsize(in[0]->dtype);
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; i++)
        outer *= in[0]->dims[i];
    for (size_t i = (size_t)axis + 1; i < r; i++)
        inner *= in[0]->dims[i];
    int64_t irow = in[0]->dims[axis] * inner, off = 0;
    for (size_t i = 0; i < n_out; i++) {
        int64_t row = out[i].dims[axis] * inner;
        for (int64_t o = 0; o < outer && row; o++)
            memcpy((char *)out[i].data + (size_t)(o * row) * es,
                   (const char *)in[0]->data + (size_t)(o * irow + off) * es, (size_t)row * es);
        off += row;
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ Slice -------- */

typedef struct slice_spec {
    int64_t start[OQ_RT_MAX_RANK], step[OQ_RT_MAX_RANK], len[OQ_RT_MAX_RANK];
} slice_spec;

static oq_status slice_compute(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                               slice_spec *sp, bool *need)
{
    size_t r = in[0]->rank;
    int64_t starts[OQ_RT_MAX_RANK], ends[OQ_RT_MAX_RANK], axes[OQ_RT_MAX_RANK],
        steps[OQ_RT_MAX_RANK];
    int64_t n, na = -1, ns = -1;
    *need = false;
    if (k->opset < 10) {
        const int64_t *v, *e, *a;
        n = oq_node_attr_ints(k->node, "starts", &v);
        if (n < 0 || n > OQ_RT_MAX_RANK || oq_node_attr_ints(k->node, "ends", &e) != n)
            return oq_k_error(k, OQ_ERR_INVALID, "bad starts/ends");
        memcpy(starts, v, (size_t)n * 8);
        memcpy(ends, e, (size_t)n * 8);
        na = oq_node_attr_ints(k->node, "axes", &a);
        if (na >= 0) {
            if (na != n)
                return oq_k_error(k, OQ_ERR_INVALID, "bad axes");
            memcpy(axes, a, (size_t)n * 8);
        }
    } else {
        if (!in[1] || !in[2])
            return oq_k_error(k, OQ_ERR_INVALID, "starts and ends are required");
        for (size_t i = 1; i < n_in && i < 5; i++)
            if (in[i] && !in[i]->data) {
                *need = true;
                return OQ_OK;
            }
        n = read_ints(in[1], starts, OQ_RT_MAX_RANK);
        if (n < 0 || read_ints(in[2], ends, OQ_RT_MAX_RANK) != n)
            return oq_k_error(k, OQ_ERR_INVALID, "bad starts/ends");
        if (n_in > 3 && in[3]) {
            na = read_ints(in[3], axes, OQ_RT_MAX_RANK);
            if (na != n)
                return oq_k_error(k, OQ_ERR_INVALID, "bad axes");
        }
        if (n_in > 4 && in[4]) {
            ns = read_ints(in[4], steps, OQ_RT_MAX_RANK);
            if (ns != n)
                return oq_k_error(k, OQ_ERR_INVALID, "bad steps");
        }
    }
    for (size_t i = 0; i < r; i++) {
        sp->start[i] = 0;
        sp->step[i] = 1;
        sp->len[i] = in[0]->dims[i];
    }
    bool seen[OQ_RT_MAX_RANK] = {false};
    for (int64_t i = 0; i < n; i++) {
        int64_t ax = na >= 0 ? oq_k_axis(axes[i], r) : i;
        if (ax < 0 || seen[ax])
            return oq_k_error(k, OQ_ERR_INVALID, "bad axis");
        seen[ax] = true;
        int64_t dim = in[0]->dims[ax];
        int64_t step = ns >= 0 ? steps[i] : 1;
        if (step == 0)
            return oq_k_error(k, OQ_ERR_INVALID, "step 0");
        int64_t s = starts[i], e = ends[i];
        if (s < 0) s += dim;
        if (e < 0) e += dim;
        if (step > 0) {
            s = s < 0 ? 0 : s > dim ? dim : s;
            e = e < 0 ? 0 : e > dim ? dim : e;
            sp->len[ax] = e > s ? (e - s + step - 1) / step : 0;
        } else {
            s = s < 0 ? -1 : s > dim - 1 ? dim - 1 : s;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            sp->len[ax] = s > e ? (s - e + (-step) - 1) / (-step) : 0;
        }
        sp->start[ax] = s;
        sp->step[ax] = step;
    }
    return OQ_OK;
}

static oq_status infer_slice(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                             oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    DEFER_UNLESS_KNOWN(k, in, n_in, out, n_out);
    slice_spec sp;
    bool need;
    oq_status st = slice_compute(k, in, n_in, &sp, &need);
    if (st)
        return st;
    if (need)
        return oq_k_defer(k, out, n_out);
    return oq_k_set_out(k, &out[0], in[0]->dtype, sp.len, in[0]->rank);
}

static oq_status run_slice(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    slice_spec sp;
    bool need;
    oq_status st = slice_compute(k, in, n_in, &sp, &need);
    if (st)
        return st;
    size_t r = in[0]->rank, es = oq_k_elsize(in[0]->dtype);
    if (numel(&out[0]) == 0)
        return OQ_OK;
    int64_t cs[OQ_RT_MAX_RANK], sstr[OQ_RT_MAX_RANK], off = 0;
    contiguous_strides(in[0]->dims, r, cs);
    for (size_t i = 0; i < r; i++) {
        sstr[i] = cs[i] * sp.step[i];
        off += cs[i] * sp.start[i];
    }
    strided_copy(k, out[0].data, (const char *)in[0]->data + (size_t)off * es, out[0].dims, sstr, r, es);
    return OQ_OK;
}

/* ------------------------------------------------------------------ Gather ------- */

static oq_status infer_gather(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                              oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    DEFER_UNLESS_KNOWN(k, in, 2, out, n_out);
    size_t r = in[0]->rank, q = in[1]->rank;
    int64_t axis = oq_k_axis(oq_node_attr_int(k->node, "axis", 0), r);
    if (axis < 0)
        return oq_k_error(k, OQ_ERR_INVALID, "axis out of range");
    int64_t d[OQ_RT_MAX_RANK];
    size_t n = 0;
    if (r + q - 1 > OQ_RT_MAX_RANK)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "rank too large");
    for (int64_t i = 0; i < axis; i++)
        d[n++] = in[0]->dims[i];
    for (size_t i = 0; i < q; i++)
        d[n++] = in[1]->dims[i];
    for (size_t i = (size_t)axis + 1; i < r; i++)
        d[n++] = in[0]->dims[i];
    return oq_k_set_out(k, &out[0], in[0]->dtype, d, n);
}

static oq_status run_gather(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    size_t r = in[0]->rank, es = oq_k_elsize(in[0]->dtype);
    int64_t axis = oq_k_axis(oq_node_attr_int(k->node, "axis", 0), r);
    int64_t outer = 1, inner = 1, ad = in[0]->dims[axis], ni = numel(in[1]);
    for (int64_t i = 0; i < axis; i++)
        outer *= in[0]->dims[i];
    for (size_t i = (size_t)axis + 1; i < r; i++)
        inner *= in[0]->dims[i];
    for (int64_t j = 0; j < ni; j++) {
        int64_t idx = oq_k_get_int(in[1], j);
        if (idx < -ad || idx >= ad)
            return oq_k_error(k, OQ_ERR_INVALID, "index %lld out of range [%lld, %lld)",
                              (long long)idx, (long long)-ad, (long long)ad);
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < ni; j++) {
            int64_t idx = oq_k_get_int(in[1], j);
            if (idx < 0)
                idx += ad;
            memcpy((char *)out[0].data + (size_t)((o * ni + j) * inner) * es,
                   (const char *)in[0]->data + (size_t)((o * ad + idx) * inner) * es,
                   (size_t)inner * es);
        }
    return OQ_OK;
}

static oq_status infer_gather_el(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                                 oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    DEFER_UNLESS_KNOWN(k, in, 2, out, n_out);
    if (in[1]->rank != in[0]->rank)
        return oq_k_error(k, OQ_ERR_INVALID, "indices rank differs from data rank");
    return oq_k_set_out(k, &out[0], in[0]->dtype, in[1]->dims, in[1]->rank);
}

static oq_status run_gather_el(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                               oq_rt_tensor *out, size_t n_out)
{
    size_t r = in[0]->rank, es = oq_k_elsize(in[0]->dtype);
    int64_t axis = oq_k_axis(oq_node_attr_int(k->node, "axis", 0), r);
    if (axis < 0)
        return oq_k_error(k, OQ_ERR_INVALID, "axis out of range");
    int64_t ds[OQ_RT_MAX_RANK], idx[OQ_RT_MAX_RANK] = {0};
    contiguous_strides(in[0]->dims, r, ds);
    int64_t n = numel(&out[0]);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = oq_k_get_int(in[1], i), ad = in[0]->dims[axis];
        if (v < -ad || v >= ad)
            return oq_k_error(k, OQ_ERR_INVALID, "index %lld out of range", (long long)v);
        if (v < 0)
            v += ad;
        int64_t off = 0;
        for (size_t a = 0; a < r; a++)
            off += ((int64_t)a == axis ? v : idx[a]) * ds[a];
        memcpy((char *)out[0].data + (size_t)i * es, (const char *)in[0]->data + (size_t)off * es, es);
        for (size_t a = r; a-- > 0;) {
            if (++idx[a] < out[0].dims[a])
                break;
            idx[a] = 0;
        }
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ Expand/Tile -- */

static oq_status infer_expand(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                              oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!in[1]->data || !oq_k_shapes_known(in, 2))
        return oq_k_defer(k, out, n_out);
    oq_rt_tensor shp;
    memset(&shp, 0, sizeof shp);
    int64_t n = read_ints(in[1], shp.dims, OQ_RT_MAX_RANK);
    if (n < 0)
        return oq_k_error(k, OQ_ERR_INVALID, "bad shape input");
    shp.rank = (size_t)n;
    const oq_rt_tensor *two[2] = {in[0], &shp};
    int64_t d[OQ_RT_MAX_RANK];
    size_t r = 0;
    oq_status st = oq_k_broadcast(k, two, 2, d, &r);
    return st ? st : oq_k_set_out(k, &out[0], in[0]->dtype, d, r);
}

static void bcopy_row(const void *st, void *o, const void *const *in, const int64_t *inc,
                      int64_t n)
{
    size_t es = *(const size_t *)st;
    if (inc[0])
        memcpy(o, in[0], (size_t)n * es);
    else
        for (int64_t i = 0; i < n; i++)
            memcpy((char *)o + (size_t)i * es, in[0], es);
}

static oq_status run_expand(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    size_t es = oq_k_elsize(in[0]->dtype);
    oq_k_bcast_apply(k, in, 1, &out[0], bcopy_row, &es);
    return OQ_OK;
}

static oq_status infer_tile(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                            oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!in[1]->data || !oq_k_shapes_known(in, 2))
        return oq_k_defer(k, out, n_out);
    int64_t rep[OQ_RT_MAX_RANK], d[OQ_RT_MAX_RANK];
    int64_t n = read_ints(in[1], rep, OQ_RT_MAX_RANK);
    if (n != (int64_t)in[0]->rank)
        return oq_k_error(k, OQ_ERR_INVALID, "repeats has %lld entries for rank %zu",
                          (long long)n, in[0]->rank);
    for (int64_t i = 0; i < n; i++) {
        if (rep[i] < 0)
            return oq_k_error(k, OQ_ERR_INVALID, "negative repeat");
        d[i] = in[0]->dims[i] * rep[i];
    }
    return oq_k_set_out(k, &out[0], in[0]->dtype, d, (size_t)n);
}

static oq_status run_tile(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                          oq_rt_tensor *out, size_t n_out)
{
    size_t r = in[0]->rank, es = oq_k_elsize(in[0]->dtype);
    int64_t cs[OQ_RT_MAX_RANK], idx[OQ_RT_MAX_RANK] = {0};
    contiguous_strides(in[0]->dims, r, cs);
    int64_t n = numel(&out[0]);
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (size_t a = 0; a < r; a++)
            off += (idx[a] % in[0]->dims[a]) * cs[a];
        memcpy((char *)out[0].data + (size_t)i * es, (const char *)in[0]->data + (size_t)off * es, es);
        for (size_t a = r; a-- > 0;) {
            if (++idx[a] < out[0].dims[a])
                break;
            idx[a] = 0;
        }
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ ConstantOfShape, Range */

static oq_status infer_cos(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    oq_attr *a = oq_node_attr(k->node, "value");
    out[0].dtype = a && a->t ? a->t->dtype : OQ_DTYPE_FLOAT;
    if (!in[0]->data)
        return oq_k_defer(k, out, n_out);
    int64_t d[OQ_RT_MAX_RANK];
    int64_t n = read_ints(in[0], d, OQ_RT_MAX_RANK);
    if (n < 0)
        return oq_k_error(k, OQ_ERR_INVALID, "bad shape input");
    return oq_k_set_out(k, &out[0], out[0].dtype, d, (size_t)n);
}

static oq_status run_cos(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    oq_attr *a = oq_node_attr(k->node, "value");
    int64_t n = numel(&out[0]);
    size_t es = oq_k_elsize(out[0].dtype);
    if (!a || !a->t) {
        memset(out[0].data, 0, (size_t)n * es);
        return OQ_OK;
    }
    const void *v = oq_tensor_data(a->t, k->diag);
    if (!v || oq_tensor_numel(a->t) != 1)
        return oq_k_error(k, OQ_ERR_INVALID, "value must hold one element");
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)out[0].data + (size_t)i * es, v, es);
    return OQ_OK;
}

static oq_status infer_range(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                             oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    if (!oq_k_data_known(in, 3))
        return oq_k_defer(k, out, n_out);
    double s = oq_k_get_f64(in[0], 0), l = oq_k_get_f64(in[1], 0), d = oq_k_get_f64(in[2], 0);
    if (d == 0)
        return oq_k_error(k, OQ_ERR_INVALID, "delta is 0");
    double c = ceil((l - s) / d);
    if (!(c < 4e18))
        return c > 0 ? oq_k_error(k, OQ_ERR_INVALID, "Range is too long") : oq_k_set_out(k, &out[0], out[0].dtype, (int64_t[]){0}, 1);
    int64_t n = c > 0 ? (int64_t)c : 0;
    return oq_k_set_out(k, &out[0], out[0].dtype, &n, 1);
}

static oq_status run_range(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    int64_t n = out[0].dims[0];
    if (in[0]->dtype == OQ_DTYPE_INT64 || in[0]->dtype == OQ_DTYPE_INT32) {
        int64_t s = oq_k_get_int(in[0], 0), d = oq_k_get_int(in[2], 0);
        for (int64_t i = 0; i < n; i++) {
            int64_t v = s + i * d;
            if (in[0]->dtype == OQ_DTYPE_INT64)
                ((int64_t *)out[0].data)[i] = v;
            else
                ((int32_t *)out[0].data)[i] = (int32_t)v;
        }
        return OQ_OK;
    }
    if (in[0]->dtype == OQ_DTYPE_FLOAT) {
        float s = ((const float *)in[0]->data)[0], d = ((const float *)in[2]->data)[0];
        for (int64_t i = 0; i < n; i++)
            ((float *)out[0].data)[i] = s + (float)i * d;
        return OQ_OK;
    }
    double s = oq_k_get_f64(in[0], 0), d = oq_k_get_f64(in[2], 0);
    for (int64_t i = 0; i < n; i++)
        oq_k_set_f64(&out[0], i, s + (double)i * d);
    return OQ_OK;
}

/* ------------------------------------------------------------------ Pad ---------- */

typedef enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } pad_mode;

static oq_status pad_params(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, int64_t *pads,
                            bool *need)
{
    size_t r = in[0]->rank;
    *need = false;
    int64_t raw[2 * OQ_RT_MAX_RANK], n;
    if (k->opset < 11) {
        const int64_t *v;
        n = oq_node_attr_ints(k->node, k->opset < 2 ? "paddings" : "pads", &v);
        if (n < 0 || n > 2 * OQ_RT_MAX_RANK)
            return oq_k_error(k, OQ_ERR_INVALID, "bad pads");
        memcpy(raw, v, (size_t)n * 8);
    } else {
        if (!in[1])
            return oq_k_error(k, OQ_ERR_INVALID, "pads is required");
        if (!in[1]->data || (n_in > 3 && in[3] && !in[3]->data)) {
            *need = true;
            return OQ_OK;
        }
        n = read_ints(in[1], raw, 2 * OQ_RT_MAX_RANK);
    }
    int64_t axes[OQ_RT_MAX_RANK], na = (int64_t)r;
    for (size_t i = 0; i < r; i++)
        axes[i] = (int64_t)i;
    if (k->opset >= 18 && n_in > 3 && in[3]) {
        na = read_ints(in[3], axes, OQ_RT_MAX_RANK);
        for (int64_t i = 0; i < na; i++)
            axes[i] = oq_k_axis(axes[i], r);
    }
    if (n != 2 * na)
        return oq_k_error(k, OQ_ERR_INVALID, "pads has %lld entries, expected %lld",
                          (long long)n, (long long)(2 * na));
    for (size_t i = 0; i < 2 * r; i++)
        pads[i] = 0;
    for (int64_t i = 0; i < na; i++) {
        if (axes[i] < 0)
            return oq_k_error(k, OQ_ERR_INVALID, "bad axes");
        pads[axes[i]] = raw[i];
        pads[axes[i] + (int64_t)r] = raw[i + na];
    }
    return OQ_OK;
}

static oq_status infer_pad(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                           oq_rt_tensor *out, size_t n_out)
{
    out[0].dtype = in[0]->dtype;
    DEFER_UNLESS_KNOWN(k, in, 1, out, n_out);
    int64_t pads[2 * OQ_RT_MAX_RANK], d[OQ_RT_MAX_RANK];
    bool need;
    oq_status st = pad_params(k, in, n_in, pads, &need);
    if (st)
        return st;
    if (need)
        return oq_k_defer(k, out, n_out);
    size_t r = in[0]->rank;
    for (size_t i = 0; i < r; i++) {
        d[i] = in[0]->dims[i] + pads[i] + pads[i + r];
        if (d[i] < 0)
            return oq_k_error(k, OQ_ERR_INVALID, "negative output dim");
    }
    return oq_k_set_out(k, &out[0], in[0]->dtype, d, r);
}

/* Source index of output position s - pad along an axis under the mode; adds s * stride
 * to *off. False: a constant pad value. Negative pads crop first: the edge, reflect and
 * wrap rules apply to the cropped range [lo, lo + len) of the axis, as onnxruntime does
 * (a wrap with one side cropped and the other padded wraps the cropped row). */
static bool pad_source(pad_mode mode, int64_t s, int64_t lo, int64_t len, int64_t *off, int64_t stride)
{
    if (s < lo || s >= lo + len) {
        if (mode == PAD_CONSTANT || len <= 0)
            return false;
        int64_t t = s - lo;
        if (mode == PAD_EDGE) {
            t = t < 0 ? 0 : len - 1;
        } else if (mode == PAD_WRAP) {
            t = ((t % len) + len) % len;
        } else {
            int64_t period = 2 * (len - 1);
            if (period == 0) {
                t = 0;
            } else {
                t = ((t % period) + period) % period;
                if (t >= len)
                    t = period - t;
            }
        }
        s = lo + t;
    }
    *off += s * stride;
    return true;
}

/* the range of an axis left after its negative pads: [*lo, *lo + *len) */
static void pad_kept(const int64_t *pads, size_t r, size_t a, int64_t dim, int64_t *lo, int64_t *len)
{
    *lo = pads[a] < 0 ? -pads[a] : 0;
    *len = dim - *lo - (pads[a + r] < 0 ? -pads[a + r] : 0);
}

static oq_status run_pad(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in,
                         oq_rt_tensor *out, size_t n_out)
{
    int64_t pads[2 * OQ_RT_MAX_RANK];
    bool need;
    oq_status st = pad_params(k, in, n_in, pads, &need);
    if (st)
        return st;
    const char *ms = oq_node_attr_string(k->node, "mode", "constant");
    pad_mode mode = strcmp(ms, "reflect") == 0 ? PAD_REFLECT
                    : strcmp(ms, "edge") == 0  ? PAD_EDGE
                    : strcmp(ms, "wrap") == 0  ? PAD_WRAP
                                               : PAD_CONSTANT;
    size_t r = in[0]->rank, es = oq_k_elsize(in[0]->dtype);
    char cval[16] = {0};
    if (k->opset < 11) {
        oq_rt_tensor tmp = out[0];
        tmp.data = cval;
        oq_k_set_f64(&tmp, 0, oq_node_attr_float(k->node, "value", 0));
    } else if (n_in > 2 && in[2] && numel(in[2]) > 0) {
        memcpy(cval, in[2]->data, es);
    }
    int64_t cs[OQ_RT_MAX_RANK], idx[OQ_RT_MAX_RANK] = {0};
    contiguous_strides(in[0]->dims, r, cs);
    if (numel(&out[0]) == 0)
        return OQ_OK;
    if (r == 0) {
        memcpy(out[0].data, in[0]->data, es);
        return OQ_OK;
    }
    /* one output row (the last axis) at a time: its source row from the other axes, then
     * the columns inside the input in one copy and the few outside by the mode's rule */
    size_t la = r - 1;
    int64_t ocols = out[0].dims[la], dim = in[0]->dims[la], pb = pads[la];
    int64_t j0 = pb > 0 ? pb : 0, j1 = pb + dim < ocols ? pb + dim : ocols; /* [j0, j1): inside */
    int64_t rows = numel(&out[0]) / ocols, klo[OQ_RT_MAX_RANK], klen[OQ_RT_MAX_RANK];
    for (size_t a = 0; a < r; a++) /* each axis' range left after its negative pads */
        pad_kept(pads, r, a, in[0]->dims[a], &klo[a], &klen[a]);
    char *o = out[0].data;
    const char *src = in[0]->data;
    for (int64_t row = 0; row < rows; row++, o += (size_t)ocols * es) {
        int64_t off = 0;
        bool inside = true;
        for (size_t a = 0; a < la && inside; a++)
            inside = pad_source(mode, idx[a] - pads[a], klo[a], klen[a], &off, cs[a]);
        if (!inside) {
            for (int64_t j = 0; j < ocols; j++)
                memcpy(o + (size_t)j * es, cval, es);
        } else {
            for (int64_t j = 0; j < ocols; j++) {
                if (j == j0 && j1 > j0) { /* the columns inside the input: one copy */
                    memcpy(o + (size_t)j * es, src + (size_t)(off + j - pb) * es, (size_t)(j1 - j0) * es);
                    j = j1 - 1;
                    continue;
                }
                int64_t co = off;
                bool in_col = pad_source(mode, j - pb, klo[la], klen[la], &co, 1);
                memcpy(o + (size_t)j * es, in_col ? src + (size_t)co * es : cval, es);
            }
        }
        for (size_t a = la; a-- > 0;) {
            if (++idx[a] < out[0].dims[a])
                break;
            idx[a] = 0;
        }
    }
    return OQ_OK;
}

/* ------------------------------------------------------------------ table -------- */

#define ANY OQ_T_ALL
#define R(op, since, until, ti, types, inf, rn, mn) \
    {"", op, since, until, ti, types, NULL, NULL, inf, rn, NULL, mn}

const oq_kernel oq_kernels_shape_ops[] = {
    R("Shape", 1, 0, 0, ANY, infer_shape, run_shape, 1),
    R("Size", 1, 0, 0, ANY, infer_size, run_size, 1),
    R("Reshape", 1, 0, 0, ANY, infer_reshape, copy_run, 1),
    R("Flatten", 1, 0, 0, ANY, infer_flatten, copy_run, 1),
    R("Squeeze", 1, 0, 0, ANY, infer_squeeze, copy_run, 1),
    R("Unsqueeze", 1, 0, 0, ANY, infer_unsqueeze, copy_run, 1),
    R("Identity", 1, 0, 0, ANY, infer_identity, copy_run, 1),
    R("Dropout", 1, 0, 0, ANY, infer_identity, run_dropout, 1),
    R("Transpose", 1, 0, 0, ANY, infer_transpose, run_transpose, 1),
    R("Concat", 1, 0, 0, ANY, infer_concat, run_concat, 1),
    R("Split", 2, 0, 0, ANY, infer_split, run_split, 1),
    R("Slice", 1, 0, 0, ANY, infer_slice, run_slice, 1),
    R("Gather", 1, 0, 0, ANY, infer_gather, run_gather, 2),
    R("GatherElements", 11, 0, 0, ANY, infer_gather_el, run_gather_el, 2),
    R("Expand", 8, 0, 0, ANY, infer_expand, run_expand, 2),
    R("Tile", 6, 0, 0, ANY, infer_tile, run_tile, 2),
    R("ConstantOfShape", 9, 0, 0, OQ_T(INT64), infer_cos, run_cos, 1),
    R("Range", 11, 0, 0, OQ_T_NUMERIC, infer_range, run_range, 3),
    R("Pad", 2, 0, 0, ANY, infer_pad, run_pad, 1),
};
OQ_KERNEL_TABLE_END(shape_ops);
