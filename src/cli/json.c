/* Streaming JSON writer: see json.h. */
#include "cli/json.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void json_init(json_writer *w, FILE *f, int indent)
{
    memset(w, 0, sizeof *w);
    w->f = f;
    w->indent = indent < 0 ? 0 : indent;
}

static bool pretty(const json_writer *w)
{
    return w->indent > 0 && w->inline_depth == 0;
}

static void newline(json_writer *w, int level)
{
    if (!pretty(w))
        return;
    fputc('\n', w->f);
    for (int i = 0; i < level * w->indent; i++)
        fputc(' ', w->f);
}

static void separator(json_writer *w)
{
    if (w->has_items[w->depth])
        fputs(w->inline_depth && w->indent > 0 ? ", " : ",", w->f);
    newline(w, w->depth);
    w->has_items[w->depth] = true;
}

/* Called before every value: handles "key": already written, commas, indentation. */
static void before_value(json_writer *w)
{
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (w->depth == 0) {
        if (w->has_items[0])
            w->error = true; /* a second top-level value */
        w->has_items[0] = true;
        return;
    }
    if (w->is_object[w->depth])
        w->error = true; /* value in an object without a key */
    separator(w);
}

static void begin(json_writer *w, bool object, bool inl)
{
    before_value(w);
    if (w->depth + 1 >= JSON_MAX_DEPTH) {
        w->error = true;
        return;
    }
    fputc(object ? '{' : '[', w->f);
    w->depth++;
    w->has_items[w->depth] = false;
    w->is_object[w->depth] = object;
    if (inl && w->inline_depth == 0)
        w->inline_depth = w->depth;
}

static void end(json_writer *w, bool object)
{
    if (w->depth == 0 || w->is_object[w->depth] != object || w->after_key) {
        w->error = true;
        return;
    }
    bool items = w->has_items[w->depth];
    bool was_inline = w->inline_depth != 0;
    if (w->inline_depth == w->depth)
        w->inline_depth = 0;
    w->depth--;
    if (items && !was_inline)
        newline(w, w->depth);
    fputc(object ? '}' : ']', w->f);
}

void json_begin_object(json_writer *w) { begin(w, true, false); }
void json_begin_array(json_writer *w) { begin(w, false, false); }
void json_begin_array_inline(json_writer *w) { begin(w, false, true); }
void json_begin_object_inline(json_writer *w) { begin(w, true, true); }
void json_end_object(json_writer *w) { end(w, true); }
void json_end_array(json_writer *w) { end(w, false); }

size_t json_utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

static void write_escaped(json_writer *w, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', w->f);
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        switch (c) {
        case '"': fputs("\\\"", w->f); i++; continue;
        case '\\': fputs("\\\\", w->f); i++; continue;
        case '\n': fputs("\\n", w->f); i++; continue;
        case '\r': fputs("\\r", w->f); i++; continue;
        case '\t': fputs("\\t", w->f); i++; continue;
        case '\b': fputs("\\b", w->f); i++; continue;
        case '\f': fputs("\\f", w->f); i++; continue;
        default: break;
        }
        if (c < 0x20 || c == 0x7f) {
            fprintf(w->f, "\\u%04x", c);
            i++;
            continue;
        }
        size_t len = json_utf8_len(s + i, n - i);
        if (len == 0) {
            fprintf(w->f, "\\u%04x", c); /* invalid UTF-8: the byte as Latin-1 */
            i++;
            continue;
        }
        fwrite(s + i, 1, len, w->f);
        i += len;
    }
    fputc('"', w->f);
}

void json_key(json_writer *w, const char *key)
{
    if (w->depth == 0 || !w->is_object[w->depth] || w->after_key) {
        w->error = true;
        return;
    }
    separator(w);
    write_escaped(w, key ? key : "", key ? strlen(key) : 0);
    fputs(w->indent > 0 ? ": " : ":", w->f);
    w->after_key = true;
}

void json_string_n(json_writer *w, const char *s, size_t n)
{
    before_value(w);
    write_escaped(w, s ? s : "", s ? n : 0);
}

void json_string(json_writer *w, const char *s)
{
    if (!s) {
        json_null(w);
        return;
    }
    json_string_n(w, s, strlen(s));
}

void json_int(json_writer *w, int64_t v)
{
    before_value(w);
    fprintf(w->f, "%" PRId64, v);
}

void json_uint(json_writer *w, uint64_t v)
{
    before_value(w);
    fprintf(w->f, "%" PRIu64, v);
}

static bool nonfinite(json_writer *w, double v)
{
    if (isfinite(v))
        return false;
    if (w->nonfinite_null)
        fputs("null", w->f);
    else if (isnan(v))
        fputs("\"NaN\"", w->f);
    else
        fputs(v > 0 ? "\"Infinity\"" : "\"-Infinity\"", w->f);
    return true;
}

void json_double(json_writer *w, double v)
{
    before_value(w);
    if (!nonfinite(w, v))
        fprintf(w->f, "%.9g", v);
}

void json_float(json_writer *w, float v)
{
    before_value(w);
    if (nonfinite(w, v))
        return;
    char buf[64];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v)
            break;
    }
    fputs(buf, w->f);
}

void json_bool(json_writer *w, bool v)
{
    before_value(w);
    fputs(v ? "true" : "false", w->f);
}

void json_null(json_writer *w)
{
    before_value(w);
    fputs("null", w->f);
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

int json_finish(json_writer *w)
{
    if (w->depth != 0 || w->after_key)
        w->error = true;
    fputc('\n', w->f);
    if (fflush(w->f) != 0 || ferror(w->f))
        return -1;
    return w->error ? -1 : 0;
}
