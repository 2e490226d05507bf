#include "onnxq/status.h"
#include "ir/grow.h"
#include "ir/text.h"

#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *oq_status_name(oq_status s)
{
    switch (s) {
    case OQ_OK: return "ok";
    case OQ_ERR_IO: return "I/O error";
    case OQ_ERR_PARSE: return "parse error";
    case OQ_ERR_INVALID: return "invalid model";
    case OQ_ERR_UNSUPPORTED: return "unsupported";
    case OQ_ERR_NOMEM: return "out of memory";
    case OQ_ERR_USAGE: return "usage error";
    case OQ_ERR_NUMERIC: return "numeric error";
    case OQ_ERR_INTERNAL: return "internal error";
    case OQ_ERR_STOPPED: return "stopped";
    }
    return "unknown error";
}

static volatile sig_atomic_t stop_flag;

void oq_stop_request(void)
{
    stop_flag = 1;
}

void oq_stop_clear(void)
{
    stop_flag = 0;
}

bool oq_stop_requested(void)
{
    return stop_flag != 0;
}

void oq_diag_init(oq_diag *d)
{
    memset(d, 0, sizeof(*d));
}

static void entry_free(oq_diag_entry *e)
{
    free(e->file);
    free(e->node);
    free(e->op);
    free(e->message);
}

void oq_diag_clear(oq_diag *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->count; i++)
        entry_free(&d->entries[i]);
    d->count = 0;
    d->errors = d->warnings = 0;
}

void oq_diag_free(oq_diag *d)
{
    if (!d)
        return;
    oq_diag_clear(d);
    free(d->entries);
    d->entries = NULL;
    d->cap = 0;
}

static char *dup_or_null(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *p = malloc(n + 1);
    if (p)
        memcpy(p, s, n + 1);
    return p;
}

oq_status oq_diag_vadd(oq_diag *d, oq_severity sev, oq_status code, const char *file,
                       const char *node, const char *op, const char *fmt, va_list ap)
{
    if (!d)
        return code;
    oq_diag_entry *ne = oq_grow(d->entries, d->count, &d->cap, sizeof(*ne), 8);
    if (!ne)
        return code;
    d->entries = ne;
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    /* one line: fold newlines */
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    oq_diag_entry *e = &d->entries[d->count++];
    e->severity = sev;
    e->code = code;
    e->file = dup_or_null(file ? file : d->file);
    e->node = dup_or_null(node);
    e->op = dup_or_null(op);
    e->message = dup_or_null(buf);
    e->weight = 0.0;
    if (sev == OQ_SEV_ERROR)
        d->errors++;
    else if (sev == OQ_SEV_WARNING)
        d->warnings++;
    if (d->sink)
        d->sink(e, d->sink_user);
    return code;
}

oq_status oq_diag_add(oq_diag *d, oq_severity sev, oq_status code, const char *file,
                      const char *node, const char *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    oq_status s = oq_diag_vadd(d, sev, code, file, node, op, fmt, ap);
    va_end(ap);
    return s;
}

void oq_diag_set_weight(oq_diag *d, double weight)
{
    if (d && d->count)
        d->entries[d->count - 1].weight = weight;
}

/* The next character of s's "shape": numbers (with sign, point, exponent) and
 * double-quoted strings become one marker each. */
static const char *shape_next(const char *s, char *out)
{
    if (*s == '"') {
        const char *q = strchr(s + 1, '"');
        *out = '\x01';
        return q ? q + 1 : s + strlen(s);
    }
    bool sign = (*s == '-' || *s == '+') && isdigit((unsigned char)s[1]);
    if (isdigit((unsigned char)*s) || sign) {
        s += sign;
        while (isdigit((unsigned char)*s) || *s == '.' ||
               ((*s == 'e' || *s == 'E') && (isdigit((unsigned char)s[1]) || s[1] == '-' || s[1] == '+')) ||
               ((*s == '-' || *s == '+') && (s[-1] == 'e' || s[-1] == 'E')))
            s++;
        *out = '\x02';
        return s;
    }
    *out = *s;
    return s + 1;
}

