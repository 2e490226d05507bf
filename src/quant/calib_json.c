/* A small JSON reader (RFC 8259) for --config files, override files and the
 * calibration table in metadata. Recursive descent, depth-limited, one error line with
 * the line number. */
#include "onnxq/calib.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_DEPTH 256

typedef struct jp {
    const char *s, *end, *start;
    const char *what;
    oq_diag *d;
    oq_status st;
} jp;

static int line_of(const jp *p)
{
    int line = 1;
    for (const char *c = p->start; c < p->s; c++)
        line += *c == '\n';
    return line;
}

static bool fail(jp *p, const char *msg)
{
    if (p->st == OQ_OK)
        p->st = oq_diag_error(p->d, OQ_ERR_PARSE, "%s: line %d: %s", p->what,
                              line_of(p), msg);
    return false;
}

static void ws(jp *p)
{
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
        p->s++;
}

static void jfree(oq_json *j)
{
    if (!j)
        return;
    free(j->str);
    for (size_t i = 0; i < j->n; i++) {
        jfree(&j->items[i]);
        if (j->keys)
            free(j->keys[i]);
    }
    free(j->items);
    free(j->keys);
}

static int hexv(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool parse_string(jp *p, char **out)
{
    p->s++; /* opening quote */
    size_t cap = 16, len = 0;
    char *b = malloc(cap);
    if (!b)
        return fail(p, "out of memory");
    while (1) {
        if (p->s >= p->end) {
            free(b);
            return fail(p, "unterminated string");
        }
        unsigned char c = (unsigned char)*p->s++;
        char tmp[4];
        size_t tl = 1;
        if (c == '"')
            break;
        if (c < 0x20) {
            free(b);
            return fail(p, "control character in string");
        }
        if (c == '\\') {
            if (p->s >= p->end) {
                free(b);
                return fail(p, "unterminated string");
            }
            char e = *p->s++;
            switch (e) {
            case '"': tmp[0] = '"'; break;
            case '\\': tmp[0] = '\\'; break;
            case '/': tmp[0] = '/'; break;
            case 'b': tmp[0] = '\b'; break;
            case 'f': tmp[0] = '\f'; break;
            case 'n': tmp[0] = '\n'; break;
            case 'r': tmp[0] = '\r'; break;
            case 't': tmp[0] = '\t'; break;
            case 'u': {
                unsigned cp = 0;
                for (int k = 0; k < 4; k++) {
                    int h = p->s < p->end ? hexv(*p->s) : -1;
                    if (h < 0) {
                        free(b);
                        return fail(p, "bad \\u escape");
                    }
                    cp = cp * 16 + (unsigned)h;
                    p->s++;
                }
                if (cp >= 0xD800 && cp <= 0xDBFF && p->end - p->s >= 6 && p->s[0] == '\\' && p->s[1] == 'u') {
                    unsigned lo = 0;
                    bool ok = true;
                    for (int k = 0; k < 4; k++) {
                        int h = hexv(p->s[2 + k]);
                        ok = ok && h >= 0;
                        lo = lo * 16 + (unsigned)(h < 0 ? 0 : h);
                    }
                    if (ok && lo >= 0xDC00 && lo <= 0xDFFF) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        p->s += 6;
                    }
                }
                if (cp == 0) {
                    free(b);
                    return fail(p, "\\u0000 in a string is not supported");
                }
                if (cp < 0x80) {
                    tmp[0] = (char)cp;
                } else if (cp < 0x800) {
                    tmp[0] = (char)(0xC0 | (cp >> 6));
                    tmp[1] = (char)(0x80 | (cp & 0x3F));
                    tl = 2;
                } else if (cp < 0x10000) {
                    tmp[0] = (char)(0xE0 | (cp >> 12));
                    tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
                    tmp[2] = (char)(0x80 | (cp & 0x3F));
                    tl = 3;
                } else {
                    tmp[0] = (char)(0xF0 | (cp >> 18));
                    tmp[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
                    tmp[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
                    tmp[3] = (char)(0x80 | (cp & 0x3F));
                    tl = 4;
                }
                break;
            }
            default:
                free(b);
                return fail(p, "bad escape in string");
            }
        } else {
            tmp[0] = (char)c;
        }
        if (len + tl + 1 > cap) {
            cap *= 2;
            char *nb = realloc(b, cap);
            if (!nb) {
                free(b);
                return fail(p, "out of memory");
            }
            b = nb;
        }
        memcpy(b + len, tmp, tl);
        len += tl;
    }
    b[len] = 0;
    *out = b;
    return true;
}

static bool parse_value(jp *p, oq_json *j, int depth);

static bool push(jp *p, oq_json *j, size_t *cap, char *key)
{
    if (j->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        oq_json *ni = realloc(j->items, nc * sizeof(oq_json));
        if (!ni)
            return fail(p, "out of memory");
        j->items = ni;
        if (j->type == OQ_JSON_OBJECT) {
            char **nk = realloc(j->keys, nc * sizeof(char *));
            if (!nk)
                return fail(p, "out of memory");
            j->keys = nk;
        }
        *cap = nc;
    }
    memset(&j->items[j->n], 0, sizeof(oq_json));
    if (j->type == OQ_JSON_OBJECT)
        j->keys[j->n] = key;
    j->n++;
    return true;
}

static bool parse_value(jp *p, oq_json *j, int depth)
{
    ws(p);
    if (depth > JSON_DEPTH)
        return fail(p, "nested too deeply");
    if (p->s >= p->end)
        return fail(p, "unexpected end of input");
    char c = *p->s;
    if (c == '{' || c == '[') {
        bool obj = c == '{';
        j->type = obj ? OQ_JSON_OBJECT : OQ_JSON_ARRAY;
        p->s++;
        size_t cap = 0;
        ws(p);
        if (p->s < p->end && *p->s == (obj ? '}' : ']')) {
            p->s++;
            return true;
        }
        while (1) {
            char *key = NULL;
            ws(p);
            if (obj) {
                if (p->s >= p->end || *p->s != '"')
                    return fail(p, "expected a string key");
                if (!parse_string(p, &key))
                    return false;
                ws(p);
                if (p->s >= p->end || *p->s != ':') {
                    free(key);
                    return fail(p, "expected ':'");
                }
                p->s++;
            }
            if (!push(p, j, &cap, key)) {
                free(key);
                return false;
            }
            if (!parse_value(p, &j->items[j->n - 1], depth + 1))
                return false;
            ws(p);
            if (p->s < p->end && *p->s == ',') {
                p->s++;
                continue;
            }
            if (p->s < p->end && *p->s == (obj ? '}' : ']')) {
                p->s++;
                return true;
            }
            return fail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    if (c == '"') {
        j->type = OQ_JSON_STRING;
        return parse_string(p, &j->str);
    }
    if (p->end - p->s >= 4 && memcmp(p->s, "true", 4) == 0) {
        j->type = OQ_JSON_BOOL;
        j->b = true;
        p->s += 4;
        return true;
    }
    if (p->end - p->s >= 5 && memcmp(p->s, "false", 5) == 0) {
        j->type = OQ_JSON_BOOL;
        p->s += 5;
        return true;
    }
    if (p->end - p->s >= 4 && memcmp(p->s, "null", 4) == 0) {
        j->type = OQ_JSON_NULL;
        p->s += 4;
        return true;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char buf[64];
        size_t k = 0;
        while (p->s < p->end && k < sizeof buf - 1 &&
               (strchr("+-.eE", *p->s) || (*p->s >= '0' && *p->s <= '9')))
            buf[k++] = *p->s++;
        buf[k] = 0;
        char *e;
        errno = 0;
        j->type = OQ_JSON_NUMBER;
        j->num = strtod(buf, &e);
        if (*e || k == 0)
            return fail(p, "bad number");
        /* a number beyond double range (1e999) reads as infinity: JSON has no infinity, and
         * onnxq's writers spell it that way (fallback steps, verify reports), as Python's
         * json module reads it. Readers that need finite values check them (calibration
         * tables refuse anything beyond float range). */
        return true;
    }
    return fail(p, "unexpected character");
}

oq_status oq_json_parse(const char *text, size_t len, const char *what, oq_json **out,
                        oq_diag *d)
{
    *out = NULL;
    jp p = {text, text + len, text, what ? what : "JSON", d, OQ_OK};
    oq_json *j = calloc(1, sizeof(*j));
    if (!j)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    if (parse_value(&p, j, 0)) {
        ws(&p);
        if (p.s != p.end)
            fail(&p, "trailing characters after the document");
    }
    if (p.st != OQ_OK) {
        oq_json_free(j);
        return p.st;
    }
    *out = j;
    return OQ_OK;
}

oq_status oq_json_parse_file(const char *path, oq_json **out, oq_diag *d)
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
    fclose(f);
    if (!b)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    oq_status st = oq_json_parse(b, len, path, out, d);
    free(b);
    return st;
}

void oq_json_free(oq_json *j)
{
    if (!j)
        return;
    jfree(j);
    free(j);
}

const oq_json *oq_json_get(const oq_json *obj, const char *key)
{
    if (!obj || obj->type != OQ_JSON_OBJECT)
        return NULL;
    for (size_t i = obj->n; i-- > 0;)
        if (strcmp(obj->keys[i], key) == 0)
            return &obj->items[i];
    return NULL;
}
