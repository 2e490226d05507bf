/* External tensor data: resolve the location safely, check the range, map the file.
 *
 * Refused, with an error naming the tensor: absolute locations, ".." components,
 * any symlink on the way (checked component by component with lstat), non-regular
 * files, offsets/lengths outside the file, and lengths that differ from the tensor's
 * byte size. Files are mapped once per model and shared by every tensor in them. */
#include "io/io-impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static bool parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s)
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < 0)
        return false;
    *out = v;
    return true;
}

oq_status oq_external_parse(const oq_tensor *t, oq_external *out, oq_diag *d)
{
    const char *nm = t->name ? t->name : "";
    memset(out, 0, sizeof(*out));
    out->length = -1;
    for (size_t i = 0; i < t->external_data.count; i++) {
        const oq_kv *kv = &t->external_data.items[i];
        if (!kv->key)
            continue;
        if (strcmp(kv->key, "location") == 0)
            out->location = kv->value;
        else if (strcmp(kv->key, "offset") == 0) {
            if (!parse_i64(kv->value, &out->offset))
                return oq_diag_error(d, OQ_ERR_INVALID, "tensor \"%s\": external data offset \"%s\" is not a non-negative integer", nm, kv->value ? kv->value : "");
        } else if (strcmp(kv->key, "length") == 0) {
            if (!parse_i64(kv->value, &out->length))
                return oq_diag_error(d, OQ_ERR_INVALID, "tensor \"%s\": external data length \"%s\" is not a non-negative integer", nm, kv->value ? kv->value : "");
        } else if (strcmp(kv->key, "checksum") == 0)
            out->checksum = kv->value;
    }
    if (!out->location || !*out->location)
        return oq_diag_error(d, OQ_ERR_INVALID, "tensor \"%s\": external data has no location", nm);
    return OQ_OK;
}

/* Check the location string and every path component under dir. Writes the full path. */
static oq_status safe_path(const char *dir, const char *loc, const char *nm, char *full,
                           size_t size, oq_diag *d)
{
    if (loc[0] == '/' || loc[0] == '\\' || (loc[0] && loc[1] == ':'))
        return oq_diag_error(d, OQ_ERR_INVALID, "tensor \"%s\": external data location \"%s\" is absolute", nm, loc);
    /* reject ".." components (either separator) */
    const char *p = loc;
    while (*p) {
        const char *e = p;
        while (*e && *e != '/' && *e != '\\')
            e++;
        if (e - p == 2 && p[0] == '.' && p[1] == '.')
            return oq_diag_error(d, OQ_ERR_INVALID, "tensor \"%s\": external data location \"%s\" contains \"..\"", nm, loc);
        p = *e ? e + 1 : e;
    }
    if (strchr(loc, '\\'))
        return oq_diag_error(d, OQ_ERR_INVALID, "tensor \"%s\": external data location \"%s\" contains a backslash", nm, loc);
    int n = snprintf(full, size, "%s/%s", dir, loc);
    if (n < 0 || (size_t)n >= size)
        return oq_diag_error(d, OQ_ERR_INVALID, "tensor \"%s\": external data location is too long", nm);
    /* lstat each component below dir */
    size_t base = strlen(dir) + 1;
    for (size_t i = base;; i++) {
        if (full[i] == '/' || full[i] == 0) {
            char c = full[i];
            full[i] = 0;
            struct stat st;
            if (lstat(full, &st) != 0) {
                int e = errno;
                full[i] = c;
                return oq_diag_error(d, OQ_ERR_IO, "tensor \"%s\": external data file \"%s\": %s", nm, loc, strerror(e));
            }
            full[i] = c;
            if (S_ISLNK(st.st_mode))
                return oq_diag_error(d, OQ_ERR_INVALID, "tensor \"%s\": external data location \"%s\" goes through a symbolic link", nm, loc);
            if (c == 0) {
                if (!S_ISREG(st.st_mode))
                    return oq_diag_error(d, OQ_ERR_INVALID, "tensor \"%s\": external data location \"%s\" is not a regular file", nm, loc);
                break;
            }
            if (!S_ISDIR(st.st_mode))
                return oq_diag_error(d, OQ_ERR_INVALID, "tensor \"%s\": external data location \"%s\": a path component is not a directory", nm, loc);
        }
    }
    return OQ_OK;
}

/* Open loc below dir one component at a time with O_NOFOLLOW, so a directory swapped
 * for a symlink after safe_path() looked at it cannot redirect the open (no race between
 * the check and the use). The final component is opened O_NONBLOCK: a FIFO put there
 * meanwhile is refused by the fstat that follows instead of blocking. */
