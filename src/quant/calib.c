/* Calibration: sample sources, the observer loop over the executor, the table. */
#include "onnxq/calib.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "onnxq/tensor_io.h"
#include "io/json.h"
#include "quant/quant-impl.h"

/* ------------------------------------------------------------------ sources ---- */

typedef enum src_kind { SRC_DIR_SUB = 0, SRC_DIR_FLAT = 1, SRC_IMAGES = 2, SRC_RANDOM = 3, SRC_FEED = 4 } src_kind;

/* Samples fed one at a time (oq_calib_source_feed): the arrays go to an unlinked
 * temporary file (the spool); memory keeps only their names, types and offsets. Shared
 * by every source that reads it (a pass's feed=ID opens another one), counted. */
typedef struct feed_item {
    char *name;
    int32_t dtype;
    size_t rank;
    int64_t dims[OQ_RT_MAX_RANK];
    int64_t nbytes;
    int64_t offset;
} feed_item;

typedef struct feed_spool {
    int fd;
    int64_t end;
    feed_item *items;        /* every sample's arrays, in order */
    size_t n_items, cap_items;
    size_t *first;           /* sample k: items[first[k] .. first[k + 1]) */
    uint64_t n_samples;
    size_t cap_first;
    uint64_t id;             /* the handle passes name (feed=ID) */
    int refs;
} feed_spool;

struct oq_calib_source {
    src_kind kind;
    char *dir;
    char **paths;          /* sample folders / files / images */
    size_t n_paths;
    uint64_t n;            /* samples */
    uint64_t limit;
    oq_image_opts img;
    uint64_t seed;
    int64_t height, width;
    /* oq_calib_source_set_dim / _set_value / _require_dims */
    char **dim_names;
    int64_t *dim_sizes;
    size_t n_dims;
    char **val_names;
    double *vals;
    size_t n_vals;
    bool require_dims;
    feed_spool *feed;      /* SRC_FEED */
};

static void feed_release(feed_spool *f);

static char *join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 2);
    if (!s)
        return NULL;
    memcpy(s, a, la);
    s[la] = '/';
    memcpy(s + la + 1, b, lb + 1);
    return s;
}

static bool ends_with(const char *s, const char *suf)
{
    size_t ls = strlen(s), lf = strlen(suf);
    return ls >= lf && strcmp(s + ls - lf, suf) == 0;
}

