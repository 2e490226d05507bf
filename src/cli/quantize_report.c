/* onnxq quantize --json: the summary of a run. */
#include "cli/quantize_report.h"

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
