/* onnxq — calibration: stream samples through the float model and keep one fixed-size
 * observer per observed tensor; the result is a table tensor -> (min, max, chosen range).
 *
 *   oq_calib_source *src;
 *   oq_calib_source_dir("calib/", &src, &d);            // or _images / _random
 *   oq_calib_options o; oq_calib_options_default(&o);    // percentile 99.99, uint8 asym
 *   oq_calib_table t;
 *   oq_calibrate(model, src, &o, &t, &d);
 *   ... t.items[i].name, .min, .max, .lo, .hi
 *   oq_calib_table_free(&t); oq_calib_source_free(src);
 *
 * Observed tensors: every float32 graph input (not an initializer) and every float32
 * tensor a node produces, in the main graph and in the subgraphs that run (the branch
 * an If takes, every iteration of a Loop/Scan body, whose inputs are observed too);
 * o.want may restrict this. A subgraph's tensors are named by oq_calib_value_key. Memory is one
 * oq_observer per observed tensor plus the executor's buffers for one sample: it does
 * not grow with the number of samples.
 *
 * Non-finite values: under OQ_NAN_ERROR the first NaN/Inf stops calibration with one
 * line naming the tensor, the node that produced it and the sample; under
 * OQ_NAN_IGNORE they are excluded from the statistics, counted per tensor, and
 * oq_calibrate adds one warning with the totals at the end; OQ_NAN_QUANTIZED counts them
 * the same way (and the first sample that had them, per tensor) and leaves the verdict to
 * insert-qdq: an error only for a tensor it would quantize.
 *
 * The table travels between the `calibrate` and `insert-qdq` passes as JSON in the
 * model's metadata_props under OQ_CALIB_METADATA_KEY (insert-qdq removes it).
 */
#ifndef ONNXQ_CALIB_H
#define ONNXQ_CALIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnxq/exec.h"
#include "onnxq/image.h"
#include "onnxq/ir.h"
#include "onnxq/quant.h"
#include "onnxq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OQ_CALIB_METADATA_KEY "onnxq.calibration"
/* calibrate{method=select}: the candidates' names ("p99.99,p99.999,minmax,mse") under
 * OQ_CALIB_SELECT_KEY, and each one's table (JSON as under OQ_CALIB_METADATA_KEY) over
 * every sample under OQ_CALIB_SELECT_ALL_PREFIX NAME and over the fit share (the samples
 * not held out) under OQ_CALIB_SELECT_FIT_PREFIX NAME. onnxq quantize takes them out;
 * insert-qdq removes any left. */
#define OQ_CALIB_SELECT_KEY "onnxq.calibration.select"
#define OQ_CALIB_SELECT_ALL_PREFIX "onnxq.calibration.all:"
#define OQ_CALIB_SELECT_FIT_PREFIX "onnxq.calibration.fit:"
#define OQ_CALIB_SELECT_MAX 8
#define OQ_CALIB_SELECT_NAME_MAX 24
/* The smooth-quant pass's per-layer record (JSON {"alpha":a,"layers":[{...}]}), in
 * metadata_props until a tool takes it out (onnxq quantize: into its --json report). */
#define OQ_SMOOTH_METADATA_KEY "onnxq.smooth_quant"
/* {"nodes": [...], "values": [...]}: names of nodes and values insert-qdq leaves in
 * float (smooth-quant's split-off outlier channels); removed with the calibration table */
#define OQ_KEEP_FLOAT_METADATA_KEY "onnxq.keep_float"

/* ------------------------------------------------------------------ sources ---- */

typedef struct oq_calib_source oq_calib_source;

/* A folder of samples. Accepted layouts:
 *  a) one subfolder per sample (sorted by name), holding for each model input X the
 *     file X.pb or X.npy, or input_N.pb / input_N.npy (N = position among the model's
 *     inputs, as in the ONNX backend test data test_data_set_*); a single-input model
 *     also accepts a subfolder holding exactly one .pb/.npy file, whatever its name;
 *  b) a flat folder of .npy / .pb files, one sample per file (single-input models);
 *  c) one ONNX test-data folder (input_0.pb, input_1.pb, ... beside output_*.pb): one
 *     sample.
 * Other files are ignored. An empty folder, a file, or a missing path is an error
 * naming it (OQ_ERR_USAGE). docs/data.md */
oq_status oq_calib_source_dir(const char *dir, oq_calib_source **out, oq_diag *d);
/* PNG / JPEG images of a folder (oq_image_dir_list), converted with `o`; the model must
 * have one float input, fed [1, C, H, W] (or NHWC). o->height/width 0: the model
 * input's fixed H and W. */
