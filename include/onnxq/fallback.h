/* onnxq — accuracy-driven fallback: return the layers that cost the most accuracy to float
 * until the quantized model's output SQNR reaches a target.
 *
 *   oq_fallback_options o = oq_fallback_options_default();
 *   o.target_sqnr_db = 30;
 *   oq_fallback_result r;
 *   oq_fallback_run(float_model, quant_model, src, &o, &r, &d);   // edits quant_model
 *   ... r.steps[i].node, r.steps[i].sqnr_db, r.met
 *   oq_fallback_result_free(&r);
 *
 * Each step measures the quantized model against the float one on every sample of src
 * with the verify engine (onnxq/verify.h) and, while the SQNR of the worst output slice
 * (oq_verify_worst: each graph output, each part of an output made by a Concat) is below
 * the target, returns one node to float (oq_fallback_node).
 * Which node (docs/verify.md, "Accuracy-driven fallback"):
 *  1. the layer L with the lowest isolated SQNR among the layers whose producer in the
 *     quantized model still has a quantized input (a DequantizeLinear input), those
 *     upstream of the worst slice first (greedy search);
 *  2. a layer's isolated error includes the quantization of its activation inputs: when an
 *     input X of L's node is itself quantized and X's own quantization error ("output-QDQ"
 *     SQNR, float X vs QDQ(float X)) is at most L's isolated SQNR + 1 dB, the input
 *     quantization explains the drop, and X's producer is chosen instead (when it can fall
 *     back: it is a node with a quantized input).
 * The result is recorded in the model's metadata_props: "onnxq.fallback.layers" (comma
 * list of node names, in the order they were returned to float) and
 * "onnxq.fallback.steps" (JSON array, one object per measurement).
 */
#ifndef ONNXQ_FALLBACK_H
#define ONNXQ_FALLBACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnxq/calib.h"
#include "onnxq/exec.h"
#include "onnxq/ir.h"
#include "onnxq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OQ_FALLBACK_LAYERS_KEY "onnxq.fallback.layers"
#define OQ_FALLBACK_STEPS_KEY "onnxq.fallback.steps"

/* Search strategies:
 *  GREEDY: one layer per step, chosen by rules 1 and 2 from a fresh measurement with
 *          isolated errors (precise; one measurement per layer returned to float).
 *  BISECT: rank the layers once, by the rules applied to the first measurement (the k-th
 *          candidate is what rule 1 and 2 pick after the k-1 before it are taken), then
 *          binary-search the smallest k such that the k first candidates in float meet the
 *          target (about log2(max_fallback) + 1 measurements, without isolation). For
 *          models that need many layers back. */
enum { OQ_FALLBACK_GREEDY = 0, OQ_FALLBACK_BISECT = 1 };

typedef struct oq_fallback_options {
    double target_sqnr_db;  /* stop when the worst output slice's SQNR >= this */
    int max_fallback;       /* at most this many nodes returned to float (default 10) */
    int threads;            /* executor threads (<= 0: one per CPU) */
    double prefer_producer_db; /* margin of rule 2 (default 1 dB) */
    int search;             /* OQ_FALLBACK_GREEDY (default) or OQ_FALLBACK_BISECT */
    oq_arith arith;         /* arithmetic the quantized model is measured with (the
                             * quantize target's; default OQ_ARITH_REFERENCE) */
    /* Called with one line of progress text per step (may be NULL). */
    void (*log)(const char *line, void *user);
    void *log_user;
    /* Called after each sample of each measurement (may be NULL); done == 0 starts a
     * measurement (e.g. oq_calib_progress_stderr). */
    void (*progress)(uint64_t done, uint64_t total, const char *label, void *user);
    void *progress_user;
    /* Greedy search: called after each step's nodes are back in float, before the
     * measurement, to redo what depended on them (the quantize job redoes bias correction:
     * the corrections after a returned layer were fitted to the errors it had quantized).
     * May edit quant_model; an error stops the search. NULL: nothing. */
    oq_status (*after_step)(oq_model *quant_model, void *user, oq_diag *d);
    void *after_step_user;
} oq_fallback_options;

oq_fallback_options oq_fallback_options_default(void);

typedef struct oq_fallback_step {
    char *node;        /* the node with weights returned to float before this measurement
                        * (NULL: step 0) */
    char *op_type;
    char *tensor;      /* the layer (tensor) whose isolated SQNR was the worst */
    double layer_iso_db; /* its isolated SQNR */
    bool via_producer; /* rule 2 chose the producer of one of its inputs */
    char *input;       /* rule 2: that input (tensor) */
    double input_own_db; /* its own (output-QDQ) SQNR */
    char *nodes;       /* every node returned to float at this step, comma separated:
                        * rule 2 also returns the nodes without weights between the
                        * producer and the layer (Relu, MaxPool, ...) */
    double sqnr_db;    /* worst output slice's SQNR measured after the change */
    char *worst_output;/* that slice (oq_verify_slice_label: "out[1:4..84]", or the output) */
    size_t layers;     /* candidates (layers) in float in this measurement */
} oq_fallback_step;

typedef struct oq_fallback_result {
    size_t n_steps;          /* measurements; steps[0] is the model as quantized */
    oq_fallback_step *steps; /* malloc'ed */
    uint64_t samples;
    bool met;                /* target reached */
    double sqnr_db;          /* min output SQNR of the model as left (quant_model) */
    char *in_float;          /* nodes in float at the end, comma separated (malloc'ed) */
    size_t layers;           /* layers (candidates) in float at the end */
} oq_fallback_result;

/* Measure, fall back, measure again ... (see above). quant_model is edited in place and
 * stays valid (oq_model_check) after every step. Errors: models the verify engine refuses,
 * sample files, a node that cannot be returned to float. */
oq_status oq_fallback_run(oq_model *float_model, oq_model *quant_model, oq_calib_source *src,
                          const oq_fallback_options *o, oq_fallback_result *res, oq_diag *d);
void oq_fallback_result_free(oq_fallback_result *r);

/* Make node n of a QDQ model compute in float:
 *  - each input that is DequantizeLinear(constant) (weight, bias) is replaced by a float
 *    constant: float_model's constant of the same name when it has the same dtype and
 *    shape (the QDQ conventions keep the weight's name at the DQ output), else the value
 *    the DQ computes (e.g. a weight folded by fold-batchnorm, which gets a new name;
 *    float_model may be NULL). Same name when n was its only consumer; the DQ and its
 *    now unused initializers are removed;
 *  - each activation input read through a QuantizeLinear -> DequantizeLinear pair is read
 *    in float: the pair is removed when n was its only consumer (the producer's output
 *    gets its name back), else n alone reads the float tensor;
 *  - its outputs' Q -> DQ pairs are removed (consumers read the float output under the
 *    same name).
 * *changed tells whether anything was done. */
oq_status oq_fallback_node(oq_model *m, oq_model *float_model, oq_node *n, bool *changed, oq_diag *d);

/* The JSON of "onnxq.fallback.steps" (malloc'ed). */
char *oq_fallback_steps_json(const oq_fallback_result *r, double target_sqnr_db);

#ifdef __cplusplus
}
#endif
#endif
