/* The quantize job (include/onnxq/quantize.h): the options and their defaults, the
 * deployment target's choices, the configuration JSON, the pass pipeline built as text
 *   [upgrade-opset{to=13|21}] constant-to-initializer eliminate-identity{constants-only}
 *   fold-constants{weights-only} fold-batchnorm fold-pad
 *   calibrate{[smooth-quant]}
 *   insert-qdq [fold-bias]
 *   [qdq-cleanup]
 * and the steps after it (bias correction, saturation check, fallback: quantize_steps.c),
 * for every front end: `onnxq quantize` (src/cli/cmd_quantize.c) parses its arguments into
 * oq_quantize_options and prints what this returns; the Python package does the same.
 * The resolved configuration is stored in the output's metadata_props
 * "onnxq.quantize.config". docs/quantize.md */
#include "onnxq/quantize.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "io/json_writer.h"
#include "job/job-impl.h"
#include "../../passes/pass-impl.h" /* oq_pass_weight_memo_begin/_end */
#include "onnxq/calib.h"
#include "onnxq/pass.h"
#include "onnxq/target.h"

#define SMOOTH_AUTO OQ_QUANTIZE_SMOOTH_AUTO /* --smooth-quant auto */

typedef struct qconfig {
    const char *mode;           /* "static" (calibrated QDQ), "dynamic" (quantize-dynamic) or
                                 * "weight-only" (quantize-weights) */
    const char *calib, *calib_images;
    int64_t calib_random;
    int64_t seed;
    int64_t max_samples;
    const char *size, *mean, *std, *layout;
    bool bgr, grey;
    const char *dims, *input_values; /* NAME=N,... for generated data */
    double scale;
    const char *method;
    double percentile;
    double averaging;
    const char *nan_policy;
    const char *act_dtype, *weight_dtype;
    bool act_symmetric, weight_symmetric, per_channel, reduce_range;
    int64_t weight_block_size;
    const char *op_types, *include_nodes, *exclude_nodes, *overrides;
    const char *embedding_dtype; /* --embedding-dtype: int8 (quantize-gather) | float */
    int64_t threads;
    const char *target;         /* deployment target (include/onnxq/target.h) */
    /* resolved */
    const oq_target *tgt;       /* the row --target named ("host" resolved) */
    const char *placement;      /* insert-qdq placement rules, from the target */
    /* where each target-driven choice came from: "target", "option" or "config" */
    const char *src_act_dtype, *src_weight_dtype, *src_weight_symmetric, *src_op_types;
    const char *depthwise, *src_depthwise; /* int8 | float (depthwise Convs left in float) */
    const char *cfg_depthwise;             /* what the config file set, for src_depthwise */
    double min_intensity;                  /* insert-qdq min-intensity (0 off; < 0 the target's) */
    const char *src_min_intensity;
    const char *weight_rounding, *src_weight_rounding; /* nearest | gptq */
    const char *cfg_weight_rounding;
    bool weight_symmetric_set;
    int prepare;                /* graph preparation before calibration: 1 --prepare, 0 --no-prepare,
                                   -1 the target's (static mode on the ort-* targets) */
    const char *src_prepare;
    int bias_correction;        /* 1 --bias-correction, 0 --no-bias-correction, -1 the target's */
    const char *src_bias_correction;
    bool fallback;              /* --target-sqnr given */
    double smooth_quant;        /* --smooth-quant ALPHA in [0, 1]; SMOOTH_AUTO; < 0 otherwise: off */
    bool smooth_asked;          /* --smooth-quant or the config file set it (else: the default) */
    bool pair_limit;            /* int8 weights for a target whose CPU saturates u8 x s8 pairs */
    int64_t opset_in, opset_target;
    bool float16;         /* the model computes in float16: widen-float16 first (static, dynamic) */
    bool fold_bias, qdq_cleanup;
    char *pipeline;
    /* --mode: static (the pipeline above) or weight-only (quantize-weights) */
    const char *wformat, *algo, *wscale_dtype; /* weight-only: qdq|matmulnbits, rtn|gptq */
    int64_t accuracy_level;
    double gptq_damp;
    bool gptq_act_order;
    uint64_t feed;              /* samples the caller fed (oq_calib_source_feed_id), 0: none */
} qconfig;


/* A bad option: one line that reads as the command's ("onnxq quantize: ..."). */
#define qerr(d, ...) oq_diag_add((d), OQ_SEV_ERROR, OQ_ERR_USAGE, "onnxq quantize", NULL, NULL, __VA_ARGS__)

static bool weight_only(const qconfig *c)
{
    return strcmp(c->mode, "weight-only") == 0;
}


static bool smooth_on(const qconfig *c)
{
    return c->smooth_quant >= 0 || c->smooth_quant == SMOOTH_AUTO;
}

/* Calibration samples given: a folder, images, random data or fed samples. */
static bool has_data(const qconfig *c)
{
    return c->calib || c->calib_images || c->calib_random > 0 || c->feed;
}

/* ------------------------------------------------------------ pipeline text */

typedef struct strb {
    char *p;
    size_t len, cap;
} strb;

static void sadd(strb *b, const char *s)
{
    size_t n = strlen(s);
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->len + n + 1)
            nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np)
            return;
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n + 1);
    b->len += n;
}

static void sopt(strb *b, bool *first, const char *k, const char *v)
{
    sadd(b, *first ? "{" : ",");
    *first = false;
    sadd(b, k);
    sadd(b, "=\"");
    for (const char *c = v; *c; c++) {
        char e[3] = {0};
        if (*c == '"' || *c == '\\') {
            e[0] = '\\';
            e[1] = *c;
        } else {
            e[0] = *c;
        }
        sadd(b, e);
    }
    sadd(b, "\"");
}

static void soptf(strb *b, bool *first, const char *k, const char *fmt, double v)
{
    char buf[64];
    snprintf(buf, sizeof buf, fmt, v);
    if (strcmp(fmt, "%.17g") == 0) /* shortest text that reads back exactly */
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(buf, sizeof buf, "%.*g", prec, v);
            if (strtod(buf, NULL) == v)
                break;
        }
    sadd(b, *first ? "{" : ",");
    *first = false;
    sadd(b, k);
    sadd(b, "=");
    sadd(b, buf);
}

static void soptb(strb *b, bool *first, const char *k, bool v)
{
    sadd(b, *first ? "{" : ",");
    *first = false;
    sadd(b, k);
    sadd(b, v ? "=true" : "=false");
}

/* The calibration sample options of the calibrate and quantize-weights passes. */
static void source_opts(strb *b, bool *f, const qconfig *c)
{
    if (c->feed)
        soptf(b, f, "feed", "%.0f", (double)c->feed);
    if (c->calib)
        sopt(b, f, "data", c->calib);
    if (c->calib_images) {
        sopt(b, f, "images", c->calib_images);
        sopt(b, f, "mean", c->mean);
        sopt(b, f, "std", c->std);
        soptb(b, f, "bgr", c->bgr);
        sopt(b, f, "layout", c->layout);
        soptf(b, f, "scale", "%.17g", c->scale);
        if (c->grey)
            soptb(b, f, "grey", true);
    }
    if (*c->dims)
        sopt(b, f, "dims", c->dims);
    if (*c->input_values)
        sopt(b, f, "values", c->input_values);
    if (c->calib_random > 0) {
        soptf(b, f, "random", "%.0f", (double)c->calib_random);
        soptf(b, f, "seed", "%.0f", (double)c->seed);
    }
    if (*c->size)
        sopt(b, f, "size", c->size);
    if (c->max_samples > 0)
        soptf(b, f, "max-samples", "%.0f", (double)c->max_samples);
}

/* --mode weight-only: [upgrade-opset{to=21}] constant-to-initializer eliminate-identity{constants-only}
 * quantize-weights{...} */
static char *build_wonly_pipeline(qconfig *c, bool progress)
{
    strb b = {0};
    bool f = true;
    if (c->opset_target > c->opset_in) {
        char buf[64];
        snprintf(buf, sizeof buf, "upgrade-opset{to=%lld},", (long long)c->opset_target);
        sadd(&b, buf);
    }
    sadd(&b, "constant-to-initializer,eliminate-identity{constants-only=true},"); /* weights behind an Identity: prep_passes */
    if (strcmp(c->embedding_dtype, "float") != 0) { /* tables and tied heads: passes/quantize_embeddings.c */
        sadd(&b, "quantize-embeddings");
        sopt(&b, &f, "dtype", c->embedding_dtype);
        soptf(&b, &f, "block-size", "%.0f", (double)c->weight_block_size);
        soptf(&b, &f, "accuracy-level", "%.0f", (double)c->accuracy_level);
        sopt(&b, &f, "include-nodes", c->include_nodes);
        sopt(&b, &f, "exclude-nodes", c->exclude_nodes);
        sadd(&b, "},");
        f = true;
    }
    sadd(&b, "quantize-weights");
    sopt(&b, &f, "dtype", c->weight_dtype);
    soptf(&b, &f, "block-size", "%.0f", (double)c->weight_block_size);
    soptb(&b, &f, "symmetric", c->weight_symmetric);
    sopt(&b, &f, "format", c->wformat);
    if (strcmp(c->wformat, "qdq") == 0)
        sopt(&b, &f, "scale-dtype", c->wscale_dtype);
    else
        soptf(&b, &f, "accuracy-level", "%.0f", (double)c->accuracy_level);
    sopt(&b, &f, "algo", c->algo);
    sopt(&b, &f, "op-types", c->op_types);
    sopt(&b, &f, "include-nodes", c->include_nodes);
    sopt(&b, &f, "exclude-nodes", c->exclude_nodes);
    if (strcmp(c->algo, "gptq") == 0 || strcmp(c->algo, "awq") == 0) {
        if (strcmp(c->algo, "gptq") == 0) {
            soptf(&b, &f, "damp", "%.17g", c->gptq_damp);
            if (c->gptq_act_order)
                soptb(&b, &f, "act-order", true);
        }
        source_opts(&b, &f, c);
        soptf(&b, &f, "threads", "%.0f", (double)c->threads);
    }
    if (progress)
        soptb(&b, &f, "progress", progress);
    sadd(&b, "}");
    return b.p;
}

