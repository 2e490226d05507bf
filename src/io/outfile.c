/* Atomic output: a temporary file beside the target, fsync, rename, fsync the directory.
 * A failure at any point removes the temporary file and leaves the old target intact.
 * The temporary files being written are listed in a fixed table that
 * oq_remove_temp_files() (async-signal-safe) empties: a program's SIGINT handler calls it,
 * so an interrupted run leaves neither a half-written output nor a temporary file. */
#include "io/io-impl.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUTBUF (1u << 20)

/* ------------------------------------------------------------ live temporary files */

#define TMP_SLOTS 32
#define TMP_PATH 4096
static char tmp_paths[TMP_SLOTS][TMP_PATH];
static volatile sig_atomic_t tmp_used[TMP_SLOTS];
static pthread_mutex_t tmp_lock = PTHREAD_MUTEX_INITIALIZER;

/* Remember a temporary file's path; the slot, or -1 when the table is full or the path
 * too long (the file is then only removed by the normal abort). */
static int tmp_register(const char *path)
{
    if (strlen(path) >= TMP_PATH)
        return -1;
    int slot = -1;
    pthread_mutex_lock(&tmp_lock);
    for (int i = 0; i < TMP_SLOTS && slot < 0; i++)
        if (!tmp_used[i]) {
            memcpy(tmp_paths[i], path, strlen(path) + 1);
            tmp_used[i] = 1; /* after the path: a handler never sees half of one */
            slot = i;
        }
    pthread_mutex_unlock(&tmp_lock);
    return slot;
}

static void tmp_unregister(int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&tmp_lock);
    tmp_used[slot] = 0;
    pthread_mutex_unlock(&tmp_lock);
}

void oq_remove_temp_files(void)
{
    for (int i = 0; i < TMP_SLOTS; i++)
        if (tmp_used[i])
            unlink(tmp_paths[i]);
}

bool oq_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (!a || !b || stat(a, &sa) != 0 || stat(b, &sb) != 0)
        return false;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

oq_status oq_outfile_open(oq_outfile *f, const char *path, oq_diag *d)
{
    memset(f, 0, sizeof(*f));
    f->fd = -1;
    f->slot = -1;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_IO, path, NULL, NULL, "is a directory");
    /* The temp file is renamed over the target: never do that to a device, FIFO or
     * socket (as root, writing to /dev/full would otherwise replace the device node). */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_IO, path, NULL, NULL,
                           "is not a regular file (%s); refusing to replace it",
                           S_ISCHR(st.st_mode) ? "character device" : S_ISBLK(st.st_mode) ? "block device"
                           : S_ISFIFO(st.st_mode) ? "FIFO" : S_ISSOCK(st.st_mode) ? "socket" : "special file");
    char *dir = dir_of(path);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t n = strlen(dir) + strlen(base) + 32;
    f->tmp_path = malloc(n);
    f->final_path = strdup(path);
    f->buf = malloc(OUTBUF);
    if (!dir || !f->tmp_path || !f->final_path || !f->buf) {
        free(dir);
        oq_outfile_abort(f);
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    }
    snprintf(f->tmp_path, n, "%s/.%s.tmp.XXXXXX", dir, base);
    free(dir);
    f->cap = OUTBUF;
    f->fd = mkstemp(f->tmp_path);
    if (f->fd < 0) {
        int e = errno;
        free(f->tmp_path);
        f->tmp_path = NULL;
        oq_outfile_abort(f);
        return oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_IO, path, NULL, NULL,
                           "cannot create a temporary file beside it: %s", strerror(e));
    }
    fchmod(f->fd, 0644);
    f->slot = tmp_register(f->tmp_path);
    return OQ_OK;
}

static void flush_buf(oq_outfile *f)
{
    size_t off = 0;
    while (off < f->used && !f->err) {
        ssize_t w = write(f->fd, f->buf + off, f->used - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            f->err = errno;
            break;
        }
        if (w == 0) {
            f->err = ENOSPC;
            break;
        }
        off += (size_t)w;
    }
    f->written += off;
    f->used = 0;
}

void oq_outfile_flush(oq_outfile *f)
{
    if (f->used && f->fd >= 0)
        flush_buf(f);
}

void oq_outfile_write(oq_outfile *f, const void *p, size_t n)
{
    const uint8_t *s = p;
    while (n && !f->err) {
        if (f->used == f->cap)
            flush_buf(f);
        size_t k = f->cap - f->used;
        if (k > n)
            k = n;
        if (k == f->cap && f->used == 0) {
            /* large block: write through */
            f->used = 0;
            size_t off = 0;
            while (off < n && !f->err) {
                ssize_t w = write(f->fd, s + off, n - off);
                if (w < 0) {
                    if (errno == EINTR)
                        continue;
                    f->err = errno;
                } else if (w == 0) {
                    f->err = ENOSPC;
                } else {
                    off += (size_t)w;
                }
            }
            f->written += off;
            return;
        }
        memcpy(f->buf + f->used, s, k);
        f->used += k;
        s += k;
        n -= k;
    }
}

void oq_outfile_abort(oq_outfile *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    if (f->tmp_path)
        unlink(f->tmp_path);
    tmp_unregister(f->slot);
    f->slot = -1;
    free(f->tmp_path);
    free(f->final_path);
    free(f->buf);
    f->tmp_path = f->final_path = NULL;
    f->buf = NULL;
}

/* Make the data durable in the temp file; still not renamed. */
static oq_status finish_tmp(oq_outfile *f, oq_diag *d)
{
    if (f->used)
        flush_buf(f);
    if (!f->err && fsync(f->fd) != 0 && errno != EINVAL && errno != EROFS)
        f->err = errno;
    if (close(f->fd) != 0 && !f->err)
        f->err = errno;
    f->fd = -1;
    if (f->err) {
        oq_status s = oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_IO, f->final_path, NULL, NULL,
                                  "write failed: %s (nothing was replaced)", strerror(f->err));
        oq_outfile_abort(f);
        return s;
    }
    return OQ_OK;
}

oq_status oq_outfile_commit(oq_outfile *f, oq_diag *d)
{
    oq_status s = finish_tmp(f, d);
    if (s)
        return s;
    if (rename(f->tmp_path, f->final_path) != 0) {
        int e = errno;
        s = oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_IO, f->final_path, NULL, NULL,
                        "cannot rename the temporary file into place: %s", strerror(e));
        oq_outfile_abort(f);
        return s;
    }
    tmp_unregister(f->slot);
    f->slot = -1;
    char *dir = dir_of(f->final_path);
    if (dir) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        free(dir);
    }
    free(f->tmp_path);
    f->tmp_path = NULL;
    oq_outfile_abort(f);
    return OQ_OK;
}

/* Two-phase commit for model + data file: both finished before either is renamed. */
oq_status oq_outfile_finish(oq_outfile *f, oq_diag *d);
oq_status oq_outfile_finish(oq_outfile *f, oq_diag *d)
{
    return finish_tmp(f, d);
}

oq_status oq_outfile_rename(oq_outfile *f, oq_diag *d);
oq_status oq_outfile_rename(oq_outfile *f, oq_diag *d)
{
    if (rename(f->tmp_path, f->final_path) != 0) {
        int e = errno;
        oq_status s = oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_IO, f->final_path, NULL, NULL,
                                  "cannot rename the temporary file into place: %s", strerror(e));
        oq_outfile_abort(f);
        return s;
    }
    tmp_unregister(f->slot);
    f->slot = -1;
    free(f->tmp_path);
    f->tmp_path = NULL;
    oq_outfile_abort(f);
    return OQ_OK;
}
