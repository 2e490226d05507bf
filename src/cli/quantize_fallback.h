/* The --target-sqnr hook of `onnxq quantize` (accuracy-driven fallback). */
#ifndef ONNXQ_CLI_QUANTIZE_FALLBACK_H
#define ONNXQ_CLI_QUANTIZE_FALLBACK_H
#include <stdbool.h>
#include <stdint.h>

#include "onnxq/biascorr.h"
#include "onnxq/exec.h"
#include "onnxq/ir.h"
#include "onnxq/pass.h"

typedef struct cli_fallback_args {
    const char *in;                    /* the float model file */
    double target_sqnr_db;
    int64_t max_fallback;
    const char *eval;                  /* --eval DIR, or NULL: the calibration data */
    const char *calib, *calib_images;  /* as given to quantize */
    const char *size, *mean, *std, *layout;
    bool bgr;
    double scale;
    int64_t calib_random, seed, max_samples, threads;
    bool quiet;
    const char *search;                /* --fallback-search greedy|bisect (NULL: greedy) */
    bool grey;                         /* --grey */
    const char *dims, *values;         /* --dim, --input-value as NAME=N,... (may be NULL) */
    oq_arith arith;                    /* the quantize target's arithmetic (measurements) */
    const char *target;                /* its name, for messages */
    const char *weight_dtype;          /* --weight-dtype as resolved, for advice */
} cli_fallback_args;

/* Run the fallback on the quantized model m (edited in place); prints the steps; *met: target reached. */
oq_status cli_quantize_fallback(const cli_fallback_args *a, oq_model *m, bool *met, oq_diag *d);

/* The saturation check (docs/quantize.md): run at most 8 calibration samples through m
 * with the reference arithmetic and with a->arith (not reference), and warn on stderr for
 * every layer losing more than 1 dB (include/onnxq/satcheck.h). *n_warned: layers named. */
oq_status cli_quantize_satcheck(const cli_fallback_args *a, oq_model *m, size_t *n_warned, oq_diag *d);
/* Bias correction (include/onnxq/biascorr.h) of m against the float model a->in after the
 * passes `prep` (the quantize pipeline's float part, parsed with reg), on at most
 * OQ_BIASCORR_SAMPLES calibration samples; prints a summary line unless quiet. */
#define OQ_BIASCORR_SAMPLES 16
oq_status cli_quantize_bias_correct(const cli_fallback_args *a, const oq_registry *reg, const char *prep, oq_model *m,
                                    oq_biascorr_result *r, double *seconds, oq_diag *d);
#endif