oq_status oq_calib_source_images(const char *dir, const oq_image_opts *o,
                                 oq_calib_source **out, oq_diag *d);
/* n samples of random data (deterministic for a seed; sample k depends on seed and k
 * only), for every input dtype the executor runs: floating types uniform in [0, 1),
 * integer types uniform in {0, ..., 9}, bool 0/1. Symbolic or unknown dims are 1,
 * except the last two of a rank-4 input, which are height/width (32 when 0), unless
 * oq_calib_source_set_dim names them. */
oq_status oq_calib_source_random(uint64_t n, uint64_t seed, int64_t height, int64_t width,
                                 oq_calib_source **out, oq_diag *d);
/* Generated data (random sources): the symbolic dimension `name` has this size; an
 * unnamed dimension is named INPUT[j] (input name, position), e.g. "input[1]". */
oq_status oq_calib_source_set_dim(oq_calib_source *s, const char *name, int64_t size, oq_diag *d);
/* Input `input` is filled with v (every element, converted to its dtype) instead of
 * random data; in a folder source, it also stands in for a missing file of that input
 * (e.g. silero VAD's int64 sample rate "sr" = 16000). */
oq_status oq_calib_source_set_value(oq_calib_source *s, const char *input, double v, oq_diag *d);
/* The same from text: "NAME=N,NAME=N" (sizes) and "NAME=V,NAME=V" (values); "" sets
 * nothing. A malformed list is OQ_ERR_USAGE naming the item. */
oq_status oq_calib_source_set_dims(oq_calib_source *s, const char *list, oq_diag *d);
oq_status oq_calib_source_set_values(oq_calib_source *s, const char *list, oq_diag *d);
/* Generated data: a symbolic dimension without oq_calib_source_set_dim is an error
 * naming it (instead of 1). */
void oq_calib_source_require_dims(oq_calib_source *s, bool on);
/* Generated data for input i of sample k alone (what a random source puts there): for
 * a command that reads some inputs from files and generates the others. */
oq_status oq_calib_source_generate(const oq_calib_source *s, const oq_plan *p, uint64_t k, size_t i,
                                   oq_rt_tensor *t, oq_diag *d);
/* Samples a caller feeds one at a time (a Python CalibrationDataReader, a camera): each
 * oq_calib_source_feed_add copies the sample's arrays (named by model input) into an
 * unlinked temporary file in $TMPDIR (default /tmp) and keeps only their names, types and
 * offsets, so memory does not grow with the number of samples and the caller's arrays are
 * not kept. Everything that reads the samples (calibration, SmoothQuant, bias correction,
 * the saturation check, the fallback) reads them back from that file, as often as it
 * needs. An input the sample lacks is an error naming the input and the sample (unless
 * oq_calib_source_set_value fills it); a dtype or shape the model does not take fails
 * when the sample is run, naming the input. Labels in messages are "#K" (K from 1). */
oq_status oq_calib_source_feed(oq_calib_source **out, oq_diag *d);
/* Append one sample: n arrays t[0..n) for the model inputs names[0..n) (copied; the
 * tensors stay the caller's). OQ_ERR_USAGE for a repeated or empty name or a bad array. */
oq_status oq_calib_source_feed_add(oq_calib_source *s, const char *const *names, const oq_rt_tensor *t,
                                   size_t n, oq_diag *d);
/* The number a pass option feed=ID names this fed source by (0: not a fed source), and a
 * new source over the same samples for that number (what calibrate, smooth-quant and
 * quantize-weights do with feed=ID; OQ_ERR_USAGE when no live fed source has it). The
 * samples stay until the last source over them is freed. */
uint64_t oq_calib_source_feed_id(const oq_calib_source *s);
oq_status oq_calib_source_from_feed_id(uint64_t id, oq_calib_source **out, oq_diag *d);
/* Use at most n samples of the source (0: all). */
void oq_calib_source_limit(oq_calib_source *s, uint64_t n);
uint64_t oq_calib_source_count(const oq_calib_source *s);
void oq_calib_source_free(oq_calib_source *s);
/* Fill in[0..n) (n = oq_plan_n_inputs(p)) with sample k (owned tensors: release them);
 * label receives what names the sample. */
oq_status oq_calib_source_sample(oq_calib_source *s, const oq_plan *p, uint64_t k, oq_rt_tensor *in,
                                 size_t n, char *label, size_t lsize, oq_diag *d);

