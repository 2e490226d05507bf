/* onnxq — compare a quantized model with its float original, one sample at a time.
 *
 *   oq_verify *v;
 *   oq_verify_options o = oq_verify_options_default();
 *   if (oq_verify_new(float_model, quant_model, &o, &v, &diag) != OQ_OK) ...
 *   for each sample: oq_verify_sample(v, inputs, n, &diag);  // inputs in float-plan order
 *   ... read oq_verify_output(v, i), oq_verify_layer(v, i) ...
 *   oq_verify_free(v);
 *
 * Per sample, three plans run in lockstep with observers (docs/verify.md):
 *  1. the float model. The observer copies the tensors that have a counterpart in the
 *     quantized model or feed the isolation model (at most one sample's activations),
 *     and feeds each layer's fixed-size histogram / min / max;
 *  2. the quantized model. Its observer compares every tensor named like a float
 *     tensor T with the stored float T (accumulated error);
 *  3. the isolation model: a copy of the quantized model in which every node reads the
 *     float model's tensors, quantized exactly as the quantized model quantizes them
 *     (each activation QuantizeLinear -> DequantizeLinear pair is duplicated: the
 *     original pair quantizes the node's own output, the copy quantizes the float
 *     tensor for the consumers). Tensor T there is the isolated result of T's producer.
 * With oq_verify_options.arith the quantized and isolation models run with that
 * arithmetic: a fused group does not produce its DequantizeLinear output T, so T is
 * then taken from the QuantizeLinear output, dequantized (the same values). With
 * arith_loss a fourth run (the quantized model, reference arithmetic) measures what the
 * target's arithmetic loses per layer (oq_satcheck).
 * The stored float tensors are freed at the end of the sample. All statistics are
 * fixed-size sums in double, so memory does not grow with the number of samples.
 *
 * Matching rule (the QDQ conventions): in the quantized model the tensor named T is the
 * (dequantized) counterpart of the float tensor T; a quantized graph input X is read
 * by its consumers as X_dequant.
 */
#ifndef ONNXQ_VERIFY_H
#define ONNXQ_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnxq/exec.h"
#include "onnxq/quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Error accumulator between a reference x and a test y (fixed size). */
typedef struct oq_err_acc {
    uint64_t n;          /* element pairs compared (both finite) */
    uint64_t nonfinite;  /* pairs skipped because x or y was NaN / Inf */
    double sxx, syy, sxy;/* sums of x^2, y^2, x*y */
    double sdd;          /* sum of (x - y)^2 */
    double sad;          /* sum of |x - y| */
    double maxad;        /* max |x - y| */
} oq_err_acc;

/* Add n pairs of any float or integer dtype (decoded with oq_elems_to_double). */
bool oq_err_acc_add(oq_err_acc *a, const void *x, int32_t xdtype, const void *y,
                    int32_t ydtype, int64_t n);
void oq_err_acc_add_f32(oq_err_acc *a, const float *x, const float *y, int64_t n);
/* SQNR in dB = 10 log10(sum x^2 / sum (x-y)^2). +Inf when y == x everywhere
 * (including both zero), -Inf when x is all zero but y is not, NaN when n == 0. */
double oq_err_sqnr_db(const oq_err_acc *a);
/* Cosine similarity; 1 when both are all zero, 0 when only one is, NaN when n == 0. */
double oq_err_cosine(const oq_err_acc *a);
double oq_err_mean_abs(const oq_err_acc *a); /* NaN when n == 0 */

typedef struct oq_verify_options {
    int threads;      /* for the three plans (<= 0: one per CPU) */
    bool isolated;    /* build and run the isolation model (default true) */
    int class_topk;   /* k of the top-k agreement for class-score outputs (default 5) */
    oq_arith arith;   /* arithmetic of the quantized (and isolation) model's QDQ groups
                       * (default OQ_ARITH_REFERENCE); the float model stays float */
    bool arith_loss;  /* arith != reference: also run the quantized model with the
                       * reference arithmetic and accumulate the target's loss against it
                       * (oq_verify_layer.arith, oq_verify_output.arith; default true) */
    /* Prepares a copy of the float model for the weight comparison (may be NULL, the
     * default): a weight the quantizer made from others (BatchNorm folded into
     * W_bnfold, a Constant node turned into an initializer) has a float counterpart only
     * in a model prepared the same way. oq_pass_prepare_float_reference (onnxq/pass.h)
     * prepares it as onnxq quantize does. Called at most once, on the first weight
     * without a counterpart; NULL or a failure: such weights are not compared. */
    oq_status (*prepare_reference)(oq_model *m, void *user, oq_diag *d);
    void *prepare_user;
    bool float_ranges; /* the float range and histogram of each quantized layer
                        * (oq_verify_layer.obs: float_range, clipped); default true; the
                        * fallback search, which reads only errors, turns it off */
    bool outputs_only; /* compare the outputs (and their slices) only, no layers (default
                        * false): the quantize job's choice among calibration candidates */
    /* With outputs_only: the float model's outputs of the i-th sample (and the shapes its
     * slices read) are taken from this cache when a verification with the same float
     * model stored them, else computed and stored: several quantized models judged on the
     * same samples, in the same order, run the float model once (may be NULL). */
    struct oq_verify_float_cache *float_cache;
} oq_verify_options;

