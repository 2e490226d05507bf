/* Tensor files: TensorProto .pb and NumPy .npy, read into and written from
 * oq_rt_tensor. The protobuf structs stay here. */
#include "onnxq/tensor_io.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io-impl.h"

/* ------------------------------------------------------------------ .npy --------- */

typedef struct npy_type {
    const char *descr;
    int32_t dtype;
} npy_type;

static const npy_type npy_types[] = {
    {"<f4", OQ_DTYPE_FLOAT},   {"<f8", OQ_DTYPE_DOUBLE}, {"<f2", OQ_DTYPE_FLOAT16},
    {"|b1", OQ_DTYPE_BOOL},    {"|i1", OQ_DTYPE_INT8},   {"|u1", OQ_DTYPE_UINT8},
    {"<i2", OQ_DTYPE_INT16},   {"<u2", OQ_DTYPE_UINT16}, {"<i4", OQ_DTYPE_INT32},
    {"<u4", OQ_DTYPE_UINT32},  {"<i8", OQ_DTYPE_INT64},  {"<u8", OQ_DTYPE_UINT64},
    {"<b1", OQ_DTYPE_BOOL},    {"<i1", OQ_DTYPE_INT8},   {"<u1", OQ_DTYPE_UINT8},
};

/* Find the value text after 'key': in a Python dict literal. */
static const char *dict_value(const char *h, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(h, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    if (*p != ':')
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

/* numpy's fortran_order (what np.save writes for a transposed array, a.T): the first
 * index varies fastest. Copy into C order, walking the C-order index as an odometer and
 * keeping the Fortran offset up to date. */
static void npy_from_fortran(uint8_t *dst, const uint8_t *src, const int64_t *dims, size_t rank,
                             size_t esize)
{
    int64_t fstride[OQ_RT_MAX_RANK], idx[OQ_RT_MAX_RANK] = {0};
    int64_t s = 1, numel = 1;
    for (size_t k = 0; k < rank; k++) {
        fstride[k] = s;
        s *= dims[k];
        numel *= dims[k];
    }
    int64_t off = 0;
    for (int64_t i = 0; i < numel; i++) {
        memcpy(dst + (size_t)i * esize, src + (size_t)off * esize, esize);
        for (size_t k = rank; k-- > 0;) {
            if (++idx[k] < dims[k]) {
                off += fstride[k];
                break;
            }
            off -= fstride[k] * (dims[k] - 1);
            idx[k] = 0;
        }
    }
}

static oq_status read_npy(const uint8_t *b, size_t len, const char *what, oq_rt_tensor *out,
                          oq_diag *d)
{
    if (len < 10)
        return oq_diag_error(d, OQ_ERR_PARSE, "%s: truncated .npy header", what);
    int major = b[6];
    size_t hlen, hoff;
    if (major == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        hoff = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12)
            return oq_diag_error(d, OQ_ERR_PARSE, "%s: truncated .npy header", what);
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        hoff = 12;
    } else {
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "%s: .npy format version %d is not supported",
                             what, major);
    }
    if (hlen > len - hoff)
        return oq_diag_error(d, OQ_ERR_PARSE, "%s: .npy header longer than the file", what);
    char *h = malloc(hlen + 1);
    if (!h)
        return OQ_ERR_NOMEM;
    memcpy(h, b + hoff, hlen);
    h[hlen] = 0;
    oq_status st = OQ_OK;
    const char *v = dict_value(h, "descr");
    int32_t dtype = 0;
    if (!v || (*v != '\'' && *v != '"')) {
        st = oq_diag_error(d, OQ_ERR_PARSE, "%s: .npy header has no 'descr'", what);
        goto done;
    }
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (strncmp(v + 1, npy_types[i].descr, 3) == 0 && (v[4] == '\'' || v[4] == '"'))
            dtype = npy_types[i].dtype;
    if (!dtype) {
        const char *e = v + 1;
        size_t n = strcspn(e, "'\"");
        st = oq_diag_error(d, OQ_ERR_UNSUPPORTED,
                           "%s: .npy dtype '%.*s' is not supported (little-endian bool, "
                           "int8-64, uint8-64, float16/32/64 only)", what, (int)n, e);
        goto done;
    }
    v = dict_value(h, "fortran_order");
    bool fortran = v && strncmp(v, "True", 4) == 0;
    if (!v || (!fortran && strncmp(v, "False", 5) != 0)) {
        st = oq_diag_error(d, OQ_ERR_PARSE, "%s: .npy header has no 'fortran_order'", what);
        goto done;
    }
    v = dict_value(h, "shape");
    if (!v || *v != '(') {
        st = oq_diag_error(d, OQ_ERR_PARSE, "%s: .npy header has no 'shape'", what);
        goto done;
    }
    int64_t dims[OQ_RT_MAX_RANK];
    size_t rank = 0;
    v++;
    for (;;) {
        while (*v == ' ' || *v == ',')
            v++;
        if (*v == ')')
            break;
        if (*v < '0' || *v > '9') {
            st = oq_diag_error(d, OQ_ERR_PARSE, "%s: bad .npy shape", what);
            goto done;
        }
        if (rank == OQ_RT_MAX_RANK) {
            st = oq_diag_error(d, OQ_ERR_UNSUPPORTED, "%s: rank above %d", what, OQ_RT_MAX_RANK);
            goto done;
        }
        errno = 0;
        char *end;
        long long x = strtoll(v, &end, 10);
        if (errno) {
            st = oq_diag_error(d, OQ_ERR_PARSE, "%s: bad .npy shape", what);
            goto done;
        }
        dims[rank++] = x;
        v = end;
        if (*v == 'L')
            v++;
    }
    int64_t numel = oq_dims_numel(dims, rank);
    int64_t nb = numel < 0 ? -1 : oq_dtype_nbytes(dtype, numel);
    if (nb < 0) {
        st = oq_diag_error(d, OQ_ERR_INVALID, "%s: .npy element count overflows", what);
        goto done;
    }
    if ((uint64_t)nb != (uint64_t)(len - hoff - hlen)) {
        st = oq_diag_error(d, OQ_ERR_INVALID, "%s: .npy data is %zu bytes, shape needs %lld",
                           what, len - hoff - hlen, (long long)nb);
        goto done;
    }
    st = oq_rt_tensor_alloc(out, dtype, dims, rank);
    if (st != OQ_OK) {
        st = oq_diag_error(d, st, "%s: cannot allocate %lld bytes", what, (long long)nb);
        goto done;
    }
    if (nb && fortran && rank > 1)
        npy_from_fortran(out->data, b + hoff + hlen, dims, rank, (size_t)(nb / numel));
    else if (nb)
        memcpy(out->data, b + hoff + hlen, (size_t)nb);
    if (dtype == OQ_DTYPE_BOOL)
        for (int64_t i = 0; i < numel; i++)
            ((uint8_t *)out->data)[i] = ((uint8_t *)out->data)[i] != 0;
done:
    free(h);
    return st;
}

