/* JSON reports of the commands: open/close (the pass list: src/job/quantize_report.c). */
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
