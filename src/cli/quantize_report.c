/* onnxq quantize --json: the summary of a run. */
#include "cli/quantize_report.h"

#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

void cli_qreport_after_pass(const oq_pass_event *ev, oq_model *m, void *user)
{
    cli_qreport *r = user;
    (void)m;
    if (r->n >= CLI_QREPORT_MAX_PASSES)
        return;
    snprintf(r->names[r->n], sizeof r->names[r->n], "%s", ev->pass->name);
    r->results[r->n] = *ev->result;
    r->secs[r->n] = ev->seconds;
    r->n++;
}

int cli_qreport_write(const cli_qreport *r, const char *path, const char *in, const char *out,
                      oq_status st, void (*config)(json_writer *w, const void *cfg), const void *cfg)
{
    cli_output dst;
    if (cli_output_open("quantize", &dst, path) != CLI_OK)
        return CLI_FAIL;
    json_writer w;
    json_init(&w, dst.f, 2);
    json_begin_object(&w);
    json_kv_int(&w, "version", 1);
    json_kv_string(&w, "input", in);
    json_kv_string(&w, "output", st == OQ_OK ? out : NULL);
    json_kv_string(&w, "status", oq_status_name(st));
    json_key(&w, "config");
    config(&w, cfg);
    double total = 0;
    json_key(&w, "passes");
    json_begin_array(&w);
    for (size_t i = 0; i < r->n; i++) {
        const oq_pass_result *pr = &r->results[i];
        total += r->secs[i];
        json_begin_object(&w);
        json_kv_string(&w, "name", r->names[i]);
        json_kv_bool(&w, "changed", pr->changed);
        json_kv_double(&w, "seconds", r->secs[i]);
        json_key(&w, "stats");
        json_begin_object(&w);
        for (size_t k = 0; k < pr->n_stats; k++)
            json_kv_int(&w, pr->stats[k].name, pr->stats[k].value);
        json_end_object(&w);
        json_end_object(&w);
    }
    json_end_array(&w);
    json_kv_double(&w, "seconds", total);
    json_key(&w, "fallback");
    if (r->fallback) {
        json_begin_object(&w);
        json_kv_bool(&w, "target_met", r->fallback_met);
        json_end_object(&w);
    } else {
        json_null(&w);
    }
    json_end_object(&w);
    int jr = json_finish(&w);
    int rc = cli_output_close("quantize", &dst);
    return jr == 0 ? rc : CLI_FAIL;
}