/* --mode weight-only: its defaults (int4, blocks of 32, MatMul and Gemm) where neither an
 * option nor the config chose, and the checks of its options. 0, or -1 after a message. */
static int resolve_weight_only(qconfig *c, bool static_only_option, oq_diag *d)
{
    if (static_only_option) {
        qerr(d, "--mode weight-only quantizes weights only: --act-dtype, --act-symmetric, "
                              "--per-tensor, --reduce-range, --overrides and --target-sqnr do not apply");
        return -1;
    }
    if (!c->weight_dtype)
        c->weight_dtype = "int4";
    if (strcmp(c->weight_dtype, "int4") && strcmp(c->weight_dtype, "uint4") && strcmp(c->weight_dtype, "int8") &&
        strcmp(c->weight_dtype, "uint8")) {
        qerr(d, "--mode weight-only: --weight-dtype %s: one of int4, uint4, int8, uint8", c->weight_dtype);
        return -1;
    }
    if (c->weight_block_size == 0)
        c->weight_block_size = 32;
    int64_t bs = c->weight_block_size;
    if (bs < 16 || bs > 256 || (bs & (bs - 1)) != 0) {
        qerr(d, "--weight-block-size %lld: a power of two in 16..256 in --mode weight-only", (long long)bs);
        return -1;
    }
    if (!c->op_types)
        c->op_types = "MatMul,Gemm";
    if (strcmp(c->wformat, "qdq") && strcmp(c->wformat, "matmulnbits")) {
        qerr(d, "--format %s: one of qdq, matmulnbits", c->wformat);
        return -1;
    }
    if (strcmp(c->algo, "rtn") && strcmp(c->algo, "gptq") && strcmp(c->algo, "awq")) {
        qerr(d, "--algo %s: one of rtn, gptq, awq", c->algo);
        return -1;
    }
    if (c->gptq_act_order && strcmp(c->algo, "gptq")) {
        qerr(d, "--gptq-act-order: only for --algo gptq (the algorithm is %s)", c->algo);
        return -1;
    }
    if (strcmp(c->wscale_dtype, "auto") && strcmp(c->wscale_dtype, "float16") && strcmp(c->wscale_dtype, "float32")) {
        qerr(d, "--weight-scale-dtype %s: one of float16, float32", c->wscale_dtype);
        return -1;
    }
    if (!strcmp(c->wformat, "matmulnbits") && !strcmp(c->wscale_dtype, "float16")) {
        qerr(d, "--weight-scale-dtype float16: MatMulNBits keeps float32 scales (the type of its input)");
        return -1;
    }
    if (c->accuracy_level < 0 || c->accuracy_level > 4) {
        qerr(d, "--accuracy-level %lld: must be in 0..4", (long long)c->accuracy_level);
        return -1;
    }
    if (!(c->gptq_damp >= 0 && c->gptq_damp <= 10)) {
        qerr(d, "--gptq-damp %g: must be in [0, 10]", c->gptq_damp);
        return -1;
    }
    return 0;
}

/* A HardSigmoid or Clip in g: the parts of the chains fuse-activations makes a HardSwish. */
/* Does the main graph hold float16 (an input, an output or an initializer)? */
static bool has_float16(const oq_graph *g)
{
    for (size_t i = 0; i < g->n_initializers; i++)
        if (g->initializers[i]->dtype == OQ_DTYPE_FLOAT16)
            return true;
    for (size_t i = 0; i < g->n_inputs; i++)
        if (g->inputs[i]->type && g->inputs[i]->type->has_elem_type && g->inputs[i]->type->elem_type == OQ_DTYPE_FLOAT16)
            return true;
    for (size_t i = 0; i < g->n_outputs; i++)
        if (g->outputs[i]->type && g->outputs[i]->type->has_elem_type && g->outputs[i]->type->elem_type == OQ_DTYPE_FLOAT16)
            return true;
    return false;
}

static bool has_hardswish_parts(const oq_graph *g)
{
    for (const oq_node *n = g->first; n; n = n->next)
        if (oq_domain_is_default(n->domain) && (!strcmp(n->op_type, "HardSigmoid") || !strcmp(n->op_type, "Clip")))
            return true;
    return false;
}

static bool needs21(const char *dt)
{
    return strstr(dt, "16") != NULL || strstr(dt, "4") != NULL;
}

/* The passes before calibration that keep the model float: bias correction runs them on
 * the float model too, so that both models hold the same layer outputs. */
static void prep_passes(strb *b, const qconfig *c)
{
    if (c->opset_target > c->opset_in) {
        char buf[64];
        snprintf(buf, sizeof buf, "upgrade-opset{to=%lld},", (long long)c->opset_target);
        sadd(b, buf);
    }
    /* eliminate-identity: a weight behind an Identity (the TorchScript exporter writes
     * Identity(initializer) for parameters it shares, e.g. nn.TransformerEncoder's cloned
     * layers) is then an initializer that insert-qdq quantizes per channel as a weight,
     * not an activation quantized per tensor after calibration. Only those: removing the
     * activations' Identity nodes moves insert-qdq's pairs (PP-OCRv6 det, 147 of them:
     * 2.1 dB lower on the zoo's eval pages) */
    /* fold-constants{weights-only}: a weight computed from constants (Transpose of a tied
     * embedding table before an LM head MatMul, a Cast of float16 weights, weight
     * normalization) becomes an initializer: quantized per channel as a weight, not as an
     * activation after calibration (static) or left float (dynamic); so do the pads of a
     * Pad, which fold-pad then folds into the Conv after it when they are zeros (in
     * onnxruntime a Pad between a DequantizeLinear and a QuantizeLinear runs in float with
     * a Q/DQ pair of its own: EfficientNet-Lite0 3.7 of 12.9 ms on an AVX2 CPU) */
    /* widen-float16: a float16 model is calibrated, quantized and corrected in float32
     * inside; its inputs and outputs stay float16 (passes/widen_float16.c) */
    if (c->float16)
        sadd(b, "widen-float16,");
    sadd(b, "constant-to-initializer,eliminate-identity{constants-only=true},"
            "fold-constants{weights-only=true,max-bytes=17179869184},fold-batchnorm,fold-pad");
    if (c->prepare) /* graph preparation: what the target's runtime fuses (docs/quantize.md) */
        sadd(b, ",fuse-activations,fold-linear,eliminate-dead");
}

static char *build_pipeline(qconfig *c, bool progress)
{
    strb b = {0};
    bool f;
    prep_passes(&b, c);
    if (strcmp(c->mode, "dynamic") == 0) { /* no calibration, no QDQ: passes/quantize_dynamic.c */
        sadd(&b, ",quantize-dynamic");
        f = true;
        sopt(&b, &f, "weight-dtype", c->weight_dtype);
        soptb(&b, &f, "weight-symmetric", c->weight_symmetric);
        soptb(&b, &f, "per-channel", c->per_channel);
        soptb(&b, &f, "reduce-range", c->reduce_range);
        if (c->pair_limit)
            soptb(&b, &f, "pair-limit", true);
        sopt(&b, &f, "op-types", c->op_types);
        sopt(&b, &f, "include-nodes", c->include_nodes);
        sopt(&b, &f, "exclude-nodes", c->exclude_nodes);
        sopt(&b, &f, "embedding-dtype", c->embedding_dtype);
        sadd(&b, "}");
        return b.p;
    }
    if (has_data(c)) {
        /* SmoothQuant in calibration's sample loop (one float pass: passes/calibrate.c) */
        sadd(&b, ",calibrate");
        f = true;
        source_opts(&b, &f, c);
        if (smooth_on(c) && c->smooth_quant == SMOOTH_AUTO)
            sopt(&b, &f, "smooth-quant", "search");
        else if (smooth_on(c))
            soptf(&b, &f, "smooth-quant", "%.17g", c->smooth_quant);
        sopt(&b, &f, "method", c->method);
        soptf(&b, &f, "percentile", "%.17g",
              c->percentile > 0 ? c->percentile : oq_default_percentile(oq_dtype_from_name(c->act_dtype)));
        if (c->averaging > 0)
            soptf(&b, &f, "averaging", "%.17g", c->averaging);
        sopt(&b, &f, "dtype", c->act_dtype);
        soptb(&b, &f, "symmetric", c->act_symmetric);
        sopt(&b, &f, "nan-policy", c->nan_policy);
        soptf(&b, &f, "threads", "%.0f", (double)c->threads);
        /* observe what insert-qdq may quantize: the selected ops and the ops around them */
        strb ot = {0};
        sadd(&ot, c->op_types);
        sadd(&ot, ",Relu,Clip,Concat,Softmax,Sigmoid,Reshape,Transpose,Flatten,Squeeze,Unsqueeze,MaxPool,Slice,"
                  "Gather,Resize");
        if (strcmp(c->placement, "ort-cpu") == 0) /* the ops insert-qdq's ort-cpu rules may quantize */
            sadd(&ot, ",Add,Mul,AveragePool,GlobalAveragePool,LeakyRelu");
        if (c->prepare)
            sadd(&ot, ",HardSwish,HardSigmoid");
        if (ot.p)
            sopt(&b, &f, "op-types", ot.p);
        free(ot.p);
        soptb(&b, &f, "progress", progress);
        sadd(&b, "}");
    }
    sadd(&b, ",insert-qdq");
    f = true;
    sopt(&b, &f, "act-dtype", c->act_dtype);
    soptb(&b, &f, "act-symmetric", c->act_symmetric);
    sopt(&b, &f, "weight-dtype", c->weight_dtype);
    soptb(&b, &f, "weight-symmetric", c->weight_symmetric);
    soptb(&b, &f, "per-channel", c->per_channel);
    soptf(&b, &f, "weight-block-size", "%.0f", (double)c->weight_block_size);
    soptb(&b, &f, "reduce-range", c->reduce_range);
    if (c->pair_limit)
        soptb(&b, &f, "pair-limit", true);
    if (c->depthwise && strcmp(c->depthwise, "float") == 0)
        soptb(&b, &f, "depthwise", false);
    if (c->min_intensity > 0)
        soptf(&b, &f, "min-intensity", "%.17g", c->min_intensity);
    sopt(&b, &f, "placement", c->placement);
    sopt(&b, &f, "op-types", c->op_types);
    sopt(&b, &f, "include-nodes", c->include_nodes);
    sopt(&b, &f, "exclude-nodes", c->exclude_nodes);
    sopt(&b, &f, "overrides", c->overrides);
    soptb(&b, &f, "quantize-bias", !c->fold_bias);
    sadd(&b, "}");
    if (c->fold_bias)
        sadd(&b, ",fold-bias");
    if (c->qdq_cleanup)
        sadd(&b, ",qdq-cleanup");
    if (strcmp(c->embedding_dtype, "int8") == 0) { /* int8 embedding tables: passes/quantize_gather.c */
        sadd(&b, ",quantize-gather");
        f = true;
        sopt(&b, &f, "include-nodes", c->include_nodes);
        sopt(&b, &f, "exclude-nodes", c->exclude_nodes);
        if (!f)
            sadd(&b, "}");
    }
    return b.p;
}