/* ------------------------------------------------------------------ .pb ---------- */

static oq_status read_pb(const uint8_t *b, size_t len, const char *what, oq_rt_tensor *out,
                         char **name, oq_diag *d)
{
    oq_model *m = NULL;
    /* messages of the wire scan and of oq_tensor_data do not name the file: let the
     * diagnostic do it */
    const char *saved_file = d ? d->file : NULL;
    if (d)
        d->file = what;
    oq_status st = oq_wire_scan(b, len, &onnx__tensor_proto__descriptor, d);
    if (d)
        d->file = saved_file;
    if (st != OQ_OK)
        return st;
    Onnx__TensorProto *p = onnx__tensor_proto__unpack(NULL, len, b);
    if (!p)
        return oq_diag_error(d, OQ_ERR_PARSE, "%s: not a TensorProto", what);
    m = oq_model_new();
    if (!m) {
        st = OQ_ERR_NOMEM;
        goto done;
    }
    oq_tensor t;
    memset(&t, 0, sizeof t);
    t.name = p->name;
    t.has_dtype = p->has_data_type;
    t.dtype = p->data_type;
    t.rank = p->n_dims;
    t.dims = p->dims;
    t.has_raw = p->has_raw_data;
    t.raw.data = p->raw_data.data;
    t.raw.len = p->raw_data.len;
    t.n_float_data = p->n_float_data;
    t.float_data = p->float_data;
    t.n_int32_data = p->n_int32_data;
    t.int32_data = p->int32_data;
    t.n_int64_data = p->n_int64_data;
    t.int64_data = p->int64_data;
    t.n_double_data = p->n_double_data;
    t.double_data = p->double_data;
    t.n_uint64_data = p->n_uint64_data;
    t.uint64_data = p->uint64_data;
    t.model = m;
    if (p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        st = oq_diag_error(d, OQ_ERR_UNSUPPORTED, "%s: external data in a tensor file is not "
                           "supported", what);
        goto done;
    }
    if (p->n_string_data || t.dtype == OQ_DTYPE_STRING) {
        st = oq_diag_error(d, OQ_ERR_UNSUPPORTED, "%s: string tensors are not supported", what);
        goto done;
    }
    if (t.rank > OQ_RT_MAX_RANK) {
        st = oq_diag_error(d, OQ_ERR_UNSUPPORTED, "%s: rank %zu above %d", what, t.rank,
                           OQ_RT_MAX_RANK);
        goto done;
    }
    if (d)
        d->file = what;
    const void *data = oq_tensor_data(&t, d);
    if (d)
        d->file = saved_file;
    if (!data) {
        st = OQ_ERR_INVALID;
        goto done;
    }
    if (t.view_nbytes != oq_dtype_nbytes(t.dtype, oq_tensor_numel(&t))) {
        st = oq_diag_error(d, OQ_ERR_INVALID, "%s: data size does not match the dims", what);
        goto done;
    }
    st = oq_rt_tensor_alloc(out, t.dtype, t.dims, t.rank);
    if (st != OQ_OK) {
        st = oq_diag_error(d, st, "%s: cannot allocate the tensor", what);
        goto done;
    }
    if (out->nbytes)
        memcpy(out->data, data, (size_t)out->nbytes);
    if (t.dtype == OQ_DTYPE_BOOL) /* raw bytes other than 0/1 are true, as for .npy */
        for (int64_t i = 0; i < out->nbytes; i++)
            ((uint8_t *)out->data)[i] = ((uint8_t *)out->data)[i] != 0;
    if (name && p->name && *p->name) {
        *name = strdup(p->name);
        if (!*name) {
            oq_rt_tensor_release(out);
            st = OQ_ERR_NOMEM;
        }
    }
done:
    oq_model_free(m);
    onnx__tensor_proto__free_unpacked(p, NULL);
    return st;
}