static bool is_tensor_file(const char *name)
{
    return ends_with(name, ".pb") || ends_with(name, ".npy");
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void free_paths(char **p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(p[i]);
    free(p);
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

oq_status oq_calib_source_dir(const char *dir, oq_calib_source **out, oq_diag *d)
{
    *out = NULL;
    oq_status st = OQ_OK;
    char **subs = NULL, **files = NULL;
    size_t ns = 0, nf = 0, cap = 0;
    struct stat dst;
    if (stat(dir, &dst) != 0)
        return oq_diag_error(d, OQ_ERR_USAGE, "%s: no such sample folder", dir);
    if (!S_ISDIR(dst.st_mode))
        return oq_diag_error(d, OQ_ERR_USAGE,
                             "%s: is a file; samples are a folder (one subfolder per sample, or .npy/.pb files)",
                             dir);
    DIR *dh = opendir(dir);
    if (!dh)
        return oq_diag_error(d, OQ_ERR_USAGE, "%s: cannot open the sample folder", dir);
    struct dirent *e;
    while ((e = readdir(dh)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char *full = join(dir, e->d_name);
        if (!full) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
            goto fail;
        }
        bool sub = is_dir(full);
        if (!sub && !is_tensor_file(e->d_name)) {
            free(full);
            continue;
        }
        if (ns + nf + 1 > cap) {
            cap = cap ? cap * 2 : 64;
            char **a = realloc(subs, cap * sizeof(char *));
            char **b = a ? realloc(files, cap * sizeof(char *)) : NULL;
            if (a)
                subs = a;
            if (b)
                files = b;
            if (!a || !b) {
                free(full);
                st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
                goto fail;
            }
        }
        if (sub)
            subs[ns++] = full;
        else
            files[nf++] = full;
    }
    if (ns == 0 && nf == 0) {
        st = oq_diag_error(d, OQ_ERR_USAGE,
                           "%s: no samples (expected one subfolder per sample, or .npy/.pb files)", dir);
        goto fail;
    }
    oq_calib_source *s = calloc(1, sizeof(*s));
    if (!s) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto fail;
    }
    /* a folder holding input_0.pb (or .npy) is one sample in the ONNX test-data layout
     * (test_data_set_N/input_*.pb, output_*.pb): its output_*.pb are not samples */
    bool test_set = false;
    for (size_t i = 0; ns == 0 && i < nf && !test_set; i++) {
        const char *b = strrchr(files[i], '/');
        b = b ? b + 1 : files[i];
        test_set = strcmp(b, "input_0.pb") == 0 || strcmp(b, "input_0.npy") == 0;
    }
    if (test_set) {
        char *self = strdup(dir);
        if (!self) {
            free(s);
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
            goto fail;
        }
        free_paths(files, nf);
        files = NULL;
        nf = 0;
        subs[0] = self; /* subs and files grow together: subs has room */
        ns = 1;
    }
    if (ns > 0) {
        s->kind = SRC_DIR_SUB;
        s->paths = subs;
        s->n_paths = ns;
        free_paths(files, nf);
    } else {
        s->kind = SRC_DIR_FLAT;
        s->paths = files;
        s->n_paths = nf;
        free(subs);
    }
    qsort(s->paths, s->n_paths, sizeof(char *), cmp_str);
    s->n = s->n_paths;
    s->dir = strdup(dir);
    closedir(dh);
    *out = s;
    return OQ_OK;
fail:
    closedir(dh);
    free_paths(subs, ns);
    free_paths(files, nf);
    return st;
}

oq_status oq_calib_source_images(const char *dir, const oq_image_opts *o,
                                 oq_calib_source **out, oq_diag *d)
{
    *out = NULL;
    /* height/width 0: the model input's fixed H, W (found when the first sample is read) */
    if ((o->height != 0 || o->width != 0) && oq_image_tensor_numel(o) <= 0)
        return oq_diag_error(d, OQ_ERR_USAGE, "image size must be positive (--size HxW)");
    oq_calib_source *s = calloc(1, sizeof(*s));
    if (!s)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    oq_status st = oq_image_dir_list(dir, &s->paths, &s->n_paths, d);
    if (st != OQ_OK) {
        free(s);
        return st;
    }
    s->kind = SRC_IMAGES;
    s->img = *o;
    s->n = s->n_paths;
    *out = s;
    return OQ_OK;
}

oq_status oq_calib_source_random(uint64_t n, uint64_t seed, int64_t height, int64_t width,
                                 oq_calib_source **out, oq_diag *d)
{
    *out = NULL;
    if (n == 0)
        return oq_diag_error(d, OQ_ERR_USAGE, "random calibration needs at least one sample");
    oq_calib_source *s = calloc(1, sizeof(*s));
    if (!s)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    s->kind = SRC_RANDOM;
    s->n = n;
    s->seed = seed ? seed : 1;
    s->height = height > 0 ? height : 32;
    s->width = width > 0 ? width : 32;
    *out = s;
    return OQ_OK;
}

void oq_calib_source_limit(oq_calib_source *s, uint64_t n)
{
    s->limit = n;
}

uint64_t oq_calib_source_count(const oq_calib_source *s)
{
    if (s->kind == SRC_FEED)
        return s->limit && s->limit < s->feed->n_samples ? s->limit : s->feed->n_samples;
    return s->limit && s->limit < s->n ? s->limit : s->n;
}

void oq_calib_source_free(oq_calib_source *s)
{
    if (!s)
        return;
    if (s->kind == SRC_FEED)
        feed_release(s->feed);
    if (s->kind == SRC_IMAGES)
        oq_image_dir_free(s->paths, s->n_paths);
    else
        free_paths(s->paths, s->n_paths);
    free_paths(s->dim_names, s->n_dims);
    free(s->dim_sizes);
    free_paths(s->val_names, s->n_vals);
    free(s->vals);
    free(s->dir);
    free(s);
}

static oq_status add_named(char ***names, size_t n, const char *name, oq_diag *d)
{
    char **a = realloc(*names, (n + 1) * sizeof(char *));
    if (!a)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    *names = a;
    if (!(a[n] = strdup(name)))
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    return OQ_OK;
}

oq_status oq_calib_source_set_dim(oq_calib_source *s, const char *name, int64_t size, oq_diag *d)
{
    if (size < 0)
        return oq_diag_error(d, OQ_ERR_USAGE, "dimension %s: size %lld is negative", name, (long long)size);
    int64_t *z = realloc(s->dim_sizes, (s->n_dims + 1) * sizeof(int64_t));
    if (!z)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    s->dim_sizes = z;
    oq_status st = add_named(&s->dim_names, s->n_dims, name, d);
    if (st != OQ_OK)
        return st;
    z[s->n_dims++] = size;
    return OQ_OK;
}

oq_status oq_calib_source_set_value(oq_calib_source *s, const char *input, double v, oq_diag *d)
{
    double *z = realloc(s->vals, (s->n_vals + 1) * sizeof(double));
    if (!z)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    s->vals = z;
    oq_status st = add_named(&s->val_names, s->n_vals, input, d);
    if (st != OQ_OK)
        return st;
    z[s->n_vals++] = v;
    return OQ_OK;
}

/* "NAME=N,NAME=N": symbolic dimension sizes (dims) or fixed input values (values) */
static oq_status set_list(oq_calib_source *src, const char *list, bool dims, oq_diag *d)
{
    for (const char *p = list ? list : ""; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char item[512];
        const char *eq = memchr(p, '=', n);
        if (!eq || eq == p || n >= sizeof item)
            return oq_diag_error(d, OQ_ERR_USAGE, "%s wants NAME=%s,..., got \"%s\"", dims ? "dims" : "values",
                                 dims ? "N" : "V", list);
        memcpy(item, p, n);
        item[n] = 0;
        item[eq - p] = 0;
        const char *num = item + (eq - p) + 1;
        char *end;
        double v = strtod(num, &end);
        if (*end || end == num || (dims && (v < 0 || v != (double)(int64_t)v)))
            return oq_diag_error(d, OQ_ERR_USAGE, "%s %s: \"%s\" is not a %s", dims ? "dimension" : "input", item,
                                 num, dims ? "size" : "number");
        oq_status st = dims ? oq_calib_source_set_dim(src, item, (int64_t)v, d) : oq_calib_source_set_value(src, item, v, d);
        if (st != OQ_OK)
            return st;
        p += n;
        if (*p == ',')
            p++;
    }
    return OQ_OK;
}

oq_status oq_calib_source_set_dims(oq_calib_source *s, const char *list, oq_diag *d)
{
    return set_list(s, list, true, d);
}

oq_status oq_calib_source_set_values(oq_calib_source *s, const char *list, oq_diag *d)
{
    return set_list(s, list, false, d);
}

void oq_calib_source_require_dims(oq_calib_source *s, bool on)
{
    s->require_dims = on;
}

static const double *find_value(const oq_calib_source *s, const char *input)
{
    for (size_t i = s->n_vals; i-- > 0;)
        if (strcmp(s->val_names[i], input) == 0)
            return &s->vals[i];
    return NULL;
}

/* xorshift64* */
static uint64_t rng_next(uint64_t *st)
{
    uint64_t x = *st;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *st = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Element k of t = v (converted to t's dtype). */
static bool put_value(oq_rt_tensor *t, int64_t k, double v)
{
    switch (t->dtype) {
    case OQ_DTYPE_FLOAT: ((float *)t->data)[k] = (float)v; break;
    case OQ_DTYPE_DOUBLE: ((double *)t->data)[k] = v; break;
    case OQ_DTYPE_FLOAT16: ((uint16_t *)t->data)[k] = oq_float_to_half((float)v); break;
    case OQ_DTYPE_BFLOAT16: {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        ((uint16_t *)t->data)[k] = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
        break;
    }
    case OQ_DTYPE_BOOL: ((uint8_t *)t->data)[k] = v != 0; break;
    case OQ_DTYPE_INT8: ((int8_t *)t->data)[k] = (int8_t)v; break;
    case OQ_DTYPE_UINT8: ((uint8_t *)t->data)[k] = (uint8_t)v; break;
    case OQ_DTYPE_INT16: ((int16_t *)t->data)[k] = (int16_t)v; break;
    case OQ_DTYPE_UINT16: ((uint16_t *)t->data)[k] = (uint16_t)v; break;
    case OQ_DTYPE_INT32: ((int32_t *)t->data)[k] = (int32_t)v; break;
    case OQ_DTYPE_UINT32: ((uint32_t *)t->data)[k] = (uint32_t)v; break;
    case OQ_DTYPE_INT64: ((int64_t *)t->data)[k] = (int64_t)v; break;
    case OQ_DTYPE_UINT64: ((uint64_t *)t->data)[k] = (uint64_t)v; break;
    default: return false;
    }
    return true;
}

/* Shape of plan input i for generated data: fixed dims as declared; a symbolic dim from
 * oq_calib_source_set_dim, else (unless require_dims) the last two of a 4-D input from
 * height/width, else 1. */
static oq_status generated_shape(const oq_calib_source *s, const oq_plan *p, size_t i, int64_t *dims,
                                 size_t *rank, int32_t *dt, oq_diag *d)
{
    bool has = false;
    const char *name = oq_plan_input_name(p, i);
    *dt = oq_plan_input_info(p, i, rank, dims, &has);
    if (!has)
        return oq_diag_error(d, OQ_ERR_USAGE, "input \"%s\" has no declared shape; give its data in files", name);
    for (size_t j = 0; j < *rank; j++) {
        if (dims[j] >= 0)
            continue;
        /* a named dimension by its name; an unnamed one as INPUT[j] */
        char pos[300];
        snprintf(pos, sizeof pos, "%s[%zu]", name, j);
        const char *sym = oq_plan_input_dim_name(p, i, j);
        bool found = false;
        for (size_t k = s->n_dims; !found && k-- > 0;)
            if (strcmp(s->dim_names[k], sym ? sym : pos) == 0) {
                dims[j] = s->dim_sizes[k];
                found = true;
            }
        if (found)
            continue;
        if (s->require_dims)
            return oq_diag_error(d, OQ_ERR_USAGE, "input \"%s\" dim %zu is symbolic (%s); give --dim %s=N", name, j,
                                 sym ? sym : "unnamed", sym ? sym : pos);
        dims[j] = *rank == 4 && j == 2 && s->height > 0 ? s->height : *rank == 4 && j == 3 && s->width > 0 ? s->width : 1;
    }
    return OQ_OK;
}

/* Plan input i filled with the fixed value set for it (oq_calib_source_set_value), or
 * with random data: floats uniform in [0, 1), integers uniform in [0, 10), bools 0/1. */
static oq_status generate_input(const oq_calib_source *s, const oq_plan *p, size_t i, uint64_t *rng,
                                oq_rt_tensor *t, oq_diag *d)
{
    size_t rank = 0;
    int64_t dims[OQ_RT_MAX_RANK];
    int32_t dt;
    const char *name = oq_plan_input_name(p, i);
    oq_status st = generated_shape(s, p, i, dims, &rank, &dt, d);
    if (st != OQ_OK)
        return st;
    if (dt == OQ_DTYPE_UNDEFINED)
        dt = OQ_DTYPE_FLOAT;
    const double *fixed = find_value(s, name);
    st = oq_rt_tensor_alloc(t, dt, dims, rank);
    if (st != OQ_OK)
        return oq_diag_error(d, st, "input \"%s\": cannot allocate a %s tensor", name, oq_dtype_name(dt));
    int64_t n = oq_rt_tensor_numel(t);
    bool is_float = oq_dtype_is_float(dt);
    for (int64_t k = 0; k < n; k++) {
        double v;
        if (fixed) {
            v = *fixed;
        } else {
            uint64_t r = rng_next(rng);
            v = dt == OQ_DTYPE_BOOL ? (double)(r >> 63)
                : is_float          ? (double)(r >> 11) / 9007199254740992.0
                                    : (double)(r % 10);
        }
        if (!put_value(t, k, v)) {
            oq_rt_tensor_release(t);
            return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "input \"%s\": no generated data for %s inputs", name,
                                 oq_dtype_name(dt));
        }
    }
    return OQ_OK;
}

oq_status oq_calib_source_generate(const oq_calib_source *s, const oq_plan *p, uint64_t k, size_t i,
                                   oq_rt_tensor *t, oq_diag *d)
{
    /* input i of sample k depends on (seed, k, i) only: --max-samples, the order of reads
     * and which other inputs are generated do not change it */
    uint64_t rs = (s->seed * 0x9E3779B97F4A7C15ull + k + 1) ^ ((uint64_t)i * 0xD1B54A32D192ED03ull);
    if (!rs)
        rs = 1;
    return generate_input(s, p, i, &rs, t, d);
}


/* ------------------------------------------------------------------ fed samples -- */

static pthread_mutex_t feed_lock = PTHREAD_MUTEX_INITIALIZER;
static feed_spool **feeds;      /* the live spools, for oq_calib_source_from_feed_id */
static size_t n_feeds, cap_feeds;

static void feed_release(feed_spool *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&feed_lock);
    bool last = --f->refs == 0;
    if (last)
        for (size_t i = 0; i < n_feeds; i++)
            if (feeds[i] == f) {
                feeds[i] = feeds[--n_feeds];
                break;
            }
    pthread_mutex_unlock(&feed_lock);
    if (!last)
        return;
    for (size_t i = 0; i < f->n_items; i++)
        free(f->items[i].name);
    free(f->items);
    free(f->first);
    if (f->fd >= 0)
        close(f->fd);
    free(f);
}

oq_status oq_calib_source_feed(oq_calib_source **out, oq_diag *d)
{
    *out = NULL;
    const char *tmp = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/onnxq-samples-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0)
        return oq_diag_error(d, OQ_ERR_IO, "%s: cannot create the temporary sample file: %s", path, strerror(errno));
    unlink(path); /* gone with the last descriptor, whatever happens */
    oq_calib_source *s = calloc(1, sizeof *s);
    feed_spool *f = calloc(1, sizeof *f);
    size_t *first = calloc(1, sizeof(size_t));
    if (!s || !f || !first) {
        close(fd);
        free(s);
        free(f);
        free(first);
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    }
    f->fd = fd;
    f->first = first;
    f->cap_first = 1;
    f->refs = 1;
    pthread_mutex_lock(&feed_lock);
    feed_spool **a = feeds;
    if (n_feeds == cap_feeds && (a = realloc(feeds, (cap_feeds ? cap_feeds * 2 : 8) * sizeof *a)) != NULL)
        cap_feeds = cap_feeds ? cap_feeds * 2 : 8;
    if (a) {
        feeds = a;
        /* the smallest number no live source has: a job's pipeline text (kept in the
         * output's metadata) is the same from one run to the next */
        uint64_t id = 1;
        for (bool taken = true; taken; id += taken) {
            taken = false;
            for (size_t i = 0; i < n_feeds && !taken; i++)
                taken = feeds[i]->id == id;
        }
        f->id = id;
        feeds[n_feeds++] = f;
    }
    pthread_mutex_unlock(&feed_lock);
    if (!a) {
        close(fd);
        free(first);
        free(f);
        free(s);
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    }
    s->kind = SRC_FEED;
    s->feed = f;
    *out = s;
    return OQ_OK;
}

