/* JSON reports of the commands (--json FILE|-): every report is one object that starts
 * with "version": 1 (the schema version of that command, documented on its page), is
 * written to standard output for "-" and atomically to a file otherwise.
 * src/cli/report.c */
#ifndef ONNXQ_CLI_REPORT_H
#define ONNXQ_CLI_REPORT_H
#include <stdbool.h>
#include <stddef.h>

#include "cli/cli.h"
#include "cli/json.h"
#include "onnxq/pass.h"

typedef struct cli_report {
    const char *cmd;
    cli_output out;
    json_writer w;            /* write the members here */
} cli_report;

/* Open path ("-": stdout) and begin the object with "version": 1. CLI_OK or CLI_FAIL. */
int cli_report_open(cli_report *r, const char *cmd, const char *path, int indent);
/* End the object and write it out. CLI_OK, or CLI_FAIL after printing why. */
int cli_report_close(cli_report *r);

/* The passes a pipeline ran, collected by oq_pipeline_run_options.after_pass. */
#define CLI_PASS_LOG_MAX 64
typedef struct cli_pass_log {
    size_t n;
    char names[CLI_PASS_LOG_MAX][64];
    oq_pass_result results[CLI_PASS_LOG_MAX];
    double secs[CLI_PASS_LOG_MAX];
    int iterations[CLI_PASS_LOG_MAX];
} cli_pass_log;

/* user: a cli_pass_log (zero-initialized). */
void cli_pass_log_after_pass(const oq_pass_event *ev, oq_model *m, void *user);
/* "passes": [{name, changed, iterations, seconds, stats}], "seconds": total */
void cli_report_passes(json_writer *w, const cli_pass_log *log);
#endif
