/* Helpers for kernels: diagnostics, shapes, broadcasting, element access, threads. */
#include <stdatomic.h>
#include "exec/exec-impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

oq_status oq_k_error(const oq_kctx *k, oq_status code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char lb[64];
    const char *label = k->node ? oq_node_label(k->node, lb, sizeof lb) : NULL;
    return oq_diag_add(k->diag, OQ_SEV_ERROR, code, k->file, label,
                       k->node ? k->node->op_type : NULL, "%s", msg);
}

oq_status oq_k_defer(oq_kctx *k, oq_rt_tensor *out, size_t n_out)
{
    if (!k->compile_time)
        return oq_k_error(k, OQ_ERR_INTERNAL, "output shape could not be inferred at run time");
    k->deferred = true;
    for (size_t i = 0; i < n_out; i++)
        out[i].rank = OQ_RT_UNKNOWN_RANK;
    return OQ_OK;
}

bool oq_k_shapes_known(const oq_rt_tensor *const *in, size_t n_in)
{
    for (size_t i = 0; i < n_in; i++) {
        if (!in[i])
            continue;
        if (in[i]->rank == OQ_RT_UNKNOWN_RANK)
            return false;
        for (size_t j = 0; j < in[i]->rank; j++)
            if (in[i]->dims[j] < 0)
                return false;
    }
    return true;
}

oq_status oq_k_infer_like_input0(oq_kctx *k, const oq_rt_tensor *const *in, size_t n_in, oq_rt_tensor *out,
                                 size_t n_out)
{
    (void)n_in;
    for (size_t i = 0; i < n_out; i++)
        out[i].dtype = in[0]->dtype;
    if (!oq_k_shapes_known(in, 1))
        return oq_k_defer(k, out, n_out);
    return oq_k_set_out(k, &out[0], in[0]->dtype, in[0]->dims, in[0]->rank);
}

bool oq_k_data_known(const oq_rt_tensor *const *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (in[i] && !in[i]->data && oq_rt_tensor_numel(in[i]) != 0)
            return false;
    return true;
}

oq_status oq_k_set_out(const oq_kctx *k, oq_rt_tensor *out, int32_t dtype, const int64_t *dims,
                       size_t rank)
{
    if (rank > OQ_RT_MAX_RANK)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "output rank %zu exceeds the maximum %d", rank,
                          OQ_RT_MAX_RANK);
    out->dtype = dtype;
    out->rank = rank;
    for (size_t i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return oq_k_error(k, OQ_ERR_INVALID, "output dimension %zu is negative (%lld)", i,
                              (long long)dims[i]);
        out->dims[i] = dims[i];
    }
    if (oq_rt_tensor_numel(out) < 0)
        return oq_k_error(k, OQ_ERR_INVALID, "output element count overflows");
    return OQ_OK;
}

oq_status oq_k_broadcast(const oq_kctx *k, const oq_rt_tensor *const *in, size_t n, int64_t *dims,
                         size_t *rank)
{
    size_t r = 0;
    for (size_t i = 0; i < n; i++)
        if (in[i] && in[i]->rank > r)
            r = in[i]->rank;
    if (r > OQ_RT_MAX_RANK)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "rank %zu exceeds the maximum", r);
    for (size_t j = 0; j < r; j++)
        dims[j] = 1;
    for (size_t i = 0; i < n; i++) {
        if (!in[i])
            continue;
        size_t off = r - in[i]->rank;
        for (size_t j = 0; j < in[i]->rank; j++) {
            int64_t d = in[i]->dims[j], *o = &dims[off + j];
            if (d == *o || d == 1)
                continue;
            if (*o == 1) {
                *o = d;
                continue;
            }
            char a[128], b[128];
            return oq_k_error(k, OQ_ERR_INVALID, "inputs cannot be broadcast: %s and %s",
                              oq_rt_tensor_describe(in[0], a, sizeof a),
                              oq_rt_tensor_describe(in[i], b, sizeof b));
        }
    }
    *rank = r;
    return OQ_OK;
}

