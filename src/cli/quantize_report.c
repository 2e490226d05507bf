/* onnxq quantize --json: the summary of a run. */
#include "cli/quantize_report.h"

#include <stdlib.h>
#include <string.h>

#include "io/json.h"
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
static void write_value(json_writer *w, const cJSON *j)
{
    if (cJSON_IsBool(j)) {
        json_bool(w, cJSON_IsTrue(j));
    } else if (cJSON_IsNumber(j)) {
        json_double(w, j->valuedouble);
    } else if (cJSON_IsString(j)) {
        json_string(w, j->valuestring);
    } else if (cJSON_IsArray(j)) {
        json_begin_array(w);
        for (const cJSON *e = j->child; e; e = e->next)
            write_value(w, e);
        json_end_array(w);
    } else if (cJSON_IsObject(j)) {
        json_begin_object(w);
        for (const cJSON *e = j->child; e; e = e->next) {
            json_key(w, e->string);
            write_value(w, e);
        }
        json_end_object(w);
    } else {
        json_null(w);
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
    cJSON *sq = NULL;
    if (r->smooth_quant && oq_json_parse(r->smooth_quant, strlen(r->smooth_quant), "smooth-quant record", &sq, NULL) == OQ_OK)
        write_value(w, sq);
    else
        json_null(w);
    cJSON_Delete(sq);
    json_key(w, "bias_correction"); /* null: not run */
    if (r->bias_correction) {
        json_begin_object(w);
        json_kv_int(w, "layers", (int64_t)r->bias.layers);
        json_kv_int(w, "changed", (int64_t)r->bias.changed);
        json_kv_int(w, "skipped", (int64_t)r->bias.skipped);
        json_kv_int(w, "samples", (int64_t)r->bias.samples);
        json_kv_double(w, "mean_abs_steps", r->bias.mean_abs_steps);
        json_kv_double(w, "max_relative_shift", r->bias.max_rel_shift);
        json_kv_string(w, "max_relative_shift_node", r->bias.max_rel_node);
        json_kv_double(w, "seconds", r->bias_seconds);
        json_end_object(w);
    } else {
        json_null(w);
    }
    json_key(w, "fallback");
    if (r->fallback) {
        json_begin_object(w);
        json_kv_bool(w, "target_met", r->fallback_met);
        json_end_object(w);
    } else {
        json_null(w);
    }
    /* every note and warning, also those the terminal showed as one line per kind */
    json_key(w, "diagnostics");
    json_begin_array(w);
    for (size_t i = 0; r->diag && i < r->diag->count; i++) {
        const oq_diag_entry *e = &r->diag->entries[i];
        json_begin_object(w);
        json_kv_string(w, "severity", e->severity == OQ_SEV_ERROR     ? "error"
                                      : e->severity == OQ_SEV_WARNING ? "warning"
                                                                      : "note");
        json_kv_string(w, "node", e->node);
        json_kv_string(w, "op", e->op);
        json_kv_string(w, "message", e->message);
        json_end_object(w);
    }
    json_end_array(w);
    return cli_report_close(&rep);
}