/* ------------------------------------------------------------------ calibration -- */

/* The sample loop under oq_calibrate, for passes that gather their own statistics
 * (smooth-quant): compile a plan of m with these observers and run every sample of src
 * through it. on_input also sees the main graph's inputs of each sample (before the
 * run; the executor does not hand them over), begin_sample gets the sample's label
 * first, and a non-OK check() (after the inputs and after the run) stops the loop with
 * that status. Any hook may be NULL. *samples: how many ran. */
typedef struct oq_calib_hooks {
    int threads;                   /* executor threads (<= 0: all CPUs) */
    oq_tensor_observer on_tensor;
    oq_input_observer on_input;
    void (*begin_sample)(const char *label, void *user);
    oq_status (*check)(void *user);
    void *user;                    /* passed to every hook except progress */
    void (*progress)(uint64_t done, uint64_t total, const char *label, void *user);
    void *progress_user;
} oq_calib_hooks;

oq_status oq_calib_run(oq_model *m, oq_calib_source *src, const oq_calib_hooks *h, uint64_t *samples,
                       oq_diag *d);

typedef struct oq_calib_options {
    oq_range_request range;        /* method, percentile, dtype, symmetric, reduce_range */
    double averaging_constant;     /* minmax moving average (0: off) */
    oq_nan_policy nan_policy;
    int threads;                   /* executor threads (<= 0: all CPUs) */
    /* Called after each sample (may be NULL). label: the sample's file or folder. */
    void (*progress)(uint64_t done, uint64_t total, const char *label, void *user);
    void *progress_user;
    /* Observe only values for which want() is true (NULL: every float tensor). */
    bool (*want)(const oq_value *v, void *user);
    void *want_user;
    /* Another pass's observers run in the same sample loop (may be NULL): its on_tensor,
     * on_input, begin_sample and check (threads and progress are the options' own). */
    const oq_calib_hooks *also;
    /* Narrow the range of a tensor every consumer of which computes x * g(x) (SiLU,
     * HardSwish: oq_calib_act_of, oq_act_is_gated) to what minimises the error after it
     * (oq_observer_range_for_act). Default true. */
    bool act_ranges;
} oq_calib_options;

void oq_calib_options_default(oq_calib_options *o);

/* The saturating activation every consumer of v applies, read from the graph: SiLU
 * (Sigmoid(v) and Mul(v, Sigmoid(v)), its only consumers), x * HardSigmoid(x) (HardSwish, or
 * HardSigmoid(v) and Mul(v, HardSigmoid(v)), or as exporters write it, Mul(v, Clip(Add(v, b),
 * 0, c)): alpha 1/c, beta b/c, the function up to the constant factor c), or Sigmoid,
 * HardSigmoid or Tanh as v's only consumer; OQ_ACT_NONE otherwise (a graph output too). */
oq_act oq_calib_act_of(const oq_value *v);
/* "silu", "hardswish", "sigmoid", "hardsigmoid", "tanh"; NULL for OQ_ACT_NONE. */
const char *oq_act_name(oq_act_kind k);
/* x * g(x) (SiLU, HardSwish): the kinds whose ranges calibration narrows and verify judges
 * after the activation. Their saturated side is flat near 0 (SiLU >= -0.28, HardSwish 0
 * below -3), whatever the input there. Sigmoid, HardSigmoid and Tanh alone are not: their
 * saturated sides are the scores and gates a model decides with, where calibration sets
 * rarely hold the values that matter (openWakeWord's hey-jarvis output lost 3 dB on the
 * zoo's eval clips with its logit's low side narrowed, nothing on held-out calibration). */
bool oq_act_is_gated(oq_act_kind k);

typedef struct oq_calib_entry {
    char *name;               /* malloc'ed */
    float min, max;           /* exact extremes of the finite values seen */
    float lo, hi;             /* the range the method chose */
    uint64_t count;           /* finite values seen */
    uint64_t nan_count, inf_count;
    /* method auto: the candidate that won (oq_auto_candidate_name: "minmax", "p99.99",
     * "mse", ...; static), NULL for the other methods; held_out: it was chosen on the
     * held-out samples (false: on the samples it was fit on) */
    const char *choice;
    bool held_out;
    char *first_nonfinite;    /* malloc'ed: the first sample with NaN/Inf here, or NULL */
    /* the activation the range was narrowed for ("silu", "hardswish", "sigmoid",
     * "hardsigmoid", "tanh"; static), NULL: not narrowed */
    const char *act;
} oq_calib_entry;

