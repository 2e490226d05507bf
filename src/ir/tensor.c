#include "ir/ir-impl.h"

#include <stdio.h>
#include <string.h>

int64_t oq_tensor_numel(const oq_tensor *t)
{
    return oq_dims_numel(t->dims, t->rank);
}

bool oq_tensor_is_external(const oq_tensor *t)
{
    return t->has_data_location && t->data_location == 1;
}

oq_tensor *oq_tensor_new(oq_model *m, const char *name, int32_t dtype, const int64_t *dims,
                         size_t rank, const void *data, int64_t nbytes)
{
    oq_tensor *t = oq_arena_alloc(m->arena, sizeof(*t));
    if (!t)
        return NULL;
    t->name = oq_arena_strdup(m->arena, name);
    t->model = m;
    if (oq_tensor_set_data(m, t, dtype, dims, rank, data, nbytes) != OQ_OK)
        return NULL;
    return t;
}

oq_status oq_tensor_set_data(oq_model *m, oq_tensor *t, int32_t dtype, const int64_t *dims,
                             size_t rank, const void *data, int64_t nbytes)
{
    if (rank && !dims)
        return OQ_ERR_USAGE;
    int64_t numel = oq_dims_numel(dims, rank);
    if (numel < 0 || dtype == OQ_DTYPE_STRING || oq_dtype_nbytes(dtype, numel) != nbytes)
        return OQ_ERR_USAGE;
    int64_t *nd = oq_arena_alloc(m->arena, (rank ? rank : 1) * sizeof(int64_t));
    if (nd && rank)
        memcpy(nd, dims, rank * sizeof(int64_t));
    void *buf = oq_arena_alloc_raw(m->arena, (size_t)(nbytes ? nbytes : 1));
    if (!nd || !buf)
        return OQ_ERR_NOMEM;
    if (nbytes)
        memcpy(buf, data, (size_t)nbytes);
    t->has_dtype = true;
    t->dtype = dtype;
    t->rank = rank;
    t->dims = nd;
    t->has_raw = true;
    t->raw.data = buf;
    t->raw.len = (size_t)nbytes;
    t->n_float_data = t->n_int32_data = t->n_int64_data = 0;
    t->n_double_data = t->n_uint64_data = t->n_string_data = 0;
    t->has_data_location = false;
    t->data_location = 0;
    t->external_data.count = 0;
    t->view = buf;
    t->view_nbytes = nbytes;
    t->view_borrowed = true;
    t->model = m;
    return OQ_OK;
}

static int nfields(const oq_tensor *t)
{
    return (t->has_raw ? 1 : 0) + (t->n_float_data > 0) + (t->n_int32_data > 0) +
           (t->n_int64_data > 0) + (t->n_double_data > 0) + (t->n_uint64_data > 0) +
           (t->n_string_data > 0) + (oq_tensor_is_external(t) ? 1 : 0);
}

/* The element count expected in a typed field for dtype, or -1 if that field cannot
 * hold dtype. */
static int64_t typed_count(int field, int32_t dtype, int64_t numel)
{
    switch (field) {
    case 0: /* float_data */
        if (dtype == OQ_DTYPE_FLOAT) return numel;
        if (dtype == OQ_DTYPE_COMPLEX64) return numel > INT64_MAX / 2 ? -1 : numel * 2;
        return -1;
    case 1: /* int32_data */
        switch (dtype) {
        case OQ_DTYPE_INT32: case OQ_DTYPE_INT16: case OQ_DTYPE_INT8: case OQ_DTYPE_UINT16:
        case OQ_DTYPE_UINT8: case OQ_DTYPE_BOOL: case OQ_DTYPE_FLOAT16: case OQ_DTYPE_BFLOAT16:
        case OQ_DTYPE_FLOAT8E4M3FN: case OQ_DTYPE_FLOAT8E4M3FNUZ: case OQ_DTYPE_FLOAT8E5M2:
        case OQ_DTYPE_FLOAT8E5M2FNUZ:
            return numel;
        case OQ_DTYPE_INT4: case OQ_DTYPE_UINT4:
            return numel / 2 + (numel & 1);
        default:
            return -1;
        }
    case 2: /* int64_data */
        return dtype == OQ_DTYPE_INT64 ? numel : -1;
    case 3: /* double_data */
        if (dtype == OQ_DTYPE_DOUBLE) return numel;
        if (dtype == OQ_DTYPE_COMPLEX128) return numel > INT64_MAX / 2 ? -1 : numel * 2;
        return -1;
    case 4: /* uint64_data */
        return dtype == OQ_DTYPE_UINT64 || dtype == OQ_DTYPE_UINT32 ? numel : -1;
    case 5: /* string_data */
        return dtype == OQ_DTYPE_STRING ? numel : -1;
    }
    return -1;
}