/* ------------------------------------------------------------ config JSON */

static void write_config(json_writer *w, const qconfig *c)
{
    json_begin_object(w);
    json_kv_string(w, "mode", c->mode);
    json_kv_string(w, "embedding_dtype", c->embedding_dtype);
    json_kv_string(w, "calib", c->calib);
    json_kv_string(w, "calib_images", c->calib_images);
    json_kv_int(w, "calib_random", c->calib_random);
    json_kv_int(w, "seed", c->seed);
    json_kv_int(w, "max_samples", c->max_samples);
    json_kv_string(w, "size", c->size);
    json_kv_string(w, "mean", c->mean);
    json_kv_string(w, "std", c->std);
    json_kv_bool(w, "bgr", c->bgr);
    json_kv_bool(w, "grey", c->grey);
    json_kv_string(w, "dims", c->dims);
    json_kv_string(w, "input_values", c->input_values);
    json_kv_string(w, "layout", c->layout);
    json_kv_double(w, "scale", c->scale);
    json_kv_string(w, "method", c->method);
    json_key(w, "percentile"); /* null: the activation type's default ("resolved") */
    if (c->percentile > 0)
        json_double(w, c->percentile);
    else
        json_null(w);
    json_kv_double(w, "averaging", c->averaging);
    json_kv_string(w, "nan_policy", c->nan_policy);
    /* a choice the target made is written as null ("the target's"), so that the file
     * with another --target gives that target's choice; "resolved" has the values */
    /* (and a weight-only default, "mode": the mode's) */
    bool tw = !strcmp(c->src_weight_symmetric, "target") || !strcmp(c->src_weight_symmetric, "mode");
    json_kv_string(w, "act_dtype", strcmp(c->src_act_dtype, "target") ? c->act_dtype : NULL);
    json_kv_bool(w, "act_symmetric", c->act_symmetric);
    json_kv_string(w, "weight_dtype",
                   strcmp(c->src_weight_dtype, "target") && strcmp(c->src_weight_dtype, "mode") ? c->weight_dtype : NULL);
    json_key(w, "weight_symmetric");
    if (tw)
        json_null(w);
    else
        json_bool(w, c->weight_symmetric);
    json_kv_bool(w, "per_channel", c->per_channel);
    json_kv_int(w, "weight_block_size", c->weight_block_size);
    json_kv_bool(w, "reduce_range", c->reduce_range);
    json_kv_string(w, "op_types",
                   strcmp(c->src_op_types, "target") && strcmp(c->src_op_types, "mode") ? c->op_types : NULL);
    json_kv_string(w, "depthwise", c->src_depthwise && strcmp(c->src_depthwise, "target") ? c->depthwise : NULL);
    json_key(w, "min_intensity"); /* null: the target's */
    if (c->src_min_intensity && strcmp(c->src_min_intensity, "target"))
        json_double(w, c->min_intensity);
    else
        json_null(w);
    json_kv_string(w, "weight_rounding",
                   c->src_weight_rounding && (!strcmp(c->src_weight_rounding, "option") ||
                                              !strcmp(c->src_weight_rounding, "config")) ? c->weight_rounding : NULL);
    json_kv_string(w, "include_nodes", c->include_nodes);
    json_kv_string(w, "exclude_nodes", c->exclude_nodes);
    json_kv_string(w, "overrides", c->overrides);
    json_kv_int(w, "threads", c->threads);
    json_kv_string(w, "target", c->target);
    json_key(w, "prepare"); /* null: the target's */
    if (!strcmp(c->src_prepare, "option") || !strcmp(c->src_prepare, "config"))
        json_bool(w, c->prepare != 0);
    else
        json_null(w);
    json_key(w, "bias_correction"); /* null: the target's */
    if (!strcmp(c->src_bias_correction, "option") || !strcmp(c->src_bias_correction, "config"))
        json_bool(w, c->bias_correction != 0);
    else
        json_null(w);
    if (weight_only(c)) {
        json_kv_string(w, "format", c->wformat);
        json_kv_string(w, "weight_scale_dtype", c->wscale_dtype);
        json_kv_int(w, "accuracy_level", c->accuracy_level);
        json_kv_string(w, "algo", c->algo);
        json_kv_double(w, "gptq_damp", c->gptq_damp);
        json_kv_bool(w, "gptq_act_order", c->gptq_act_order);
    }
    json_key(w, "smooth_quant"); /* null: off */
    if (c->smooth_quant == SMOOTH_AUTO)
        json_string(w, "auto");
    else if (c->smooth_quant >= 0)
        json_double(w, c->smooth_quant);
    else
        json_null(w);
    json_key(w, "resolved");
    json_begin_object(w);
    json_kv_string(w, "target", c->tgt->name);
    if (strcmp(c->target, "host") == 0)
        json_kv_string(w, "host_cpu", oq_target_host_reason());
    json_kv_string(w, "arithmetic", oq_arith_name(c->tgt->arith));
    json_kv_string(w, "placement", c->placement);
    json_kv_bool(w, "prepare", c->prepare != 0);
    json_kv_bool(w, "bias_correction", c->bias_correction != 0);
    json_kv_bool(w, "pair_limit", c->pair_limit);
    json_kv_double(w, "percentile",
                   c->percentile > 0 ? c->percentile : oq_default_percentile(oq_dtype_from_name(c->act_dtype)));
    json_kv_string(w, "act_dtype", c->act_dtype);
    json_kv_string(w, "weight_dtype", c->weight_dtype);
    json_kv_bool(w, "weight_symmetric", c->weight_symmetric);
    json_kv_string(w, "op_types", c->op_types);
    if (c->depthwise)
        json_kv_string(w, "depthwise", c->depthwise);
    json_kv_double(w, "min_intensity", c->min_intensity > 0 ? c->min_intensity : 0);
    if (c->weight_rounding)
        json_kv_string(w, "weight_rounding", c->weight_rounding);
    json_key(w, "sources");
    json_begin_object(w);
    json_kv_string(w, "act_dtype", c->src_act_dtype);
    json_kv_string(w, "weight_dtype", c->src_weight_dtype);
    json_kv_string(w, "weight_symmetric", c->src_weight_symmetric);
    json_kv_string(w, "op_types", c->src_op_types);
    json_kv_string(w, "prepare", c->src_prepare);
    json_kv_string(w, "bias_correction", c->src_bias_correction);
    if (c->src_depthwise)
        json_kv_string(w, "depthwise", c->src_depthwise);
    if (c->src_min_intensity)
        json_kv_string(w, "min_intensity", c->src_min_intensity);
    if (c->src_weight_rounding)
        json_kv_string(w, "weight_rounding", c->src_weight_rounding);
    json_end_object(w);
    json_kv_int(w, "opset_in", c->opset_in);
    json_kv_int(w, "opset_out", c->opset_target > c->opset_in ? c->opset_target : c->opset_in);
    json_kv_bool(w, "bias_by_fold_bias", c->fold_bias);
    json_kv_bool(w, "qdq_cleanup", c->qdq_cleanup);
    json_kv_string(w, "pipeline", c->pipeline);
    json_end_object(w);
    json_end_object(w);
}



/* ------------------------------------------------------------ options */

void oq_quantize_options_default(oq_quantize_options *c)
{
    memset(c, 0, sizeof(*c));
    c->mode = "static";
    c->embedding_dtype = NULL; /* the mode's: int8 (static, dynamic), float (weight-only) */
    c->seed = 1;
    c->size = "";
    c->mean = "0,0,0";
    c->std = "1,1,1";
    c->layout = "nchw";
    c->scale = 255.0;
    c->method = "select"; /* chosen on held-out samples: src/job/quantize_select.c */
    c->percentile = 0; /* 0: the activation type's default (oq_default_percentile) */
    c->nan_policy = "quantized";
    /* act_dtype, weight_dtype, weight_symmetric and op_types come from the target unless
     * an option or the config file sets them (resolve_target) */
    c->weight_symmetric = -1;
    c->per_channel = true;
    c->target = "ort-x86";
    c->prepare = -1;
    c->bias_correction = -1;
    c->min_intensity = -1;
    c->smooth_quant = SMOOTH_AUTO; /* static mode with calibration data; off otherwise */
    c->include_nodes = "";
    c->exclude_nodes = "";
    c->overrides = "";
    c->dims = "";
    c->input_values = "";
    c->format = "qdq";
    c->algo = "rtn";
    c->weight_scale_dtype = "auto";
    c->gptq_damp = 0.01;
    c->max_fallback = 10;
}

oq_quantize_options *oq_quantize_options_new(void)
{
    oq_quantize_options *o = malloc(sizeof *o);
    if (o)
        oq_quantize_options_default(o);
    return o;
}

void oq_quantize_options_delete(oq_quantize_options *o)
{
    oq_quantize_options_free(o);
    free(o);
}

void oq_quantize_options_set_source(oq_quantize_options *o, oq_calib_source *src)
{
    o->source = src;
}

void oq_quantize_options_set_log(oq_quantize_options *o, void (*log)(const char *line, void *user), void *user,
                                 bool progress)
{
    o->log = log;
    o->log_user = user;
    o->progress_stderr = progress;
}