oq_status oq_calib_source_feed_add(oq_calib_source *s, const char *const *names, const oq_rt_tensor *t, size_t n,
                                   oq_diag *d)
{
    if (!s || s->kind != SRC_FEED)
        return oq_diag_error(d, OQ_ERR_USAGE, "oq_calib_source_feed_add: not a fed source");
    feed_spool *f = s->feed;
    uint64_t k = f->n_samples + 1; /* the sample's number, from 1, in messages */
    if (n == 0)
        return oq_diag_error(d, OQ_ERR_USAGE, "fed sample %llu: no arrays", (unsigned long long)k);
    for (size_t i = 0; i < n; i++) {
        if (!names[i] || !*names[i])
            return oq_diag_error(d, OQ_ERR_USAGE, "fed sample %llu: array %zu has no input name",
                                 (unsigned long long)k, i);
        for (size_t j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return oq_diag_error(d, OQ_ERR_USAGE, "fed sample %llu: input \"%s\" given twice",
                                     (unsigned long long)k, names[i]);
        int64_t numel = oq_rt_tensor_numel(&t[i]);
        if (t[i].rank > OQ_RT_MAX_RANK || numel < 0 || oq_dtype_nbytes(t[i].dtype, 1) <= 0 ||
            t[i].nbytes != oq_dtype_nbytes(t[i].dtype, numel) || (t[i].nbytes > 0 && !t[i].data))
            return oq_diag_error(d, OQ_ERR_USAGE, "fed sample %llu: input \"%s\": bad array (%s, %lld bytes)",
                                 (unsigned long long)k, names[i], oq_dtype_name(t[i].dtype), (long long)t[i].nbytes);
    }
    if (f->n_items + n > f->cap_items) {
        size_t nc = f->cap_items ? f->cap_items * 2 : 64;
        while (nc < f->n_items + n)
            nc *= 2;
        feed_item *a = realloc(f->items, nc * sizeof *a);
        if (!a)
            return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        f->items = a;
        f->cap_items = nc;
    }
    if (f->n_samples + 2 > f->cap_first) {
        size_t nc = f->cap_first * 2 + 2;
        size_t *a = realloc(f->first, nc * sizeof *a);
        if (!a)
            return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        f->first = a;
        f->cap_first = nc;
    }
    int64_t at = f->end;
    for (size_t i = 0; i < n; i++) {
        const char *p = t[i].data;
        for (int64_t done = 0; done < t[i].nbytes;) {
            size_t chunk = (size_t)(t[i].nbytes - done < (1 << 30) ? t[i].nbytes - done : (1 << 30));
            ssize_t w = pwrite(f->fd, p + done, chunk, (off_t)(at + done));
            if (w <= 0) {
                oq_status st = oq_diag_error(d, OQ_ERR_IO, "fed sample %llu: cannot write to the temporary sample "
                                             "file: %s", (unsigned long long)k, w < 0 ? strerror(errno) : "disk full");
                for (size_t j = 0; j < i; j++)
                    free(f->items[f->n_items + j].name);
                return st;
            }
            done += w;
        }
        feed_item *it = &f->items[f->n_items + i];
        it->name = strdup(names[i]);
        if (!it->name) {
            for (size_t j = 0; j < i; j++)
                free(f->items[f->n_items + j].name);
            return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        }
        it->dtype = t[i].dtype;
        it->rank = t[i].rank;
        memcpy(it->dims, t[i].dims, sizeof it->dims);
        it->nbytes = t[i].nbytes;
        it->offset = at;
        at += t[i].nbytes;
    }
    f->end = at;
    f->n_items += n;
    f->n_samples++;
    f->first[f->n_samples] = f->n_items;
    return OQ_OK;
}

uint64_t oq_calib_source_feed_id(const oq_calib_source *s)
{
    return s && s->kind == SRC_FEED ? s->feed->id : 0;
}

oq_status oq_calib_source_from_feed_id(uint64_t id, oq_calib_source **out, oq_diag *d)
{
    *out = NULL;
    oq_calib_source *s = calloc(1, sizeof *s);
    if (!s)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    feed_spool *f = NULL;
    pthread_mutex_lock(&feed_lock);
    for (size_t i = 0; i < n_feeds && !f; i++)
        if (feeds[i]->id == id)
            f = feeds[i];
    if (f)
        f->refs++;
    pthread_mutex_unlock(&feed_lock);
    if (!f) {
        free(s);
        return oq_diag_error(d, OQ_ERR_USAGE, "feed=%llu: no such fed sample source in this process (feed= is set by "
                             "the library's quantize job, not written by hand)", (unsigned long long)id);
    }
    s->kind = SRC_FEED;
    s->feed = f;
    *out = s;
    return OQ_OK;
}

static oq_status feed_sample(oq_calib_source *s, const oq_plan *p, uint64_t k, oq_rt_tensor *in, size_t n,
                             char *label, size_t lsize, oq_diag *d)
{
    const feed_spool *f = s->feed;
    snprintf(label, lsize, "#%llu", (unsigned long long)k + 1);
    size_t i0 = f->first[k], i1 = f->first[k + 1];
    for (size_t i = 0; i < n; i++) {
        const char *iname = oq_plan_input_name(p, i);
        const feed_item *it = NULL;
        for (size_t j = i0; j < i1 && !it; j++)
            if (strcmp(f->items[j].name, iname) == 0)
                it = &f->items[j];
        if (!it && find_value(s, iname)) {
            uint64_t rs = 1;
            oq_status st = generate_input(s, p, i, &rs, &in[i], d);
            if (st != OQ_OK)
                return st;
            continue;
        }
        if (!it) {
            char have[512] = "";
            size_t len = 0;
            for (size_t j = i0; j < i1 && len + 4 < sizeof have; j++)
                len += (size_t)snprintf(have + len, sizeof have - len, "%s\"%s\"", j > i0 ? ", " : "",
                                        f->items[j].name);
            return oq_diag_error(d, OQ_ERR_USAGE, "fed sample %llu: no array for input \"%s\" (the sample has %s)",
                                 (unsigned long long)k + 1, iname, have);
        }
        oq_status st = oq_rt_tensor_alloc(&in[i], it->dtype, it->dims, it->rank);
        if (st != OQ_OK)
            return oq_diag_error(d, st, "out of memory");
        char *dst = in[i].data;
        for (int64_t done = 0; done < it->nbytes;) {
            size_t chunk = (size_t)(it->nbytes - done < (1 << 30) ? it->nbytes - done : (1 << 30));
            ssize_t r = pread(f->fd, dst + done, chunk, (off_t)(it->offset + done));
            if (r <= 0)
                return oq_diag_error(d, OQ_ERR_IO, "fed sample %llu: cannot read back input \"%s\" from the "
                                     "temporary sample file: %s", (unsigned long long)k + 1, iname,
                                     r < 0 ? strerror(errno) : "short file");
            done += r;
        }
    }
    return OQ_OK;
}

/* Fill in[0..n) for sample k; `label` receives what names the sample. */
static oq_status source_sample(oq_calib_source *s, const oq_plan *p, uint64_t k,
                               oq_rt_tensor *in, size_t n, char *label, size_t lsize, oq_diag *d)
{
    oq_status st = OQ_OK;
    if (s->kind == SRC_FEED)
        return feed_sample(s, p, k, in, n, label, lsize, d);
    if (s->kind == SRC_RANDOM) {
        snprintf(label, lsize, "random sample %llu", (unsigned long long)k + 1);
        for (size_t i = 0; i < n; i++) {
            st = oq_calib_source_generate(s, p, k, i, &in[i], d);
            if (st != OQ_OK)
                return st;
        }
        return OQ_OK;
    }
    const char *path = s->paths[k % s->n_paths];
    snprintf(label, lsize, "%s", path);
    if (s->kind == SRC_IMAGES) {
        const char *iname = n ? oq_plan_input_name(p, 0) : "";
        if (n != 1)
            return oq_diag_error(d, OQ_ERR_USAGE, "images need a model with one input (this one has %zu)", n);
        oq_image_opts io = s->img;
        size_t rank = 0;
        int64_t md[OQ_RT_MAX_RANK];
        bool has = false;
        int32_t dt = oq_plan_input_info(p, 0, &rank, md, &has);
        if (dt != OQ_DTYPE_FLOAT && dt != OQ_DTYPE_UNDEFINED)
            return oq_diag_error(d, OQ_ERR_USAGE, "input \"%s\" is %s; images give float32", iname, oq_dtype_name(dt));
        if (io.height <= 0 || io.width <= 0) {
            int hi = io.layout == OQ_LAYOUT_NCHW ? 2 : 1;
            if (!has || rank != 4 || md[hi] <= 0 || md[hi + 1] <= 0)
                return oq_diag_error(d, OQ_ERR_USAGE, "input \"%s\" has no fixed height and width; give --size HxW",
                                     iname);
            io.height = md[hi];
            io.width = md[hi + 1];
        }
        int64_t dims[4] = {1, io.channels, io.height, io.width};
        if (io.layout == OQ_LAYOUT_NHWC) {
            dims[1] = io.height;
            dims[2] = io.width;
            dims[3] = io.channels;
        }
        st = oq_rt_tensor_alloc(&in[0], OQ_DTYPE_FLOAT, dims, 4);
        if (st != OQ_OK)
            return oq_diag_error(d, st, "out of memory");
        return oq_image_load(path, &io, in[0].data, d);
    }
    if (s->kind == SRC_DIR_FLAT) {
        if (n != 1)
            return oq_diag_error(d, OQ_ERR_USAGE,
                                 "%s: a flat folder of tensor files needs a one-input model (this one has %zu); "
                                 "use one subfolder per sample holding <input name>.pb/.npy (docs/data.md)",
                                 s->dir, n);
        return oq_tensor_file_read(path, &in[0], NULL, d);
    }
    /* one subfolder per sample */
    for (size_t i = 0; i < n; i++) {
        const char *iname = oq_plan_input_name(p, i);
        char cand[4][512];
        snprintf(cand[0], sizeof cand[0], "%s/%s.pb", path, iname);
        snprintf(cand[1], sizeof cand[1], "%s/%s.npy", path, iname);
        snprintf(cand[2], sizeof cand[2], "%s/input_%zu.pb", path, i);
        snprintf(cand[3], sizeof cand[3], "%s/input_%zu.npy", path, i);
        const char *found = NULL;
        struct stat sb;
        for (int c = 0; c < 4 && !found; c++)
            if (stat(cand[c], &sb) == 0 && S_ISREG(sb.st_mode))
                found = cand[c];
        char single[512];
        if (!found && n == 1) {
            DIR *dh = opendir(path);
            int cnt = 0;
            struct dirent *e;
            while (dh && (e = readdir(dh)) != NULL)
                if (e->d_name[0] != '.' && is_tensor_file(e->d_name)) {
                    cnt++;
                    snprintf(single, sizeof single, "%s/%s", path, e->d_name);
                }
            if (dh)
                closedir(dh);
            if (cnt == 1)
                found = single;
        }
        if (!found && find_value(s, iname)) {
            uint64_t rs = 1;
            st = generate_input(s, p, i, &rs, &in[i], d);
            if (st != OQ_OK)
                return st;
            continue;
        }
        if (!found)
            return oq_diag_error(d, OQ_ERR_USAGE,
                                 "%s: no file for input \"%s\" (looked for %s.pb, %s.npy, input_%zu.pb, input_%zu.npy)",
                                 path, iname, iname, iname, i, i);
        st = oq_tensor_file_read(found, &in[i], NULL, d);
        if (st != OQ_OK)
            return st;
    }
    return OQ_OK;
}

/* A random source left a symbolic dimension at its default (1, or height/width). */
static bool defaulted_dims(const oq_calib_source *s, const oq_plan *p)
{
    if (s->kind != SRC_RANDOM)
        return false;
    for (size_t i = 0; i < oq_plan_n_inputs(p); i++) {
        size_t rank = 0;
        int64_t dims[OQ_RT_MAX_RANK];
        bool has = false;
        oq_plan_input_info(p, i, &rank, dims, &has);
        for (size_t j = 0; has && j < rank; j++) {
            char pos[300];
            snprintf(pos, sizeof pos, "%s[%zu]", oq_plan_input_name(p, i), j);
            const char *sym = dims[j] < 0 ? oq_plan_input_dim_name(p, i, j) : NULL;
            bool set = false;
            for (size_t k = 0; dims[j] < 0 && k < s->n_dims && !set; k++)
                set = strcmp(s->dim_names[k], sym ? sym : pos) == 0;
            if (dims[j] < 0 && !set)
                return true;
        }
    }
    return false;
}

/* The executor's error names the tensor, not the sample: put "sample X: " in front of
 * the last error recorded since entry `from` (one line that says both, not two). */
static void name_sample(oq_diag *d, size_t from, const char *label, const char *hint)
{
    for (size_t i = d ? d->count : 0; i-- > from;) {
        oq_diag_entry *e = &d->entries[i];
        if (e->severity != OQ_SEV_ERROR)
            continue;
        size_t n = strlen(label) + strlen(e->message) + strlen(hint) + 16;
        char *m = malloc(n);
        if (!m)
            return;
        snprintf(m, n, "%s%s: %s%s", strncmp(label, "random", 6) == 0 ? "" : "sample ", label, e->message, hint);
        free(e->message);
        e->message = m;
        return;
    }
    if (d)
        oq_diag_error(d, OQ_ERR_INTERNAL, "calibration stopped at sample %s", label);
}

oq_status oq_calib_source_sample(oq_calib_source *s, const oq_plan *p, uint64_t k, oq_rt_tensor *in,
                                 size_t n, char *label, size_t lsize, oq_diag *d)
{
    return source_sample(s, p, k, in, n, label, lsize, d);
}

/* ------------------------------------------------------------------ calibration -- */

void oq_calib_options_default(oq_calib_options *o)
{
    memset(o, 0, sizeof(*o));
    oq_range_request_default(&o->range);
    o->nan_policy = OQ_NAN_ERROR;
    o->threads = 0;
    o->act_ranges = true;
}

/* Mul(v, g) or Mul(g, v) where g is n's output: the other input of the Mul is v. */
static bool mul_of(const oq_node *mul, const oq_value *v, const oq_node *g)
{
    if (!oq_quant_op_is(mul, "Mul") || mul->n_inputs != 2 || !g || g->n_outputs < 1)
        return false;
    const oq_value *a = mul->inputs[0], *b = mul->inputs[1], *go = g->outputs[0];
    return (a == v && b == go) || (a == go && b == v);
}

/* The one node that reads n's first output (not a graph output), or NULL. */
static const oq_node *sole_reader(const oq_node *n)
{
    const oq_value *o = n && n->n_outputs >= 1 ? n->outputs[0] : NULL;
    return o && o->n_uses == 1 && !oq_value_is_graph_output(o) ? o->uses[0].node : NULL;
}

/* HardSwish as exporters write it, x * Clip(x + b, 0, c) (then / c or * 1/c, a constant
 * factor that neither the error ratio nor the range search sees): Add and Mul are x's
 * readers, the Add's other input the constant b > 0, its output read by a Clip to [0, c]
 * alone, the Clip's output by that Mul alone. As x * HardSigmoid(x) with alpha 1/c, beta
 * b/c. */
static bool decomposed_hswish(const oq_value *v, const oq_node *n0, const oq_node *n1, oq_act *r)
{
    const oq_node *add = oq_quant_op_is(n0, "Add") ? n0 : n1, *mul = add == n0 ? n1 : n0;
    if (!oq_quant_op_is(add, "Add") || add->n_inputs != 2)
        return false;
    double b = NAN, lo = -INFINITY, hi = INFINITY;
    oq_quant_const_scalar(add->inputs[0] == v ? add->inputs[1] : add->inputs[0], &b, NULL);
    const oq_node *clip = sole_reader(add);
    if (!(b > 0) || !oq_quant_op_is(clip, "Clip") || sole_reader(clip) != mul || !mul_of(mul, v, clip))
        return false;
    if (clip->n_inputs > 1 && clip->inputs[1]) { /* opset 11+: bounds as inputs, else attributes */
        lo = NAN;
        oq_quant_const_scalar(clip->inputs[1], &lo, NULL);
    } else {
        lo = oq_node_attr_float(clip, "min", -INFINITY);
    }
    if (clip->n_inputs > 2 && clip->inputs[2]) {
        hi = NAN;
        oq_quant_const_scalar(clip->inputs[2], &hi, NULL);
    } else {
        hi = oq_node_attr_float(clip, "max", INFINITY);
    }
    if (!(lo == 0.0) || !(hi > 0) || !isfinite(hi))
        return false;
    r->kind = OQ_ACT_HSWISH;
    r->alpha = 1.0 / hi;
    r->beta = b / hi;
    return true;
}

oq_act oq_calib_act_of(const oq_value *v)
{
    oq_act none = {OQ_ACT_NONE, 0, 0}, r = none;
    if (!v || oq_value_is_graph_output(v) || v->n_uses < 1 || v->n_uses > 2)
        return none;
    const oq_node *n0 = v->uses[0].node, *n1 = v->n_uses == 2 ? v->uses[1].node : NULL;
    if (v->n_uses == 1) {
        if (oq_quant_op_is(n0, "Sigmoid"))
            r.kind = OQ_ACT_SIGMOID;
        else if (oq_quant_op_is(n0, "Tanh"))
            r.kind = OQ_ACT_TANH;
        else if (oq_quant_op_is(n0, "HardSigmoid")) {
            r.kind = OQ_ACT_HSIGMOID;
            r.alpha = oq_node_attr_float(n0, "alpha", 0.2f);
            r.beta = oq_node_attr_float(n0, "beta", 0.5f);
        } else if (oq_quant_op_is(n0, "HardSwish")) {
            r.kind = OQ_ACT_HSWISH;
            r.alpha = 1.0 / 6.0;
            r.beta = 0.5;
        }
        return r;
    }
    if (decomposed_hswish(v, n0, n1, &r))
        return r;
    /* x * g(x): g(x)'s output read by that Mul alone */
    const oq_node *g = oq_quant_op_is(n0, "Mul") ? n1 : n0, *mul = g == n0 ? n1 : n0;
    if (!g || g->n_inputs < 1 || g->inputs[0] != v || sole_reader(g) != mul || !mul_of(mul, v, g))
        return none;
    if (oq_quant_op_is(g, "Sigmoid"))
        r.kind = OQ_ACT_SILU;
    else if (oq_quant_op_is(g, "HardSigmoid")) {
        r.kind = OQ_ACT_HSWISH;
        r.alpha = oq_node_attr_float(g, "alpha", 0.2f);
        r.beta = oq_node_attr_float(g, "beta", 0.5f);
    }
    return r;
}

bool oq_act_is_gated(oq_act_kind k)
{
    return k == OQ_ACT_SILU || k == OQ_ACT_HSWISH;
}

const char *oq_act_name(oq_act_kind k)
{
    switch (k) {
    case OQ_ACT_SILU: return "silu";
    case OQ_ACT_HSWISH: return "hardswish";
    case OQ_ACT_SIGMOID: return "sigmoid";
    case OQ_ACT_HSIGMOID: return "hardsigmoid";
    case OQ_ACT_TANH: return "tanh";
    default: return NULL;
    }
}

typedef struct obs_slot {
    const oq_value *v;
    oq_observer obs;
    oq_observer *held;       /* auto: the held-out samples' observer (obs: the others) */
    char *first_nonfinite;   /* the first sample with NaN/Inf in this tensor (malloc'ed) */
} obs_slot;

typedef struct cal_ctx {
    obs_slot *slots;
    size_t n_slots;
    int32_t *by_id;          /* value id -> slot, -1 */
    uint32_t n_ids;
    oq_nan_policy policy;
    const char *label;
    oq_status st;
    oq_diag *d;
    uint64_t next_sample;    /* index of the next sample begin_sample sees */
    bool held_now;           /* auto: the current sample is held out */
    const oq_calib_hooks *also; /* oq_calib_options.also */
} cal_ctx;

static void observe(cal_ctx *c, obs_slot *s, const oq_node *node, const oq_rt_tensor *t)
{
    if (c->st != OQ_OK || t->dtype != OQ_DTYPE_FLOAT)
        return;
    int64_t n = oq_rt_tensor_numel(t);
    if (n <= 0)
        return;
    oq_nonfinite nf;
    oq_observer *ob = c->held_now && s->held ? s->held : &s->obs;
    oq_status st = oq_observer_update(ob, t->data, n, &nf, s->v->name, c->d);
    if (st != OQ_OK) {
        c->st = st;
        return;
    }
    if ((nf.nan_count || nf.inf_count) && !s->first_nonfinite && c->label)
        s->first_nonfinite = strdup(c->label); /* NULL when out of memory: the message says less */
    if (c->policy == OQ_NAN_ERROR && (nf.nan_count || nf.inf_count)) {
        char lb[256];
        float bad = ((const float *)t->data)[nf.first_index];
        c->st = oq_diag_add(c->d, OQ_SEV_ERROR, OQ_ERR_NUMERIC, NULL, node ? oq_node_label(node, lb, sizeof lb) : NULL,
                            node ? node->op_type : NULL,
                            "tensor \"%s\"%s has %s (%llu NaN, %llu Inf, first at element %lld) on sample %s "
                            "(--nan-policy ignore excludes them)",
                            s->v->name, node ? "" : " (graph input)", isnan(bad) ? "NaN" : bad > 0 ? "+Inf" : "-Inf",
                            (unsigned long long)nf.nan_count, (unsigned long long)nf.inf_count,
                            (long long)nf.first_index, c->label);
    }
}

static void on_tensor(const oq_node *node, size_t out_index, const oq_rt_tensor *t, void *user)
{
    cal_ctx *c = user;
    if (c->also && c->also->on_tensor)
        c->also->on_tensor(node, out_index, t, c->also->user);
    if (out_index >= node->n_outputs || !node->outputs[out_index])
        return;
    uint32_t id = node->outputs[out_index]->id;
    if (id >= c->n_ids || c->by_id[id] < 0)
        return;
    observe(c, &c->slots[c->by_id[id]], node, t);
}

static bool is_float_value(const oq_value *v)
{
    return v->type && v->type->kind == OQ_TYPE_TENSOR && v->type->has_elem_type &&
           v->type->elem_type == OQ_DTYPE_FLOAT;
}

static bool maybe_float(const oq_value *v)
{
    /* unknown type: observe it; non-float tensors are skipped at run time */
    return !v->type || !v->type->has_elem_type || is_float_value(v);
}

/* Observed values of g and its subgraphs (upper bound: inputs and node outputs). */
static size_t count_slots(const oq_graph *g)
{
    size_t n = g->n_inputs;
    for (const oq_node *x = g->first; x; x = x->next) {
        n += x->n_outputs;
        oq_graph *subs[16];
        size_t k = oq_node_subgraphs(x, subs, 16);
        for (size_t i = 0; i < k && i < 16; i++)
            n += count_slots(subs[i]);
    }
    return n;
}

static void add_slot(cal_ctx *c, oq_value *v, const oq_calib_options *o)
{
    if (!v || v->id >= c->n_ids || c->by_id[v->id] >= 0 || v->initializer || !maybe_float(v) ||
        (o->want && !o->want(v, o->want_user)))
        return;
    c->slots[c->n_slots].v = v;
    c->by_id[v->id] = (int32_t)c->n_slots++;
}

/* Graph inputs (of a body: the Loop/Scan iteration values), node outputs in order, and
 * the subgraphs of each node right after it. Subgraphs nested deeper than 64 levels are
 * not observed (their nodes then stay in float). */
static void add_slots(cal_ctx *c, oq_graph *g, const oq_calib_options *o, int depth)
{
    for (size_t i = 0; i < g->n_inputs; i++)
        add_slot(c, g->inputs[i]->value, o);
    for (oq_node *n = g->first; n; n = n->next) {
        if (!(n->op_type && strcmp(n->op_type, "Constant") == 0 && oq_domain_is_default(n->domain)))
            for (size_t k = 0; k < n->n_outputs; k++)
                add_slot(c, n->outputs[k], o);
        oq_graph *subs[16];
        size_t k = oq_node_subgraphs(n, subs, 16);
        for (size_t i = 0; i < k && i < 16 && depth < 64; i++)
            add_slots(c, subs[i], o, depth + 1);
    }
}

static void on_input(const oq_value *v, const oq_rt_tensor *t, void *user)
{
    cal_ctx *c = user;
    if (c->also && c->also->on_input)
        c->also->on_input(v, t, c->also->user);
    if (v->id < c->n_ids && c->by_id[v->id] >= 0)
        observe(c, &c->slots[c->by_id[v->id]], NULL, t);
}

static void begin_sample(const char *label, void *user)
{
    cal_ctx *c = user;
    if (c->also && c->also->begin_sample)
        c->also->begin_sample(label, c->also->user);
    c->label = label;
    c->held_now = oq_calib_sample_held_out(c->next_sample++);
}

bool oq_calib_sample_held_out(uint64_t k)
{
    return k % OQ_CALIB_HOLDOUT_EVERY == OQ_CALIB_HOLDOUT_EVERY - 1;
}

static oq_status check(void *user)
{
    cal_ctx *c = user;
    if (c->st == OQ_OK && c->also && c->also->check)
        return c->also->check(c->also->user);
    return c->st;
}

oq_status oq_calib_run(oq_model *m, oq_calib_source *src, const oq_calib_hooks *h, uint64_t *samples,
                       oq_diag *d)
{
    oq_status st = OQ_OK;
    oq_plan *plan = NULL;
    oq_rt_tensor *in = NULL, *outs = NULL;
    size_t n_in = 0, n_out = 0;
    oq_graph *g = m->graph;
    *samples = 0;
    if (!g)
        return oq_diag_error(d, OQ_ERR_INVALID, "model has no graph");
    oq_plan_options po = oq_plan_options_default();
    po.threads = h->threads;
    po.on_tensor = h->on_tensor;
    po.on_input = h->on_input;
    po.user = h->user;
    st = oq_plan_compile(m, &po, &plan, d);
    if (st != OQ_OK)
        goto done;
    n_in = oq_plan_n_inputs(plan);
    n_out = oq_plan_n_outputs(plan);
    in = calloc(n_in ? n_in : 1, sizeof(oq_rt_tensor));
    outs = calloc(n_out ? n_out : 1, sizeof(oq_rt_tensor));
    if (!in || !outs) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    uint64_t total = oq_calib_source_count(src);
    char label[600];
    if (h->progress)
        h->progress(0, total, "", h->progress_user);
    for (uint64_t k = 0; k < total; k++) {
        if (oq_stop_requested()) {
            st = oq_diag_error(d, OQ_ERR_STOPPED, "stopped");
            goto done;
        }
        st = source_sample(src, plan, k, in, n_in, label, sizeof label, d);
        if (st != OQ_OK)
            goto done;
        if (h->begin_sample)
            h->begin_sample(label, h->user);
        /* graph inputs are not handed to the observer by the executor */
        for (size_t i = 0; h->on_input && i < n_in; i++) {
            oq_value *v = oq_graph_find_local(g, oq_plan_input_name(plan, i));
            if (v)
                h->on_input(v, &in[i], h->user);
        }
        if (h->check && (st = h->check(h->user)) != OQ_OK)
            goto done;
        size_t errs_before = d ? d->count : 0;
        oq_status rs = oq_plan_run(plan, in, n_in, outs, n_out, d);
        for (size_t i = 0; i < n_in; i++)
            oq_rt_tensor_release(&in[i]);
        for (size_t i = 0; i < n_out; i++)
            oq_rt_tensor_release(&outs[i]);
        if (rs != OQ_OK) {
            name_sample(d, errs_before, label, defaulted_dims(src, plan) ? " (generated data: symbolic "
                                                   "dimensions without --dim NAME=N are 1)" : "");
            st = rs;
            goto done;
        }
        if (h->check && (st = h->check(h->user)) != OQ_OK)
            goto done;
        if (h->progress)
            h->progress(k + 1, total, label, h->progress_user);
    }
    *samples = total;
done:
    if (in)
        for (size_t i = 0; i < n_in; i++)
            oq_rt_tensor_release(&in[i]);
    free(in);
    free(outs);
    oq_plan_free(plan);
    return st;
}

/* Which observers a table is made from: auto's split (fit and held-out, chosen per
 * tensor), the fit share only, every sample (both shares merged), or the one observer
 * of an unsplit run. */
typedef enum table_share { SHARE_ONE, SHARE_AUTO, SHARE_FIT, SHARE_ALL } table_share;

/* Observe every sample of src through m; split: every OQ_CALIB_HOLDOUT_EVERY-th sample
 * goes to a second set of observers (*held, freed by the caller). */
static oq_status calib_observe(oq_model *m, oq_calib_source *src, const oq_calib_options *o, bool split,
                               oq_observer_kind kind, cal_ctx *c, oq_observer **held, uint64_t *total, oq_diag *d)
{
    oq_graph *g = m->graph;
    *held = NULL;
    *total = 0;
    if (!g)
        return oq_diag_error(d, OQ_ERR_INVALID, "model has no graph");
    /* slots: graph inputs, then node outputs in order, each subgraph after its node */
    size_t cap = count_slots(g);
    c->slots = calloc(cap ? cap : 1, sizeof(obs_slot));
    c->n_ids = m->next_id + 1;
    c->by_id = malloc(c->n_ids * sizeof(int32_t));
    if (!c->slots || !c->by_id)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory (%zu observers)", cap);
    for (uint32_t i = 0; i < c->n_ids; i++)
        c->by_id[i] = -1;
    add_slots(c, g, o, 0);
    if (split && !(*held = calloc(c->n_slots ? c->n_slots : 1, sizeof(oq_observer))))
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory (%zu observers)", c->n_slots);
    for (size_t i = 0; i < c->n_slots; i++) {
        if (split) {
            c->slots[i].held = &(*held)[i];
            oq_observer_init(&(*held)[i], kind, OQ_NAN_IGNORE);
        }
        oq_observer_init(&c->slots[i].obs, kind, OQ_NAN_IGNORE);
        if (kind == OQ_OBSERVER_MINMAX && o->averaging_constant > 0) {
            oq_status st = oq_observer_set_averaging(&c->slots[i].obs, o->averaging_constant, d);
            if (st != OQ_OK)
                return st;
        }
    }
    c->policy = o->nan_policy;
    c->d = d;
    c->also = o->also;
    oq_calib_hooks h = {
        .threads = o->threads,
        .on_tensor = on_tensor,
        .on_input = on_input,
        .begin_sample = begin_sample,
        .check = check,
        .user = c,
        .progress = o->progress,
        .progress_user = o->progress_user,
    };
    return oq_calib_run(m, src, &h, total, d);
}

/* The table of range request r over c's observers (share: which of them). notes: add
 * the note or warning about non-finite values (once per calibration). */
static oq_status calib_table(const cal_ctx *c, const oq_calib_options *o, const oq_range_request *r,
                             table_share share, uint64_t total, bool notes, oq_calib_table *out, oq_diag *d)
{
    oq_status st = OQ_OK;
    memset(out, 0, sizeof(*out));
    out->samples = total;
    out->items = calloc(c->n_slots ? c->n_slots : 1, sizeof(oq_calib_entry));
    if (!out->items)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    out->method = r->method;
    out->percentile = r->percentile;
    if (share == SHARE_AUTO)
        for (uint64_t k = 0; k < total; k++)
            out->held_out_samples += oq_calib_sample_held_out(k);
    size_t n_bad_tensors = 0;
    const char *first_bad = NULL;
    oq_observer merged;
    for (size_t i = 0; i < c->n_slots; i++) {
        /* every sample's observer (counts, min/max), and the ones the range comes from */
        const oq_observer *fit = &c->slots[i].obs, *held = c->slots[i].held, *cnt = fit;
        if (held) {
            merged = *fit;
            if ((st = oq_observer_merge(&merged, held, d)) != OQ_OK)
                goto fail;
            cnt = &merged;
        }
        /* share FIT ranges from the fit share unless it saw nothing; ALL and ONE from every
         * sample; AUTO checks on the held-out share when both shares saw values */
        bool split = share == SHARE_AUTO && held && fit->count > 0 && held->count > 0;
        const oq_observer *ob = split || (share == SHARE_FIT && fit->initialized) ? fit : cnt;
        const oq_observer *hb = split ? held : NULL;
        if (cnt->count == 0 && cnt->nan_count == 0 && cnt->inf_count == 0)
            continue; /* never produced as float32 (e.g. an int tensor of unknown type) */
        oq_calib_entry *e = &out->items[out->count];
        e->name = oq_calib_value_key(c->slots[i].v);
        if (!e->name || (c->slots[i].first_nonfinite && !(e->first_nonfinite = strdup(c->slots[i].first_nonfinite)))) {
            free(e->name);
            e->name = NULL;
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
            goto fail;
        }
        out->count++;
        e->min = cnt->initialized ? cnt->min : 0.0f;
        e->max = cnt->initialized ? cnt->max : 0.0f;
        e->count = cnt->count;
        e->nan_count = cnt->nan_count;
        e->inf_count = cnt->inf_count;
        out->nan_total += e->nan_count;
        out->inf_total += e->inf_count;
        if (e->nan_count || e->inf_count) {
            n_bad_tensors++;
            if (!first_bad)
                first_bad = e->name;
        }
        if (share == SHARE_AUTO) {
            oq_auto_result ar;
            st = oq_observer_range_auto(ob, hb, r, &e->lo, &e->hi, &ar, e->name, d);
            e->choice = ob->initialized || (hb && hb->initialized) ? oq_auto_candidate_name(ar.chosen) : NULL;
            e->held_out = ar.held_out;
        } else if (share != SHARE_ONE && r->method == OQ_CALIB_MSE) {
            st = oq_observer_range_candidate(ob, OQ_AUTO_MSE, r, &e->lo, &e->hi, e->name, d);
        } else {
            st = oq_observer_range(ob, r, &e->lo, &e->hi, NULL, e->name, d);
        }
        if (st == OQ_OK && o->act_ranges) {
            /* the range for what the activation reads, on the same samples' statistics */
            oq_act act = oq_calib_act_of(c->slots[i].v);
            bool moved = false;
            if (oq_act_is_gated(act.kind))
                st = oq_observer_range_for_act(share == SHARE_FIT ? ob : cnt, r, &act, &e->lo, &e->hi, &moved, d);
            e->act = moved ? oq_act_name(act.kind) : NULL;
        }
        if (st != OQ_OK)
            goto fail;
    }
    out->nonfinite_error = o->nan_policy == OQ_NAN_QUANTIZED;
    if (notes && n_bad_tensors && o->nan_policy == OQ_NAN_QUANTIZED)
        oq_diag_add(d, OQ_SEV_NOTE, OQ_OK, NULL, NULL, NULL,
                    "calibration: %llu NaN and %llu Inf values in %zu tensors (first: \"%s\"), left out of the "
                    "statistics; quantizing one of them is refused",
                    (unsigned long long)out->nan_total, (unsigned long long)out->inf_total, n_bad_tensors, first_bad);
    else if (notes && n_bad_tensors)
        oq_diag_warn(d, "calibration: %llu NaN and %llu Inf values excluded from the statistics, in %zu tensors (first: \"%s\")",
                     (unsigned long long)out->nan_total, (unsigned long long)out->inf_total,
                     n_bad_tensors, first_bad);
    return OQ_OK;
fail:
    oq_calib_table_free(out);
    return st;
}

static void cal_ctx_free(cal_ctx *c, oq_observer *held)
{
    for (size_t i = 0; c->slots && i < c->n_slots; i++)
        free(c->slots[i].first_nonfinite);
    free(c->slots);
    free(held);
    free(c->by_id);
}

oq_status oq_calibrate(oq_model *m, oq_calib_source *src, const oq_calib_options *o,
                       oq_calib_table *out, oq_diag *d)
{
    memset(out, 0, sizeof(*out));
    cal_ctx c;
    memset(&c, 0, sizeof c);
    oq_observer *held = NULL;
    uint64_t total = 0;
    bool is_auto = o->range.method == OQ_CALIB_AUTO;
    oq_observer_kind kind = o->range.method == OQ_CALIB_MINMAX ? OQ_OBSERVER_MINMAX : OQ_OBSERVER_HISTOGRAM;
    oq_status st = calib_observe(m, src, o, is_auto, kind, &c, &held, &total, d);
    if (st == OQ_OK)
        st = calib_table(&c, o, &o->range, is_auto ? SHARE_AUTO : SHARE_ONE, total, true, out, d);
    cal_ctx_free(&c, held);
    return st;
}

oq_status oq_calibrate_candidates(oq_model *m, oq_calib_source *src, const oq_calib_options *o,
                                  const oq_range_request *cand, size_t n, oq_calib_table *fit, oq_calib_table *all,
                                  oq_diag *d)
{
    for (size_t i = 0; i < n; i++) {
        memset(&fit[i], 0, sizeof fit[i]);
        memset(&all[i], 0, sizeof all[i]);
    }
    for (size_t i = 0; i < n; i++)
        if (cand[i].method == OQ_CALIB_AUTO)
            return oq_diag_error(d, OQ_ERR_USAGE, "calibration candidates: auto is not a candidate");
    cal_ctx c;
    memset(&c, 0, sizeof c);
    oq_observer *held = NULL;
    uint64_t total = 0;
    oq_status st = calib_observe(m, src, o, true, OQ_OBSERVER_HISTOGRAM, &c, &held, &total, d);
    for (size_t i = 0; i < n && st == OQ_OK; i++) {
        st = calib_table(&c, o, &cand[i], SHARE_ALL, total, i == 0, &all[i], d);
        if (st == OQ_OK)
            st = calib_table(&c, o, &cand[i], SHARE_FIT, total, false, &fit[i], d);
    }
    cal_ctx_free(&c, held);
    if (st != OQ_OK)
        for (size_t i = 0; i < n; i++) {
            oq_calib_table_free(&fit[i]);
            oq_calib_table_free(&all[i]);
        }
    return st;
}

void oq_calib_table_free(oq_calib_table *t)
{
    for (size_t i = 0; i < t->count; i++) {
        free(t->items[i].name);
        free(t->items[i].first_nonfinite);
    }
    free(t->items);
    memset(t, 0, sizeof(*t));
}

const oq_calib_entry *oq_calib_table_find(const oq_calib_table *t, const char *name)
{
    for (size_t i = 0; i < t->count; i++)
        if (strcmp(t->items[i].name, name) == 0)
            return &t->items[i];
    return NULL;
}

/* "<owner>.<attribute>" of a subgraph (attribute index for GRAPHS attributes) into b. */
static bool scope_of(const oq_graph *g, char *b, size_t size)
{
    if (!g->parent || !g->owner)
        return true;
    if (!scope_of(g->parent, b, size))
        return false;
    size_t len = strlen(b);
    char lb[200];
    const oq_node *n = g->owner;
    const char *attr = "?";
    long idx = -1;
    for (size_t i = 0; i < n->n_attrs; i++) {
        const oq_attr *a = n->attrs[i];
        if (a->g == g)
            attr = a->name ? a->name : "";
        for (size_t j = 0; j < a->n_graphs; j++)
            if (a->graphs[j] == g) {
                attr = a->name ? a->name : "";
                idx = (long)j;
            }
    }
    int w = idx >= 0 ? snprintf(b + len, size - len, "%s.%s[%ld]/", oq_node_label(n, lb, sizeof lb), attr, idx)
                     : snprintf(b + len, size - len, "%s.%s/", oq_node_label(n, lb, sizeof lb), attr);
    return w >= 0 && (size_t)w < size - len;
}

char *oq_calib_value_key(const oq_value *v)
{
    if (!v->graph || !v->graph->parent)
        return strdup(v->name);
    char scope[2048];
    scope[0] = 0;
    if (!scope_of(v->graph, scope, sizeof scope))
        return NULL;
    size_t ls = strlen(scope), ln = strlen(v->name);
    char *k = malloc(ls + ln + 1);
    if (!k)
        return NULL;
    memcpy(k, scope, ls);
    memcpy(k + ls, v->name, ln + 1);
    return k;
}

const oq_calib_entry *oq_calib_table_find_value(const oq_calib_table *t, const oq_value *v)
{
    if (!v->graph || !v->graph->parent)
        return oq_calib_table_find(t, v->name);
    char *k = oq_calib_value_key(v);
    const oq_calib_entry *e = k ? oq_calib_table_find(t, k) : NULL;
    free(k);
    return e;
}

/* ------------------------------------------------------------------ JSON table --- */

static bool add_float(cJSON *to, float v)
{
    char num[32];
    snprintf(num, sizeof num, "%.9g", (double)v);
    return oq_json_add_raw(to, NULL, num); /* as written: reads back to the same float */
}

char *oq_calib_table_to_json(const oq_calib_table *t)
{
    char samples[32], pct[32];
    snprintf(samples, sizeof samples, "%llu", (unsigned long long)t->samples);
    snprintf(pct, sizeof pct, "%.17g", t->percentile);
    cJSON *root = cJSON_CreateObject();
    cJSON *ts = NULL;
    bool ok = root && oq_json_add_raw(root, "samples", samples) &&
              cJSON_AddStringToObject(root, "method", oq_calib_method_name(t->method)) &&
              oq_json_add_raw(root, "percentile", pct) && (ts = cJSON_AddObjectToObject(root, "tensors"));
    for (size_t i = 0; ok && i < t->count; i++) {
        const oq_calib_entry *e = &t->items[i];
        cJSON *a = cJSON_CreateArray();
        ok = a && add_float(a, e->min) && add_float(a, e->max) && add_float(a, e->lo) &&
             add_float(a, e->hi) && cJSON_AddItemToObject(ts, e->name, a);
        if (!ok)
            cJSON_Delete(a);
    }
    if (ok && t->method == OQ_CALIB_AUTO) {
        char ho[32];
        snprintf(ho, sizeof ho, "%llu", (unsigned long long)t->held_out_samples);
        cJSON *ch = NULL;
        ok = oq_json_add_raw(root, "held_out_samples", ho) && (ch = cJSON_AddObjectToObject(root, "choices"));
        for (size_t i = 0; ok && i < t->count; i++) {
            const oq_calib_entry *e = &t->items[i];
            char nm[24];
            if (!e->choice)
                continue;
            snprintf(nm, sizeof nm, "%s%s", e->choice, e->held_out ? "" : "*");
            ok = cJSON_AddStringToObject(ch, e->name, nm) != NULL;
        }
    }
    bool any_act = false;
    for (size_t i = 0; i < t->count; i++)
        any_act |= t->items[i].act != NULL;
    if (ok && any_act) { /* "acts": {"tensor": "silu"}, the ranges narrowed for an activation */
        cJSON *ac = cJSON_AddObjectToObject(root, "acts");
        ok = ac != NULL;
        for (size_t i = 0; ok && i < t->count; i++)
            if (t->items[i].act)
                ok = cJSON_AddStringToObject(ac, t->items[i].name, t->items[i].act) != NULL;
    }
    if (ok && (t->nonfinite_error || t->nan_total || t->inf_total)) {
        /* "nonfinite": {"tensor": [nan, inf, "first sample"]} */
        cJSON *nf = NULL;
        ok = (!t->nonfinite_error || cJSON_AddTrueToObject(root, "nonfinite_error")) &&
             (nf = cJSON_AddObjectToObject(root, "nonfinite"));
        for (size_t i = 0; ok && i < t->count; i++) {
            const oq_calib_entry *e = &t->items[i];
            if (!e->nan_count && !e->inf_count)
                continue;
            char a[32], b[32];
            snprintf(a, sizeof a, "%llu", (unsigned long long)e->nan_count);
            snprintf(b, sizeof b, "%llu", (unsigned long long)e->inf_count);
            cJSON *arr = cJSON_CreateArray();
            ok = arr && oq_json_add_raw(arr, NULL, a) && oq_json_add_raw(arr, NULL, b) &&
                 cJSON_AddItemToArray(arr, cJSON_CreateString(e->first_nonfinite ? e->first_nonfinite : "")) &&
                 cJSON_AddItemToObject(nf, e->name, arr);
            if (!ok)
                cJSON_Delete(arr);
        }
    }
    char *s = ok ? cJSON_PrintUnformatted(root) : NULL; /* malloc'ed (cJSON's default hooks) */
    cJSON_Delete(root);
    return s;
}

oq_status oq_calib_table_from_json(const char *text, oq_calib_table *out, oq_diag *d)
{
    memset(out, 0, sizeof(*out));
    cJSON *j = NULL;
    oq_status st = oq_json_parse(text, strlen(text), "metadata " OQ_CALIB_METADATA_KEY, &j, d);
    if (st != OQ_OK)
        return st;
    const cJSON *ts = oq_json_get(j, "tensors");
    const cJSON *sm = oq_json_get(j, "samples");
    const cJSON *me = oq_json_get(j, "method");
    if (!ts || !cJSON_IsObject(ts)) {
        st = oq_diag_error(d, OQ_ERR_INVALID, "metadata " OQ_CALIB_METADATA_KEY ": no \"tensors\" object");
        goto fail;
    }
    if (cJSON_IsNumber(sm)) {
        if (!(sm->valuedouble >= 0 && sm->valuedouble < 18446744073709551616.0) || sm->valuedouble != floor(sm->valuedouble)) {
            st = oq_diag_error(d, OQ_ERR_INVALID, "metadata " OQ_CALIB_METADATA_KEY
                               ": \"samples\" is not a count: %g", sm->valuedouble);
            goto fail;
        }
        out->samples = (uint64_t)sm->valuedouble;
    }
    if (cJSON_IsString(me) && oq_calib_method_from_name(me->valuestring) >= 0)
        out->method = (oq_calib_method)oq_calib_method_from_name(me->valuestring);
    size_t n = (size_t)cJSON_GetArraySize(ts);
    out->items = calloc(n ? n : 1, sizeof(oq_calib_entry));
    if (!out->items) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto fail;
    }
    const cJSON *a;
    const cJSON *choices = oq_json_get(j, "choices");
    const cJSON *next_choice = cJSON_IsObject(choices) ? choices->child : NULL;
    cJSON_ArrayForEach(a, ts) {
        const char *key = a->string;
        if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 4) {
            st = oq_diag_error(d, OQ_ERR_INVALID, "metadata " OQ_CALIB_METADATA_KEY ": tensor \"%s\": expected [min,max,lo,hi]",
                               key);
            goto fail;
        }
        float v[4];
        int k = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, a) {
            if (!cJSON_IsNumber(x)) {
                st = oq_diag_error(d, OQ_ERR_INVALID, "metadata " OQ_CALIB_METADATA_KEY ": tensor \"%s\": not a number",
                                   key);
                goto fail;
            }
            /* a float table: a value that rounds beyond FLT_MAX would become infinity
             * (0x1.ffffffp127 is FLT_MAX plus half its last step) */
            if (!(fabs(x->valuedouble) < 0x1.ffffffp127)) {
                st = oq_diag_error(d, OQ_ERR_INVALID, "metadata " OQ_CALIB_METADATA_KEY
                                   ": tensor \"%s\": %g is out of float range",
                                   key, x->valuedouble);
                goto fail;
            }
            v[k++] = (float)x->valuedouble;
        }
        oq_calib_entry *e = &out->items[out->count];
        e->name = strdup(key);
        if (!e->name) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
            goto fail;
        }
        out->count++;
        e->min = v[0];
        e->max = v[1];
        e->lo = v[2];
        e->hi = v[3];
        /* choices are written in the order of the tensors: the next one, else a lookup */
        const cJSON *cv = next_choice && next_choice->string && !strcmp(next_choice->string, key)
                              ? next_choice
                              : oq_json_get(choices, key);
        if (cv)
            next_choice = cv->next;
        if (cJSON_IsString(cv)) {
            char nm[24];
            snprintf(nm, sizeof nm, "%s", cv->valuestring);
            size_t ln = strlen(nm);
            e->held_out = !(ln && nm[ln - 1] == '*');
            if (!e->held_out)
                nm[ln - 1] = 0;
            int ci = oq_auto_candidate_from_name(nm);
            e->choice = ci >= 0 ? oq_auto_candidate_name(ci) : NULL;
        }
    }
    const cJSON *hs = oq_json_get(j, "held_out_samples");
    if (cJSON_IsNumber(hs) && hs->valuedouble >= 0 && hs->valuedouble < 1e18)
        out->held_out_samples = (uint64_t)hs->valuedouble;
    out->nonfinite_error = cJSON_IsTrue(oq_json_get(j, "nonfinite_error"));
    const cJSON *acts = oq_json_get(j, "acts"), *x;
    if (!cJSON_IsObject(acts))
        acts = NULL;
    cJSON_ArrayForEach(x, acts) {
        oq_calib_entry *e = x->string ? (oq_calib_entry *)oq_calib_table_find(out, x->string) : NULL;
        for (int k = OQ_ACT_SILU; e && cJSON_IsString(x) && k <= OQ_ACT_TANH; k++)
            if (!strcmp(x->valuestring, oq_act_name((oq_act_kind)k)))
                e->act = oq_act_name((oq_act_kind)k);
    }
    const cJSON *nf = oq_json_get(j, "nonfinite");
    if (!cJSON_IsObject(nf))
        nf = NULL;
    cJSON_ArrayForEach(x, nf) {
        oq_calib_entry *e = x->string ? (oq_calib_entry *)oq_calib_table_find(out, x->string) : NULL;
        const cJSON *na = cJSON_GetArrayItem(x, 0), *ni = cJSON_GetArrayItem(x, 1), *f = cJSON_GetArrayItem(x, 2);
        if (!e || !cJSON_IsNumber(na) || !cJSON_IsNumber(ni) || !(na->valuedouble >= 0 && na->valuedouble < 1e18) ||
            !(ni->valuedouble >= 0 && ni->valuedouble < 1e18))
            continue;
        e->nan_count = (uint64_t)na->valuedouble;
        e->inf_count = (uint64_t)ni->valuedouble;
        out->nan_total += e->nan_count;
        out->inf_total += e->inf_count;
        if (cJSON_IsString(f) && *f->valuestring && !(e->first_nonfinite = strdup(f->valuestring))) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
            goto fail;
        }
    }
    cJSON_Delete(j);
    return OQ_OK;