typedef struct oq_calib_table {
    size_t count;
    oq_calib_entry *items;    /* in graph order (inputs first) */
    uint64_t samples;
    oq_calib_method method;
    double percentile;
    uint64_t nan_total, inf_total;
    uint64_t held_out_samples; /* method auto: samples held out to score the candidates */
    bool nonfinite_error;     /* OQ_NAN_QUANTIZED: quantizing a tensor with NaN/Inf is an error */
} oq_calib_table;

/* Method auto holds out every OQ_CALIB_HOLDOUT_EVERY-th sample (k % 4 == 3, k from 0):
 * candidates are fit on the others and scored on these (docs/calibration.md). With
 * fewer than 4 samples nothing is held out and the candidates are scored in-sample. */
#define OQ_CALIB_HOLDOUT_EVERY 4
bool oq_calib_sample_held_out(uint64_t k);

oq_status oq_calibrate(oq_model *m, oq_calib_source *src, const oq_calib_options *o,
                       oq_calib_table *out, oq_diag *d);
/* Several range requests from one sample loop, for a choice on held-out samples (onnxq
 * quantize's default method "select", src/job/quantize_select.c): every
 * OQ_CALIB_HOLDOUT_EVERY-th sample is observed apart (oq_calib_sample_held_out); for each
 * request cand[i] (any method but auto; o->range is not used), fit[i] gets its ranges
 * from the other samples and all[i] from every sample (min, max and counts: every sample
 * in both). Method mse is auto's fast search here (oq_observer_range_candidate). fit and
 * all hold n tables each; free each with oq_calib_table_free. */
oq_status oq_calibrate_candidates(oq_model *m, oq_calib_source *src, const oq_calib_options *o,
                                  const oq_range_request *cand, size_t n, oq_calib_table *fit, oq_calib_table *all,
                                  oq_diag *d);
void oq_calib_table_free(oq_calib_table *t);
const oq_calib_entry *oq_calib_table_find(const oq_calib_table *t, const char *name);
/* The table's name for a value: its name in the main graph; in a subgraph, its name
 * after the path of the nodes and attributes that hold the subgraph, so that equal
 * names in different bodies do not mix: "If_3.then_branch/conv_out",
 * "loop.body/If_0.else_branch/x" (node label as oq_node_label gives it; a GRAPHS
 * attribute adds "[index]"). Malloc'ed; NULL when out of memory. */
char *oq_calib_value_key(const oq_value *v);
/* oq_calib_table_find under oq_calib_value_key(v). */
const oq_calib_entry *oq_calib_table_find_value(const oq_calib_table *t, const oq_value *v);

/* JSON text {"samples":N,"method":"...","percentile":p,"tensors":{"name":[min,max,lo,hi],..}}
 * (malloc'ed; floats written so that they read back exactly), and back. Method auto adds
 * "held_out_samples":N and "choices":{"name":"p99.99",..} (the winning candidate per
 * tensor; names chosen in-sample carry a trailing "*": "mse*"). */
char *oq_calib_table_to_json(const oq_calib_table *t);
oq_status oq_calib_table_from_json(const char *text, oq_calib_table *out, oq_diag *d);

/* A progress reporter for oq_calib_options.progress (and verify, the fallback search,
 * conformance) writing to stderr: on a terminal one self-updating line (done/total,
 * rate, time left), otherwise a plain line every 10 % (and at the end). done == 0
 * starts a new round. user: an oq_calib_progress_state, zero-initialized; `what` names
 * the work ("calibrating" when NULL). */
typedef struct oq_calib_progress_state {
    double start;
    double last_print;
    int last_decile;
    int tty;                  /* 0 unknown, 1 terminal, 2 not a terminal */
    const char *what;
} oq_calib_progress_state;
void oq_calib_progress_stderr(uint64_t done, uint64_t total, const char *label, void *user);
/* Send what oq_calib_progress_stderr would print to fn instead (what: the work, e.g.
 * "calibrating"; done == 0 starts a round), process-wide; NULL restores stderr. For a
 * front end with its own progress display (the Python package: a callback or tqdm). */
void oq_calib_progress_set_hook(void (*fn)(const char *what, uint64_t done, uint64_t total, void *user),
                                void *user);
/* Erase the terminal line before other output is printed (nothing when not a terminal). */
void oq_calib_progress_clear(oq_calib_progress_state *s);

#ifdef __cplusplus
}
#endif
#endif
