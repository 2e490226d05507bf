/* onnxq quantize --json: the summary of a run. */
#include "cli/quantize_report.h"

#include <stdlib.h>
#include <string.h>

#include "onnxq/calib.h"

char *cli_take_metadata(oq_model *m, const char *key)
{
    for (size_t i = 0; i < m->metadata.count; i++) {
        oq_kv *kv = &m->metadata.items[i];
        if (!kv->key || strcmp(kv->key, key) != 0)
            continue;
        char *v = strdup(kv->value ? kv->value : "");
        memmove(kv, kv + 1, (m->metadata.count - i - 1) * sizeof(oq_kv));
        m->metadata.count--;
        return v;
    }
    return NULL;
}

/* A parsed JSON value written back (the pass's record, embedded in the report). */
static void write_value(json_writer *w, const oq_json *j)
{
    switch (j->type) {
    case OQ_JSON_BOOL: json_bool(w, j->b); break;
    case OQ_JSON_NUMBER: json_double(w, j->num); break;
    case OQ_JSON_STRING: json_string(w, j->str); break;
    case OQ_JSON_ARRAY:
        json_begin_array(w);
        for (size_t i = 0; i < j->n; i++)
            write_value(w, &j->items[i]);
        json_end_array(w);
        break;
    case OQ_JSON_OBJECT:
        json_begin_object(w);
        for (size_t i = 0; i < j->n; i++) {
            json_key(w, j->keys[i]);
            write_value(w, &j->items[i]);
        }
        json_end_object(w);
        break;
    default: json_null(w); break;
    }
}

int cli_qreport_write(const cli_qreport *r, const char *path, const char *in, const char *out,
                      oq_status st, void (*config)(json_writer *w, const void *cfg), const void *cfg)
{
    cli_report rep;
    if (cli_report_open(&rep, "quantize", path, 2) != CLI_OK)
        return CLI_FAIL;
    json_writer *w = &rep.w;
    json_kv_string(w, "input", in);
    json_kv_string(w, "output", st == OQ_OK ? out : NULL);
    json_kv_string(w, "status", oq_status_name(st));
    json_key(w, "config");
    config(w, cfg);
    cli_report_passes(w, &r->passes);
    json_key(w, "smooth_quant"); /* null: not run */
    oq_json *sq = NULL;
    if (r->smooth_quant && oq_json_parse(r->smooth_quant, strlen(r->smooth_quant), "smooth-quant record", &sq, NULL) == OQ_OK)
        write_value(w, sq);
    else
        json_null(w);
    oq_json_free(sq);
    json_key(w, "fallback");
    if (r->fallback) {
        json_begin_object(w);
        json_kv_bool(w, "target_met", r->fallback_met);
        json_end_object(w);
    } else {
        json_null(w);
    }
    return cli_report_close(&rep);
}