static bool str_eq_null(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

bool oq_diag_same_kind(const oq_diag_entry *a, const oq_diag_entry *b)
{
    if (a->severity != b->severity || a->code != b->code || !str_eq_null(a->op, b->op) ||
        !str_eq_null(a->file, b->file))
        return false;
    const char *x = a->message, *y = b->message;
    while (*x && *y) {
        char cx, cy;
        x = shape_next(x, &cx);
        y = shape_next(y, &cy);
        if (cx != cy)
            return false;
    }
    return !*x && !*y;
}

static int diag_format_raw(const oq_diag_entry *e, char *buf, size_t size);

/* src into buf (size bytes, NUL-terminated) with control characters and bytes that are
 * not UTF-8 written as \xNN: names come from the model file, and a message stays one
 * printable line whatever they hold. Unlike oq_sb_escaped (dump's), a backslash stays as
 * it is: messages quote regular expressions and paths. Returns the length the whole
 * result needs. */
static int escape_text(const char *src, char *buf, size_t size)
{
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)src;
    size_t n = strlen(src);
    for (size_t i = 0; i < n;) {
        char tmp[8];
        size_t tl, adv;
        size_t u = p[i] >= 0x80 ? oq_utf8_len(p + i, n - i) : 0;
        if (u) {
            memcpy(tmp, p + i, u);
            tl = adv = u;
        } else if (p[i] < 0x20 || p[i] >= 0x7F) {
            tl = (size_t)snprintf(tmp, sizeof tmp, "\\x%02X", p[i]);
            adv = 1;
        } else {
            tmp[0] = (char)p[i];
            tl = adv = 1;
        }
        for (size_t k = 0; k < tl; k++, o++)
            if (o + 1 < size)
                buf[o] = tmp[k];
        i += adv;
    }
    if (size)
        buf[o < size ? o : size - 1] = 0;
    return (int)o;
}

int oq_diag_format(const oq_diag_entry *e, char *buf, size_t size)
{
    char raw[4096];
    int n = diag_format_raw(e, raw, sizeof raw);
    if (n < 0)
        return n;
    if ((size_t)n < sizeof raw)
        return escape_text(raw, buf, size);
    char *big = malloc((size_t)n + 1);
    if (!big)
        return escape_text(raw, buf, size);
    diag_format_raw(e, big, (size_t)n + 1);
    int r = escape_text(big, buf, size);
    free(big);
    return r;
}

static int diag_format_raw(const oq_diag_entry *e, char *buf, size_t size)
{
    char node[512] = "";
    if (e->node && e->op)
        snprintf(node, sizeof node, "node \"%s\" (%s): ", e->node, e->op);
    else if (e->node)
        snprintf(node, sizeof node, "node \"%s\": ", e->node);
    else if (e->op)
        snprintf(node, sizeof node, "%s: ", e->op);
    const char *sev = e->severity == OQ_SEV_WARNING ? "warning: "
                      : e->severity == OQ_SEV_NOTE  ? "note: "
                                                    : "";
    if (e->file)
        return snprintf(buf, size, "%s: %s%s%s", e->file, sev, node, e->message ? e->message : "");
    return snprintf(buf, size, "%s%s%s", sev, node, e->message ? e->message : "");
}

void oq_diag_append(oq_diag *d, const oq_diag *src)
{
    for (size_t k = 0; src && k < src->count; k++) {
        const oq_diag_entry *e = &src->entries[k];
        oq_diag_add(d, e->severity, e->code, e->file, e->node, e->op, "%s", e->message);
        oq_diag_set_weight(d, e->weight);
    }
}

const oq_diag_entry *oq_diag_first_error(const oq_diag *d)
{
    if (!d)
        return NULL;
    for (size_t i = 0; i < d->count; i++)
        if (d->entries[i].severity == OQ_SEV_ERROR)
            return &d->entries[i];
    return NULL;
}
