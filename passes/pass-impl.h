/* Private helpers shared by the pass manager and the built-in passes. */
#ifndef ONNXQ_PASS_IMPL_H
#define ONNXQ_PASS_IMPL_H
#include "onnxq/onnxq.h"
#include "onnxq/pass.h"

/* ---- options (passes/pipeline.c; oq_opt_type_name is in onnxq/pass.h) */
/* Parse text[0..len) as a value of def's type into *out (out->s is malloc'ed canonical
 * text; free with oq_option_value_free). */
oq_status oq_option_parse_value(const oq_pass_option_def *def, const char *text, size_t len,
                                oq_pass_option_value *out);
void oq_option_value_free(oq_pass_option_value *v);

/* ---- graph helpers for passes (passes/util.c) */
/* Default-domain node of this op type. */
bool oq_pass_is_op(const oq_node *n, const char *op);
/* Remove a node and, recursively, the nodes of its subgraphs (so that values of the
 * enclosing scopes lose the uses those subgraphs held). */
void oq_pass_remove_node(oq_node *n);
/* Call fn on the main graph and every subgraph reachable through node attributes
 * (depth first, inner graphs after the graph that owns them). Stops at the first
 * non-OK status. */
typedef oq_status (*oq_graph_visit_fn)(oq_graph *g, void *ctx);
oq_status oq_pass_for_each_graph(oq_model *m, oq_graph_visit_fn fn, void *ctx);
/* Constant tensor data as doubles (float, double, float16, bfloat16, ints). n elements
 * written to *out (malloc'ed). NULL tensor data -> error in d. */
oq_status oq_pass_tensor_to_double(oq_tensor *t, double **out, int64_t *n, oq_diag *d);
/* Build a tensor of dtype (float/double/float16/bfloat16) from doubles. */
oq_tensor *oq_pass_tensor_from_double(oq_model *m, const char *name, int32_t dtype,
                                      const int64_t *dims, size_t rank, const double *v);
/* A new initializer of dtype from doubles, named after base (made unique in g). */
oq_value *oq_pass_new_initializer(oq_graph *g, const char *base, int32_t dtype, const int64_t *dims, size_t rank,
                                  const double *vals);
/* int64 vector from a constant tensor of int32/int64; -1 when not constant/int. */
int64_t oq_pass_const_ints(const oq_value *v, int64_t *out, int64_t max, oq_diag *d);
/* Add an int64 1-D initializer named after base. */
oq_value *oq_pass_add_ints(oq_graph *g, const char *base, const int64_t *v, size_t n);
/* Number of uses of v plus 1 if it is a graph output of its graph. */
size_t oq_pass_value_refs(const oq_value *v);
/* Drop value_info entries of values that no longer exist (no producer, no use). */
size_t oq_pass_prune_value_info(oq_graph *g);
/* Best-effort static rank / element type of a value without the executor: from its
 * type, a constant, or by following rank- and type-preserving producers. -1 when
 * unknown. */
int64_t oq_pass_value_rank(const oq_value *v);
int32_t oq_pass_value_elem_type(const oq_value *v);
/* int8 symmetric weight q (quantized from w with `scales`, n_scales of them along
 * ch_axis, or one) of node n (Conv, Gemm, MatMul): raise channel scales and lower pairs
 * so that no adjacent same-sign pair in the reduction order of onnxruntime's u8 x s8
 * kernels exceeds 128 steps (passes/insert_qdq.c, "pair saturation limit"). Returns the
 * number of channels raised (-1: out of memory); *fixed gets the pairs lowered. */
int64_t oq_pass_limit_weight_pairs(const oq_node *n, const int64_t *dims, size_t rank, int8_t *q, const float *w,
                                   float *scales, int64_t n_scales, int ch_axis, int64_t *fixed);
/* While at least one begin is open, insert-qdq keeps each weight it quantizes (bytes,
 * scales, zero points, pair-limit counts) and takes them back when the same weight data
 * is quantized again with the same spec for a node of the same op type and attributes;
 * the last end frees them (passes/insert_qdq.c). Thread-safe. The quantize job's choice
 * among calibration candidates runs insert-qdq once per candidate on copies of a model. */
void oq_pass_weight_memo_begin(void);
void oq_pass_weight_memo_end(void);
/* While at least one begin is open, insert-qdq keeps a copy of the float data of each int8
 * weight it quantizes (not blocked), found by the model it quantized (two jobs in one
 * process keep theirs apart), the quantized initializer's name and element count (NULL: not
 * kept); the last end frees them. Thread-safe. For the quantize job's weight rounding, which
 * needs the float weights behind the model's int8 ones (fold-bias may have raised a
 * channel's scale since: the rounding uses the scales the model has). */