void oq_quantize_options_free(oq_quantize_options *o)
{
    if (!o)
        return;
    cJSON_Delete(o->config_doc);
    o->config_doc = NULL;
}

/* Apply a JSON config object; strings point into j (kept alive by the caller). */
static oq_status load_config(oq_quantize_options *c, const cJSON *j, const char *path, bool as_config, oq_diag *d)
{
    if (!cJSON_IsObject(j))
        return qerr(d, "%s: expected a JSON object", path);
    for (const cJSON *v = j->child; v; v = v->next) {
        const char *k = v->string;
        const char **sp = NULL;
        int64_t *ip = NULL;
        double *dp = NULL;
        bool *bp = NULL;
        if (!strcmp(k, "mode")) sp = &c->mode;
        else if (!strcmp(k, "embedding_dtype")) sp = &c->embedding_dtype;
        else if (!strcmp(k, "calib")) sp = &c->calib;
        else if (!strcmp(k, "calib_images")) sp = &c->calib_images;
        else if (!strcmp(k, "calib_random")) ip = &c->calib_random;
        else if (!strcmp(k, "seed")) ip = &c->seed;
        else if (!strcmp(k, "max_samples")) ip = &c->max_samples;
        else if (!strcmp(k, "size")) sp = &c->size;
        else if (!strcmp(k, "mean")) sp = &c->mean;
        else if (!strcmp(k, "std")) sp = &c->std;
        else if (!strcmp(k, "bgr")) bp = &c->bgr;
        else if (!strcmp(k, "grey")) bp = &c->grey;
        else if (!strcmp(k, "dims")) sp = &c->dims;
        else if (!strcmp(k, "input_values")) sp = &c->input_values;
        else if (!strcmp(k, "layout")) sp = &c->layout;
        else if (!strcmp(k, "scale")) dp = &c->scale;
        else if (!strcmp(k, "method")) sp = &c->method;
        else if (!strcmp(k, "percentile")) {
            if (cJSON_IsNull(v)) /* the activation type's default */
                continue;
            dp = &c->percentile;
        }
        else if (!strcmp(k, "averaging")) dp = &c->averaging;
        else if (!strcmp(k, "nan_policy")) sp = &c->nan_policy;
        else if (!strcmp(k, "act_dtype")) sp = &c->act_dtype;
        else if (!strcmp(k, "act_symmetric")) bp = &c->act_symmetric;
        else if (!strcmp(k, "weight_dtype")) sp = &c->weight_dtype;
        else if (!strcmp(k, "weight_symmetric")) {
            if (cJSON_IsNull(v)) /* the target's */
                continue;
            if (!cJSON_IsBool(v))
                return qerr(d, "%s: key \"%s\" has the wrong type", path, k);
            c->weight_symmetric = cJSON_IsTrue(v);
            c->config_weight_symmetric = as_config;
            continue;
        }
        else if (!strcmp(k, "target")) sp = &c->target;
        else if (!strcmp(k, "prepare") || !strcmp(k, "bias_correction")) { /* null: the target's */
            bool prep = k[0] == 'p';
            if (cJSON_IsNull(v))
                continue;
            if (!cJSON_IsBool(v))
                return qerr(d, "%s: key \"%s\" has the wrong type", path, k);
            *(prep ? &c->prepare : &c->bias_correction) = cJSON_IsTrue(v);
            *(prep ? &c->config_prepare : &c->config_bias_correction) = as_config;
            continue;
        }
        else if (!strcmp(k, "smooth_quant")) {
            c->smooth_quant_set = true;
            if (cJSON_IsNull(v)) {
                c->smooth_quant = -1;
                continue;
            }
            if (cJSON_IsString(v) && !strcmp(v->valuestring, "auto")) {
                c->smooth_quant = SMOOTH_AUTO;
                continue;
            }
            if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 1))
                return qerr(d, "%s: key \"%s\" must be null, \"auto\" or a number in [0, 1]", path, k);
            c->smooth_quant = v->valuedouble;
            continue;
        }
        else if (!strcmp(k, "per_channel")) bp = &c->per_channel;
        else if (!strcmp(k, "weight_block_size")) ip = &c->weight_block_size;
        else if (!strcmp(k, "reduce_range")) bp = &c->reduce_range;
        else if (!strcmp(k, "op_types")) sp = &c->op_types;
        else if (!strcmp(k, "depthwise")) {
            if (cJSON_IsNull(v)) /* the target's */
                continue;
            sp = &c->depthwise;
        }
        else if (!strcmp(k, "weight_rounding")) {
            if (cJSON_IsNull(v)) /* the target's */
                continue;
            sp = &c->weight_rounding;
        }
        else if (!strcmp(k, "min_intensity")) {
            if (cJSON_IsNull(v)) /* the target's */
                continue;
            if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0))
                return qerr(d, "%s: key \"%s\" must be null or a number >= 0", path, k);
            c->min_intensity = v->valuedouble;
            c->config_min_intensity = as_config;
            continue;
        }
        else if (!strcmp(k, "include_nodes")) sp = &c->include_nodes;
        else if (!strcmp(k, "exclude_nodes")) sp = &c->exclude_nodes;
        else if (!strcmp(k, "overrides")) sp = &c->overrides;
        else if (!strcmp(k, "threads")) ip = &c->threads;
        else if (!strcmp(k, "format")) sp = &c->format;
        else if (!strcmp(k, "weight_scale_dtype")) sp = &c->weight_scale_dtype;
        else if (!strcmp(k, "accuracy_level")) ip = &c->accuracy_level;
        else if (!strcmp(k, "algo")) sp = &c->algo;
        else if (!strcmp(k, "gptq_damp")) dp = &c->gptq_damp;
        else if (!strcmp(k, "gptq_act_order")) bp = &c->gptq_act_order;
        else if (!strcmp(k, "resolved")) continue; /* output only */
        /* the caller's options only: what the command takes as options, not in --config */
        else if (!as_config && !strcmp(k, "target_sqnr")) {
            if (cJSON_IsNull(v)) {
                c->fallback = false;
                continue;
            }
            dp = &c->target_sqnr_db;
            c->fallback = true;
        }
        else if (!as_config && !strcmp(k, "max_fallback")) ip = &c->max_fallback;
        else if (!as_config && !strcmp(k, "eval")) sp = &c->eval;
        else if (!as_config && !strcmp(k, "fallback_search")) sp = &c->fallback_search;
        else if (!as_config && !strcmp(k, "quiet")) bp = &c->quiet;
        else
            return qerr(d, "%s: unknown key \"%s\"", path, k);
        bool ok;
        if (sp) {
            ok = cJSON_IsString(v) || cJSON_IsNull(v);
            if (ok)
                *sp = cJSON_IsString(v) ? v->valuestring : NULL;
            if (ok && !*sp && (sp == &c->size || sp == &c->mean || sp == &c->std || sp == &c->layout ||
                               sp == &c->method || sp == &c->nan_policy || sp == &c->include_nodes ||
                               sp == &c->exclude_nodes || sp == &c->overrides || sp == &c->target ||
                               sp == &c->dims || sp == &c->input_values || sp == &c->mode || sp == &c->format ||
                               sp == &c->algo || sp == &c->weight_scale_dtype))
                ok = false;
        } else if (bp) {
            ok = cJSON_IsBool(v);
            if (ok)
                *bp = cJSON_IsTrue(v);
        } else {
            ok = cJSON_IsNumber(v);
            if (ok && ip) {
                ok = v->valuedouble == (double)(int64_t)v->valuedouble;
                *ip = (int64_t)v->valuedouble;
            } else if (ok) {
                *dp = v->valuedouble;
            }
        }
        if (!ok)
            return qerr(d, "%s: key \"%s\" has the wrong type", path, k);
    }
    if (as_config) {
        c->config_act_dtype = c->act_dtype;
        c->config_weight_dtype = c->weight_dtype;
        c->config_op_types = c->op_types;
        c->config_depthwise = c->depthwise;
        c->config_weight_rounding = c->weight_rounding;
    }
    return OQ_OK;
}

static oq_status options_load(oq_quantize_options *o, cJSON *j, const char *what, bool as_config, oq_diag *d);

oq_status oq_quantize_options_load(oq_quantize_options *o, const char *json, size_t len, const char *what,
                                   bool as_config, oq_diag *d)
{
    cJSON *j = NULL;
    oq_status st = oq_json_parse(json, len, what, &j, d);
    if (st != OQ_OK)
        return st;
    return options_load(o, j, what, as_config, d);
}

oq_status oq_quantize_options_load_file(oq_quantize_options *o, const char *path, bool as_config, oq_diag *d)
{
    cJSON *j = NULL;
    oq_status st = oq_json_parse_file(path, &j, d);
    if (st != OQ_OK)
        return st;
    return options_load(o, j, path, as_config, d);
}

/* Apply j (taken: kept in o->config_doc, or freed on error). */
static oq_status options_load(oq_quantize_options *o, cJSON *j, const char *what, bool as_config, oq_diag *d)
{
    oq_status st;
    st = load_config(o, j, what, as_config, d);
    if (st != OQ_OK) {
        cJSON_Delete(j);
        return st;
    }
    /* keep every document loaded: the strings of an earlier one may still be in use */
    if (o->config_doc) {
        cJSON *keep = cJSON_CreateArray();
        if (!keep || !cJSON_AddItemToArray(keep, j)) {
            cJSON_Delete(keep);
            cJSON_Delete(j);
            return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        }
        cJSON_AddItemToArray(keep, o->config_doc);
        o->config_doc = keep;
    } else {
        o->config_doc = j;
    }
    return OQ_OK;
}


/* ------------------------------------------------------------ target */

static const char *source_of(const char *now, const char *after_config)
{
    return !now ? "target" : now != after_config ? "option" : "config";
}

/* Fill what neither an option nor the config file chose from the target's row, and say
 * where each choice came from (--print-config "resolved"). */