static const char *field_names[] = {"float_data", "int32_data", "int64_data", "double_data",
                                    "uint64_data", "string_data"};

static int which_typed(const oq_tensor *t, size_t *count)
{
    size_t c[6] = {t->n_float_data, t->n_int32_data, t->n_int64_data,
                   t->n_double_data, t->n_uint64_data, t->n_string_data};
    for (int i = 0; i < 6; i++)
        if (c[i]) {
            *count = c[i];
            return i;
        }
    return -1;
}

oq_status oq_tensor_validate(const oq_tensor *t, const char *where, oq_diag *d)
{
    const char *nm = t->name ? t->name : "";
    if (!where)
        where = "tensor";
    for (size_t i = 0; i < t->rank; i++)
        if (t->dims[i] < 0)
            return oq_diag_error(d, OQ_ERR_INVALID, "%s \"%s\": dimension %zu is negative (%lld)",
                                 where, nm, i, (long long)t->dims[i]);
    int64_t numel = oq_tensor_numel(t);
    if (numel < 0)
        return oq_diag_error(d, OQ_ERR_INVALID, "%s \"%s\": element count overflows int64",
                             where, nm);
    if (!t->has_dtype || !oq_dtype_valid(t->dtype))
        return oq_diag_error(d, OQ_ERR_INVALID, "%s \"%s\": invalid data_type %d", where, nm,
                             (int)t->dtype);
    if (t->dtype != OQ_DTYPE_STRING && oq_dtype_nbytes(t->dtype, numel) < 0)
        return oq_diag_error(d, OQ_ERR_INVALID, "%s \"%s\": %s[%lld] byte size overflows int64",
                             where, nm, oq_dtype_name(t->dtype), (long long)numel);
    if (nfields(t) > 1)
        return oq_diag_error(d, OQ_ERR_INVALID, "%s \"%s\": data is stored in more than one field",
                             where, nm);
    if (oq_tensor_is_external(t))
        return OQ_OK; /* checked by the external-data loader against the file */
    if (t->has_raw) {
        if (t->dtype == OQ_DTYPE_STRING)
            return oq_diag_error(d, OQ_ERR_INVALID, "%s \"%s\": string tensor in raw_data",
                                 where, nm);
        int64_t want = oq_dtype_nbytes(t->dtype, numel);
        if (want < 0 || (uint64_t)want != (uint64_t)t->raw.len)
            return oq_diag_error(d, OQ_ERR_INVALID,
                                 "%s \"%s\": raw_data has %zu bytes, %s[%lld] needs %lld", where,
                                 nm, t->raw.len, oq_dtype_name(t->dtype), (long long)numel,
                                 (long long)want);
        return OQ_OK;
    }
    size_t count = 0;
    int f = which_typed(t, &count);
    if (f < 0) {
        if (numel == 0)
            return OQ_OK;
        return oq_diag_error(d, OQ_ERR_INVALID, "%s \"%s\": has no data for %lld elements",
                             where, nm, (long long)numel);
    }
    int64_t want = typed_count(f, t->dtype, numel);
    if (want < 0)
        return oq_diag_error(d, OQ_ERR_INVALID, "%s \"%s\": %s cannot hold %s", where, nm,
                             field_names[f], oq_dtype_name(t->dtype));
    if ((uint64_t)want != (uint64_t)count)
        return oq_diag_error(d, OQ_ERR_INVALID, "%s \"%s\": %s has %zu values, expected %lld",
                             where, nm, field_names[f], count, (long long)want);
    return OQ_OK;
}

void oq_tensor_release(oq_tensor *t)
{
    const oq_model_io *io = t && t->model ? t->model->io : NULL;
    if (io && io->ops && io->ops->release_tensor)
        io->ops->release_tensor(t->model, t);
}