void oq_pass_float_weights_begin(void);
void oq_pass_float_weights_end(void);
const float *oq_pass_float_weight(const oq_model *m, const char *qname, int64_t numel);
/* Remove v's producer (a Constant) or initializer when nothing uses v any more. */
void oq_pass_drop_if_unused(oq_value *v);
/* A Pad that adds zeros: mode "constant" and value 0 (Pad-2's `value` attribute, or
 * Pad-11+'s constant_value input absent or a one-element constant 0). Its pads are not
 * looked at; nothing is reported (a constant it cannot read is not a zero). */
bool oq_pass_is_zero_pad(const oq_node *p);

/* ---- small shared helpers (passes/util.c) */
/* Is name one of the comma- (or space-) separated items of list? */
bool oq_pass_name_in_list(const char *list, const char *name);
/* A name not used in g or its enclosing scopes, based on a followed by b (arena copy). */
char *oq_pass_unique_name2(oq_graph *g, const char *a, const char *b);
/* Compile a POSIX extended regex option (empty: *has stays false); a bad one is
 * OQ_ERR_USAGE "WHO: OPT \"PAT\": reason". */
#include <regex.h>
oq_status oq_pass_compile_regex(const char *who, const char *opt, const char *pat, regex_t *re, bool *has, oq_diag *d);
/* include-nodes / exclude-nodes: does node n's name (or "") match inc (when given) and not
 * exc (when given)? NULL: no filter. */
bool oq_pass_node_name_selected(const oq_node *n, const regex_t *inc, const regex_t *exc);

/* ---- int8 embedding tables (passes/quantize_gather.c): quantize-gather and
 * quantize-dynamic{embedding-dtype=int8}. Gathers on axis 0 of a constant float table of
 * at least min_elements elements, with computed indices, whose name passes inc/exc (NULL:
 * all), read an int8 copy with one scale per row: Gather -> Cast -> Mul(Gather(scales)). */
#define OQ_GATHER_MIN_ELEMENTS 16384
typedef struct oq_gather_spec {
    int64_t min_elements;
    const regex_t *inc, *exc;
} oq_gather_spec;
oq_status oq_pass_quantize_gathers(oq_model *m, const oq_gather_spec *s, oq_pass_result *res, oq_diag *d);
/* An embedding dtype option: "int8" (*on = true) or "float"; else OQ_ERR_USAGE naming who/opt. */
oq_status oq_pass_gather_dtype(const char *who, const char *opt, const char *v, bool *on, oq_diag *d);

/* Option definitions shared by the passes that select nodes and quantize weights. */
#define OQ_PASS_NODE_FILTER_OPTIONS                                                                                \
    {"include-nodes", OQ_OPT_STRING, "", "only nodes whose name matches this POSIX extended regex"},              \
    {"exclude-nodes", OQ_OPT_STRING, "", "skip nodes whose name matches this POSIX extended regex"}
#define OQ_PASS_PAIR_LIMIT_OPTION                                                                                  \
    {"pair-limit", OQ_OPT_BOOL, "false",                                                                          \
     "int8 weights: no same-sign adjacent pair with |a|+|b| > 128, so u8 x s8 kernels without VNNI cannot saturate"}

/* ---- calibration samples from pass options (passes/calib_source.c) */
typedef struct oq_calib_source oq_calib_source;
/* The source the options name: exactly one of data=DIR, images=DIR (size, mean, std,
 * bgr, layout, scale, grey), random=N (seed, size), feed=ID (samples fed through the API,
 * oq_calib_source_from_feed_id); then dims, values, max-samples.
 * Errors start with `who`. */