static int resolve_target(qconfig *c, const char *cfg_act, const char *cfg_wdt, const char *cfg_ops,
                          bool wsym_option, oq_diag *d)
{
    c->tgt = oq_target_find(c->target);
    if (!c->tgt) {
        qerr(d, "--target \"%s\": unknown target (one of: %s)", c->target, oq_target_names());
        return -1;
    }
    c->src_act_dtype = source_of(c->act_dtype, cfg_act);
    c->src_weight_dtype = source_of(c->weight_dtype, cfg_wdt);
    c->src_op_types = source_of(c->op_types, cfg_ops);
    c->src_weight_symmetric = wsym_option ? "option" : c->weight_symmetric_set ? "config" : "target";
    if (!c->act_dtype)
        c->act_dtype = oq_dtype_name(c->tgt->act_dtype);
    if (!c->weight_dtype)
        c->weight_dtype = oq_dtype_name(c->tgt->weight_dtype);
    if (!c->op_types) /* dynamic: ConvInteger runs slower than float Conv in onnxruntime */
        c->op_types = strcmp(c->mode, "dynamic") == 0 ? "MatMul,Gemm" : c->tgt->op_types;
    if (!wsym_option && !c->weight_symmetric_set)
        c->weight_symmetric = c->tgt->weight_symmetric;
    c->placement = c->tgt->placement == OQ_PLACE_ORT_CPU ? "ort-cpu" : "plain";
    /* depthwise Convs: float on the onnxruntime targets (its integer depthwise kernels are
     * slower than its float ones, and with bias correction the float ones are more accurate
     * on PaddleOCR det, rec and cls: docs/quantize.md, placement rules); insert-qdq still
     * quantizes, per channel, those onnxruntime would quantize per tensor itself */
    c->src_depthwise = source_of(c->depthwise, c->cfg_depthwise);
    if (!c->depthwise)
        c->depthwise = c->tgt->placement == OQ_PLACE_ORT_CPU && strcmp(c->mode, "static") == 0 ? "float" : "int8";
    /* graph preparation: on for static quantization on the onnxruntime targets (faster
     * there, and not less accurate on average: docs/quantize.md "Graph preparation") */
    /* not with --target-sqnr: the fallback search reached 32 dB on PaddleOCR det with 50
     * layers in float unprepared and not at all prepared (docs/quantize.md) */
    if (c->prepare < 0) {
        bool stat = strcmp(c->mode, "static") == 0;
        c->prepare = stat && c->tgt->placement == OQ_PLACE_ORT_CPU && !c->fallback;
        c->src_prepare = !stat ? "mode" : c->fallback ? "fallback" : "target";
    }
    /* bias correction: on for static quantization on the onnxruntime targets (more
     * accurate on every model measured: docs/quantize.md "Bias correction"); generic keeps
     * the plain result. Not with --target-sqnr: a layer the fallback returns to float gets
     * its float bias back, and the corrections after it no longer fit */
    if (c->bias_correction < 0) {
        bool stat = strcmp(c->mode, "static") == 0;
        c->bias_correction = stat && c->tgt->placement == OQ_PLACE_ORT_CPU && !c->fallback;
        c->src_bias_correction = !stat ? "mode" : c->fallback ? "fallback" : "target";
    }
    /* weight rounding: see below, once the weight type is known */
    c->src_weight_rounding = source_of(c->weight_rounding, c->cfg_weight_rounding);
    if (c->weight_rounding && strcmp(c->weight_rounding, "nearest") && strcmp(c->weight_rounding, "gptq")) {
        qerr(d, "--weight-rounding \"%s\": nearest or gptq", c->weight_rounding);
        return -1;
    }
    if (strcmp(c->depthwise, "int8") && strcmp(c->depthwise, "float")) {
        qerr(d, "--depthwise \"%s\": int8 or float", c->depthwise);
        return -1;
    }
    /* int8 weights asked for on a target whose kernels add u8 x s8 pairs in int16: limit
     * the pairs so that they cannot saturate (insert-qdq pair-limit, docs/quantize.md) */
    c->pair_limit = c->tgt->arith == OQ_ARITH_AVX2 && strcmp(c->weight_dtype, "int8") == 0 && c->weight_symmetric &&
                    !c->reduce_range;
    /* Convs with few multiply-adds per element they exchange with float ops: float on
     * onnxruntime with AVX2 arithmetic, where its integer convolution gains too little over
     * the float one to pay for the Q/DQ and layout Transposes around it (insert-qdq
     * min-intensity, docs/quantize.md); 8-bit activations, static mode */
    if (c->min_intensity < 0) {
        int32_t adt = oq_dtype_from_name(c->act_dtype);
        c->min_intensity = strcmp(c->mode, "static") == 0 && c->tgt->placement == OQ_PLACE_ORT_CPU &&
                                   c->tgt->arith == OQ_ARITH_AVX2 &&
                                   (adt == OQ_DTYPE_UINT8 || adt == OQ_DTYPE_INT8)
                               ? 64
                               : 0;
        c->src_min_intensity = "target";
    }
    /* weight rounding: to nearest unless asked (GPTQ gains on some zoo models and loses on
     * others on data from another source than calibration: docs/quantize.md "Weight
     * rounding"); the source says what would stand in the way of --weight-rounding gptq */
    if (!c->weight_rounding) {
        bool stat = strcmp(c->mode, "static") == 0;
        bool int8 = strcmp(c->weight_dtype, "int8") == 0 && c->weight_symmetric && !c->reduce_range;
        c->weight_rounding = "nearest";
        c->src_weight_rounding = !stat ? "mode" : !int8 ? "weight_dtype" : "target";
    }
    return 0;
}


/* insert-qdq's counts (pass statistics), to refuse a run that quantized nothing */
typedef struct qdq_counts {
    bool seen;
    int64_t selected, not_calibrated, low_intensity;
} qdq_counts;

static qdq_counts qdq_counts_of(const oq_job_pass_log *log)
{
    qdq_counts q = {0};
    for (size_t k = 0; k < log->n; k++) {
        bool dyn = strcmp(log->names[k], "quantize-dynamic") == 0;
        if (strcmp(log->names[k], "insert-qdq") != 0 && !dyn)
            continue;
        q.seen = true;
        const oq_pass_result *r = &log->results[k];
        for (size_t i = 0; i < r->n_stats; i++) {
            if (strcmp(r->stats[i].name, dyn ? "nodes_quantized" : "nodes_selected") == 0)
                q.selected = r->stats[i].value;
            else if (strcmp(r->stats[i].name, "nodes_not_calibrated") == 0)
                q.not_calibrated = r->stats[i].value;
            else if (strcmp(r->stats[i].name, "convs_float_low_intensity") == 0)
                q.low_intensity = r->stats[i].value;
        }
    }
    return q;
}

/* --mode weight-only: refuse a run that quantized nothing; print the weight bytes. */
static int wonly_report(const oq_job_pass_log *log, const qconfig *c, bool quiet, const jlog *lg, oq_diag *d)
{
    int64_t n = 0, fb = 0, qb = 0, n16 = 0, nbf = 0, et = 0, efb = 0, eqb = 0;
    for (size_t k = 0; k < log->n; k++) {
        if (strcmp(log->names[k], "quantize-embeddings") == 0) {
            const oq_pass_result *r = &log->results[k];
            for (size_t i = 0; i < r->n_stats; i++) {
                if (strcmp(r->stats[i].name, "tables_quantized") == 0)
                    et = r->stats[i].value;
                else if (strcmp(r->stats[i].name, "weight_bytes_float") == 0)
                    efb = r->stats[i].value;
                else if (strcmp(r->stats[i].name, "weight_bytes_quantized") == 0)
                    eqb = r->stats[i].value;
            }
            continue;
        }
        if (strcmp(log->names[k], "quantize-weights") != 0)
            continue;
        const oq_pass_result *r = &log->results[k];
        for (size_t i = 0; i < r->n_stats; i++) {
            if (strcmp(r->stats[i].name, "weights_quantized") == 0)
                n = r->stats[i].value;
            else if (strcmp(r->stats[i].name, "weight_bytes_float") == 0)
                fb = r->stats[i].value;
            else if (strcmp(r->stats[i].name, "weight_bytes_quantized") == 0)
                qb = r->stats[i].value;
            else if (strcmp(r->stats[i].name, "weights_float16") == 0)
                n16 = r->stats[i].value;
            else if (strcmp(r->stats[i].name, "weights_bfloat16") == 0)
                nbf = r->stats[i].value;
        }
    }
    if (n == 0) {
        oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_UNSUPPORTED, NULL, NULL, NULL,
                    "no weight quantized: no node of %s%s with a constant 2-D float32, float16 or bfloat16 B in the main graph", c->op_types,
                    *c->include_nodes || *c->exclude_nodes ? " (after --include-nodes/--exclude-nodes)" : "");
        return -1;
    }
    if (!quiet && et > 0)
        say(lg, "onnxq quantize: weight-only: %lld embedding table%s, %lld bytes -> %lld bytes (GatherBlockQuantized "
                "and tied heads included)", (long long)et, et == 1 ? "" : "s", (long long)efb, (long long)eqb);
    if (!quiet)
        say(lg, "onnxq quantize: weight-only: %lld weight%s, %lld bytes of %s -> %lld bytes (%.4f, 1/%.2f) "
                        "(scales%s included)", (long long)n, n == 1 ? "" : "s", (long long)fb,
                n16 == n ? "float16" : nbf == n ? "bfloat16" : n16 + nbf == 0 ? "float32" : "float", (long long)qb,
                (double)qb / (double)fb, (double)fb / (double)qb, c->weight_symmetric ? "" : " and zero points");
    return 0;
}

/* ------------------------------------------------------------ the job */

struct oq_quantize_job {
    qconfig c;
    oq_quantize_options o;      /* the caller's (strings borrowed) */
    jlog lg;
    bool quiet, fallback;
    oq_quantize_fallback_args fb; /* quantize_steps.c */
    void *in_data;              /* oq_quantize_job_set_input */
    size_t in_len;
    char *dims_text, *values_text;
};

int oq_quantize_exit_code(oq_status st)
{
    if (st == OQ_OK)
        return 0;
    return st == OQ_ERR_USAGE || st == OQ_ERR_UNSUPPORTED || st == OQ_ERR_NUMERIC || st == OQ_ERR_PARSE ||
                   st == OQ_ERR_INVALID
               ? 2
               : 1;
}

