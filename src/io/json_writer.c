/* JSON writer on cJSON: see json.h. */
#include "io/json_writer.h"

#include <cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/grow.h"
#include "ir/text.h"

void json_init(json_writer *w, FILE *f, int indent)
{
    memset(w, 0, sizeof *w);
    w->f = f;
    w->indent = indent < 0 ? 0 : indent;
}

/* Attach a new value where the document stands: the root, the next element of an
 * array, or the member named by json_key. Takes item (NULL: out of memory). */
static bool attach(json_writer *w, cJSON *item)
{
    char *key = w->key;
    w->key = NULL;
    bool ok = item != NULL;
    if (!ok) {
        w->error = true;
    } else if (w->depth == 0) {
        ok = !w->root && !key; /* else a second top-level value */
        if (ok)
            w->root = item;
    } else if (cJSON_IsObject(w->open[w->depth])) {
        ok = key && cJSON_AddItemToObject(w->open[w->depth], key, item); /* copies key */
    } else {
        ok = !key && cJSON_AddItemToArray(w->open[w->depth], item);
    }
    if (!ok) {
        w->error = true;
        cJSON_Delete(item);
    }
    free(key);
    return ok;
}

static void begin(json_writer *w, bool object, bool inl)
{
    if (w->depth + 1 >= JSON_MAX_DEPTH) {
        w->error = true;
        return;
    }
    unsigned char *p = oq_grow(w->inl, w->n_inl, &w->cap_inl, 1, 64);
    if (!p) {
        w->error = true;
        return;
    }
    w->inl = p;
    cJSON *c = object ? cJSON_CreateObject() : cJSON_CreateArray();
    if (!attach(w, c))
        return;
    w->inl[w->n_inl++] = inl;
    w->open[++w->depth] = c;
}

static void end(json_writer *w, bool object)
{
    if (w->depth == 0 || cJSON_IsObject(w->open[w->depth]) != object || w->key) {
        w->error = true;
        return;
    }
    w->depth--;
}

void json_begin_object(json_writer *w) { begin(w, true, false); }
void json_begin_array(json_writer *w) { begin(w, false, false); }
void json_begin_array_inline(json_writer *w) { begin(w, false, true); }
void json_begin_object_inline(json_writer *w) { begin(w, true, true); }
void json_end_object(json_writer *w) { end(w, true); }
void json_end_array(json_writer *w) { end(w, false); }

/* Bytes cJSON does not escape the way onnxq writes them: NUL (it ends a C string), DEL
 * and bytes that are not valid UTF-8 (cJSON copies them), all written as \u00XX. */
static size_t irregular_len(const unsigned char *s, size_t n)
{
    if (s[0] == 0 || s[0] == 0x7f)
        return 0;
    return oq_utf8_len(s, n);
}

/* A string with irregular bytes: cJSON escapes the runs between them (its printed
 * string item without the quotes), the bytes become \u00XX, all in one raw item. */
static cJSON *irregular_string(const unsigned char *s, size_t n)
{
    size_t cap = 6 * n + 3, len = 0; /* \u00XX is the longest a byte gets */
    char *out = malloc(cap);
    cJSON *item = NULL;
    if (!out)
        return NULL;
    out[len++] = '"';
    for (size_t i = 0; i < n;) {
        size_t run = 0, l;
        while (i + run < n && (l = irregular_len(s + i + run, n - i - run)) > 0)
            run += l;
        if (run) {
            char *part = malloc(run + 1);
            cJSON *tmp = part ? (memcpy(part, s + i, run), part[run] = 0, cJSON_CreateString(part)) : NULL;
            char *printed = tmp ? cJSON_PrintUnformatted(tmp) : NULL;
            free(part);
            cJSON_Delete(tmp);
            if (!printed)
                goto done;
            size_t pl = strlen(printed) - 2; /* without the quotes */
            memcpy(out + len, printed + 1, pl);
            len += pl;
            free(printed);
            i += run;
        } else {
            len += (size_t)snprintf(out + len, cap - len, "\\u%04x", s[i++]);
        }
    }
    out[len++] = '"';
    out[len] = 0;
    item = cJSON_CreateRaw(out);
done:
    free(out);
    return item;
}

void json_key(json_writer *w, const char *key)
{
    if (w->depth == 0 || !cJSON_IsObject(w->open[w->depth]) || w->key) {
        w->error = true;
        return;
    }
    /* cJSON escapes member names itself: a byte that is not valid UTF-8 becomes the
     * character U+00XX (the byte read as Latin-1, as in values, in UTF-8 form) */
    const unsigned char *k = (const unsigned char *)(key ? key : "");
    size_t n = strlen((const char *)k), len = 0;
    w->key = malloc(2 * n + 1);
    if (!w->key) {
        w->error = true;
        return;
    }
    for (size_t i = 0, l; i < n; i += l) {
        l = oq_utf8_len(k + i, n - i);
        if (l) {
            memcpy(w->key + len, k + i, l);
            len += l;
        } else {
            l = 1;
            w->key[len++] = (char)(0xc0 | (k[i] >> 6));
            w->key[len++] = (char)(0x80 | (k[i] & 0x3f));
        }
    }
    w->key[len] = 0;
}