static int open_beneath(const char *dir, const char *loc)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const char *p = loc;
    char comp[256];
    while (fd >= 0 && *p) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n >= sizeof comp) {
            close(fd);
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy(comp, p, n);
        comp[n] = 0;
        p += n;
        while (*p == '/')
            p++;
        if (n == 0)
            continue;
        int flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | (*p ? O_DIRECTORY : O_NONBLOCK);
        int nfd = openat(fd, comp, flags);
        int e2 = errno;
        close(fd);
        errno = e2;
        fd = nfd;
    }
    return fd;
}

static oq_mapping *find_or_map(oq_model *m, const char *full, const char *nm, const char *loc,
                               oq_diag *d, oq_status *st)
{
    oq_io_state *s = oq_io_state_get(m);
    if (!s) {
        *st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (oq_mapping *mp = s->maps; mp; mp = mp->next)
        if (strcmp(mp->path, full) == 0)
            return mp;
    int fd = open_beneath(m->dir ? m->dir : ".", loc);
    if (fd < 0) {
        *st = oq_diag_error(d, OQ_ERR_IO, "tensor \"%s\": cannot open external data \"%s\": %s", nm, loc, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        *st = oq_diag_error(d, OQ_ERR_INVALID, "tensor \"%s\": external data \"%s\" is not a regular file", nm, loc);
        return NULL;
    }
    oq_mapping *mp = oq_arena_alloc(m->arena, sizeof(*mp));
    if (!mp) {
        close(fd);
        *st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        return NULL;
    }
    mp->len = (size_t)sb.st_size;
    mp->path = oq_arena_strdup(m->arena, full);
    if (mp->len) {
        mp->addr = mmap(NULL, mp->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (mp->addr == MAP_FAILED) {
            close(fd);
            *st = oq_diag_error(d, OQ_ERR_IO, "tensor \"%s\": cannot map external data \"%s\": %s", nm, loc, strerror(errno));
            return NULL;
        }
    }
    close(fd);
    mp->next = s->maps;
    s->maps = mp;
    return mp;
}

oq_status oq_io_map_external(oq_model *m, oq_tensor *t, oq_diag *d)
{
    const char *nm = t->name ? t->name : "";
    if (oq_io_stream_has(m, t)) /* written by this process to the output being streamed */
        return oq_io_stream_map(m, t, d);
    oq_external ext;
    oq_status st = oq_external_parse(t, &ext, d);
    if (st)
        return st;
    if (t->dtype == OQ_DTYPE_STRING)
        return oq_diag_error(d, OQ_ERR_INVALID, "tensor \"%s\": string tensors cannot use external data", nm);
    int64_t numel = oq_tensor_numel(t);
    int64_t want = oq_dtype_nbytes(t->dtype, numel);
    if (numel < 0 || want < 0)
        return oq_diag_error(d, OQ_ERR_INVALID, "tensor \"%s\": bad dims or data type for external data", nm);
    if (ext.length >= 0 && ext.length != want)
        return oq_diag_error(d, OQ_ERR_INVALID,
                             "tensor \"%s\": external data length %lld differs from the tensor's size %lld bytes",
                             nm, (long long)ext.length, (long long)want);
    char full[4096];
    st = safe_path(m->dir ? m->dir : ".", ext.location, nm, full, sizeof full, d);
    if (st)
        return st;
    oq_mapping *mp = find_or_map(m, full, nm, ext.location, d, &st);
    if (!mp)
        return st;
    if ((uint64_t)ext.offset > mp->len || (uint64_t)want > mp->len - (uint64_t)ext.offset)
        return oq_diag_error(d, OQ_ERR_INVALID,
                             "tensor \"%s\": external data range [%lld, %lld) is outside \"%s\" (%zu bytes)",
                             nm, (long long)ext.offset, (long long)(ext.offset + want), ext.location, mp->len);
    uint8_t *p = (uint8_t *)mp->addr + ext.offset;
    if (want == 0) {
        t->view = (void *)"";
        t->view_nbytes = 0;
        t->view_borrowed = true;
        return OQ_OK;
    }
    if (((uintptr_t)p & 15) != 0) {
        /* misaligned for typed access: copy (rare; onnxq writes aligned offsets) */
        void *c = oq_arena_memdup(m->arena, p, (size_t)want);
        if (!c)
            return oq_diag_error(d, OQ_ERR_NOMEM, "tensor \"%s\": out of memory", nm);
        t->view = c;
        t->view_borrowed = false;
    } else {
        t->view = p;
        t->view_borrowed = true;
    }
    t->view_nbytes = want;
    return OQ_OK;
}

bool oq_io_model_maps_file(oq_model *m, const char *path);
bool oq_io_model_maps_file(oq_model *m, const char *path)
{
    oq_io_state *s = m->io;
    if (!s)
        return false;
    for (oq_mapping *mp = s->maps; mp; mp = mp->next)
        if (oq_same_file(mp->path, path))
            return true;
    return false;
}