void oq_quantize_result_free(oq_quantize_result *r)
{
    if (!r)
        return;
    free(r->config);
    free(r->summary);
    free(r->pipeline);
    memset(r, 0, sizeof *r);
}

void oq_quantize_job_free(oq_quantize_job *j)
{
    if (!j)
        return;
    free(j->c.pipeline);
    free(j->in_data);
    free(j->dims_text);
    free(j->values_text);
    free(j);
}

oq_status oq_quantize_job_set_input(oq_quantize_job *j, const void *data, size_t len, oq_diag *d)
{
    void *p = malloc(len ? len : 1);
    if (!p)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    memcpy(p, data, len);
    free(j->in_data);
    j->in_data = p;
    j->in_len = len;
    return OQ_OK;
}

/* The options as the job's configuration (the command's qconfig). */
static void config_from_options(qconfig *c, const oq_quantize_options *o)
{
    memset(c, 0, sizeof *c);
    c->mode = o->mode;
    c->calib = o->calib;
    c->calib_images = o->calib_images;
    c->calib_random = o->calib_random;
    c->seed = o->seed;
    c->max_samples = o->max_samples;
    c->size = o->size;
    c->mean = o->mean;
    c->std = o->std;
    c->layout = o->layout;
    c->bgr = o->bgr;
    c->grey = o->grey;
    c->dims = o->dims;
    c->input_values = o->input_values;
    c->scale = o->scale;
    c->method = o->method;
    c->percentile = o->percentile;
    if (strcmp(c->method, "select") == 0 && c->percentile > 0)
        c->method = "percentile"; /* --percentile P alone: that percentile */
    c->averaging = o->averaging;
    c->nan_policy = o->nan_policy;
    c->act_dtype = o->act_dtype;
    c->weight_dtype = o->weight_dtype;
    c->act_symmetric = o->act_symmetric;
    c->weight_symmetric = o->weight_symmetric != 0; /* -1: the target's, filled by resolve_target */
    c->weight_symmetric_set = o->weight_symmetric >= 0 && o->config_weight_symmetric;
    c->per_channel = o->per_channel;
    c->reduce_range = o->reduce_range;
    c->weight_block_size = o->weight_block_size;
    c->op_types = o->op_types;
    c->include_nodes = o->include_nodes;
    c->exclude_nodes = o->exclude_nodes;
    c->overrides = o->overrides;
    c->embedding_dtype = o->embedding_dtype;
    c->threads = o->threads;
    c->target = o->target;
    c->depthwise = o->depthwise;
    c->cfg_depthwise = o->config_depthwise;
    c->min_intensity = o->min_intensity;
    if (o->min_intensity >= 0)
        c->src_min_intensity = o->config_min_intensity ? "config" : "option";
    c->weight_rounding = o->weight_rounding;
    c->cfg_weight_rounding = o->config_weight_rounding;
    c->prepare = o->prepare;
    if (o->prepare >= 0)
        c->src_prepare = o->config_prepare ? "config" : "option";
    c->bias_correction = o->bias_correction;
    if (o->bias_correction >= 0)
        c->src_bias_correction = o->config_bias_correction ? "config" : "option";
    c->smooth_quant = o->smooth_quant;
    c->smooth_asked = o->smooth_quant_set;
    c->wformat = o->format;
    c->algo = o->algo;
    c->wscale_dtype = o->weight_scale_dtype;
    c->accuracy_level = o->accuracy_level;
    c->gptq_damp = o->gptq_damp;
    c->gptq_act_order = o->gptq_act_order;
    c->feed = o->source ? oq_calib_source_feed_id(o->source) : 0;
}

oq_status oq_quantize_job_new(const oq_quantize_options *o, oq_quantize_job **out, oq_diag *d)
{
    *out = NULL;
    oq_quantize_job *j = calloc(1, sizeof *j);
    if (!j)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    j->o = *o;
    j->lg.fn = o->log;
    j->lg.user = o->log_user;
    j->quiet = o->quiet;
    j->fallback = o->fallback;
    qconfig *cp = &j->c;
    config_from_options(cp, o);
#define c (*cp)
    oq_status st = OQ_ERR_USAGE;
    bool quiet = j->quiet, fallback = j->fallback;
    if (o->source && !c.feed) {
        st = qerr(d, "the sample source given is not a fed source (oq_calib_source_feed)");
        goto fail;
    }
    if (strcmp(c.mode, "static") && strcmp(c.mode, "dynamic") && !weight_only(&c)) {
        qerr(d, "--mode \"%s\": unknown (static, dynamic, weight-only)", c.mode);
        goto fail;
    }
    if (!c.embedding_dtype) /* weight-only: embedding tables only when asked (quantize-embeddings) */
        c.embedding_dtype = weight_only(&c) ? "float" : "int8";
    if (weight_only(&c) && strcmp(c.embedding_dtype, "int4") && strcmp(c.embedding_dtype, "int8") &&
        strcmp(c.embedding_dtype, "float")) {
        qerr(d, "--embedding-dtype \"%s\": int4, int8 or float in --mode weight-only", c.embedding_dtype);
        goto fail;
    }
    if (!weight_only(&c) && strcmp(c.embedding_dtype, "int8") && strcmp(c.embedding_dtype, "float")) {
        qerr(d, "--embedding-dtype \"%s\": int8 or float", c.embedding_dtype);
        goto fail;
    }
    /* weight-only's own defaults (int4, MatMul,Gemm, symmetric) stand where the target's
     * would: "mode" in --print-config's sources */
    bool wsym_option = o->weight_symmetric >= 0 && !o->config_weight_symmetric;
    bool wo_wdt = !c.weight_dtype, wo_ops = !c.op_types, wo_sym = !wsym_option && !c.weight_symmetric_set;
    if (weight_only(&c) &&
        resolve_weight_only(&c, c.act_dtype || c.act_symmetric || !c.per_channel || c.reduce_range || *c.overrides ||
                                    fallback, d) != 0)
        goto fail;
    c.fallback = fallback;
    if (resolve_target(&c, o->config_act_dtype, o->config_weight_dtype, o->config_op_types, wsym_option, d) != 0)
        goto fail;
    if (weight_only(&c)) {
        if (wo_wdt)
            c.src_weight_dtype = "mode";
        if (wo_ops)
            c.src_op_types = "mode";
        if (wo_sym) {
            c.weight_symmetric = true;
            c.src_weight_symmetric = "mode";
        }
    }
    if (o->check_resolved && o->check_resolved(o->check_user) != 0)
        goto fail;
    bool dynamic = strcmp(c.mode, "dynamic") == 0;
    if (!c.smooth_asked && (dynamic || weight_only(&c) || (!c.calib && !c.calib_images && c.calib_random <= 0 && !c.feed)))
        c.smooth_quant = -1; /* the default applies to static mode with calibration data */
    if (dynamic && smooth_on(&c)) {
        qerr(d, "--smooth-quant is for --mode static (it moves activation outliers into weights "
                "before activations are quantized)");
        goto fail;
    }
    if (dynamic) { /* nothing to calibrate: refuse what only calibration would use (docs/quantize.md) */
        const char *na = c.calib ? "--calib" : c.calib_images ? "--calib-images" : c.calib_random > 0 ? "--calib-random"
                         : c.feed ? "calibration data" : fallback ? "--target-sqnr" : o->eval ? "--eval"
                         : *c.overrides ? "--overrides" : c.weight_block_size ? "--weight-block-size"
                         : *c.dims ? "--dim" : *c.input_values ? "--input-value" : NULL;
        if (na) {
            qerr(d, "--mode dynamic: %s does not apply (activations are quantized at run time from "
                    "each tensor's own range: no calibration)", na);
            goto fail;
        }
        if (strcmp(c.act_dtype, "uint8") != 0 || c.act_symmetric) {
            qerr(d, "--mode dynamic: activations are uint8 asymmetric (DynamicQuantizeLinear); "
                    "--act-dtype %s%s does not apply", c.act_dtype, c.act_symmetric ? " --act-symmetric" : "");
            goto fail;
        }
        if (strcmp(c.weight_dtype, "uint8") != 0 && strcmp(c.weight_dtype, "int8") != 0) {
            qerr(d, "--mode dynamic: --weight-dtype %s: uint8 or int8 (MatMulInteger takes 8-bit weights)",
                 c.weight_dtype);
            goto fail;
        }
    }
    int nsrc = (c.calib != NULL) + (c.calib_images != NULL) + (c.calib_random > 0) + (c.feed != 0);
    if (nsrc > 1) {
        qerr(d, c.feed ? "give only one of the fed samples, calib, calib_images, calib_random"
                       : "give only one of --calib, --calib-images, --calib-random");
        goto fail;
    }
    if (weight_only(&c) && nsrc == 0 && strcmp(c.algo, "rtn") != 0) {
        qerr(d, "--algo %s: no calibration data: give --calib DIR, --calib-images DIR or --calib-random N", c.algo);
        goto fail;
    }
    if (weight_only(&c) && nsrc > 0 && strcmp(c.algo, "rtn") == 0 && !quiet)
        say(&j->lg, "onnxq quantize: note: --algo rtn uses no calibration data (the samples are ignored; "
                    "--algo gptq and awq use them)");
    if (weight_only(&c) && smooth_on(&c)) {
        qerr(d, "--smooth-quant is for --mode static (it moves activation outliers into weights "
                "before activations are quantized)");
        goto fail;
    }
    bool bc_asked = !strcmp(c.src_bias_correction, "option") || !strcmp(c.src_bias_correction, "config");
    if (c.bias_correction && bc_asked && strcmp(c.mode, "static") != 0) {
        qerr(d, "--bias-correction is for --mode static (it corrects the biases of the quantized "
                "Conv/Gemm layers against the float model on the calibration data)");
        goto fail;
    }
    bool wr_asked = !strcmp(c.src_weight_rounding, "option") || !strcmp(c.src_weight_rounding, "config");
    if (wr_asked && !strcmp(c.weight_rounding, "gptq")) {
        if (strcmp(c.mode, "static") != 0) {
            qerr(d, "--weight-rounding gptq is for --mode static (weight-only mode: --algo gptq)");
            goto fail;
        }
        if (strcmp(c.weight_dtype, "int8") != 0 || !c.weight_symmetric || c.reduce_range) {
            qerr(d, "--weight-rounding gptq needs int8 symmetric weights (--weight-dtype int8, without "
                    "--weight-asymmetric or --reduce-range)");
            goto fail;
        }
        if (nsrc == 0) {
            qerr(d, "--weight-rounding gptq needs calibration data: give --calib DIR, --calib-images DIR or "
                    "--calib-random N");
            goto fail;
        }
    }
    if (!strcmp(c.weight_rounding, "gptq") && nsrc == 0) {
        c.weight_rounding = "nearest"; /* --overrides alone: nothing to measure with */
        c.src_weight_rounding = "data";
    }
    if (c.bias_correction && nsrc == 0) {
        if (bc_asked) {
            qerr(d, "--bias-correction needs calibration data: give --calib DIR, --calib-images DIR or "
                    "--calib-random N");
            goto fail;
        }
        c.bias_correction = 0; /* --overrides alone: nothing to measure with */
        c.src_bias_correction = "data";
    }
    if (nsrc == 0 && smooth_on(&c)) {
        qerr(d, "--smooth-quant needs calibration data: give --calib DIR, --calib-images DIR or "
                "--calib-random N");
        goto fail;
    }
    if (nsrc == 0 && !*c.overrides && !weight_only(&c) && !dynamic) {
        qerr(d, "no calibration data: give --calib DIR, --calib-images DIR or --calib-random N");
        goto fail;
    }
    /* paths checked before any work (exit 2): an output that cannot be written, or data
     * that is not a folder, is known now rather than after calibration */
    if (o->check_paths && o->check_paths(o->check_user) != 0)
        goto fail;
#undef c
    oq_quantize_fallback_args fa = {NULL, o->target_sqnr_db, o->max_fallback, o->eval, cp->calib, cp->calib_images,
                                    cp->size, cp->mean, cp->std, cp->layout, cp->bgr, cp->scale, cp->calib_random,
                                    cp->seed, cp->max_samples, cp->threads, quiet, o->fallback_search, cp->grey,
                                    cp->dims, cp->input_values, OQ_ARITH_REFERENCE, NULL, NULL,
                                    NULL, 0, o->source, &j->lg, o->progress_stderr};
    fa.arith = cp->tgt->arith;
    fa.target = cp->tgt->name;
    fa.weight_dtype = cp->weight_dtype;
    j->fb = fa;
    *out = j;
    return OQ_OK;
fail:
    oq_quantize_job_free(j);
    return st;
}

