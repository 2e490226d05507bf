/* JSON reports of the commands: open/close and the pass list (opt, quantize). */
#include "cli/report.h"

#include <stdio.h>
#include <string.h>

int cli_report_open(cli_report *r, const char *cmd, const char *path, int indent)
{
    memset(r, 0, sizeof *r);
    r->cmd = cmd;
    if (cli_output_open(cmd, &r->out, path) != CLI_OK)
        return CLI_FAIL;
    json_init(&r->w, r->out.f, indent);
    json_begin_object(&r->w);
    json_kv_int(&r->w, "version", 1);
    return CLI_OK;
}

int cli_report_close(cli_report *r)
{
    json_end_object(&r->w);
    int jr = json_finish(&r->w);
    int rc = cli_output_close(r->cmd, &r->out);
    if (rc == CLI_OK && jr != 0) {
        cli_error(r->cmd, "error writing %s", r->out.path);
        rc = CLI_FAIL;
    }
    return rc;
}

void cli_pass_log_after_pass(const oq_pass_event *ev, oq_model *m, void *user)
{
    cli_pass_log *log = user;
    (void)m;
    if (log->n >= CLI_PASS_LOG_MAX)
        return;
    snprintf(log->names[log->n], sizeof log->names[log->n], "%s", ev->pass->name);
    log->results[log->n] = *ev->result;
    log->secs[log->n] = ev->seconds;
    log->iterations[log->n] = ev->iterations;
    log->n++;
}

void cli_report_passes(json_writer *w, const cli_pass_log *log)
{
    double total = 0;
    json_key(w, "passes");
    json_begin_array(w);
    for (size_t i = 0; i < log->n; i++) {
        const oq_pass_result *r = &log->results[i];
        total += log->secs[i];
        json_begin_object(w);
        json_kv_string(w, "name", log->names[i]);
        json_kv_bool(w, "changed", r->changed);
        json_kv_int(w, "iterations", log->iterations[i]);
        json_kv_double(w, "seconds", log->secs[i]);
        json_key(w, "stats");
        json_begin_object(w);
        for (size_t k = 0; k < r->n_stats; k++)
            json_kv_int(w, r->stats[k].name, r->stats[k].value);
        json_end_object(w);
        json_end_object(w);
    }
    json_end_array(w);
    json_kv_double(w, "seconds", total);
}
