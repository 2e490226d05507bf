/* onnxq — the quantize job: what `onnxq quantize` does, for any front end (the CLI, the
 * Python package, a program).
 *
 *   oq_quantize_options o;
 *   oq_quantize_options_default(&o);          // target ort-x86, static, percentile, ...
 *   o.calib = "models/calib";                 // or o.source: samples the caller feeds
 *   oq_quantize_result r;
 *   if (oq_quantize("in.onnx", "out.onnx", &o, &r, &d) != OQ_OK) ...   // one line per error
 *   ... r.summary (the JSON `onnxq quantize --json` writes)
 *   oq_quantize_result_free(&r); oq_quantize_options_free(&o);
 *
 * The job resolves the options against the deployment target's row (include/onnxq/target.h:
 * activation/weight types, op types, placement, graph preparation, bias correction), builds
 * the pass pipeline (docs/quantize.md lists it), runs it, then bias correction, the
 * saturation check and the accuracy-driven fallback as asked, checks the result, stores the
 * resolved configuration in the output's metadata_props "onnxq.quantize.config" and writes
 * the model atomically. Calibration samples come from o.calib / o.calib_images /
 * o.calib_random (as the command-line options) or from o.source, a source the caller fills
 * sample by sample (oq_calib_source_feed, include/onnxq/calib.h): the job hands it to every
 * pass and step that reads samples.
 *
 * Errors: a bad option is OQ_ERR_USAGE with one diagnostic whose formatted line
 * (oq_diag_format) is what the command prints, "onnxq quantize: --target \"x\": unknown
 * target (one of: ...)"; errors of the model, the data or the job name the file, node or
 * sample as everywhere in libonnxq. Status classes as the command's exit codes:
 * OQ_ERR_USAGE, _UNSUPPORTED, _NUMERIC, _PARSE, _INVALID are bad input (exit 2), the others a
 * failed job (exit 1). oq_stop_request() (include/onnxq/status.h) stops a running job at
 * the next sample or pass with OQ_ERR_STOPPED. Lines the command prints while working
 * (notes, the bias correction and saturation check summaries, fallback steps) go to
 * o.log when set; progress bars on stderr only with o.progress_stderr.
 */
#ifndef ONNXQ_QUANTIZE_H
#define ONNXQ_QUANTIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnxq/calib.h"
#include "onnxq/ir.h"
#include "onnxq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OQ_QUANTIZE_SMOOTH_AUTO (-2.0) /* --smooth-quant auto */

/* Every option of `onnxq quantize`, by the names of its --config keys (docs/quantize.md).
 * Strings are borrowed (they must live until the job is done). NULL where the comment says
 * "the target's": the target's row (or --mode weight-only's default) decides. */