static bool npy_magic(const uint8_t *b, size_t len)
{
    return len >= 6 && memcmp(b, "\x93NUMPY", 6) == 0;
}

oq_status oq_tensor_buffer_read(const void *data, size_t len, const char *what,
                                oq_rt_tensor *out, char **name, oq_diag *d)
{
    memset(out, 0, sizeof(*out));
    if (name)
        *name = NULL;
    if (!what)
        what = "tensor";
    const uint8_t *b = data;
    if (npy_magic(b, len))
        return read_npy(b, len, what, out, d);
    return read_pb(b, len, what, out, name, d);
}

oq_status oq_tensor_file_read(const char *path, oq_rt_tensor *out, char **name, oq_diag *d)
{
    memset(out, 0, sizeof(*out));
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    oq_status st;
    if (!f)
        return oq_diag_error(d, OQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) {
        st = oq_diag_error(d, OQ_ERR_IO, "%s: cannot seek", path);
        goto done;
    }
    long sz = ftell(f);
    rewind(f);
    if (sz < 0) {
        st = oq_diag_error(d, OQ_ERR_IO, "%s: cannot size", path);
        goto done;
    }
    buf = malloc((size_t)sz + 1);
    if (!buf) {
        st = OQ_ERR_NOMEM;
        goto done;
    }
    if (fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
        st = oq_diag_error(d, OQ_ERR_IO, "%s: read error", path);
        goto done;
    }
    size_t pl = strlen(path);
    if (pl >= 4 && strcmp(path + pl - 4, ".npy") == 0 && !npy_magic(buf, (size_t)sz)) {
        /* named .npy: not read as a TensorProto, whose parse error would say nothing useful */
        st = oq_diag_error(d, OQ_ERR_INVALID, "%s: not a .npy file (it does not start with \\x93NUMPY)", path);
        goto done;
    }
    st = oq_tensor_buffer_read(buf, (size_t)sz, path, out, name, d);
done:
    free(buf);
    fclose(f);
    return st;
}

