#include "cli/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnxq/tensor_io.h"

/* A line that only restates the category of an error printed before it ("pass
 * \"calibrate\" (#3 in the pipeline) failed: usage error"): the precise cause is
 * already on the screen, and the category would read as a second, contradicting cause. */
static bool restates_earlier_error(const oq_diag *d, size_t i)
{
    const oq_diag_entry *e = &d->entries[i];
    if (e->severity != OQ_SEV_ERROR)
        return false;
    bool earlier = false;
    for (size_t k = 0; k < i && !earlier; k++)
        earlier = d->entries[k].severity == OQ_SEV_ERROR;
    if (!earlier)
        return false;
    char tail[128];
    snprintf(tail, sizeof tail, "failed: %s", oq_status_name(e->code));
    size_t lm = strlen(e->message), lt = strlen(tail);
    return lm >= lt && strcmp(e->message + lm - lt, tail) == 0;
}

static cli_verbosity verbosity = CLI_NORMAL;

void cli_set_verbosity(cli_verbosity v)
{
    verbosity = v;
}

cli_verbosity cli_get_verbosity(void)
{
    return verbosity;
}

static void print_entry(const oq_diag_entry *e, size_t more)
{
    char buf[2048];
    oq_diag_format(e, buf, sizeof buf);
    fprintf(stderr, "%s%s", e->file ? "" : "onnxq: ", buf);
    if (more)
        fprintf(stderr, " [worst of %zu like it; --verbose or --json lists all]", more + 1);
    fputc('\n', stderr);
}

void cli_print_diag(const oq_diag *d)
{
    for (size_t i = 0; i < d->count; i++) {
        const oq_diag_entry *e = &d->entries[i];
        if (restates_earlier_error(d, i))
            continue;
        if (e->severity == OQ_SEV_ERROR || verbosity == CLI_VERBOSE) {
            print_entry(e, 0);
            continue;
        }
        if (verbosity == CLI_QUIET)
            continue;
        /* one line per kind, at the place of its first entry */
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = d->entries[k].severity != OQ_SEV_ERROR && oq_diag_same_kind(&d->entries[k], e);
        if (seen)
            continue;
        const oq_diag_entry *worst = e;
        size_t more = 0;
        for (size_t k = i + 1; k < d->count; k++)
            if (oq_diag_same_kind(&d->entries[k], e)) {
                more++;
                if (d->entries[k].weight > worst->weight)
                    worst = &d->entries[k];
            }
        print_entry(worst, more);
    }
}

int cli_exit_code(oq_status s)
{
    switch (s) {
    case OQ_OK: return CLI_OK;
    case OQ_ERR_PARSE:
    case OQ_ERR_INVALID:
    case OQ_ERR_USAGE:
    case OQ_ERR_UNSUPPORTED:
        return CLI_BAD;
    default:
        return CLI_FAIL;
    }
}

/* A model that cannot be loaded gets one line: its first error, and how many more the
 * reader/checker found (a broken file often breaks several things at once). */
static void print_load_failure(const oq_diag *d)
{
    const oq_diag_entry *first = NULL;
    size_t more = 0;
    bool cut = false; /* the checker stopped early (it leaves a note) */
    for (size_t i = 0; i < d->count; i++) {
        cut |= d->entries[i].severity == OQ_SEV_NOTE;
        if (d->entries[i].severity != OQ_SEV_ERROR)
            continue;
        if (!first)
            first = &d->entries[i];
        else
            more++;
    }
    if (!first) {
        cli_print_diag(d);
        return;
    }
    char buf[2048];
    oq_diag_format(first, buf, sizeof buf);
    fprintf(stderr, "%s%s", first->file ? "" : "onnxq: ", buf);
    if (more)
        fprintf(stderr, " (and %zu%s more error%s; first shown)", more, cut ? "+" : "",
                more == 1 && !cut ? "" : "s");
    fputc('\n', stderr);
}

oq_model *cli_load_model(const char *path, oq_status *st)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_model *m = NULL;
    oq_status s = oq_model_read(path, NULL, &m, &d);
    if (s != OQ_OK)
        print_load_failure(&d);
    else
        cli_print_diag(&d);
    oq_diag_free(&d);
    if (st)
        *st = s;
    if (s == OQ_ERR_IO && st)
        *st = OQ_ERR_USAGE; /* a missing/unreadable input is bad input: exit 2 */
    return m;
}

oq_model *cli_load_model_rc(const char *path, int *rc)
{
    oq_status st;
    oq_model *m = cli_load_model(path, &st);
    if (!m)
        *rc = cli_exit_code(st);
    return m;
}

void cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "onnxq %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

bool cli_is_help(const char *arg)
{
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

bool cli_positive_count(const char *cmd, const char *opt, const char *text, int *out)
{
    *out = atoi(text);
    if (*out >= 1)
        return true;
    cli_error(cmd, "%s wants a positive count", opt);
    return false;
}

bool cli_positional(const char *cmd, const char *arg, const char **const slots[], size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!*slots[i]) {
            *slots[i] = arg;
            return true;
        }
    cli_error(cmd, "unexpected argument \"%s\"", arg);
    return false;
}