void oq_k_bcast_strides(const oq_rt_tensor *t, const int64_t *dims, size_t rank, int64_t *strides)
{
    size_t off = rank - t->rank;
    int64_t s = 1;
    for (size_t j = rank; j-- > 0;) {
        if (j < off) {
            strides[j] = 0;
            continue;
        }
        int64_t d = t->dims[j - off];
        strides[j] = (d == 1 && dims[j] != 1) ? 0 : s;
        s *= d;
    }
}

int64_t oq_k_axis(int64_t axis, size_t rank)
{
    int64_t r = (int64_t)rank;
    if (axis < -r || axis >= r)
        return -1;
    return axis < 0 ? axis + r : axis;
}

size_t oq_k_elsize(int32_t dtype)
{
    int b = oq_dtype_bits(dtype);
    return b >= 8 ? (size_t)b / 8 : 0;
}

int64_t oq_k_get_int(const oq_rt_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case OQ_DTYPE_INT64: return ((const int64_t *)t->data)[i];
    case OQ_DTYPE_INT32: return ((const int32_t *)t->data)[i];
    case OQ_DTYPE_UINT64: {
        uint64_t v = ((const uint64_t *)t->data)[i];
        return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
    }
    default: {
        /* no undefined float->int conversion: NaN -> 0, out of range saturates */
        double v = oq_k_get_f64(t, i);
        if (v != v)
            return 0;
        if (v >= 9223372036854775807.0)
            return INT64_MAX;
        if (v <= -9223372036854775808.0)
            return INT64_MIN;
        return (int64_t)v;
    }
    }
}

double oq_k_get_f64(const oq_rt_tensor *t, int64_t i)
{
    const void *p = t->data;
    switch (t->dtype) {
    case OQ_DTYPE_FLOAT: return ((const float *)p)[i];
    case OQ_DTYPE_DOUBLE: return ((const double *)p)[i];
    case OQ_DTYPE_FLOAT16: return oq_half_to_float(((const uint16_t *)p)[i]);
    case OQ_DTYPE_BFLOAT16: return oq_bfloat16_to_float(((const uint16_t *)p)[i]);
    case OQ_DTYPE_INT8: return ((const int8_t *)p)[i];
    case OQ_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case OQ_DTYPE_BOOL: return ((const uint8_t *)p)[i] != 0;
    case OQ_DTYPE_INT16: return ((const int16_t *)p)[i];
    case OQ_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case OQ_DTYPE_INT32: return ((const int32_t *)p)[i];
    case OQ_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case OQ_DTYPE_INT64: return (double)((const int64_t *)p)[i];
    case OQ_DTYPE_UINT64: return (double)((const uint64_t *)p)[i];
    default: return 0;
    }
}

void oq_k_set_f64(oq_rt_tensor *t, int64_t i, double v)
{
    void *p = t->data;
    switch (t->dtype) {
    case OQ_DTYPE_FLOAT: ((float *)p)[i] = (float)v; break;
    case OQ_DTYPE_DOUBLE: ((double *)p)[i] = v; break;
    case OQ_DTYPE_FLOAT16: ((uint16_t *)p)[i] = oq_float_to_half((float)v); break;
    case OQ_DTYPE_BFLOAT16: ((uint16_t *)p)[i] = oq_float_to_bfloat16((float)v); break;
    case OQ_DTYPE_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case OQ_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case OQ_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case OQ_DTYPE_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
    case OQ_DTYPE_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case OQ_DTYPE_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case OQ_DTYPE_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case OQ_DTYPE_INT64: ((int64_t *)p)[i] = (int64_t)v; break;
    case OQ_DTYPE_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    default: break;
    }
}

void *oq_k_scratch(oq_kctx *k, size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    if (k->scratch_size < bytes) {
        free(k->scratch);
        size_t sz = (bytes + 63) & ~(size_t)63;
        k->scratch = aligned_alloc(64, sz);
        k->scratch_size = k->scratch ? sz : 0;
        if (!k->scratch)
            oq_k_error(k, OQ_ERR_NOMEM, "cannot allocate %zu bytes of scratch memory", bytes);
    }
    return k->scratch;
}

