/* libFuzzer target for the JSON reader (quantize --config and --overrides files, the
 * calibration table stored in model metadata): bytes -> oq_json_parse (cJSON behind
 * src/io/json.c), and the same text (up to its first NUL) -> oq_calib_table_from_json.
 * Any input may be rejected, but:
 *   - nothing may crash or trip ASan/UBSan,
 *   - a rejected input must return no document / an empty table and record an error,
 *   - an accepted document is a well-formed tree (every object member has a key,
 *     every string a value), and oq_json_get finds each member of an object,
 *   - an accepted calibration table writes (oq_calib_table_to_json) and reads back to
 *     the same names and the same float bits. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "onnxq/calib.h"
#include "onnxq/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t walk(const cJSON *j, int depth)
{
    if (depth > CJSON_NESTING_LIMIT + 1)
        abort();
    size_t n = 1;
    if (cJSON_IsString(j))
        n += strlen(j->valuestring);
    if (cJSON_IsArray(j) || cJSON_IsObject(j)) {
        const cJSON *m;
        cJSON_ArrayForEach(m, j) {
            if (cJSON_IsObject(j)) {
                if (!m->string || !oq_json_get(j, m->string))
                    abort();
                n += strlen(m->string);
            }
            n += walk(m, depth + 1);
        }
    }
    return n;
}

static int same_bits(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    oq_diag d;
    oq_diag_init(&d);
    cJSON *j = NULL;
    oq_status st = oq_json_parse((const char *)data, size, "fuzz.json", &j, &d);
    if (st != OQ_OK) {
        if (j || d.errors == 0)
            abort();
    } else {
        if (!j)
            abort();
        walk(j, 0);
        cJSON_Delete(j);
    }
    oq_diag_clear(&d);

    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    oq_calib_table t;
    st = oq_calib_table_from_json(text, &t, &d);
    free(text);
    if (st != OQ_OK) {
        if (t.count || t.items || d.errors == 0)
            abort();
        oq_diag_free(&d);
        return 0;
    }
    char *out = oq_calib_table_to_json(&t);
    if (out) {
        oq_calib_table u;
        if (oq_calib_table_from_json(out, &u, &d) != OQ_OK || u.count != t.count)
            abort();
        for (size_t i = 0; i < t.count; i++) {
            const oq_calib_entry *a = &t.items[i], *b = &u.items[i];
            if (strcmp(a->name, b->name) != 0 || !same_bits(a->min, b->min) ||
                !same_bits(a->max, b->max) || !same_bits(a->lo, b->lo) || !same_bits(a->hi, b->hi))
                abort();
        }
        if (u.samples != t.samples || u.method != t.method)
            abort();
        oq_calib_table_free(&u);
        free(out);
    }
    oq_calib_table_free(&t);
    oq_diag_free(&d);
    return 0;
}