const void *oq_tensor_data(oq_tensor *t, oq_diag *d)
{
    if (t->view)
        return t->view;
    const char *nm = t->name ? t->name : "";
    if (oq_tensor_validate(t, "tensor", d) != OQ_OK)
        return NULL;
    int64_t numel = oq_tensor_numel(t);
    if (oq_tensor_is_external(t)) {
        if (!t->model)
            return NULL;
        const oq_model_io *io = t->model->io;
        if (!io || !io->ops || !io->ops->map_external) {
            oq_diag_error(d, OQ_ERR_UNSUPPORTED, "tensor \"%s\": external data of a model "
                          "that was not read from a file cannot be loaded", nm);
            return NULL;
        }
        if (io->ops->map_external(t->model, t, d) != OQ_OK)
            return NULL;
        return t->view;
    }
    if (t->has_raw) {
        if (t->raw.data && ((uintptr_t)t->raw.data & 15) && t->raw.len && t->model) {
            /* raw_data borrowed from a file at an odd offset: typed access needs an
             * aligned copy (made once, on first use; writing the model never needs it) */
            void *c = oq_model_memdup(t->model, t->raw.data, t->raw.len);
            if (!c) {
                oq_diag_error(d, OQ_ERR_NOMEM, "tensor \"%s\": out of memory", nm);
                return NULL;
            }
            t->view = c;
            t->view_nbytes = (int64_t)t->raw.len;
            t->view_borrowed = false;
            return t->view;
        }
        t->view = t->raw.data ? t->raw.data : (void *)"";
        t->view_nbytes = (int64_t)t->raw.len;
        t->view_borrowed = true;
        return t->view;
    }
    if (t->dtype == OQ_DTYPE_STRING) {
        t->view = t->string_data ? (void *)t->string_data : (void *)"";
        t->view_nbytes = (int64_t)(t->n_string_data * sizeof(oq_bytes));
        t->view_borrowed = true;
        return t->view;
    }
    int64_t nb = oq_dtype_nbytes(t->dtype, numel);
    if (numel == 0 || nb == 0) {
        t->view = (void *)"";
        t->view_nbytes = 0;
        t->view_borrowed = true;
        return t->view;
    }
    switch (t->dtype) {
    case OQ_DTYPE_FLOAT: case OQ_DTYPE_COMPLEX64:
        t->view = t->float_data; break;
    case OQ_DTYPE_INT32:
        t->view = t->int32_data; break;
    case OQ_DTYPE_INT64:
        t->view = t->int64_data; break;
    case OQ_DTYPE_DOUBLE: case OQ_DTYPE_COMPLEX128:
        t->view = t->double_data; break;
    case OQ_DTYPE_UINT64:
        t->view = t->uint64_data; break;
    default: break;
    }
    if (t->view) {
        t->view_nbytes = nb;
        t->view_borrowed = true;
        return t->view;
    }
    if (!t->model) {
        oq_diag_error(d, OQ_ERR_INTERNAL, "tensor \"%s\": cannot decode without a model", nm);
        return NULL;
    }
    uint8_t *buf = oq_model_alloc(t->model, (size_t)nb);
    if (!buf) {
        oq_diag_error(d, OQ_ERR_NOMEM, "tensor \"%s\": out of memory decoding %lld bytes", nm,
                      (long long)nb);
        return NULL;
    }
    int bits = oq_dtype_bits(t->dtype);
    if (t->dtype == OQ_DTYPE_UINT32) {
        for (int64_t i = 0; i < numel; i++) {
            uint32_t v = (uint32_t)t->uint64_data[i];
            memcpy(buf + 4 * i, &v, 4);
        }
    } else if (bits == 4) {
        for (int64_t i = 0; i < nb; i++)
            buf[i] = (uint8_t)t->int32_data[i];
    } else if (t->dtype == OQ_DTYPE_BOOL) {
        /* any non-zero int32 is true (as numpy_helper.to_array reads it), not its low byte */
        for (int64_t i = 0; i < numel; i++)
            buf[i] = t->int32_data[i] != 0;
    } else if (bits == 8) {
        for (int64_t i = 0; i < numel; i++)
            buf[i] = (uint8_t)t->int32_data[i];
    } else if (bits == 16) {
        for (int64_t i = 0; i < numel; i++) {
            uint16_t v = (uint16_t)t->int32_data[i];
            memcpy(buf + 2 * i, &v, 2);
        }
    } else {
        oq_diag_error(d, OQ_ERR_UNSUPPORTED, "tensor \"%s\": cannot decode %s", nm,
                      oq_dtype_name(t->dtype));
        return NULL;
    }
    t->view = buf;
    t->view_nbytes = nb;
    t->view_borrowed = false;
    return t->view;
}