/* ------------------------------------------------------------ paths -------- */

bool cli_is_stdout(const char *path)
{
    return path && strcmp(path, "-") == 0;
}

/* the folder part of path ("." when none); buf must hold PATH_MAX */
static const char *parent_of(const char *path, char *buf, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return ".";
    if (slash == path)
        return "/";
    size_t n = (size_t)(slash - path);
    if (n >= size)
        n = size - 1;
    memcpy(buf, path, n);
    buf[n] = 0;
    return buf;
}

int cli_check_output(const char *cmd, const char *what, const char *path, bool allow_stdout,
                     const char *const *inputs, size_t n_inputs)
{
    if (!path || !*path) {
        cli_error(cmd, "%s: empty output path", what);
        return CLI_BAD;
    }
    if (cli_is_stdout(path)) {
        if (allow_stdout)
            return CLI_OK;
        cli_error(cmd, "%s -: this output cannot go to standard output; give a file name", what);
        return CLI_BAD;
    }
    struct stat sb;
    size_t len = strlen(path);
    if ((stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) || path[len - 1] == '/') {
        cli_error(cmd, "%s %s: is a folder; give a file name (e.g. %s%sout)", what, path, path,
                  path[len - 1] == '/' ? "" : "/");
        return CLI_BAD;
    }
    char pb[4096];
    const char *dir = parent_of(path, pb, sizeof pb);
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        cli_error(cmd, "%s %s: folder %s does not exist", what, path, dir);
        return CLI_BAD;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        cli_error(cmd, "%s %s: folder %s is not writable", what, path, dir);
        return CLI_BAD;
    }
    for (size_t i = 0; i < n_inputs; i++) {
        struct stat si;
        if (inputs[i] && stat(path, &sb) == 0 && stat(inputs[i], &si) == 0 &&
            sb.st_dev == si.st_dev && sb.st_ino == si.st_ino) {
            cli_error(cmd, "%s %s: refusing to overwrite the input model (%s); write to another file",
                      what, path, inputs[i]);
            return CLI_BAD;
        }
    }
    return CLI_OK;
}

int cli_check_output_dir(const char *cmd, const char *what, const char *dir)
{
    struct stat sb;
    if (!dir || !*dir) {
        cli_error(cmd, "%s: empty folder name", what);
        return CLI_BAD;
    }
    if (stat(dir, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) {
            cli_error(cmd, "%s %s: exists and is not a folder", what, dir);
            return CLI_BAD;
        }
    } else if (mkdir(dir, 0777) != 0) {
        cli_error(cmd, "%s %s: cannot create the folder: %s", what, dir, strerror(errno));
        return CLI_BAD;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        cli_error(cmd, "%s %s: folder is not writable", what, dir);
        return CLI_BAD;
    }
    return CLI_OK;
}

int cli_check_input_dir(const char *cmd, const char *what, const char *dir)
{
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        cli_error(cmd, "%s %s: %s", what, dir, strerror(errno));
        return CLI_BAD;
    }
    if (!S_ISDIR(sb.st_mode)) {
        cli_error(cmd, "%s %s: is a file, not a folder of samples (docs/data.md)", what, dir);
        return CLI_BAD;
    }
    return CLI_OK;
}

/* ------------------------------------------------------------ text outputs - */

int cli_output_open(const char *cmd, cli_output *o, const char *path)
{
    memset(o, 0, sizeof *o);
    o->path = path;
    if (cli_is_stdout(path)) {
        o->f = stdout;
        return CLI_OK;
    }
    o->f = open_memstream(&o->buf, &o->len);
    if (!o->f) {
        cli_error(cmd, "%s: out of memory", path);
        return CLI_FAIL;
    }
    return CLI_OK;
}

int cli_output_close(const char *cmd, cli_output *o)
{
    int rc = CLI_OK;
    if (!o->f)
        return CLI_OK;
    if (o->f == stdout) {
        if (fflush(stdout) != 0 || ferror(stdout)) {
            cli_error(cmd, "error writing to standard output");
            rc = CLI_FAIL;
        }
        o->f = NULL;
        return rc;
    }
    bool bad = ferror(o->f) != 0;
    fclose(o->f);
    o->f = NULL;
    oq_diag d;
    oq_diag_init(&d);
    if (bad) {
        cli_error(cmd, "%s: out of memory", o->path);
        rc = CLI_FAIL;
    } else if (oq_file_write_atomic(o->path, o->buf, o->len, &d) != OQ_OK) {
        cli_print_diag(&d);
        rc = CLI_FAIL;
    }
    oq_diag_free(&d);
    free(o->buf);
    o->buf = NULL;
    return rc;
}