oq_status oq_tensor_file_write_pb(const char *path, const oq_rt_tensor *t, const char *name,
                                  oq_diag *d)
{
    Onnx__TensorProto p = ONNX__TENSOR_PROTO__INIT;
    int64_t dims[OQ_RT_MAX_RANK];
    if (t->rank > OQ_RT_MAX_RANK)
        return oq_diag_error(d, OQ_ERR_USAGE, "%s: bad tensor rank", path);
    for (size_t i = 0; i < t->rank; i++)
        dims[i] = t->dims[i];
    p.n_dims = t->rank;
    p.dims = dims;
    p.has_data_type = 1;
    p.data_type = t->dtype;
    p.name = (char *)(name ? name : "");
    int64_t nb = oq_dtype_nbytes(t->dtype, oq_rt_tensor_numel(t));
    if (nb < 0)
        return oq_diag_error(d, OQ_ERR_USAGE, "%s: bad tensor", path);
    p.has_raw_data = 1;
    p.raw_data.len = (size_t)nb;
    p.raw_data.data = t->data;
    size_t sz = onnx__tensor_proto__get_packed_size(&p);
    uint8_t *buf = malloc(sz ? sz : 1);
    if (!buf)
        return OQ_ERR_NOMEM;
    onnx__tensor_proto__pack(&p, buf);
    oq_outfile f;
    oq_status st = oq_outfile_open(&f, path, d);
    if (st == OQ_OK) {
        oq_outfile_write(&f, buf, sz);
        st = oq_outfile_commit(&f, d);
    }
    free(buf);
    return st;
}

oq_status oq_file_write_atomic(const char *path, const void *data, size_t n, oq_diag *d)
{
    oq_outfile f;
    oq_status st = oq_outfile_open(&f, path, d);
    if (st == OQ_OK) {
        oq_outfile_write(&f, data, n);
        st = oq_outfile_commit(&f, d);
    }
    return st;
}

oq_status oq_tensor_file_write_npy(const char *path, const oq_rt_tensor *t, oq_diag *d)
{
    const char *descr = NULL;
    for (size_t i = 0; i < 12; i++)
        if (npy_types[i].dtype == t->dtype)
            descr = npy_types[i].descr;
    if (!descr)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "%s: NumPy has no dtype for %s", path,
                             oq_dtype_name(t->dtype));
    char h[512];
    int n = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (size_t i = 0; i < t->rank; i++)
        n += snprintf(h + n, sizeof h - (size_t)n, "%lld,%s", (long long)t->dims[i],
                      (i + 1 < t->rank) ? " " : "");
    if (t->rank > 1)
        n--; /* "(2, 3,)" -> "(2, 3)" */
    n += snprintf(h + n, sizeof h - (size_t)n, "), }");
    /* pad with spaces so that data starts at a multiple of 64, end with '\n' */
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    size_t hl = (size_t)n + pad + 1;
    pre[8] = (uint8_t)(hl & 0xff);
    pre[9] = (uint8_t)(hl >> 8);
    oq_outfile f;
    oq_status st = oq_outfile_open(&f, path, d);
    if (st != OQ_OK)
        return st;
    oq_outfile_write(&f, pre, 10);
    oq_outfile_write(&f, h, (size_t)n);
    for (size_t i = 0; i < pad; i++)
        oq_outfile_write(&f, " ", 1);
    oq_outfile_write(&f, "\n", 1);
    int64_t nb = oq_dtype_nbytes(t->dtype, oq_rt_tensor_numel(t));
    if (nb > 0)
        oq_outfile_write(&f, t->data, (size_t)nb);
    return oq_outfile_commit(&f, d);
}
