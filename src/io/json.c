/* Reading JSON with cJSON: io/json.h. */
#include "io/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One error line for a document cJSON refused (or that has trailing bytes) at p. */
static oq_status parse_error(const char *text, size_t len, const char *p, const char *what,
                             const char *msg, oq_diag *d)
{
    size_t off = p && p >= text && p <= text + len ? (size_t)(p - text) : 0;
    int line = 1, col = 1;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    char near[16];
    unsigned char c = off < len ? (unsigned char)text[off] : 0;
    if (off >= len)
        snprintf(near, sizeof near, "the end");
    else if (c >= 0x21 && c < 0x7f)
        snprintf(near, sizeof near, "'%c'", c);
    else
        snprintf(near, sizeof near, "byte 0x%02x", c);
    return oq_diag_error(d, OQ_ERR_PARSE, "%s: line %d, column %d: %s at %s", what, line, col,
                         msg, near);
}

/* Past JSON whitespace in [p, end): text need not be NUL-terminated. */
static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
        p++;
    return p;
}

oq_status oq_json_parse(const char *text, size_t len, const char *what, cJSON **out,
                        oq_diag *d)
{
    *out = NULL;
    if (!what)
        what = "JSON";
    const char *nul = memchr(text, 0, len);
    if (nul) /* cJSON's strings are C strings: a NUL would cut one short unseen */
        return parse_error(text, len, nul, what, "NUL byte", d);
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!j) {
        /* cJSON says where, not what: the position it stopped at; an empty document
         * stops at 0 */
        if (skip_ws(text, text + len) == text + len)
            return parse_error(text, len, text + len, what, "no JSON document", d);
        return parse_error(text, len, end, what, "invalid JSON", d);
    }
    end = skip_ws(end, text + len);
    if (end != text + len) {
        cJSON_Delete(j);
        return parse_error(text, len, end, what, "trailing characters after the document", d);
    }
    *out = j;
    return OQ_OK;
}

oq_status oq_json_parse_file(const char *path, cJSON **out, oq_diag *d)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return oq_diag_error(d, OQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *b = malloc(cap);
    while (b) {
        size_t r = fread(b + len, 1, cap - len, f);
        len += r;
        if (len < cap)
            break;
        if (cap > ((size_t)1 << 28)) {
            free(b);
            fclose(f);
            return oq_diag_error(d, OQ_ERR_USAGE, "%s: larger than 256 MiB", path);
        }
        char *nb = realloc(b, cap * 2);
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    bool rerr = b && ferror(f);
    fclose(f);
    if (!b)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    if (rerr) {
        free(b);
        return oq_diag_error(d, OQ_ERR_IO, "%s: read error", path);
    }
    oq_status st = oq_json_parse(b, len, path, out, d);
    free(b);
    return st;
}

const cJSON *oq_json_get(const cJSON *obj, const char *key)
{
    if (!cJSON_IsObject(obj))
        return NULL;
    const cJSON *found = NULL;
    const cJSON *m;
    cJSON_ArrayForEach(m, obj)
        if (m->string && strcmp(m->string, key) == 0)
            found = m;
    return found;
}

bool oq_json_add_raw(cJSON *to, const char *key, const char *text)
{
    cJSON *x = cJSON_CreateRaw(text);
    if (x && (key ? cJSON_AddItemToObject(to, key, x) : cJSON_AddItemToArray(to, x)))
        return true;
    cJSON_Delete(x);
    return false;
}
