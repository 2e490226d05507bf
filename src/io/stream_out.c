/* Streaming output: the output's external data file written while passes run.
 *
 * oq_model_stream_begin(m, path) opens the data file oq_model_write(m, path) will produce,
 * as a temporary file beside it (src/io/outfile.c). From then on oq_graph_add_initializer
 * hands every new initializer of at least the size threshold to oq_io_stream_tensor, which
 * appends its bytes (64-byte aligned) and returns a tensor holding only the reference
 * (location, offset, length): the data is never kept in the model. oq_model_write to the
 * same path appends the remaining tensors to the same file and renames both files into
 * place; a model freed without that (a failed job) removes the temporary file.
 *
 * With oq_tensor_release (the source weight, once quantized, and every tensor the writer
 * copied) giving back the pages of the mapped input, a weight-only run's memory is the
 * model's structure plus the working set of one weight, whatever the number of weights. */
#include "io/io-impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXT_ALIGN 64

struct oq_stream_sink {
    oq_outfile f;
    char *data_path;      /* final path of the data file */
    char *data_name;      /* its location as written in the model (a file name) */
    uint64_t off;         /* bytes appended so far (the next tensor's offset before padding) */
    int64_t threshold;
    size_t n, cap;
    const oq_tensor **tensors; /* the streamed ones (malloc'ed) */
};

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

bool oq_io_model_maps_file(oq_model *m, const char *path);

/* The data file path and location name oq_model_write uses for path and opts. */
oq_status oq_io_data_names(const char *path, const oq_write_options *o, char **data_path, char *data_name,
                           size_t name_size, oq_diag *d);
oq_status oq_io_data_names(const char *path, const oq_write_options *o, char **data_path, char *data_name,
                           size_t name_size, oq_diag *d)
{
    *data_path = NULL;
    snprintf(data_name, name_size, "%s", o && o->external_name ? o->external_name : base_name(path));
    if (!(o && o->external_name))
        strncat(data_name, ".data", name_size - strlen(data_name) - 1);
    if (strchr(data_name, '/'))
        return oq_diag_error(d, OQ_ERR_USAGE, "external data name \"%s\" must be a file name", data_name);
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) : 0;
    char *dp = malloc(dl + strlen(data_name) + 3);
    if (!dp)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    if (slash)
        sprintf(dp, "%.*s/%s", (int)dl, path, data_name);
    else
        sprintf(dp, "%s", data_name);
    *data_path = dp;
    return OQ_OK;
}

/* Would writing data_path clobber something the input reads? Checks every external
 * location of the main graph's initializers (mapped or not yet) and the model file. */
static bool input_reads(oq_model *m, const char *data_path)
{
    if ((m->path && oq_same_file(m->path, data_path)) || oq_io_model_maps_file(m, data_path))
        return true;
    if (!m->graph)
        return false;
    for (size_t i = 0; i < m->graph->n_initializers; i++) {
        oq_tensor *t = m->graph->initializers[i];
        oq_external ext;
        oq_diag q;
        oq_diag_init(&q);
        bool ok = oq_tensor_is_external(t) && oq_external_parse(t, &ext, &q) == OQ_OK;
        oq_diag_free(&q);
        if (!ok)
            continue;
        size_t n = strlen(m->dir ? m->dir : ".") + strlen(ext.location) + 2;
        char *full = malloc(n);
        if (!full)
            continue;
        snprintf(full, n, "%s/%s", m->dir ? m->dir : ".", ext.location);
        bool same = oq_same_file(full, data_path);
        free(full);
        if (same)
            return true;
    }
    return false;
}

oq_status oq_model_stream_begin(oq_model *m, const char *path, const oq_write_options *opts, oq_diag *d)
{
    oq_io_state *s = oq_io_state_get(m);
    if (!s)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    if (s->sink)
        return oq_diag_error(d, OQ_ERR_USAGE, "the model already streams its output to \"%s\"", s->sink->data_path);
    if (opts && opts->external_data < 0)
        return oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_USAGE, path, NULL, NULL,
                           "a streamed output has external data (external_data = -1 asks for none)");
    if (m->path && oq_same_file(m->path, path))
        return oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_USAGE, path, NULL, NULL,
                           "refusing to overwrite the input model; write to another file");
    oq_stream_sink *k = calloc(1, sizeof *k);
    char name[1024];
    if (!k)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    oq_status st = oq_io_data_names(path, opts, &k->data_path, name, sizeof name, d);
    if (st == OQ_OK && input_reads(m, k->data_path))
        st = oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_USAGE, k->data_path, NULL, NULL,
                         "refusing to overwrite a file the input model reads; choose another output name");
    if (st == OQ_OK && !(k->data_name = strdup(name)))
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    if (st == OQ_OK)
        st = oq_outfile_open(&k->f, k->data_path, d);
    if (st != OQ_OK) {
        free(k->data_path);
        free(k->data_name);
        free(k);
        return st;
    }
    k->threshold = opts && opts->size_threshold > 0 ? opts->size_threshold : 1024;
    s->sink = k;
    return OQ_OK;
}