void oq_k_parallel_for(const oq_kctx *k, int64_t n, int64_t grain, oq_range_fn fn, void *arg)
{
    oq_pool_for(k->pool, n, grain, fn, arg);
}

bool oq_k_cpu_avx2(void)
{
#if defined(__GNUC__) && defined(__x86_64__)
    /* -1 unknown; racing writers store the same value */
    static _Atomic int have = -1;
    int h = atomic_load_explicit(&have, memory_order_relaxed);
    if (h < 0) {
        __builtin_cpu_init();
        const char *env = getenv("ONNXQ_SGEMM_ISA"); /* "generic": portable code only */
        h = (!env || strcmp(env, "generic") != 0) && __builtin_cpu_supports("avx2") ? 1 : 0;
        atomic_store_explicit(&have, h, memory_order_relaxed);
    }
    return h == 1;
#else
    return false;
#endif
}

int oq_k_ort_nchwc_block(void)
{
#if defined(__GNUC__) && defined(__x86_64__)
    const char *env = getenv("ONNXQ_HOST_CPU");
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        return 0;
    if (env && strcmp(env, "avx2") == 0)
        return 8;
    return __builtin_cpu_supports("avx512f") ? 16 : 8;
#else
    return 0;
#endif
}

bool oq_k_ort_sgemm_m1(void)
{
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx");
#else
    return false;
#endif
}

int oq_k_threads(const oq_kctx *k)
{
    return oq_pool_threads(k->pool);
}

/* ---- public oq_rt_tensor helpers ---- */

int64_t oq_rt_tensor_numel(const oq_rt_tensor *t)
{
    if (t->rank == OQ_RT_UNKNOWN_RANK || t->rank > OQ_RT_MAX_RANK)
        return -1;
    return oq_dims_numel(t->dims, t->rank);
}

static oq_status fill(oq_rt_tensor *t, int32_t dtype, const int64_t *dims, size_t rank)
{
    if (rank > OQ_RT_MAX_RANK || !oq_dtype_valid(dtype))
        return OQ_ERR_USAGE;
    memset(t, 0, sizeof(*t));
    t->dtype = dtype;
    t->rank = rank;
    for (size_t i = 0; i < rank; i++)
        t->dims[i] = dims[i];
    int64_t n = oq_rt_tensor_numel(t);
    if (n < 0)
        return OQ_ERR_USAGE;
    t->nbytes = oq_dtype_nbytes(dtype, n);
    return t->nbytes < 0 ? OQ_ERR_USAGE : OQ_OK;
}

oq_status oq_rt_tensor_borrow(oq_rt_tensor *t, int32_t dtype, const int64_t *dims, size_t rank,
                              void *data)
{
    oq_status s = fill(t, dtype, dims, rank);
    t->data = data;
    return s;
}

oq_status oq_rt_tensor_alloc(oq_rt_tensor *t, int32_t dtype, const int64_t *dims, size_t rank)
{
    oq_status s = fill(t, dtype, dims, rank);
    if (s != OQ_OK)
        return s;
    t->data = calloc(1, (size_t)(t->nbytes ? t->nbytes : 1));
    if (!t->data)
        return OQ_ERR_NOMEM;
    t->owned = true;
    return OQ_OK;
}

void oq_rt_tensor_release(oq_rt_tensor *t)
{
    if (!t)
        return;
    if (t->owned)
        free(t->data);
    memset(t, 0, sizeof(*t));
}

const char *oq_rt_tensor_describe(const oq_rt_tensor *t, char *buf, size_t size)
{
    if (!t) {
        snprintf(buf, size, "(none)");
        return buf;
    }
    size_t o = (size_t)snprintf(buf, size, "%s", oq_dtype_name(t->dtype));
    if (t->rank == OQ_RT_UNKNOWN_RANK) {
        if (o < size)
            snprintf(buf + o, size - o, "[?]");
        return buf;
    }
    if (o < size)
        o += (size_t)snprintf(buf + o, size - o, "[");
    for (size_t i = 0; i < t->rank && o < size; i++)
        o += (size_t)snprintf(buf + o, size - o, i ? ",%lld" : "%lld", (long long)t->dims[i]);
    if (o < size)
        snprintf(buf + o, size - o, "]");
    return buf;
}