/* The configuration as JSON text (indent 0: one line, as in the metadata; 2: --print-config). */
static char *config_text(const qconfig *c, int indent)
{
    char *text = NULL;
    size_t len = 0;
    FILE *ms = open_memstream(&text, &len);
    if (!ms)
        return NULL;
    json_writer w;
    json_init(&w, ms, indent);
    write_config(&w, c);
    int jr = json_finish(&w);
    fclose(ms);
    if (jr != 0) {
        free(text);
        return NULL;
    }
    if (indent == 0 && len && text[len - 1] == '\n')
        text[len - 1] = 0;
    return text;
}

oq_status oq_quantize_job_run(oq_quantize_job *j, const char *in, oq_model *m, const char *out,
                              oq_quantize_result *res, oq_diag *d)
{
    qconfig *cp = &j->c;
#define c (*cp)
    const bool quiet = j->quiet, fallback = j->fallback, print_config = j->o.resolve_only;
    const jlog *lg = &j->lg;
    oq_quantize_result rdummy; /* r NULL: filled, then freed here */
    bool own_res = !res;
    if (!res)
        res = &rdummy;
    memset(res, 0, sizeof *res);
    oq_job_qreport *report = calloc(1, sizeof *report);
    bool fallback_met = true, failed_job = false, bad_input = false, wround = false;
    oq_registry *reg = NULL;
    oq_pipeline *pl = NULL, *pl_rest = NULL;
    char *meta = NULL, *head = NULL;
    oq_status st = OQ_OK;
    const char *saved_file = d ? d->file : NULL;
    if (!report) {
        oq_model_free(m);
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    }
    j->fb.in = in;
    j->fb.in_data = j->in_data;
    j->fb.in_len = j->in_len;
    if ((st = oq_registry_new(&reg, d)) != OQ_OK)
        goto done;
    c.fold_bias = oq_registry_find(reg, "fold-bias") != NULL;
    c.qdq_cleanup = oq_registry_find(reg, "qdq-cleanup") != NULL;
    if (!m) {
        st = j->in_data ? oq_model_read_buffer(j->in_data, j->in_len, in, NULL, &m, d) : oq_model_read(in, NULL, &m, d);
        if (st != OQ_OK) {
            bad_input = true; /* the input model (missing, unreadable, not ONNX): exit 2, as the command */
            goto done;
        }
    }
    if (d)
        d->file = in;
    c.opset_in = oq_model_opset(m, "");
    c.opset_target = c.opset_in < 13 ? 13 : c.opset_in;
    c.float16 = has_float16(m->graph);
    /* graph preparation writes x * clip(x + 3, 0, 6) / 6 and x * HardSigmoid(x) as one
     * HardSwish from opset 14 on. onnxruntime 1.30 still runs it as HardSigmoid + Mul, but
     * the quantized x is then dequantized once instead of once per reader (PaddleOCR cls:
     * 21 DequantizeLinear nodes instead of 31 in the optimized graph, 1.05 -> 0.99 of the
     * float time, docs/quantize.md "Graph preparation") */
    if (c.prepare && c.opset_target < 14 && has_hardswish_parts(m->graph))
        c.opset_target = 14;
    if ((needs21(c.act_dtype) || needs21(c.weight_dtype) || c.weight_block_size > 0) && c.opset_target < 21)
        c.opset_target = 21;
    if (weight_only(&c) && strcmp(c.wformat, "matmulnbits") == 0)
        c.opset_target = c.opset_in; /* a com.microsoft op: the default domain stays as it is */
    if (*c.overrides && c.opset_target < 21) {
        /* a 16-bit or 4-bit dtype in the overrides (mixed precision) needs opset 21 too */
        cJSON *ov = NULL;
        if ((st = oq_json_parse_file(c.overrides, &ov, d)) != OQ_OK) {
            st = OQ_ERR_USAGE;
            goto done;
        }
        const cJSON *e, *obj = cJSON_IsObject(ov) ? ov : NULL;
        cJSON_ArrayForEach(e, obj) {
            const cJSON *dt = oq_json_get(e, "dtype");
            if (cJSON_IsString(dt) && needs21(dt->valuestring))
                c.opset_target = 21;
        }
        cJSON_Delete(ov);
    }
    if (strcmp(c.target, "host") == 0 && !quiet && !print_config)
        say(lg, "onnxq quantize: --target host: %s (%s)", c.tgt->name, oq_target_host_reason());
    bool progress = !quiet && j->o.progress_stderr;
    c.pipeline = weight_only(&c) ? build_wonly_pipeline(&c, progress) : build_pipeline(&c, progress);
    if (!c.pipeline) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    res->pipeline = strdup(c.pipeline);
    if (print_config) {
        res->config = config_text(&c, 2);
        st = res->config ? OQ_OK : oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (c.calib_random > 0 && !quiet)
        say(lg, "onnxq quantize: warning: --calib-random: ranges from random data are not meaningful "
                "(use it for smoke tests only; give --calib or --calib-images for a real model)");
    if (strstr(c.act_dtype, "16") && strstr(c.weight_dtype, "16") && !quiet)
        say(lg, "onnxq quantize: warning: 16-bit activations with 16-bit weights: integer kernels that "
                "accumulate in int32 can overflow (onnxruntime's optimized path does on PaddleOCR det); "
                "prefer --weight-dtype int8 with 16-bit activations");
    if (!c.fold_bias && !quiet)
        say(lg, "onnxq quantize: note: pass fold-bias is not available; insert-qdq quantizes biases itself");
    if (!c.qdq_cleanup && !quiet)
        say(lg, "onnxq quantize: note: pass qdq-cleanup is not available; skipped");
    /* --method select: calibration, the choice on held-out samples, then the rest */
    const char *rest = NULL;
    if (!weight_only(&c) && has_data(&c) && strcmp(c.method, "select") == 0) {
        const char *at = strstr(c.pipeline, ",insert-qdq");
        if (at && !(head = strndup(c.pipeline, (size_t)(at - c.pipeline)))) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
            goto done;
        }
        rest = at ? at + 1 : NULL;
    }
    size_t err_pos = 0;
    if (oq_pipeline_parse(reg, head ? head : c.pipeline, &pl, &err_pos, d) != OQ_OK ||
        (rest && oq_pipeline_parse(reg, rest, &pl_rest, &err_pos, d) != OQ_OK)) {
        st = OQ_ERR_USAGE;
        goto done;
    }
    if (weight_only(&c) && out) {
        /* new weights go straight to OUT's data file as the pass makes them, and each float
         * weight's pages are given back once it is quantized: memory stays one weight's
         * working set, whatever the model's size (docs/weight-only.md) */
        oq_write_options so = {0};
        if ((st = oq_model_stream_begin(m, out, &so, d)) != OQ_OK)
            goto done;
    }
    oq_pipeline_run_options ro = {0};
    ro.after_pass = oq_job_qreport_after_pass;
    ro.user = report;
    wround = !strcmp(c.weight_rounding, "gptq") && !strcmp(c.mode, "static") && has_data(&c);
    if (wround) /* insert-qdq keeps the float weights for it */
        oq_pass_float_weights_begin();
    st = oq_pipeline_run(pl, m, &ro, d);
    if (st == OQ_OK && pl_rest) {
        /* every candidate and the final model quantize the same weights: once */
        oq_pass_weight_memo_begin();
        st = oq_job_select_calibration(&j->fb, reg, rest, m, &report->select, d);
        if (st == OQ_OK && report->select.n) {
            free(report->calibration);
            report->calibration = NULL;
            for (size_t i = 0; i < m->metadata.count; i++)
                if (m->metadata.items[i].key && !strcmp(m->metadata.items[i].key, OQ_CALIB_METADATA_KEY))
                    report->calibration = strdup(m->metadata.items[i].value ? m->metadata.items[i].value : "");
            if (!quiet)
                oq_job_qreport_print_select(&report->select, lg);
        }
        if (st == OQ_OK)
            st = oq_pipeline_run(pl_rest, m, &ro, d);
        oq_pass_weight_memo_end();
    }
    report->smooth_quant = oq_job_take_metadata(m, OQ_SMOOTH_METADATA_KEY);
    if (st == OQ_OK && !quiet)
        oq_job_qreport_print_calibration(report, lg);
    qdq_counts qc = qdq_counts_of(&report->passes);
    if (st == OQ_OK && weight_only(&c) && wonly_report(&report->passes, &c, quiet, lg, d) != 0) {
        st = OQ_ERR_UNSUPPORTED;
        failed_job = true; /* the command exits 1 without a summary */
        goto done;
    }
    if (st == OQ_OK && qc.seen && qc.selected == 0) {
        /* writing the float model back and exiting 0 would hide that nothing happened */
        const char *filt = *c.include_nodes || *c.exclude_nodes ? " (after --include-nodes/--exclude-nodes)" : "";
        bool dynamic = strcmp(c.mode, "dynamic") == 0;
        size_t convs = 0; /* what static mode would quantize in a convolutional model */
        for (const oq_node *n = m->graph->first; dynamic && n; n = n->next)
            convs += oq_domain_is_default(n->domain) && strcmp(n->op_type, "Conv") == 0 && n->n_inputs > 1 &&
                     n->inputs[1] && oq_value_const_tensor(n->inputs[1]);
        if (dynamic && convs)
            oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_UNSUPPORTED, NULL, NULL, NULL,
                        "no node quantized: no node of the op types %s%s with a constant float weight; static "
                        "mode quantizes the model's %zu Conv node%s (without --mode dynamic, with --calib DIR or "
                        "--calib-images DIR; --op-types Conv would make them ConvInteger here)",
                        c.op_types, filt, convs, convs == 1 ? "" : "s");
        else if (dynamic)
            oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_UNSUPPORTED, NULL, NULL, NULL,
                        "no node quantized: no node of the op types %s%s with a constant float weight (--mode dynamic "
                        "quantizes weights held in initializers; `onnxq dump` lists the model's op types)",
                        c.op_types, filt);
        else if (qc.low_intensity > 0)
            oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_UNSUPPORTED, NULL, NULL, NULL,
                        "no node quantized: the %lld Conv node%s of the model %s too few multiply-adds per element "
                        "to run faster quantized in onnxruntime on this target (--min-intensity %g; "
                        "--min-intensity 0 quantizes %s)",
                        (long long)qc.low_intensity, qc.low_intensity == 1 ? "" : "s",
                        qc.low_intensity == 1 ? "does" : "do", c.min_intensity, qc.low_intensity == 1 ? "it" : "them");
        else if (qc.not_calibrated > 0)
            oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_UNSUPPORTED, NULL, NULL, NULL,
                        "no node quantized: the %lld node%s of the requested op types %s%s %s inside subgraphs "
                        "never executed during calibration (calibrate with data that takes those branches)",
                        (long long)qc.not_calibrated, qc.not_calibrated == 1 ? "" : "s", c.op_types, filt,
                        qc.not_calibrated == 1 ? "is" : "are all");
        else
            oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_UNSUPPORTED, NULL, NULL, NULL,
                        "no node quantized: no node of the requested op types %s%s in the model or its subgraphs "
                        "(--op-types; `onnxq dump` lists the model's op types)", c.op_types, filt);
        st = OQ_ERR_UNSUPPORTED;
        failed_job = true;
        goto done;
    }
    if (st == OQ_OK && qc.low_intensity > 0 && !quiet)
        say(lg,
            "onnxq quantize: placement: %lld Conv node%s left float, too few multiply-adds per element crossing "
            "between float and 8 bits to run faster quantized in onnxruntime with %s arithmetic (--min-intensity %g; "
            "0 quantizes them)",
            (long long)qc.low_intensity, qc.low_intensity == 1 ? "" : "s", oq_arith_name(c.tgt->arith),
            c.min_intensity);
    if (st == OQ_OK) {
        oq_diag cd;
        oq_diag_init(&cd);
        if (oq_model_check(m, &cd) != OQ_OK) {
            oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_INTERNAL, NULL, NULL, NULL, "the quantized model is invalid:");
            oq_diag_append(d, &cd);
            st = OQ_ERR_INTERNAL;
        }
        oq_diag_free(&cd);
    }
    if (st == OQ_OK && (wround || c.bias_correction)) { /* before the saturation check and the fallback measure the model */
        strb pb = {0};
        prep_passes(&pb, &c);
        st = pb.p ? oq_job_refine(&j->fb, reg, pb.p, wround, c.pair_limit, c.bias_correction, m, report, d)
                  : oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        free(pb.p);
        report->bias_correction = st == OQ_OK && c.bias_correction;
        report->weight_rounding = st == OQ_OK && wround;
    }
    if (wround) {
        oq_pass_float_weights_end();
        wround = false;
    }
    if (st == OQ_OK && !fallback) {
        /* what the held-out samples said of the model as written: a low figure is said
         * once, with the ways to trade speed for accuracy (a layout detector at 5.5 dB
         * lost a sixth of its detections with exit 0 and no word) */
        const oq_job_bc_guard *bg = &report->bias_check;
        const oq_job_select_result *sr = &report->select;
        double held = NAN;
        const char *part = "";
        uint64_t nh = 0;
        if (report->bias_correction && bg->held_out) {
            held = bg->kept ? bg->db_with : bg->db_without;
            part = bg->kept ? bg->part_with : bg->part_without;
            nh = bg->held_out;
        } else if (sr->n && sr->held_out) {
            held = sr->worst_db[sr->chosen];
            part = sr->worst_part[sr->chosen];
            nh = sr->held_out;
        }
        if (isfinite(held) && held < OQ_HELD_OUT_LOW_DB)
            oq_diag_add(d, OQ_SEV_WARNING, OQ_OK, NULL, NULL, NULL,
                        "quantize: on %llu held-out calibration sample(s) the worst output part%s%s%s is %.1f dB "
                        "SQNR against the float model (below %.0f dB: expect visible losses); 16-bit activations "
                        "(--act-dtype uint16) or layers back to float (--target-sqnr DB) trade speed for accuracy",
                        (unsigned long long)nh, *part ? " (" : "", part, *part ? ")" : "", held, OQ_HELD_OUT_LOW_DB);
    }
    if (st == OQ_OK && c.tgt->arith != OQ_ARITH_REFERENCE && has_data(&c) && !weight_only(&c)) {
        /* the saturation check: what the target's arithmetic loses, per layer */
        size_t nw = 0;
        oq_diag sd;
        oq_diag_init(&sd);
        if (oq_job_satcheck(&j->fb, m, &nw, &sd) != OQ_OK) { /* a check, not the job: warn */
            char msg[512] = "unknown error";
            const oq_diag_entry *e = oq_diag_first_error(&sd);
            if (e)
                oq_diag_format(e, msg, sizeof msg);
            if (!quiet)
                say(lg, "onnxq quantize: warning: saturation check not done: %s", msg);
        }
        oq_diag_free(&sd);
    }
    if (st == OQ_OK && fallback) {
        strb pb = {0};
        prep_passes(&pb, &c);
        st = pb.p ? oq_job_fallback(&j->fb, reg, pb.p, c.pair_limit, report, m, &fallback_met, d)
                  : oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        free(pb.p);
    }
    if (st == OQ_OK) {
        meta = config_text(&c, 0);
        if (!meta) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
            goto summary;
        }
        oq_model_set_metadata(m, "onnxq.quantize.config", meta);
        oq_write_options wo = {0};
        st = oq_model_write(m, out, &wo, d);
    }
