/* Text of models for people: ir/text.h. */
#include "ir/text.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t oq_utf8_len(const unsigned char *s, size_t n)
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

void oq_sb_add(oq_sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void oq_sb_puts(oq_sbuf *b, const char *s) { oq_sb_add(b, s, strlen(s)); }

void oq_sb_printf(oq_sbuf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        oq_sb_add(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    oq_sb_add(b, big, (size_t)n);
    free(big);
}

const char *oq_sb_str(const oq_sbuf *b) { return b->p ? b->p : ""; }
void oq_sb_reset(oq_sbuf *b) { b->len = 0; if (b->p) b->p[0] = '\0'; }
void oq_sb_free(oq_sbuf *b) { free(b->p); memset(b, 0, sizeof *b); }

/* A name in text output: bare when it is made of plain characters, else quoted with
 * C-style escapes (also for the empty name). */
void oq_sb_name_n(oq_sbuf *b, const char *s, size_t n)
{
    bool plain = n > 0;
    for (size_t i = 0; i < n && plain; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("_.:/-+@#[]()<>", c)))
            plain = false;
    }
    if (plain)
        oq_sb_add(b, s, n);
    else
        oq_sb_escaped(b, s, n, true);
}

void oq_sb_escaped(oq_sbuf *b, const char *s, size_t n, bool quote)
{
    if (quote)
        oq_sb_puts(b, "\"");
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if ((c == '"' && quote) || c == '\\') {
            char e[2] = {'\\', (char)c};
            oq_sb_add(b, e, 2);
            i++;
        } else if (c == '\n') {
            oq_sb_puts(b, "\\n");
            i++;
        } else if (c == '\t') {
            oq_sb_puts(b, "\\t");
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            oq_sb_printf(b, "\\x%02x", c);
            i++;
        } else {
            size_t len = oq_utf8_len((const unsigned char *)s + i, n - i);
            if (len == 0) {
                oq_sb_printf(b, "\\x%02x", c);
                i++;
            } else {
                oq_sb_add(b, s + i, len);
                i += len;
            }
        }
    }
    if (quote)
        oq_sb_puts(b, "\"");
}

/* Free text (producer, doc string, metadata): escaped but not quoted. */
void oq_sb_text(oq_sbuf *b, const char *s)
{
    oq_sb_escaped(b, s ? s : "", s ? strlen(s) : 0, false);
}

void oq_sb_name(oq_sbuf *b, const char *s) { oq_sb_name_n(b, s ? s : "", s ? strlen(s) : 0); }

/* Shortest %g form that reads back to the same value (float32 or double). */
void oq_sb_real(oq_sbuf *b, double v, bool f32)
{
    if (isnan(v)) {
        oq_sb_puts(b, "nan");
        return;
    }
    if (isinf(v)) {
        oq_sb_puts(b, v > 0 ? "inf" : "-inf");
        return;
    }
    char buf[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (f32 ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v)
            break;
    }
    oq_sb_puts(b, buf);
}

/* ---------------------------------------------------------------- types, values -- */

void oq_sb_dims(oq_sbuf *b, const int64_t *dims, size_t rank)
{
    oq_sb_puts(b, "[");
    for (size_t i = 0; i < rank; i++)
        oq_sb_printf(b, "%s%" PRId64, i ? ", " : "", dims[i]);
    oq_sb_puts(b, "]");
}

/* float32[1, 3, N, ?]; "[...]" when the rank is unknown, "[]" for a scalar. */
void oq_sb_type(oq_sbuf *b, const oq_type *t)
{
    if (!t) {
        oq_sb_puts(b, "?");
        return;
    }
    switch (t->kind) {
    case OQ_TYPE_TENSOR:
    case OQ_TYPE_SPARSE_TENSOR:
        if (t->kind == OQ_TYPE_SPARSE_TENSOR)
            oq_sb_puts(b, "sparse ");
        oq_sb_puts(b, t->has_elem_type ? oq_dtype_name(t->elem_type) : "?");
        if (!t->shape) {
            oq_sb_puts(b, "[...]");
            break;
        }
        oq_sb_puts(b, "[");
        for (size_t i = 0; i < t->shape->rank; i++) {
            const oq_dim *d = &t->shape->dims[i];
            if (i)
                oq_sb_puts(b, ", ");
            if (d->kind == OQ_DIM_VALUE)
                oq_sb_printf(b, "%" PRId64, d->value);
            else if (d->kind == OQ_DIM_PARAM && d->param)
                oq_sb_name(b, d->param);
            else
                oq_sb_puts(b, "?");
        }
        oq_sb_puts(b, "]");
        break;
    case OQ_TYPE_SEQUENCE:
        oq_sb_puts(b, "seq(");
        oq_sb_type(b, t->elem);
        oq_sb_puts(b, ")");
        break;
    case OQ_TYPE_OPTIONAL:
        oq_sb_puts(b, "optional(");
        oq_sb_type(b, t->elem);
        oq_sb_puts(b, ")");
        break;
    case OQ_TYPE_MAP:
        oq_sb_printf(b, "map(%s, ", t->has_key_type ? oq_dtype_name(t->key_type) : "?");
        oq_sb_type(b, t->elem);
        oq_sb_puts(b, ")");
        break;
    case OQ_TYPE_OPAQUE:
        oq_sb_printf(b, "opaque(%s%s%s)", t->opaque_domain ? t->opaque_domain : "",
                  t->opaque_domain && *t->opaque_domain ? "." : "",
                  t->opaque_name ? t->opaque_name : "");
        break;
    default:
        oq_sb_puts(b, "?");
        break;
    }
}

static bool is_constant_node(const oq_node *n)
{
    return n && n->op_type && strcmp(n->op_type, "Constant") == 0 &&
           oq_domain_is_default(n->domain);
}

/* The tensor a Constant node holds in its "value" attribute, or NULL. */
static oq_tensor *constant_tensor(const oq_node *n)
{
    if (!is_constant_node(n))
        return NULL;
    oq_attr *a = oq_node_attr(n, "value");
    return a && a->t ? a->t : NULL;
}

/* Best known type of a value as text; false (nothing written) when unknown. */
bool oq_sb_value_type(oq_sbuf *b, const oq_value *v)
{
    if (!v)
        return false;
    if (v->type) {
        oq_sb_type(b, v->type);
        return true;
    }
    const oq_tensor *t = v->initializer;
    if (!t && v->kind == OQ_VALUE_NODE && v->producer_index == 0)
        t = constant_tensor(v->producer);
    if (t) {
        oq_sb_puts(b, oq_dtype_name(t->dtype));
        oq_sb_dims(b, t->dims, t->rank);
        return true;
    }
    return false;
}