static void sink_free(oq_stream_sink *k)
{
    free(k->data_path);
    free(k->data_name);
    free(k->tensors);
    free(k);
}

void oq_io_stream_abort(oq_model *m)
{
    oq_io_state *s = m->io;
    if (!s || !s->sink)
        return;
    oq_outfile_abort(&s->sink->f);
    sink_free(s->sink);
    s->sink = NULL;
}

bool oq_io_stream_has(oq_model *m, const oq_tensor *t)
{
    oq_io_state *s = m ? m->io : NULL;
    if (!s || !s->sink || !oq_tensor_is_external(t))
        return false;
    for (size_t i = s->sink->n; i-- > 0;)
        if (s->sink->tensors[i] == t)
            return true;
    return false;
}

/* Append bytes at the next aligned offset; returns that offset. */
static uint64_t sink_append(oq_stream_sink *k, const void *data, int64_t nbytes)
{
    static const uint8_t zeros[EXT_ALIGN];
    uint64_t pad = (EXT_ALIGN - k->off % EXT_ALIGN) % EXT_ALIGN;
    oq_outfile_write(&k->f, zeros, (size_t)pad);
    k->off += pad;
    uint64_t at = k->off;
    oq_outfile_write(&k->f, data, (size_t)nbytes);
    k->off += (uint64_t)nbytes;
    return at;
}

static oq_status set_ref(oq_model *m, oq_tensor *t, const char *location, uint64_t off, int64_t nbytes)
{
    char buf[2][32];
    snprintf(buf[0], sizeof buf[0], "%llu", (unsigned long long)off);
    snprintf(buf[1], sizeof buf[1], "%lld", (long long)nbytes);
    oq_kv *kv = oq_model_alloc(m, 3 * sizeof *kv);
    if (!kv)
        return OQ_ERR_NOMEM;
    kv[0].key = oq_model_strdup(m, "location");
    kv[0].value = oq_model_strdup(m, location);
    kv[1].key = oq_model_strdup(m, "offset");
    kv[1].value = oq_model_strdup(m, buf[0]);
    kv[2].key = oq_model_strdup(m, "length");
    kv[2].value = oq_model_strdup(m, buf[1]);
    if (!kv[0].key || !kv[0].value || !kv[1].key || !kv[1].value || !kv[2].key || !kv[2].value)
        return OQ_ERR_NOMEM;
    t->external_data.items = kv;
    t->external_data.count = 3;
    t->has_data_location = true;
    t->data_location = 1; /* EXTERNAL */
    return OQ_OK;
}

oq_status oq_io_stream_tensor(oq_model *m, const char *name, int32_t dtype, const int64_t *dims, size_t rank,
                              const void *data, int64_t nbytes, oq_tensor **out, oq_diag *d)
{
    *out = NULL;
    oq_io_state *s = m->io;
    oq_stream_sink *k = s ? s->sink : NULL;
    int64_t numel = oq_dims_numel(dims, rank);
    if (!k || nbytes < k->threshold || dtype == OQ_DTYPE_STRING || numel < 0 ||
        oq_dtype_nbytes(dtype, numel) != nbytes || (rank && !dims))
        return OQ_OK; /* not streamed: the caller keeps it in the model */
    if (k->n == k->cap) {
        size_t nc = k->cap ? 2 * k->cap : 64;
        const oq_tensor **nt = realloc(k->tensors, nc * sizeof *nt);
        if (!nt)
            return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        k->tensors = nt;
        k->cap = nc;
    }
    oq_tensor *t = oq_model_alloc(m, sizeof *t);
    int64_t *nd = oq_model_alloc(m, (rank ? rank : 1) * sizeof *nd);
    if (!t || !nd || !(t->name = oq_model_strdup(m, name)))
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    if (rank)
        memcpy(nd, dims, rank * sizeof *nd);
    t->model = m;
    t->has_dtype = true;
    t->dtype = dtype;
    t->rank = rank;
    t->dims = nd;
    uint64_t at = sink_append(k, data, nbytes);
    if (set_ref(m, t, k->data_name, at, nbytes) != OQ_OK)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    k->tensors[k->n++] = t;
    *out = t;
    return OQ_OK;
}