summary:
    report->fallback = fallback;
    report->fallback_met = fallback_met;
    report->diag = d;
    res->fallback_met = fallback_met;
    res->summary = oq_job_qreport_text(report, in, out, st, &c);
    res->config = config_text(&c, 2);
done:
#undef c
    if (wround)
        oq_pass_float_weights_end();
    res->exit_code = st == OQ_OK ? (fallback_met ? 0 : 1) : failed_job ? 1
                     : bad_input && st != OQ_ERR_NOMEM ? 2 : oq_quantize_exit_code(st);
    if (d)
        d->file = saved_file;
    free(report->smooth_quant);
    free(report->calibration);
    free(report);
    free(meta);
    oq_pipeline_free(pl);
    oq_pipeline_free(pl_rest);
    free(head);
    oq_registry_free(reg);
    oq_model_free(m);
    if (own_res)
        oq_quantize_result_free(res);
    return st;
}

static void write_config_cb(json_writer *w, const void *c)
{
    write_config(w, c);
}

char *oq_job_qreport_text(const oq_job_qreport *r, const char *in, const char *out, oq_status st, const void *cfg)
{
    return oq_job_qreport_write(r, in, out, st, write_config_cb, cfg);
}

static oq_status quantize_any(const void *data, size_t len, const char *in, const char *out,
                              const oq_quantize_options *o, oq_quantize_result *r, oq_diag *d)
{
    oq_quantize_job *j = NULL;
    if (r)
        memset(r, 0, sizeof *r);
    oq_status st = oq_quantize_job_new(o, &j, d);
    if (st == OQ_OK && data)
        st = oq_quantize_job_set_input(j, data, len, d);
    if (st == OQ_OK)
        st = oq_quantize_job_run(j, in, NULL, out, r, d);
    oq_quantize_job_free(j);
    return st;
}

oq_status oq_quantize(const char *in, const char *out, const oq_quantize_options *o, oq_quantize_result *r,
                      oq_diag *d)
{
    return quantize_any(NULL, 0, in, out, o, r, d);
}

oq_status oq_quantize_buffer(const void *in_data, size_t in_len, const char *in_name, const char *out,
                             const oq_quantize_options *o, oq_quantize_result *r, oq_diag *d)
{
    return quantize_any(in_data, in_len, in_name ? in_name : "<model bytes>", out, o, r, d);
}
