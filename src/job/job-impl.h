/* Private to the quantize job (src/job/): the steps after the pipeline, the --json
 * summary, the log of the passes that ran. include/onnxq/quantize.h is the API. */
#ifndef ONNXQ_JOB_IMPL_H
#define ONNXQ_JOB_IMPL_H
#include <stdbool.h>
#include <stdint.h>

#include "io/json_writer.h"
#include "onnxq/biascorr.h"
#include "onnxq/calib.h"
#include "onnxq/exec.h"
#include "onnxq/ir.h"
#include "onnxq/pass.h"
#include "onnxq/verify.h"
#include "onnxq/wround.h"

/* Where the lines the command prints go (oq_quantize_options.log; NULL: nowhere). */
typedef struct jlog {
    void (*fn)(const char *line, void *user);
    void *user;
} jlog;
void say(const jlog *l, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The passes a pipeline ran, collected by oq_pipeline_run_options.after_pass. */
#define OQ_JOB_PASS_LOG_MAX 64
typedef struct oq_job_pass_log {
    size_t n;
    char names[OQ_JOB_PASS_LOG_MAX][64];
    oq_pass_result results[OQ_JOB_PASS_LOG_MAX];
    double secs[OQ_JOB_PASS_LOG_MAX];
    int iterations[OQ_JOB_PASS_LOG_MAX];
} oq_job_pass_log;
/* user: an oq_job_pass_log (zero-initialized). */
void oq_job_pass_log_after_pass(const oq_pass_event *ev, oq_model *m, void *user);
/* "passes": [{name, changed, iterations, seconds, stats}], "seconds": total */
void oq_job_report_passes(json_writer *w, const oq_job_pass_log *log);

/* The default calibration (--method select, src/job/quantize_select.c): the calibrate
 * pass left every candidate's ranges in m (calibrate{method=select}); each candidate's
 * ranges from the fit share go through `rest` (the pipeline after calibration) on a copy
 * of m, the copy runs the held-out samples (oq_calib_sample_held_out, at most
 * OQ_SELECT_HELD_OUT_MAX) with a->arith, and the candidate with the best judgement
 * (oq_job_judge: worst output part) wins, if it beats the first candidate by more than
 * OQ_SELECT_MARGIN_DB and OQ_JUDGE_Z standard errors of the difference (else the first
 * stays). The winner's ranges over every sample become m's table.
 * Nothing to choose (no candidates in m): r->n == 0. */
#define OQ_SELECT_HELD_OUT_MAX 8
/* ... doubled while the model's weights times the factor stay within
 * OQ_SELECT_SMALL_BYTES, up to OQ_SELECT_HELD_OUT_CAP samples */
#define OQ_SELECT_HELD_OUT_CAP 32
#define OQ_SELECT_SMALL_BYTES ((uint64_t)64 << 20)
#define OQ_SELECT_MARGIN_DB 0.1
/* Larger models (main-graph initializers, bytes) are not copied to judge the candidates:
 * they take the first one. */
#define OQ_SELECT_WEIGHT_BYTES_MAX ((uint64_t)1 << 30)
/* Bytes of m's main-graph initializers (what each copy of the model holds). */
uint64_t oq_job_weight_bytes(const oq_model *m);
/* The held-out samples of a source of ns samples judged for a model of weight_bytes:
 * oq_calib_sample_held_out ones, 8, up to 32 for a small model. Returns how many. */
size_t oq_job_held_out(uint64_t ns, uint64_t weight_bytes, uint64_t held[OQ_SELECT_HELD_OUT_CAP]);
/* A held-out worst output part below this (dB) is reported as a warning after quantizing. */
#define OQ_HELD_OUT_LOW_DB 15.0
typedef struct oq_job_select_result {
    size_t n;                                             /* candidates (0: no choice made) */
    char names[OQ_CALIB_SELECT_MAX][OQ_CALIB_SELECT_NAME_MAX];
    double worst_db[OQ_CALIB_SELECT_MAX];                 /* held-out worst part, dB */
    char worst_part[OQ_CALIB_SELECT_MAX][256];            /* which output (part) it was */
    double se_db[OQ_CALIB_SELECT_MAX];                    /* standard error of its difference from the first's */
    bool clear[OQ_CALIB_SELECT_MAX];                      /* better than the first by more than the noise */
    size_t chosen;
    uint64_t held_out;                                    /* samples judged (0: too few, the first candidate) */
    bool too_big;                                         /* not judged: the model is over OQ_SELECT_WEIGHT_BYTES_MAX */
    double seconds;
} oq_job_select_result;
/* The held-out check of a step after quantizing (weight rounding, bias correction). */
typedef struct oq_job_bc_guard {
    size_t held_out;          /* samples judged (0: not checked: too few samples, or too big) */
    double db_without, db_with; /* their judgement (oq_job_score.db), dB */
    double se_db;             /* standard error of their difference (0: not estimated) */
    char part_without[256], part_with[256];
    bool kept;                /* the step's changes were kept */
} oq_job_bc_guard;
/* The --json summary of a quantize run (schema version 1, docs/quantize.md). */
typedef struct oq_job_qreport {
    oq_job_pass_log passes;   /* ro.after_pass = oq_job_qreport_after_pass, ro.user = the report */
    bool fallback;            /* --target-sqnr given */
    bool fallback_met;
    char *smooth_quant;       /* the smooth-quant pass's JSON record (malloc'ed), or NULL */
    bool bias_correction;     /* bias correction ran */
    oq_biascorr_result bias;
    oq_job_bc_guard bias_check;
    double bias_seconds;
    const char *bias_label;   /* how oq_job_refine's line names bias correction (NULL: "bias correction") */
    bool bias_need_gain;      /* bias correction kept only when the held-out samples gain (not only
                               * when they do not clearly lose) */
    size_t bias_again;        /* times bias correction was redone in the fallback (after each step) */
    oq_biascorr_result bias2; /* the last of them */
    oq_job_bc_guard bias2_check;
    double bias2_seconds;     /* all of them */
    bool weight_rounding;     /* weight rounding ran */
    oq_wround_result wround;
    oq_job_bc_guard wround_check;
    double wround_seconds;
    const oq_diag *diag;      /* every note and warning, listed as "diagnostics" */
    char *calibration;        /* the calibrate pass's table (JSON, malloc'ed) or NULL */
    oq_job_select_result select; /* --method select: the candidates and the choice (n 0: none) */
} oq_job_qreport;
/* Logs the pass and keeps a copy of the calibration table after the calibrate pass. */
void oq_job_qreport_after_pass(const oq_pass_event *ev, oq_model *m, void *user);
/* One line: what calibration chose, per method (method auto: tensors per candidate). */
void oq_job_qreport_print_calibration(const oq_job_qreport *r, const jlog *lg);
/* Remove metadata_props entry `key` from m; its value (malloc'ed) or NULL. */
char *oq_job_take_metadata(oq_model *m, const char *key);
/* The summary as JSON text (indent 2, trailing newline; malloc'ed, NULL out of memory);
 * config writes the configuration object (as --print-config). */
char *oq_job_qreport_write(const oq_job_qreport *r, const char *in, const char *out, oq_status st,
                           void (*config)(json_writer *w, const void *cfg), const void *cfg);
char *oq_job_qreport_text(const oq_job_qreport *r, const char *in, const char *out, oq_status st, const void *cfg);

/* The steps after the pipeline: bias correction, the saturation check, the fallback. */
typedef struct oq_quantize_fallback_args {
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
    const void *in_data;               /* the float model's bytes, when not read from `in` */
    size_t in_len;
    oq_calib_source *feed;             /* samples fed by the caller, or NULL */
    const jlog *lg;
    bool progress;                     /* progress bars on stderr */
} oq_quantize_fallback_args;
/* A held-out judgement: for each output part (oq_verify: every output, each input of a
 * Concat that makes one), the mean over the samples of each sample's SQNR (clamped to
 * +-150 dB), and the worst part. The mean of per-sample SQNRs, not the SQNR of the pooled
 * errors: one sample with a large error cannot decide alone. Each part's sums per sample
 * are kept, so that two judgements of the same samples can be compared with their noise. */
typedef struct oq_job_score {
    double db;              /* the worst part's mean SQNR, dB (verify's pooled worst part
                             * when the parts changed between samples) */
    char part[256];         /* its label */
    size_t n_samples, n_parts;
    double *sums;           /* [(sample * n_parts + part) * 3 + {0: n, 1: sum x^2, 2: sum (x-y)^2}],
                             * malloc'ed; NULL when the parts changed between samples */
} oq_job_score;
void oq_job_score_free(oq_job_score *s);
/* a->db - b->db; *se (may be NULL): the jackknife standard error of that difference over
 * the samples (each left out in turn: both scores again, the spread of the differences), 0
 * when it cannot be estimated (fewer than 3 samples, parts unknown, an infinite score). */
double oq_job_score_diff(const oq_job_score *a, const oq_job_score *b, double *se);
/* A held-out difference counts when it is over this many standard errors (and over
 * OQ_SELECT_MARGIN_DB): a candidate replaces the first only when it is better by that much,
 * a step after quantizing is dropped only when the model is worse with it by that much. */
#define OQ_JUDGE_Z 2.0
/* a is better than b on the same samples by more than OQ_SELECT_MARGIN_DB and OQ_JUDGE_Z
 * standard errors of the difference; *se (may be NULL) gets that standard error. */
bool oq_job_clearly_better(const oq_job_score *a, const oq_job_score *b, double *se);
/* The judgement (oq_job_score) of qm against fm over the samples held[0..nh) of src with
 * a->arith, in this order every time (fc keeps the float outputs by position; may be
 * shared by several qm of one fm); sc->db -INFINITY when nothing is comparable. *sc is
 * overwritten (free an earlier score first); free it with oq_job_score_free. */
oq_status oq_job_judge(oq_model *fm, oq_model *qm, oq_calib_source *src, const uint64_t *held, size_t nh,
                       oq_verify_float_cache *fc, const oq_quantize_fallback_args *a, oq_job_score *sc, oq_diag *d);

/* Monotonic seconds (CLOCK_MONOTONIC), for the report's timings. */
double oq_job_now_s(void);
/* The float model a->in read again (the job edits its copy in place); NULL with *st set. */
oq_model *oq_job_load_float(const oq_quantize_fallback_args *a, oq_status *st, oq_diag *d);
/* The data the fallback, the saturation check, bias correction and the calibration
 * choice measure with: --eval DIR (eval true and --eval given) or the calibration data. */
oq_status oq_job_open_source(const oq_quantize_fallback_args *a, bool eval, oq_calib_source **out, oq_diag *d);


oq_status oq_job_select_calibration(const oq_quantize_fallback_args *a, const oq_registry *reg, const char *rest,
                                    oq_model *m, oq_job_select_result *r, oq_diag *d);
/* One line: the chosen candidate and every candidate's held-out worst part. */
void oq_job_qreport_print_select(const oq_job_select_result *r, const jlog *lg);
/* Run the fallback on the quantized model m (edited in place); logs the steps; *met: target reached. */
/* The fallback search. With rep->bias_correction, bias correction is redone after each step
 * (pipeline `prep` prepares the float twin, as for oq_job_refine; rep->bias_again, bias2*). */
oq_status oq_job_fallback(const oq_quantize_fallback_args *a, const oq_registry *reg, const char *prep,
                          bool pair_limit, oq_job_qreport *rep, oq_model *m, bool *met, oq_diag *d);
/* The saturation check (docs/quantize.md): run at most 8 calibration samples through m
 * with the reference arithmetic and with a->arith (not reference), and warn for every
 * layer losing more than 1 dB (include/onnxq/satcheck.h). *n_warned: layers named. */
oq_status oq_job_satcheck(const oq_quantize_fallback_args *a, oq_model *m, size_t *n_warned, oq_diag *d);
/* After the pipeline, on m (edited in place), each step optional: weight rounding
 * (include/onnxq/wround.h: GPTQ on the int8 weights, the float weights from insert-qdq's
 * keeper, oq_pass_float_weights_begin before the pipeline; pair_limit as the target), then
 * bias correction (include/onnxq/biascorr.h) against the float model a->in after the passes
 * `prep` (the quantize pipeline's float part, parsed with reg). Both fit on at most
 * OQ_BIASCORR_SAMPLES calibration samples that are not held out; with enough samples
 * (oq_job_held_out gives 2 or more) each step is kept only when the held-out samples'
 * worst output part (oq_job_judge, a->arith) is not worse with it than before it by more
 * than OQ_SELECT_MARGIN_DB and OQ_JUDGE_Z standard errors (oq_job_score_diff). Fills
 * rep's wround, wround_check, wround_seconds, bias, bias_check, bias_seconds; logs a line
 * per step unless quiet. */
#define OQ_BIASCORR_SAMPLES 16
oq_status oq_job_refine(const oq_quantize_fallback_args *a, const oq_registry *reg, const char *prep, bool wround,
                        bool pair_limit, bool bias, oq_model *m, oq_job_qreport *rep, oq_diag *d);
/* Dense data of a tensor for display, or NULL (strings, complex and the stats dtypes;
 * errors are not fatal here): onnxq dump's text and JSON. src/job/dump_json.c */
const void *oq_dump_tensor_peek(oq_tensor *t);
#endif