/* A streamed tensor's bytes, read back (a pass that looks at what it wrote, GPTQ's
 * sweeps through the partly quantized model): map its range of the temporary file. */
oq_status oq_io_stream_map(oq_model *m, oq_tensor *t, oq_diag *d)
{
    oq_io_state *s = m->io;
    oq_stream_sink *k = s->sink;
    const char *nm = t->name ? t->name : "";
    oq_external ext;
    oq_status st = oq_external_parse(t, &ext, d);
    if (st != OQ_OK)
        return st;
    int64_t want = oq_dtype_nbytes(t->dtype, oq_tensor_numel(t));
    oq_outfile_flush(&k->f);
    if (k->f.err)
        return oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_IO, k->data_path, NULL, NULL, "write failed: %s", strerror(k->f.err));
    if (want < 0 || ext.offset < 0 || (uint64_t)ext.offset + (uint64_t)want > k->f.written)
        return oq_diag_error(d, OQ_ERR_INTERNAL, "tensor \"%s\": streamed range outside the data written", nm);
    if (want == 0) {
        t->view = (void *)"";
        t->view_nbytes = 0;
        t->view_borrowed = true;
        return OQ_OK;
    }
    long pg = sysconf(_SC_PAGESIZE);
    uint64_t start = (uint64_t)ext.offset / (uint64_t)pg * (uint64_t)pg;
    size_t len = (size_t)((uint64_t)ext.offset + (uint64_t)want - start);
    oq_mapping *mp = oq_model_alloc(m, sizeof *mp);
    if (!mp || !(mp->path = oq_model_strdup(m, k->f.tmp_path)))
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    void *a = mmap(NULL, len, PROT_READ, MAP_PRIVATE, k->f.fd, (off_t)start);
    if (a == MAP_FAILED)
        return oq_diag_error(d, OQ_ERR_IO, "tensor \"%s\": cannot map the data being written: %s", nm, strerror(errno));
    mp->addr = a;
    mp->len = len;
    mp->next = s->maps;
    s->maps = mp;
    t->view = (uint8_t *)a + ((uint64_t)ext.offset - start);
    t->view_nbytes = want;
    t->view_borrowed = true;
    return OQ_OK;
}

void oq_io_release_tensor(oq_model *m, oq_tensor *t)
{
    oq_io_state *s = m->io;
    if (!s || !t->view || !t->view_borrowed || t->view_nbytes <= 0)
        return;
    uintptr_t a = (uintptr_t)t->view, e = a + (uintptr_t)t->view_nbytes;
    for (oq_mapping *mp = s->maps; mp; mp = mp->next) {
        uintptr_t ma = (uintptr_t)mp->addr;
        if (!mp->addr || a < ma || e > ma + mp->len)
            continue;
        /* whole pages around the range: the mapping is read-only and file-backed, so a page
         * dropped with a neighbour's bytes is simply read again when the neighbour is used */
        uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
        uintptr_t lo = a / pg * pg, hi = (e + pg - 1) / pg * pg;
        if (lo < ma)
            lo = ma;
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
        return;
    }
}

/* ---------------------------------------------------------------- the writer's side */

/* The sink oq_model_write(m, data_path) continues, or NULL (not streaming, or streaming
 * to another file: the streamed tensors are then copied like any external data). */
oq_stream_sink *oq_io_stream_for(oq_model *m, const char *data_path, const char *data_name);
oq_stream_sink *oq_io_stream_for(oq_model *m, const char *data_path, const char *data_name)
{
    oq_io_state *s = m->io;
    if (!s || !s->sink)
        return NULL;
    if (strcmp(s->sink->data_path, data_path) != 0 || strcmp(s->sink->data_name, data_name) != 0)
        return NULL;
    return s->sink;
}

oq_outfile *oq_io_stream_file(oq_stream_sink *k, uint64_t *off);
oq_outfile *oq_io_stream_file(oq_stream_sink *k, uint64_t *off)
{
    *off = k->off;
    return &k->f;
}

/* The writer took the file over (finished, renamed or aborted it): forget the sink. */
void oq_io_stream_done(oq_model *m);
void oq_io_stream_done(oq_model *m)
{
    oq_io_state *s = m->io;
    if (!s || !s->sink)
        return;
    /* the streamed tensors now refer to the final file, which exists */
    sink_free(s->sink);
    s->sink = NULL;
}
