/* Reading JSON documents (--config and --overrides files, the calibration table in
 * model metadata, fallback steps) with cJSON (libcjson, README: Dependencies). Private
 * to libonnxq and the program: no cJSON type appears in include/onnxq/.
 *
 *   cJSON *j;
 *   if (oq_json_parse_file("cfg.json", &j, d) != OQ_OK) ...   // one line naming the
 *   const cJSON *v = oq_json_get(j, "method");                 // file, line and column
 *   if (cJSON_IsString(v)) ... v->valuestring ...
 *   cJSON_Delete(j);
 *
 * Numbers are doubles (valuedouble); one beyond double range reads as +-infinity, the
 * spelling onnxq's writers use for it (1e999): readers that need finite values check. */
#ifndef ONNXQ_IO_JSON_H
#define ONNXQ_IO_JSON_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "onnxq/status.h"

/* Parse a whole document (RFC 8259; nesting depth <= CJSON_NESTING_LIMIT, 1000). `what`
 * names it in errors: "config.json: line 3, column 7: invalid JSON at ':'". NUL bytes
 * and anything after the document are refused. *out: free with cJSON_Delete. */
oq_status oq_json_parse(const char *text, size_t len, const char *what, cJSON **out,
                        oq_diag *d);
/* The same for a file (at most 256 MiB); errors name the path. */
oq_status oq_json_parse_file(const char *path, cJSON **out, oq_diag *d);
/* Member `key` of an object (the last one of that name, as before cJSON: RFC 8259
 * leaves duplicates to the reader), or NULL (also when obj is not an object). */
const cJSON *oq_json_get(const cJSON *obj, const char *key);

/* Writing: add the JSON text `text` (a number as onnxq formats it: "%.9g", "1e999")
 * as member `key` of object `to`, or as the next element of array `to` (key NULL).
 * cJSON prints it as it is. False when out of memory. */
bool oq_json_add_raw(cJSON *to, const char *key, const char *text);

#endif