typedef struct oq_quantize_options {
    const char *mode;              /* "static" (default) | "dynamic" | "weight-only" */
    const char *calib;             /* folder of samples (docs/data.md) */
    const char *calib_images;      /* folder of PNG/JPEG images, converted by size..grey */
    int64_t calib_random;          /* N random samples (smoke tests) */
    int64_t seed;                  /* for calib_random (default 1) */
    int64_t max_samples;           /* at most this many samples (0: all) */
    const char *size, *mean, *std, *layout; /* images: "HxW" ("": the model's), "a,b,c", nchw|nhwc */
    bool bgr, grey;
    double scale;                  /* images: pixels divided by this first (default 255) */
    const char *dims;              /* "NAME=N,..." symbolic dimension sizes (generated data) */
    const char *input_values;      /* "NAME=V,..." inputs filled with V */
    const char *method;            /* auto | minmax | percentile (default) | entropy | mse */
    double percentile;             /* 0: the activation type's default (99.99 / 99.999) */
    double averaging;              /* minmax moving average (0: off) */
    const char *nan_policy;        /* quantized (default) | error | ignore */
    const char *act_dtype;         /* NULL: the target's */
    bool act_symmetric;
    const char *weight_dtype;      /* NULL: the target's (weight-only: int4) */
    int weight_symmetric;          /* -1: the target's; 0 asymmetric; 1 symmetric */
    bool per_channel;              /* default true */
    int64_t weight_block_size;     /* 0: none (weight-only: 32) */
    bool reduce_range;
    const char *op_types;          /* NULL: the target's */
    const char *depthwise;         /* NULL: the target's; "int8" | "float" */
    double min_intensity;          /* < 0: the target's (64 with AVX2 arithmetic: ort-x86,
                                    * static mode; 0 elsewhere); 0: off; T: a Conv doing fewer
                                    * than T multiply-adds per element it exchanges with float
                                    * ops stays float (docs/quantize.md) */
    const char *embedding_dtype;   /* "int8" (default) | "float" */
    const char *include_nodes, *exclude_nodes; /* POSIX extended regex, "" none */
    const char *overrides;         /* JSON file {tensor: {scale, zero_point, ...}}, "" none */
    int64_t threads;               /* executor threads (0: all CPUs) */
    const char *target;            /* "ort-x86" (default) | "ort-x86-vnni" | "generic" | "host" */
    int prepare;                   /* -1: the target's; 0/1 */
    int bias_correction;           /* -1: the target's; 0/1 */
    const char *weight_rounding;   /* NULL: the target's; "nearest" | "gptq" (static int8 weights:
                                    * GPTQ with the quantizer's scales, kept when held-out
                                    * samples agree; docs/quantize.md "Weight rounding") */
    double smooth_quant;           /* SmoothQuant alpha in [0, 1]; OQ_QUANTIZE_SMOOTH_AUTO (the
                                    * default: alpha per input, static mode with calibration
                                    * data; off otherwise); other values < 0: off */
    bool smooth_quant_set;         /* the caller or a config set smooth_quant (else the default
                                    * applies: auto where it can, off elsewhere) */
    const char *format;            /* weight-only: "qdq" (default) | "matmulnbits" */
    const char *algo;              /* weight-only: "rtn" (default) | "gptq" | "awq" */
    const char *weight_scale_dtype;/* weight-only qdq: "auto" (default) | "float32" | "float16" */
    int64_t accuracy_level;        /* weight-only matmulnbits: 0..4 */
    double gptq_damp;              /* default 0.01 */
    bool gptq_act_order;           /* GPTQ: features by decreasing input energy (default false) */
    /* accuracy-driven fallback (--target-sqnr) */
    bool fallback;                 /* on: target_sqnr_db is the goal */
    double target_sqnr_db;
    int64_t max_fallback;          /* default 10 */
    const char *eval;              /* samples to measure on (NULL: the calibration data) */
    const char *fallback_search;   /* NULL/"greedy" | "bisect" */
    /* samples fed by the caller (oq_calib_source_feed): used instead of calib, calib_images
     * and calib_random, by every step that reads samples; borrowed */
    oq_calib_source *source;
    /* front end */
    bool quiet;                    /* no notes or summaries to log */
    bool progress_stderr;          /* the passes' progress bars on stderr (the command) */
    void (*log)(const char *line, void *user); /* each line the command prints (no newline) */
    void *log_user;
    /* the command's own checks, at its points (may be NULL; nonzero stops the job with
     * OQ_ERR_USAGE, the front end having said why): after the options are resolved (the
     * command: an input and -o given), and before any file is read (its path checks) */
    int (*check_resolved)(void *user);
    int (*check_paths)(void *user);
    void *check_user;
    bool resolve_only;             /* resolve and build the pipeline, then stop: r.config
                                    * (what --print-config prints); nothing is written */
    /* where a choice came from, for the resolved configuration's "sources" (set by
     * oq_quantize_options_load; a caller setting a field itself leaves these alone) */
    const char *config_act_dtype, *config_weight_dtype, *config_op_types, *config_depthwise,
        *config_weight_rounding;
    bool config_weight_symmetric, config_prepare, config_bias_correction, config_min_intensity;
    void *config_doc;              /* the loaded document (strings point into it) */
} oq_quantize_options;

