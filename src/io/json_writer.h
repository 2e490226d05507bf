/* The JSON writer of the onnxq commands (dump, verify, ...): calls in document order
 * build a cJSON tree (libcjson, README: Dependencies), written by json_finish.
 *
 *   json_writer w;
 *   json_init(&w, stdout, 2);          // indent 2 spaces; 0 = compact, one line
 *   json_begin_object(&w);
 *   json_key(&w, "name"); json_string(&w, "conv1");
 *   json_key(&w, "dims"); json_begin_array_inline(&w);
 *   json_int(&w, 64); json_int(&w, 3);
 *   json_end_array(&w);
 *   json_end_object(&w);
 *   if (json_finish(&w) != 0) ...     // writes the document and a newline, frees the
 *                                     // tree; reports misuse/I/O
 *
 * Compact documents are cJSON's own output; indented ones are laid out from it, one
 * member a line. An "inline" container is printed on one line even in indented mode
 * (for short lists of numbers).
 *
 * Values:
 *  - strings are written as UTF-8 with `"` `\` and control characters escaped
 *    (\n \t \r \b \f, others as \u00XX); bytes that are not valid UTF-8, and DEL,
 *    are written as \u00XX (the byte read as Latin-1), so the output is always valid
 *    JSON; in member names such a byte is the same character written in UTF-8;
 *  - json_int / json_uint print exact integers;
 *  - json_double prints %.9g; json_float prints the shortest %.Ng (N <= 9) that reads
 *    back to the same float32 (numbers are cJSON raw items: printed as formatted here);
 *  - NaN and +-Inf: by default the strings "NaN", "Infinity", "-Infinity"
 *    (JSON has no literal for them); with w.nonfinite_null = true they are null.
 */
#ifndef ONNXQ_IO_JSON_WRITER_H
#define ONNXQ_IO_JSON_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 1024

typedef struct json_writer {
    FILE *f;
    int indent;               /* spaces per level; 0 = compact */
    bool nonfinite_null;      /* NaN/Inf as null instead of strings */
    int depth;
    struct cJSON *root;       /* the document so far */
    struct cJSON *open[JSON_MAX_DEPTH]; /* open containers, open[1] = the outermost */
    char *key;                /* after json_key: the member's name (malloc'ed) */
    unsigned char *inl;       /* per container in document order: printed inline */
    size_t n_inl, cap_inl;
    bool error;               /* misuse (value without key, unbalanced, too deep), or
                               * out of memory */
} json_writer;

void json_init(json_writer *w, FILE *f, int indent);
void json_begin_object(json_writer *w);
void json_begin_array(json_writer *w);
void json_begin_array_inline(json_writer *w);
void json_begin_object_inline(json_writer *w);
void json_end_object(json_writer *w);
void json_end_array(json_writer *w);
void json_key(json_writer *w, const char *key);

void json_string(json_writer *w, const char *s);           /* NULL writes null */
void json_string_n(json_writer *w, const char *s, size_t n);
void json_int(json_writer *w, int64_t v);
void json_uint(json_writer *w, uint64_t v);
void json_double(json_writer *w, double v);
void json_float(json_writer *w, float v);
void json_bool(json_writer *w, bool v);
void json_null(json_writer *w);

/* Shorthands for "key": value inside an object. */
void json_kv_string(json_writer *w, const char *key, const char *s);
void json_kv_int(json_writer *w, const char *key, int64_t v);
void json_kv_double(json_writer *w, const char *key, double v);
void json_kv_bool(json_writer *w, const char *key, bool v);

/* Writes the document (as far as it was built: values given by misuse are dropped) and a
 * newline, and frees the tree; returns 0, or -1 on misuse, out of memory or a write
 * error. Every json_init needs its json_finish (the tree is freed there). */
int json_finish(json_writer *w);

#endif
