/* onnxq quantize --json FILE|-: a summary of what was done (schema version 1,
 * docs/quantize.md): the resolved configuration, every pass with its statistics and
 * time, the fallback result, the output. src/cli/quantize_report.c */
#ifndef ONNXQ_CLI_QUANTIZE_REPORT_H
#define ONNXQ_CLI_QUANTIZE_REPORT_H
#include <stdbool.h>
#include <stdio.h>

#include "cli/report.h"
#include "onnxq/biascorr.h"

typedef struct cli_qreport {
    cli_pass_log passes;      /* ro.after_pass = cli_pass_log_after_pass, ro.user = &passes */
    bool fallback;            /* --target-sqnr given */
    bool fallback_met;
    char *smooth_quant;       /* the smooth-quant pass's JSON record (malloc'ed), or NULL */
    bool bias_correction;     /* bias correction ran */
    oq_biascorr_result bias;
    double bias_seconds;
    const oq_diag *diag;      /* every note and warning, listed as "diagnostics" */
    char *calibration;        /* the calibrate pass's table (JSON, malloc'ed) or NULL */
} cli_qreport;

/* ro.after_pass with ro.user = the cli_qreport: logs the pass (cli_pass_log_after_pass)
 * and keeps a copy of the calibration table after the calibrate pass. */
void cli_qreport_after_pass(const oq_pass_event *ev, oq_model *m, void *user);
/* One line: what calibration chose, per method (method auto: tensors per candidate). */
void cli_qreport_print_calibration(const cli_qreport *r, FILE *f);

/* Remove metadata_props entry `key` from m; its value (malloc'ed) or NULL. */
char *cli_take_metadata(oq_model *m, const char *key);

/* Write the summary; config writes the configuration object (as --print-config). */
int cli_qreport_write(const cli_qreport *r, const char *path, const char *in, const char *out,
                      oq_status st, void (*config)(json_writer *w, const void *cfg), const void *cfg);
#endif