oq_status oq_pass_calib_source(const oq_pass_options *opts, const char *who, oq_calib_source **out, oq_diag *d);
/* Does any of data, images, random, feed name a source? */
bool oq_pass_calib_source_given(const oq_pass_options *opts);
/* The option definitions oq_pass_calib_source reads, for a pass's option table. */
#define OQ_PASS_CALIB_SOURCE_OPTIONS                                                                               \
    {"data", OQ_OPT_STRING, "", "folder of samples (one subfolder per sample, or .npy/.pb files)"},               \
    {"images", OQ_OPT_STRING, "", "folder of PNG/JPEG images (size: from the model input unless given)"},         \
    {"random", OQ_OPT_INT, "0", "N random samples (smoke runs only: ranges are not meaningful)"},                 \
    {"seed", OQ_OPT_INT, "1", "seed for random"},                                                                 \
    {"size", OQ_OPT_STRING, "", "HxW: image size; for random, the last two dims of a 4-D input"},                 \
    {"mean", OQ_OPT_STRING, "0,0,0", "images: per-channel mean subtracted after dividing by scale"},              \
    {"std", OQ_OPT_STRING, "1,1,1", "images: per-channel std divided by"},                                        \
    {"bgr", OQ_OPT_BOOL, "false", "images: channels in B,G,R order"},                                             \
    {"layout", OQ_OPT_STRING, "nchw", "images: nchw or nhwc"},                                                    \
    {"scale", OQ_OPT_FLOAT, "255", "images: pixels are divided by this first"},                                   \
    {"grey", OQ_OPT_BOOL, "false", "images: one channel (luma)"},                                                 \
    {"dims", OQ_OPT_STRING, "", "random: NAME=N,...: sizes of symbolic dimensions"},                              \
    {"values", OQ_OPT_STRING, "", "NAME=V,...: inputs filled with V instead of random data (e.g. sr=16000)"},    \
    {"max-samples", OQ_OPT_INT, "0", "use at most this many samples (0: all)"},                                  \
    {"feed", OQ_OPT_INT, "0", "samples a program fed this process (oq_calib_source_feed_id; set by oq_quantize)"}
/* Scales as a stored tensor's bytes (malloc'ed, *nbytes long): float32, or float16 /
 * bfloat16 when dt says so. */
void *oq_pass_scale_bytes(const float *s, int64_t n, int32_t dt, int64_t *nbytes);

/* ---- smooth-quant's statistics gathered in another pass's sample loop (passes/smooth_quant.c)
 * The smooth-quant pass runs them in a loop of its own; calibrate's smooth-quant=search|ALPHA
 * runs them in calibration's loop (one float pass instead of two). */
typedef struct oq_sq_params {
    bool search;               /* alpha per input (else alpha for all) */
    double alpha, outlier_ratio, min_gain_db, min_gain_mul_db;
    /* search: a channel whose peak is at least split_ratio times the median one may be
     * split off into a float MatMul of its own (0: never) */
    double split_ratio;
    double split_gain_db;      /* split when the held-out error falls by more than this */
    double split_z;            /* and the mean per-sample gain by more than this many standard
                                  errors (0: no such rule) */
} oq_sq_params;
void oq_sq_params_default(oq_sq_params *p);
typedef struct oq_sq_run oq_sq_run;
struct oq_calib_hooks;
/* Find the MatMul/Gemm inputs to smooth and fill h's observers (on_tensor, on_input,
 * begin_sample, check, user; the caller sets threads and progress). all_minmax: also keep
 * each input's per-channel min/max over every sample (oq_sq_smoothed's derived range). */
oq_status oq_sq_begin(oq_model *m, const oq_sq_params *p, bool all_minmax, oq_sq_run **out,
                      struct oq_calib_hooks *h, oq_diag *d);
size_t oq_sq_n_inputs(const oq_sq_run *r); /* candidate inputs (0: nothing to observe) */
/* After the samples ran: choose, rewrite m, notes and OQ_SMOOTH_METADATA_KEY, pass stats. */
oq_status oq_sq_finish(oq_sq_run *r, oq_model *m, uint64_t samples, oq_pass_result *res, oq_diag *d);
#define OQ_SQ_CHAIN_MAX 10 /* tensors a fold may rescale before X (can_fold looks 8 deep) */
typedef struct oq_sq_input {
    const char *orig, *now;    /* X's name in the float model; what the layers read now */
    bool replaced;             /* X itself now holds X/s, renamed `now` (a fold); else a Mul
                                * makes `now` and X is unchanged */
    bool judged_minmax;        /* the search judged it with min/max ranges */
    bool derived;              /* min/max of `now` (and the chain's) known from per-channel
                                * extremes and s */
    float min, max;
    size_t n_chain;            /* a fold through Relu/LeakyRelu/Add(constant) also scaled
                                * these tensors before X (now: NULL when never observed) */
    struct sq_chain_range {
        const char *orig, *now;
        float min, max;
    } chain[OQ_SQ_CHAIN_MAX];
} oq_sq_input;
typedef struct sq_chain_range sq_chain_range;
/* Input i (< oq_sq_n_inputs) after oq_sq_finish: false when it was left alone. */
bool oq_sq_smoothed(const oq_sq_run *r, size_t i, oq_sq_input *out);
void oq_sq_free(oq_sq_run *r);
#endif
