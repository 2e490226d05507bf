/* onnxq — text of models for people (dump's text and Graphviz, type strings): a growing
 * string buffer and the escaping and type formats the outputs share. Private to
 * libonnxq and the program (not installed); include/onnxq/inspect.h has the public
 * type-text functions. */
#ifndef ONNXQ_IR_TEXT_H
#define ONNXQ_IR_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnxq/ir.h"

/* A malloc'ed, NUL-terminated string that grows; zero-initialize. oom: an allocation
 * failed (later appends are dropped). */
typedef struct oq_sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} oq_sbuf;

void oq_sb_add(oq_sbuf *b, const char *s, size_t n);
void oq_sb_puts(oq_sbuf *b, const char *s);
void oq_sb_printf(oq_sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
const char *oq_sb_str(const oq_sbuf *b); /* "" when empty */
void oq_sb_reset(oq_sbuf *b);
void oq_sb_free(oq_sbuf *b);

/* Text with C-style escapes for control characters, `"`, `\` and invalid UTF-8
 * (\xNN); quoted when `quote`. */
void oq_sb_escaped(oq_sbuf *b, const char *s, size_t n, bool quote);
/* A name: bare when made of plain characters (letters, digits, _.:/-+@#[]()<>), else
 * quoted and escaped (also the empty name). */
void oq_sb_name_n(oq_sbuf *b, const char *s, size_t n);
void oq_sb_name(oq_sbuf *b, const char *s);
/* Free text (producer, doc string, metadata): escaped, not quoted. */
void oq_sb_text(oq_sbuf *b, const char *s);
/* Shortest %g form that reads back to the same float32 (f32) or double; nan, inf. */
void oq_sb_real(oq_sbuf *b, double v, bool f32);
void oq_sb_dims(oq_sbuf *b, const int64_t *dims, size_t rank);     /* [1, 3, 24, 24] */
/* float32[1, 3, N, ?]; "[...]" when the rank is unknown, "[]" for a scalar; seq(...),
 * optional(...), map(K, V), opaque(domain.name); "?" for NULL. */
void oq_sb_type(oq_sbuf *b, const oq_type *t);
/* Best known type of a value: its type, else its initializer's or Constant's dtype and
 * dims. False (nothing written) when unknown. */
bool oq_sb_value_type(oq_sbuf *b, const oq_value *v);

/* Length of the valid UTF-8 sequence starting at s (at most n bytes), 0 if invalid
 * (overlong, surrogate, > U+10FFFF, truncated). n must be >= 1. */
size_t oq_utf8_len(const unsigned char *s, size_t n);

#endif
