#include "cli/cli.h"

#include <stdarg.h>
#include <string.h>

void cli_print_diag(const oq_diag *d)
{
    char buf[2048];
    for (size_t i = 0; i < d->count; i++) {
        oq_diag_format(&d->entries[i], buf, sizeof buf);
        if (d->entries[i].file)
            fprintf(stderr, "%s\n", buf);
        else
            fprintf(stderr, "onnxq: %s\n", buf);
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