/* ---- broadcast driver ---- */

typedef struct bcast_job {
    size_t n, rank;           /* collapsed rank; last dim is the row */
    int64_t dims[OQ_RT_MAX_RANK];
    int64_t strides[4][OQ_RT_MAX_RANK]; /* element strides per input */
    size_t es[4], oes;
    const char *base[4];
    char *obase;
    int64_t row;
    int64_t pieces, piece;    /* a long row is split into pieces of `piece` elements */
    oq_row_fn fn;
    const void *state;
} bcast_job;

static void bcast_rows(void *arg, int64_t begin, int64_t end, int worker)
{
    const bcast_job *j = arg;
    (void)worker;
    for (int64_t item = begin; item < end; item++) {
        int64_t r = item / j->pieces, p0 = (item % j->pieces) * j->piece;
        int64_t len = j->row - p0 < j->piece ? j->row - p0 : j->piece;
        const void *ptr[4];
        int64_t inc[4];
        int64_t off[4] = {0, 0, 0, 0};
        int64_t rem = r;
        for (size_t d = j->rank - 1; d-- > 0;) {
            int64_t idx = rem % j->dims[d];
            rem /= j->dims[d];
            for (size_t i = 0; i < j->n; i++)
                off[i] += idx * j->strides[i][d];
        }
        for (size_t i = 0; i < j->n; i++) {
            inc[i] = j->strides[i][j->rank - 1];
            ptr[i] = j->base[i] + (size_t)(off[i] + p0 * inc[i]) * j->es[i];
        }
        j->fn(j->state, j->obase + (size_t)(r * j->row + p0) * j->oes, ptr, inc, len);
    }
}

void oq_k_bcast_apply(const oq_kctx *k, const oq_rt_tensor *const *in, size_t n,
                      oq_rt_tensor *out, oq_row_fn fn, const void *state)
{
    bcast_job j;
    memset(&j, 0, sizeof j);
    int64_t numel = oq_rt_tensor_numel(out);
    if (numel <= 0)
        return;
    int64_t st[4][OQ_RT_MAX_RANK + 1];
    int64_t dims[OQ_RT_MAX_RANK + 1];
    size_t r = out->rank;
    for (size_t d = 0; d < r; d++)
        dims[d] = out->dims[d];
    for (size_t i = 0; i < n; i++)
        oq_k_bcast_strides(in[i], out->dims, r, st[i]);
    if (r == 0) {
        dims[0] = 1;
        for (size_t i = 0; i < n; i++)
            st[i][0] = 0;
        r = 1;
    }
    /* collapse: drop size-1 dims, merge dims that are contiguous for every input */
    size_t cr = 0;
    for (size_t d = 0; d < r; d++) {
        if (dims[d] == 1 && r > 1)
            continue;
        if (cr > 0) {
            bool merge = true;
            for (size_t i = 0; i < n; i++)
                if (j.strides[i][cr - 1] != st[i][d] * dims[d])
                    merge = false;
            if (merge) {
                j.dims[cr - 1] *= dims[d];
                for (size_t i = 0; i < n; i++)
                    j.strides[i][cr - 1] = st[i][d];
                continue;
            }
        }
        j.dims[cr] = dims[d];
        for (size_t i = 0; i < n; i++)
            j.strides[i][cr] = st[i][d];
        cr++;
    }
    if (cr == 0) {
        j.dims[0] = 1;
        for (size_t i = 0; i < n; i++)
            j.strides[i][0] = 0;
        cr = 1;
    }
    j.n = n;
    j.rank = cr;
    j.row = j.dims[cr - 1];
    for (size_t i = 0; i < n; i++) {
        j.es[i] = oq_k_elsize(in[i]->dtype);
        j.base[i] = in[i]->data;
    }
    j.oes = oq_k_elsize(out->dtype);
    j.obase = out->data;
    j.fn = fn;
    j.state = state;
    int64_t rows = numel / j.row;
    /* rows longer than 64k elements are cut in pieces so that they too are shared
     * between threads (an elementwise result does not depend on the split) */
    j.piece = j.row > 65536 ? 32768 : j.row;
    j.pieces = (j.row + j.piece - 1) / j.piece;
    int64_t grain = j.piece >= 16384 ? 1 : 16384 / j.piece;
    oq_k_parallel_for(k, rows * j.pieces, grain, bcast_rows, &j);
}