typedef struct oq_verify_float_cache oq_verify_float_cache;
oq_verify_float_cache *oq_verify_float_cache_new(void); /* NULL when out of memory */
void oq_verify_float_cache_free(oq_verify_float_cache *c);

oq_verify_options oq_verify_options_default(void);

/* One part of a graph output (docs/verify.md, "Slices"). A graph output produced by a
 * Concat, directly or through ops that only move or map elements one to one (Identity,
 * Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Cast, unary activations, and
 * Add/Sub/Mul/Div/Clip whose other operands are constants), is judged per Concat input:
 * each input is a slice, an index range along one axis of the output. The axis and the
 * ranges follow the Concat's axis through those ops with the shapes of each sample. */
typedef struct oq_verify_slice {
    const char *tensor;    /* the Concat input (float model) */
    const char *node;      /* its producer's name ("" for a graph input or a constant) */
    const char *op_type;   /* its producer's op type ("input", "constant") */
    int64_t axis;          /* the output's axis the part lies along (last sample); -1:
                            * the slice is the whole output */
    int64_t start, end;    /* its index range [start, end) on that axis (last sample) */
    oq_err_acc err;        /* float vs quantized, this part's elements only */
} oq_verify_slice;

/* At most this many slices per output (a Concat with more inputs is judged whole). */
#define OQ_VERIFY_MAX_SLICES 64

/* One graph output. */
typedef struct oq_verify_output {
    const char *name;
    oq_err_acc err;
    bool class_scores;     /* float [N, C] with C >= 2 on every sample */
    uint64_t rows;         /* rows compared for top-k */
    uint64_t top1_agree;   /* argmax equal */
    uint64_t topk_agree;   /* float argmax among the quantized model's top k */
    int topk;              /* k actually used: min(class_topk, C) */
    size_t rank;
    int64_t dims[OQ_RT_MAX_RANK]; /* of the last sample */
    oq_err_acc arith;      /* arith_loss: quantized model, reference (x) vs target (y) */
    /* Slices (above): one per Concat input when the output is a Concat's and every
     * sample compared could be split; otherwise one slice, the whole output (axis -1,
     * tensor the output, err equal to err; when a Concat was found but a sample could not
     * be split, slice_note says why). */
    size_t n_slices;
    oq_verify_slice *slices;
    const char *concat;      /* the Concat node's name (NULL without slices) */
    const char *slice_note;  /* NULL, or why a Concat output is not split */
} oq_verify_output;

/* The worst part of output o: the slice of lowest SQNR (slices without elements left
 * out). Returns that SQNR (NaN when nothing was compared); *slice (may be NULL) gets its
 * index (SIZE_MAX when nothing was compared), *err (may be NULL) its error sums (the
 * output's when nothing was compared). */
double oq_verify_output_worst(const oq_verify_output *o, size_t *slice, const oq_err_acc **err);
/* Whether output o was compared at all: false for outputs that are not float tensors (an
 * ArgMax or TopK index) and for outputs empty on every sample. oq_verify_worst leaves such
 * outputs out while another output was compared. */
bool oq_verify_output_judged(const oq_verify_output *o);
/* "NAME[AXIS:START..END]" for a slice, "NAME" for the whole output (or SIZE_MAX), into buf
 * (truncated to size); returns buf. */
char *oq_verify_slice_label(const oq_verify_output *o, size_t slice, char *buf, size_t size);

/* One layer: a float tensor produced by a node (or a graph input) that has a
 * counterpart in the quantized model. */
typedef struct oq_verify_layer {
    const char *name;        /* tensor name T */
    const char *node;        /* producing node in the float model ("" for inputs) */
    const char *op_type;     /* its op type ("input" for a graph input) */
    size_t order;            /* position of the producer in the float graph */
    bool quantized;          /* T is the output of a DequantizeLinear fed by a Q */
    /* quantizer's choice (per-tensor parameters; has_qrange false otherwise) */
    bool has_qrange;
    float scale;
    int32_t zero_point;
    int32_t qdtype;
    double qmin, qmax;       /* (qmin_int - zp) * scale, (qmax_int - zp) * scale */
    /* float model's range and distribution over all samples */
    oq_observer obs;         /* histogram observer (fixed size) */
    double clipped;          /* float elements below qmin - scale/2 or above qmax + scale/2 (saturated) */
    oq_err_acc own;          /* float T vs QDQ(float T) with the quantizer's parameters:
                              * this tensor's own quantization error (has_qrange) */
    oq_err_acc acc;          /* float T vs quantized model's T */
    oq_err_acc iso;          /* float T vs isolation model's T */
    bool has_iso;
    bool shape_mismatch;     /* shapes differed on some sample (not compared then) */
    /* arith_loss, quantized layers: the quantized model's QuantizeLinear output for T,
     * dequantized, reference arithmetic (x) vs the target's (y) (include/onnxq/satcheck.h) */
    bool has_arith;
    oq_err_acc arith;
    /* every consumer of T in the float model computes x * g(x) (SiLU, HardSwish:
     * oq_calib_act_of, oq_act_is_gated): own, acc and iso compare f(T) instead of T, the
     * error that reaches the model (quantize narrows such ranges to it). act_name:
     * "silu", "hardswish" or NULL. */
    oq_act act;
    const char *act_name;
} oq_verify_layer;