/* The defaults of `onnxq quantize` (docs/quantize.md). */
void oq_quantize_options_default(oq_quantize_options *o);
/* Apply a JSON object of options by their --config names (`onnxq quantize --print-config`
 * prints one; "resolved" is ignored). as_config: the values count as a configuration file's
 * ("config" in the resolved "sources"; the command's --config FILE); false: as the caller's
 * options ("option"), and the fallback keys target_sqnr (number, or null: off),
 * max_fallback, eval and fallback_search are accepted too. `what` names the document in
 * errors. The strings stay in a document o owns: oq_quantize_options_free. */
oq_status oq_quantize_options_load(oq_quantize_options *o, const char *json, size_t len, const char *what,
                                   bool as_config, oq_diag *d);
/* The same from a file (errors name it, with line and column). */
oq_status oq_quantize_options_load_file(oq_quantize_options *o, const char *path, bool as_config, oq_diag *d);
void oq_quantize_options_free(oq_quantize_options *o);

/* For callers through a foreign-function interface (the Python package's ctypes): the
 * options on the heap with the defaults set, the fields JSON cannot carry, and the
 * result on the heap. */
oq_quantize_options *oq_quantize_options_new(void);
void oq_quantize_options_delete(oq_quantize_options *o);
void oq_quantize_options_set_source(oq_quantize_options *o, oq_calib_source *src);
void oq_quantize_options_set_log(oq_quantize_options *o, void (*log)(const char *line, void *user), void *user,
                                 bool progress);

typedef struct oq_quantize_result {
    char *config;                  /* the resolved configuration (JSON, --print-config) */
    char *summary;                 /* the --json summary (JSON, docs/quantize.md) */
    char *pipeline;                /* the pass pipeline that ran */
    bool fallback_met;             /* false: --target-sqnr asked for and not reached
                                    * (the model is written; the command exits 1) */
    int exit_code;                 /* what the command exits with: 0; 1 a failed job (also
                                    * nothing quantized, or the fallback target not met);
                                    * 2 bad usage or input */
} oq_quantize_result;
/* The command's exit code for a status: 2 for bad usage or input, 1 otherwise (0: OQ_OK). */
int oq_quantize_exit_code(oq_status st);
void oq_quantize_result_free(oq_quantize_result *r);

/* Quantize the model file `in` to `out` (in may also be given as bytes: in_data/in_len,
 * `in` then names it). r may be NULL. r->summary is filled also when the job fails after
 * the options were resolved (its "status" says how). */
oq_status oq_quantize(const char *in, const char *out, const oq_quantize_options *o, oq_quantize_result *r,
                      oq_diag *d);
oq_status oq_quantize_buffer(const void *in_data, size_t in_len, const char *in_name, const char *out,
                             const oq_quantize_options *o, oq_quantize_result *r, oq_diag *d);

/* The same in two steps, for a front end that checks paths between them (the command):
 * oq_quantize_job_new checks and resolves the options (no file is touched);
 * oq_quantize_job_run reads the model (or takes m, read by the caller from `in`: edited in
 * place and freed by the job) and does the work. */
typedef struct oq_quantize_job oq_quantize_job;
oq_status oq_quantize_job_new(const oq_quantize_options *o, oq_quantize_job **out, oq_diag *d);
/* The model as bytes instead of the file `in` (copied). */
oq_status oq_quantize_job_set_input(oq_quantize_job *j, const void *data, size_t len, oq_diag *d);
oq_status oq_quantize_job_run(oq_quantize_job *j, const char *in, oq_model *m, const char *out,
                              oq_quantize_result *r, oq_diag *d);
void oq_quantize_job_free(oq_quantize_job *j);

#ifdef __cplusplus
}
#endif
#endif