void json_string_n(json_writer *w, const char *s, size_t n)
{
    if (!s)
        n = 0;
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    for (size_t i = 0, l; i < n; i += l)
        if ((l = irregular_len(u + i, n - i)) == 0) {
            attach(w, irregular_string(u, n));
            return;
        }
    char *copy = malloc(n + 1);
    if (copy) {
        memcpy(copy, u, n);
        copy[n] = 0;
    }
    attach(w, copy ? cJSON_CreateString(copy) : NULL);
    free(copy);
}

void json_string(json_writer *w, const char *s)
{
    if (!s) {
        json_null(w);
        return;
    }
    json_string_n(w, s, strlen(s));
}

static void number(json_writer *w, const char *text)
{
    attach(w, cJSON_CreateRaw(text));
}

void json_int(json_writer *w, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    number(w, buf);
}

void json_uint(json_writer *w, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    number(w, buf);
}

static bool nonfinite(json_writer *w, double v)
{
    if (isfinite(v))
        return false;
    if (w->nonfinite_null)
        json_null(w);
    else
        json_string(w, isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
    return true;
}

void json_double(json_writer *w, double v)
{
    char buf[64];
    if (nonfinite(w, v))
        return;
    snprintf(buf, sizeof buf, "%.9g", v);
    number(w, buf);
}

void json_float(json_writer *w, float v)
{
    if (nonfinite(w, v))
        return;
    char buf[64];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v)
            break;
    }
    number(w, buf);
}

void json_bool(json_writer *w, bool v)
{
    attach(w, cJSON_CreateBool(v));
}

void json_null(json_writer *w)
{
    attach(w, cJSON_CreateNull());
}

void json_kv_string(json_writer *w, const char *key, const char *s)
{
    json_key(w, key);
    json_string(w, s);
}

void json_kv_int(json_writer *w, const char *key, int64_t v)
{
    json_key(w, key);
    json_int(w, v);
}

void json_kv_double(json_writer *w, const char *key, double v)
{
    json_key(w, key);
    json_double(w, v);
}

void json_kv_bool(json_writer *w, const char *key, bool v)
{
    json_key(w, key);
    json_bool(w, v);
}

static void newline(FILE *f, int level, int indent)
{
    fputc('\n', f);
    for (int i = 0; i < level * indent; i++)
        fputc(' ', f);
}

/* Indented layout of cJSON's compact text: a line per member or element, except
 * inside inline containers (", " between items); ": " after names. Strings are copied
 * as they are; inl[k] says whether the k-th container of the text is inline. */
static void layout(const json_writer *w, const char *s)
{
    FILE *f = w->f;
    int level = 0, inline_level = 0; /* level of the outermost open inline container */
    size_t k = 0;
    for (const char *p = s; *p; p++) {
        switch (*p) {
        case '"': {
            const char *q = p + 1;
            for (; *q != '"'; q++)
                if (*q == '\\')
                    q++;
            fwrite(p, 1, (size_t)(q - p + 1), f);
            p = q;
            break;
        }
        case '{':
        case '[':
            fputc(*p, f);
            level++;
            if (!inline_level && k < w->n_inl && w->inl[k])
                inline_level = level;
            k++;
            if (p[1] != '}' && p[1] != ']' && !inline_level)
                newline(f, level, w->indent);
            break;
        case '}':
        case ']':
            level--;
            if (p[-1] != '{' && p[-1] != '[' && !inline_level)
                newline(f, level, w->indent);
            fputc(*p, f);
            if (inline_level > level)
                inline_level = 0;
            break;
        case ',':
            fputc(',', f);
            if (inline_level)
                fputc(' ', f);
            else
                newline(f, level, w->indent);
            break;
        case ':':
            fputs(": ", f);
            break;
        default:
            fputc(*p, f);
        }
    }
}

int json_finish(json_writer *w)
{
    if (w->depth != 0 || w->key)
        w->error = true;
    char *text = w->root ? cJSON_PrintUnformatted(w->root) : NULL;
    if (w->root && !text)
        w->error = true;
    if (text) {
        if (w->indent > 0)
            layout(w, text);
        else
            fputs(text, w->f);
    }
    fputc('\n', w->f);
    free(text);
    cJSON_Delete(w->root);
    free(w->key);
    free(w->inl);
    w->root = NULL;
    w->key = NULL;
    w->inl = NULL;
    w->depth = 0;
    if (fflush(w->f) != 0 || ferror(w->f))
        return -1;
    return w->error ? -1 : 0;
}