/* A quantized weight: float initializer W vs DequantizeLinear output W. */
typedef struct oq_verify_weight {
    const char *name;
    const char *consumer_op; /* op type of its first consumer in the float model */
    oq_err_acc err;
    bool per_channel;
    int64_t channels;
} oq_verify_weight;

typedef struct oq_verify oq_verify;

/* The models must outlive v and must not be edited while v exists. Errors: outputs
 * of the float model missing from the quantized one, inputs that differ, plans that
 * do not compile. */
oq_status oq_verify_new(oq_model *float_model, oq_model *quant_model,
                        const oq_verify_options *o, oq_verify **out, oq_diag *d);
void oq_verify_free(oq_verify *v);

/* The float plan: its inputs define the order of `inputs` in oq_verify_sample. */
const oq_plan *oq_verify_float_plan(const oq_verify *v);

/* Run one sample through the models and accumulate. `what` names the sample in
 * messages (may be NULL). */
oq_status oq_verify_sample(oq_verify *v, const oq_rt_tensor *inputs, size_t n_inputs,
                           const char *what, oq_diag *d);

uint64_t oq_verify_n_samples(const oq_verify *v);
size_t oq_verify_n_outputs(const oq_verify *v);
const oq_verify_output *oq_verify_output_at(const oq_verify *v, size_t i);
/* The worst part of all outputs: the lowest oq_verify_output_worst (an output with
 * nothing compared, NaN, counts as the worst). *output and *slice may be NULL; *output
 * is SIZE_MAX when the model has no output. */
double oq_verify_worst(const oq_verify *v, size_t *output, size_t *slice);
/* Layers in float graph order. */
size_t oq_verify_n_layers(const oq_verify *v);
const oq_verify_layer *oq_verify_layer_at(const oq_verify *v, size_t i);
size_t oq_verify_n_weights(const oq_verify *v);
const oq_verify_weight *oq_verify_weight_at(const oq_verify *v, size_t i);
/* Whether the isolation model was built (after the first sample). */
bool oq_verify_has_isolation(const oq_verify *v);
/* Largest number of bytes of float tensors held at once for one sample. */
int64_t oq_verify_peak_store_bytes(const oq_verify *v);

/* ---- the report (docs/verify.md "JSON"), for every front end ---- */

/* A layer with something compared (accumulated or isolated elements). */
bool oq_verify_layer_compared(const oq_verify_layer *L);
/* Indices of the compared layers, worst first (isolated SQNR, else accumulated; then
 * accumulated; then graph order); malloc'ed, *n of them; NULL out of memory. */
size_t *oq_verify_worst_layers(const oq_verify *v, size_t *n);
/* The layer's float histogram rebinned to `bins` bins over [lo, hi] (its float range and
 * quantization range, padded 2 %); false when it has none. */
bool oq_verify_layer_histogram(const oq_verify_layer *L, double *lo, double *hi, uint64_t *out, int bins);

#define OQ_VERIFY_REPORT_BINS 60
struct oq_target;
typedef struct oq_verify_report_info {
    const char *float_model, *quant_model; /* as named in the report */
    const char *source;                    /* where the samples came from */
    const struct oq_target *target;        /* the quantized model's arithmetic (NULL: reference) */
    int top;                               /* worst layers listed */
    bool has_min;                          /* a minimum output SQNR was asked for: */
    double min_sqnr;                       /*   it, */
    bool pass;                             /*   and whether every output met it */
    int64_t peak_rss_bytes;                /* the process's peak (the command's report) */
    int indent;                            /* JSON indent (the command: 1) */
} oq_verify_report_info;
/* The report `onnxq verify --json` writes (schema version 1): per output (error, top-k,
 * slices, worst part), per layer (quantizer's range, float range, output QDQ,
 * accumulated and isolated error, histogram), worst layers, weights, memory. JSON text,
 * malloc'ed (NULL out of memory). */
char *oq_verify_report_json(const oq_verify *v, const oq_verify_report_info *info);

#ifdef __cplusplus
}
#endif
#endif