fail:
    cJSON_Delete(j);
    oq_calib_table_free(out);
    return st;
}

/* ------------------------------------------------------------------ progress ----- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void (*progress_hook)(const char *what, uint64_t done, uint64_t total, void *user);
static void *progress_hook_user;

void oq_calib_progress_set_hook(void (*fn)(const char *what, uint64_t done, uint64_t total, void *user), void *user)
{
    progress_hook = fn;
    progress_hook_user = user;
}

void oq_calib_progress_stderr(uint64_t done, uint64_t total, const char *label, void *user)
{
    oq_calib_progress_state *s = user;
    double t = now_s();
    const char *what = s->what ? s->what : "calibrating";
    if (progress_hook) {
        progress_hook(what, done, total, progress_hook_user);
        return;
    }
    if (s->tty == 0)
        s->tty = isatty(fileno(stderr)) ? 1 : 2;
    (void)label;
    if (done == 0 || s->start == 0) { /* a new round (calibration, one measurement) */
        s->start = t;
        s->last_print = 0;
        s->last_decile = -1;
        if (done == 0)
            return;
    }
    double el = t - s->start;
    double rate = el > 0 ? (double)done / el : 0;
    double eta = rate > 0 && total >= done ? (double)(total - done) / rate : 0;
    if (s->tty == 1) {
        if (done < total && t - s->last_print < 0.1)
            return;
        s->last_print = t;
        int width = 30;
        int fill = total ? (int)((double)width * (double)done / (double)total) : width;
        char bar[40];
        for (int i = 0; i < width; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[width] = 0;
        fprintf(stderr, "\r%s [%s] %llu/%llu  %.1f/s  ETA %.0fs\033[K", what, bar,
                (unsigned long long)done, (unsigned long long)total, rate, eta);
        if (done == total)
            fputc('\n', stderr);
        fflush(stderr);
    } else {
        int dec = total ? (int)(10 * done / total) : 10;
        if (dec == s->last_decile)
            return;
        s->last_decile = dec;
        fprintf(stderr, "%s: %llu/%llu, %.1f/s, %.0fs left\n", what, (unsigned long long)done,
                (unsigned long long)total, rate, eta);
    }
}

void oq_calib_progress_clear(oq_calib_progress_state *s)
{
    if (progress_hook)
        return;
    if (s->tty == 1 && s->last_print > 0) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
}
