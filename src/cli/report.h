/* JSON reports of the commands (--json FILE|-): every report is one object that starts
 * with "version": 1 (the schema version of that command, documented on its page), is
 * written to standard output for "-" and atomically to a file otherwise.
 * src/cli/report.c */
#ifndef ONNXQ_CLI_REPORT_H
#define ONNXQ_CLI_REPORT_H
#include <stdbool.h>
#include <stddef.h>

#include "cli/cli.h"
#include "io/json_writer.h"
#include "job/job-impl.h"
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

/* The passes a pipeline ran, collected by oq_pipeline_run_options.after_pass: the quantize
 * job's log (src/job/job-impl.h), shared with opt and the other commands. */
typedef oq_job_pass_log cli_pass_log;
#define CLI_PASS_LOG_MAX OQ_JOB_PASS_LOG_MAX
/* user: a cli_pass_log (zero-initialized). */
#define cli_pass_log_after_pass oq_job_pass_log_after_pass
/* "passes": [{name, changed, iterations, seconds, stats}], "seconds": total */
#define cli_report_passes oq_job_report_passes
#endif
