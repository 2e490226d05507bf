/* onnxq quantize --json FILE|-: a summary of what was done (schema version 1,
 * docs/quantize.md): the resolved configuration, every pass with its statistics and
 * time, the fallback result, the output. src/cli/quantize_report.c */
#ifndef ONNXQ_CLI_QUANTIZE_REPORT_H
#define ONNXQ_CLI_QUANTIZE_REPORT_H
#include <stdbool.h>
#include <stdint.h>

#include "cli/json.h"
#include "onnxq/pass.h"

#define CLI_QREPORT_MAX_PASSES 32

typedef struct cli_qreport {
    size_t n;
    char names[CLI_QREPORT_MAX_PASSES][64];
    oq_pass_result results[CLI_QREPORT_MAX_PASSES];
    double secs[CLI_QREPORT_MAX_PASSES];
    /* filled by the command */
    bool fallback;            /* --target-sqnr given */
    bool fallback_met;
} cli_qreport;

/* oq_pipeline_run_options.after_pass; user: a cli_qreport. */
void cli_qreport_after_pass(const oq_pass_event *ev, oq_model *m, void *user);
/* Write the summary; config writes the configuration object (as --print-config). */
int cli_qreport_write(const cli_qreport *r, const char *path, const char *in, const char *out,
                      oq_status st, void (*config)(json_writer *w, const void *cfg), const void *cfg);
#endif