oq_status oq_k_run_widened(oq_kctx *k, oq_kernel_run_fn fn, const oq_rt_tensor *const *in,
                           size_t n_in, oq_rt_tensor *out, size_t n_out)
{
    enum { MAXIO = 16 };
    if (n_in > MAXIO || n_out > MAXIO)
        return oq_k_error(k, OQ_ERR_UNSUPPORTED, "float16: more than %d inputs or outputs", MAXIO);
    oq_rt_tensor wi[MAXIO], wo[MAXIO];
    const oq_rt_tensor *pin[MAXIO + 1] = {NULL};
    size_t off_in[MAXIO], off_out[MAXIO], total = 0;
    /* one buffer for every widened copy, kept by the plan from run to run (a fresh
     * allocation per call costs its page faults: more than the conversion) */
    for (size_t i = 0; i < n_in; i++)
        if (in[i] && in[i]->dtype == OQ_DTYPE_FLOAT16) {
            off_in[i] = total;
            total += ((size_t)oq_rt_tensor_numel(in[i]) * sizeof(float) + 63) & ~(size_t)63;
        }
    for (size_t o = 0; o < n_out; o++)
        if (out[o].dtype == OQ_DTYPE_FLOAT16) {
            off_out[o] = total;
            total += ((size_t)oq_rt_tensor_numel(&out[o]) * sizeof(float) + 63) & ~(size_t)63;
        }
    if (k->wide_size < total || !k->wide) {
        free(k->wide);
        size_t sz = total ? total : 64;
        k->wide = aligned_alloc(64, sz);
        k->wide_size = k->wide ? sz : 0;
        if (!k->wide)
            return oq_k_error(k, OQ_ERR_NOMEM, "out of memory widening float16 to float32 (%zu bytes)", total);
    }
    char *base = k->wide;
    for (size_t i = 0; i < n_in; i++) {
        pin[i] = in[i];
        if (!in[i] || in[i]->dtype != OQ_DTYPE_FLOAT16)
            continue;
        int64_t n = oq_rt_tensor_numel(in[i]);
        wi[i] = *in[i];
        wi[i].dtype = OQ_DTYPE_FLOAT;
        wi[i].nbytes = n * (int64_t)sizeof(float);
        wi[i].owned = false;
        wi[i].data = base + off_in[i];
        oq_half_to_float_n(in[i]->data, wi[i].data, n);
        pin[i] = &wi[i];
    }
    for (size_t o = 0; o < n_out; o++) {
        wo[o] = out[o];
        wo[o].owned = false;
        if (out[o].dtype != OQ_DTYPE_FLOAT16)
            continue;
        int64_t n = oq_rt_tensor_numel(&out[o]);
        wo[o].dtype = OQ_DTYPE_FLOAT;
        wo[o].nbytes = n * (int64_t)sizeof(float);
        wo[o].data = base + off_out[o];
    }
    const oq_k_post *post = k->post; /* a fused chain is float16 code: applied after */
    k->post = NULL;
    oq_status st = fn(k, pin, n_in, wo, n_out);
    k->post = post;
    for (size_t o = 0; o < n_out && st == OQ_OK; o++)
        if (out[o].dtype == OQ_DTYPE_FLOAT16)
            oq_float_to_half_n(wo[o].data, out[o].data, oq_rt_tensor_numel(&out[o]));
    return st;
}
