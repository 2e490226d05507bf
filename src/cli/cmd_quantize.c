/* onnxq quantize IN -o OUT [--calib DIR | --calib-images DIR ... | --calib-random N] [options]
 *
 * Static post-training quantization as a pipeline of passes:
 *   [upgrade-opset{to=13|21}] constant-to-initializer fold-batchnorm [smooth-quant] calibrate
 *   insert-qdq [fold-bias]
 *   [qdq-cleanup]
 * The resolved configuration is printed with --print-config, loaded with --config FILE
 * (the same JSON; command-line options win over the file) and stored in the output's
 * metadata_props "onnxq.quantize.config". docs/quantize.md */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/json.h"
#include "cli/samples.h"
#include "io/json.h"
#include "onnxq/calib.h"
#include "onnxq/pass.h"
#include "onnxq/target.h"
#include "cli/quantize_fallback.h"
#include "cli/quantize_report.h"

#define SMOOTH_AUTO (-2.0) /* --smooth-quant auto */

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
    bool fold_bias, qdq_cleanup;
    char *pipeline;
    /* --mode: static (the pipeline above) or weight-only (quantize-weights) */
    const char *wformat, *algo, *wscale_dtype; /* weight-only: qdq|matmulnbits, rtn|gptq */
    int64_t accuracy_level;
    double gptq_damp;
} qconfig;

static void config_default(qconfig *c)
{
    memset(c, 0, sizeof(*c));
    c->mode = "static";
    c->embedding_dtype = "int8";
    c->seed = 1;
    c->size = "";
    c->mean = "0,0,0";
    c->std = "1,1,1";
    c->layout = "nchw";
    c->scale = 255.0;
    c->method = "percentile";
    c->percentile = 0; /* 0: the activation type's default (oq_default_percentile) */
    c->nan_policy = "quantized";
    /* act_dtype, weight_dtype, weight_symmetric and op_types come from the target unless
     * an option or the config file sets them (resolve_target) */
    c->weight_symmetric = true;
    c->per_channel = true;
    c->target = "ort-x86";
    c->prepare = -1;
    c->bias_correction = -1;
    c->smooth_quant = SMOOTH_AUTO; /* static mode with calibration data; off otherwise */
    c->include_nodes = "";
    c->exclude_nodes = "";
    c->overrides = "";
    c->dims = "";
    c->input_values = "";
    c->wformat = "qdq";
    c->algo = "rtn";
    c->wscale_dtype = "auto";
    c->gptq_damp = 0.01;
}

static bool weight_only(const qconfig *c)
{
    return strcmp(c->mode, "weight-only") == 0;
}

static bool smooth_on(const qconfig *c)
{
    return c->smooth_quant >= 0 || c->smooth_quant == SMOOTH_AUTO;
}

static void help(FILE *f)
{
    fprintf(f,
            "usage: onnxq quantize IN -o OUT [--calib DIR | --calib-images DIR ... |\n"
            "                       --calib-random N] [options]\n\n"
            "Static post-training quantization to a QDQ model (onnxruntime, TensorRT-style), or\n"
            "weight-only blockwise quantization of MatMul/Gemm weights (--mode weight-only).\n"
            "Defaults (target ort-x86): activations uint8 asymmetric per tensor, weights int8\n"
            "symmetric per channel with the pair limit (no int16 saturation on AVX2), bias int32,\n"
            "graph preparation (fuse-activations, fold-linear) before calibration, percentile\n"
            "99.99 calibration (99.999 for 16-bit activations), Conv/Gemm/MatMul and the ops\n"
            "onnxruntime fuses around them.\n\n"
            "mode:\n"
            "  --mode M               static (default: weights and activations, calibrated) |\n"
            "                         dynamic (no calibration: MatMul/Gemm weights quantized offline,\n"
            "                         activations at run time by DynamicQuantizeLinear; onnxruntime\n"
            "                         fuses DynamicQuantizeMatMul; --op-types Conv adds ConvInteger;\n"
            "                         docs/quantize.md \"Dynamic\") |\n"
            "                         weight-only (MatMul/Gemm constant weights only, blockwise;\n"
            "                         no calibration for --algo rtn)\n"
            "weight-only (docs/quantize.md \"Weight-only\"):\n"
            "  --weight-dtype T       int4 (default) | uint4 | int8 | uint8\n"
            "  --weight-block-size N  a power of two in 16..256 along the reduction axis (default 32)\n"
            "  --weight-asymmetric    a zero point per block (default symmetric)\n"
            "  --format F             qdq (default: blocked DequantizeLinear, opset 21) |\n"
            "                         matmulnbits (com.microsoft MatMulNBits, onnxruntime)\n"
            "  --weight-scale-dtype T qdq scales float32 (default: onnxruntime fuses them) | float16\n"
            "  --accuracy-level L     matmulnbits accuracy_level 0..4 (default 0)\n"
            "  --algo A               rtn (default: round to nearest) | gptq (needs --calib/...)\n"
            "  --gptq-damp D          GPTQ dampening, fraction of the mean Hessian diagonal (default 0.01)\n\n"
            "deployment target:\n"
            "  --target T             where the model will run (default ort-x86):\n"
            "                         ort-x86       onnxruntime on any x86-64 CPU: U8S8, pairs limited so\n"
            "                                       that AVX2 cannot saturate them\n"
            "                         ort-x86-vnni  onnxruntime on AVX-512 VNNI/AVX-VNNI/AMX CPUs: U8S8\n"
            "                         generic       plain QDQ (uint8/int8) for other consumers\n"
            "                         host          ort-x86-vnni or ort-x86 from this CPU\n"
            "                         --act-dtype, --weight-dtype, --weight-asymmetric, --op-types\n"
            "                         override what the target chose (--print-config shows both)\n"
            "  --prepare, --no-prepare  graph preparation before calibration (default: on for static\n"
            "                         mode on the ort-* targets; faster in onnxruntime, docs/quantize.md):\n"
            "                         fuse-activations (HardSwish chains; x*HardSigmoid(x) below opset 14),\n"
            "                         fold-linear (Mul/Add by constants into Conv/Gemm weights)\n"
            "  --bias-correction, --no-bias-correction  after quantizing, add to each quantized\n"
            "                         Conv/Gemm's bias its mean output error against the float model on\n"
            "                         16 calibration samples, layer by layer (default: on for static mode\n"
            "                         on the ort-* targets; docs/quantize.md \"Bias correction\")\n"
            "  --smooth-quant auto|off|ALPHA  SmoothQuant before calibration: per input channel j of a\n"
            "                         MatMul/Gemm, s = max|X|^ALPHA / max|W|^(1-ALPHA); X / s, W * s (the float\n"
            "                         model stays equivalent). auto (default in static mode): ALPHA in 0.3..0.9\n"
            "                         or none per input, by the layers' output error on held-out calibration\n"
            "                         samples; smoothed inputs get min/max ranges (docs/passes/smooth-quant.md)\n\n"
            "calibration data:\n"
            "  --calib DIR            one subfolder per sample with <input>.pb/.npy or input_N.pb,\n"
            "                         or a flat folder of .npy/.pb files (one-input models)\n"
            "  --calib-images DIR     PNG/JPEG images, with [--size HxW] [--mean a,b,c] [--std a,b,c]\n"
            "                         [--bgr] [--grey] [--layout nchw|nhwc] [--scale 255]\n"
            "                         (--size default: the model input's fixed H, W)\n"
            "  --calib-random N       N random samples (smoke test: ranges are meaningless)\n"
            "  --seed S               seed for --calib-random (default 1)\n"
            "  --dim NAME=N           size of a symbolic dimension for --calib-random\n"
            "  --input-value NAME=V   fill input NAME with V (random data, or a sample without\n"
            "                         that input's file), e.g. sr=16000; docs/data.md\n"
            "  --max-samples N        use at most N samples\n"
            "  --method M             auto | minmax | percentile | entropy | mse (default percentile);\n"
            "                         auto: per tensor, minmax, percentile 99.9/99.99/99.999 or mse,\n"
            "                         whichever errs least on held-out calibration samples\n"
            "  --percentile P         for percentile (default 99.99; 99.999 for 16-bit activations)\n"
            "  --averaging C          minmax moving-average constant in (0,1]\n"
            "  --nan-policy P         quantized (default: stop when a tensor that would be quantized\n"
            "                         had NaN/Inf) | error (any observed tensor) | ignore (exclude, count)\n"
            "quantization:\n"
            "  --act-dtype T          uint8 (targets' default) | int8 | uint16 | int16 (16-bit: opset 21)\n"
            "  --act-symmetric        symmetric activations\n"
            "  --weight-dtype T       int8 (targets' default; pair-limited on ort-x86) | uint8 (U8U8) |\n"
            "                         int16 | uint16 |\n"
            "                         int4 | uint4\n"
            "  --weight-asymmetric    asymmetric weights (default symmetric)\n"
            "  --per-tensor           one weight scale per tensor (default per channel)\n"
            "  --weight-block-size N  blocked weights along the reduction axis (opset 21)\n"
            "  --reduce-range         7-bit weights (int8 [-64,63], uint8 [0,127]), activations unchanged:\n"
            "                         onnxruntime's reduce_range\n"
            "  --op-types A,B,..      op types to quantize (default: the target's; ort-x86: Conv,Gemm,MatMul;\n"
            "                         generic: Conv,ConvTranspose,Gemm,MatMul)\n"
            "  --depthwise int8|float depthwise Convs quantized or left float (default on the ort-*\n"
            "                         targets: faster in onnxruntime, whose integer depthwise kernels\n"
            "                         are slow, and more accurate with bias correction; those onnxruntime\n"
            "                         would quantize per tensor itself are quantized per channel)\n"
            "  --embedding-dtype T    int8 (default) | float: Gathers of large constant tables\n"
            "                         (embeddings) read an int8 table, one scale per row (static and\n"
            "                         dynamic modes; docs/passes/quantize-gather.md)\n"
            "  --include-nodes REGEX  only nodes whose name matches (POSIX extended regex)\n"
            "  --exclude-nodes REGEX  skip nodes whose name matches\n"
            "  --overrides FILE       JSON {tensor: {scale, zero_point, dtype, min, max}}\n"
            "other:\n"
            "  --config FILE          load a configuration (JSON as printed by --print-config)\n"
            "  --print-config         print the resolved configuration as JSON and exit\n"
            "  --json FILE            summary (configuration, passes, statistics) as JSON;\n"
            "                         '-': standard output (docs/quantize.md)\n"
            "  --threads N            executor threads for calibration (default: all CPUs)\n"
            "  --quiet                print nothing but errors\n"
            "  --verbose              print every note (default: one line per kind of note,\n"
            "                         its worst case and a count; --json lists all)\n"
            "accuracy-driven fallback (docs/verify.md):\n"
            "  --target-sqnr DB       return the worst layers to float until the output SQNR >= DB\n"
            "  --max-fallback N       at most N layers in float (default 10)\n"
            "  --fallback-search S    greedy (default: re-measure after each layer) | bisect\n"
            "                         (rank once, binary-search the count: for many layers)\n"
            "  --eval DIR             measure on these samples (default: the calibration data)\n");
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

/* --mode weight-only: [upgrade-opset{to=21}] constant-to-initializer quantize-weights{...} */
static char *build_wonly_pipeline(qconfig *c, bool progress)
{
    strb b = {0};
    bool f = true;
    if (c->opset_target > c->opset_in) {
        char buf[64];
        snprintf(buf, sizeof buf, "upgrade-opset{to=%lld},", (long long)c->opset_target);
        sadd(&b, buf);
    }
    sadd(&b, "constant-to-initializer,quantize-weights");
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
    if (strcmp(c->algo, "gptq") == 0) {
        soptf(&b, &f, "damp", "%.17g", c->gptq_damp);
        source_opts(&b, &f, c);
        soptf(&b, &f, "threads", "%.0f", (double)c->threads);
        soptb(&b, &f, "progress", progress);
    }
    sadd(&b, "}");
    return b.p;
}

/* --mode weight-only: its defaults (int4, blocks of 32, MatMul and Gemm) where neither an
 * option nor the config chose, and the checks of its options. 0, or -1 after a message. */
static int resolve_weight_only(qconfig *c, bool static_only_option)
{
    if (static_only_option) {
        cli_error("quantize", "--mode weight-only quantizes weights only: --act-dtype, --act-symmetric, "
                              "--per-tensor, --reduce-range, --overrides and --target-sqnr do not apply");
        return -1;
    }
    if (!c->weight_dtype)
        c->weight_dtype = "int4";
    if (strcmp(c->weight_dtype, "int4") && strcmp(c->weight_dtype, "uint4") && strcmp(c->weight_dtype, "int8") &&
        strcmp(c->weight_dtype, "uint8")) {
        cli_error("quantize", "--mode weight-only: --weight-dtype %s: one of int4, uint4, int8, uint8", c->weight_dtype);
        return -1;
    }
    if (c->weight_block_size == 0)
        c->weight_block_size = 32;
    int64_t bs = c->weight_block_size;
    if (bs < 16 || bs > 256 || (bs & (bs - 1)) != 0) {
        cli_error("quantize", "--weight-block-size %lld: a power of two in 16..256 in --mode weight-only", (long long)bs);
        return -1;
    }
    if (!c->op_types)
        c->op_types = "MatMul,Gemm";
    if (strcmp(c->wformat, "qdq") && strcmp(c->wformat, "matmulnbits")) {
        cli_error("quantize", "--format %s: one of qdq, matmulnbits", c->wformat);
        return -1;
    }
    if (strcmp(c->algo, "rtn") && strcmp(c->algo, "gptq")) {
        cli_error("quantize", "--algo %s: one of rtn, gptq", c->algo);
        return -1;
    }
    if (strcmp(c->wscale_dtype, "auto") && strcmp(c->wscale_dtype, "float16") && strcmp(c->wscale_dtype, "float32")) {
        cli_error("quantize", "--weight-scale-dtype %s: one of float16, float32", c->wscale_dtype);
        return -1;
    }
    if (!strcmp(c->wformat, "matmulnbits") && !strcmp(c->wscale_dtype, "float16")) {
        cli_error("quantize", "--weight-scale-dtype float16: MatMulNBits keeps float32 scales (the type of its input)");
        return -1;
    }
    if (c->accuracy_level < 0 || c->accuracy_level > 4) {
        cli_error("quantize", "--accuracy-level %lld: must be in 0..4", (long long)c->accuracy_level);
        return -1;
    }
    if (!(c->gptq_damp >= 0 && c->gptq_damp <= 10)) {
        cli_error("quantize", "--gptq-damp %g: must be in [0, 10]", c->gptq_damp);
        return -1;
    }
    return 0;
}

/* A HardSigmoid or Clip in g: the parts of the chains fuse-activations makes a HardSwish. */
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
    sadd(b, "constant-to-initializer,fold-batchnorm");
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
    if (smooth_on(c) && (c->calib || c->calib_images || c->calib_random > 0)) {
        sadd(&b, ",smooth-quant");
        f = true;
        if (c->smooth_quant == SMOOTH_AUTO)
            soptb(&b, &f, "search", true);
        else
            soptf(&b, &f, "alpha", "%.17g", c->smooth_quant);
        source_opts(&b, &f, c);
        soptf(&b, &f, "threads", "%.0f", (double)c->threads);
        soptb(&b, &f, "progress", progress);
        sadd(&b, "}");
    }
    if (c->calib || c->calib_images || c->calib_random > 0) {
        sadd(&b, ",calibrate");
        f = true;
        source_opts(&b, &f, c);
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
    json_end_object(w);
    json_kv_int(w, "opset_in", c->opset_in);
    json_kv_int(w, "opset_out", c->opset_target > c->opset_in ? c->opset_target : c->opset_in);
    json_kv_bool(w, "bias_by_fold_bias", c->fold_bias);
    json_kv_bool(w, "qdq_cleanup", c->qdq_cleanup);
    json_kv_string(w, "pipeline", c->pipeline);
    json_end_object(w);
    json_end_object(w);
}

static void write_config_cb(json_writer *w, const void *c)
{
    write_config(w, c);
}

/* Apply a JSON config object; strings point into j (kept alive by the caller). */
static int load_config(qconfig *c, const cJSON *j, const char *path)
{
    if (!cJSON_IsObject(j)) {
        cli_error("quantize", "%s: expected a JSON object", path);
        return -1;
    }
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
            bp = &c->weight_symmetric;
            c->weight_symmetric_set = true;
        }
        else if (!strcmp(k, "target")) sp = &c->target;
        else if (!strcmp(k, "prepare") || !strcmp(k, "bias_correction")) { /* null: the target's */
            bool prep = k[0] == 'p';
            if (cJSON_IsNull(v))
                continue;
            if (!cJSON_IsBool(v)) {
                cli_error("quantize", "%s: key \"%s\" has the wrong type", path, k);
                return -1;
            }
            *(prep ? &c->prepare : &c->bias_correction) = cJSON_IsTrue(v);
            *(prep ? &c->src_prepare : &c->src_bias_correction) = "config";
            continue;
        }
        else if (!strcmp(k, "smooth_quant")) {
            c->smooth_asked = true;
            if (cJSON_IsNull(v)) {
                c->smooth_quant = -1;
                continue;
            }
            if (cJSON_IsString(v) && !strcmp(v->valuestring, "auto")) {
                c->smooth_quant = SMOOTH_AUTO;
                continue;
            }
            if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 1)) {
                cli_error("quantize", "%s: key \"%s\" must be null, \"auto\" or a number in [0, 1]", path, k);
                return -1;
            }
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
        else if (!strcmp(k, "include_nodes")) sp = &c->include_nodes;
        else if (!strcmp(k, "exclude_nodes")) sp = &c->exclude_nodes;
        else if (!strcmp(k, "overrides")) sp = &c->overrides;
        else if (!strcmp(k, "threads")) ip = &c->threads;
        else if (!strcmp(k, "format")) sp = &c->wformat;
        else if (!strcmp(k, "weight_scale_dtype")) sp = &c->wscale_dtype;
        else if (!strcmp(k, "accuracy_level")) ip = &c->accuracy_level;
        else if (!strcmp(k, "algo")) sp = &c->algo;
        else if (!strcmp(k, "gptq_damp")) dp = &c->gptq_damp;
        else if (!strcmp(k, "resolved")) continue; /* output only */
        else {
            cli_error("quantize", "%s: unknown key \"%s\"", path, k);
            return -1;
        }
        bool ok;
        if (sp) {
            ok = cJSON_IsString(v) || cJSON_IsNull(v);
            if (ok)
                *sp = cJSON_IsString(v) ? v->valuestring : NULL;
            if (ok && !*sp && (sp == &c->size || sp == &c->mean || sp == &c->std || sp == &c->layout ||
                               sp == &c->method || sp == &c->nan_policy || sp == &c->include_nodes ||
                               sp == &c->exclude_nodes || sp == &c->overrides || sp == &c->target ||
                               sp == &c->dims || sp == &c->input_values || sp == &c->mode || sp == &c->wformat ||
                               sp == &c->algo || sp == &c->wscale_dtype))
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
        if (!ok) {
            cli_error("quantize", "%s: key \"%s\" has the wrong type", path, k);
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ target */

static const char *source_of(const char *now, const char *after_config)
{
    return !now ? "target" : now != after_config ? "option" : "config";
}

/* Fill what neither an option nor the config file chose from the target's row, and say
 * where each choice came from (--print-config "resolved"). */
static int resolve_target(qconfig *c, const char *cfg_act, const char *cfg_wdt, const char *cfg_ops,
                          bool wsym_option)
{
    c->tgt = oq_target_find(c->target);
    if (!c->tgt) {
        cli_error("quantize", "--target \"%s\": unknown target (one of: %s)", c->target, oq_target_names());
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
    if (strcmp(c->depthwise, "int8") && strcmp(c->depthwise, "float")) {
        cli_error("quantize", "--depthwise \"%s\": int8 or float", c->depthwise);
        return -1;
    }
    /* int8 weights asked for on a target whose kernels add u8 x s8 pairs in int16: limit
     * the pairs so that they cannot saturate (insert-qdq pair-limit, docs/quantize.md) */
    c->pair_limit = c->tgt->arith == OQ_ARITH_AVX2 && strcmp(c->weight_dtype, "int8") == 0 && c->weight_symmetric &&
                    !c->reduce_range;
    return 0;
}

/* ------------------------------------------------------------ main */

/* An image option the shared parser (cli_image_option) accepted: keep its text. */
static void image_option_text(qconfig *c, const char *opt, const char *val, const oq_image_opts *img)
{
    if (!strcmp(opt, "--size")) c->size = val;
    else if (!strcmp(opt, "--mean")) c->mean = val;
    else if (!strcmp(opt, "--std")) c->std = val;
    else if (!strcmp(opt, "--layout")) c->layout = val;
    else if (!strcmp(opt, "--scale")) c->scale = img->scale;
    else if (!strcmp(opt, "--bgr")) c->bgr = true;
    else c->grey = img->channels == 1;
}

static int parse_i64(const char *s, int64_t *out)
{
    char *e;
    errno = 0;
    long long v = strtoll(s, &e, 10);
    if (errno || *e || e == s)
        return -1;
    *out = v;
    return 0;
}

static int parse_f64(const char *s, double *out)
{
    char *e;
    errno = 0;
    double v = strtod(s, &e);
    if (errno || *e || e == s)
        return -1;
    *out = v;
    return 0;
}

/* insert-qdq's counts (pass statistics), to refuse a run that quantized nothing */
typedef struct qdq_counts {
    bool seen;
    int64_t selected, not_calibrated;
} qdq_counts;

static qdq_counts qdq_counts_of(const cli_pass_log *log)
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
        }
    }
    return q;
}

/* --mode weight-only: refuse a run that quantized nothing; print the weight bytes. */
static int wonly_report(const cli_pass_log *log, const qconfig *c, bool quiet, oq_diag *d)
{
    int64_t n = 0, fb = 0, qb = 0;
    for (size_t k = 0; k < log->n; k++) {
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
        }
    }
    if (n == 0) {
        oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_UNSUPPORTED, NULL, NULL, NULL,
                    "no weight quantized: no node of %s%s with a constant 2-D float B in the main graph", c->op_types,
                    *c->include_nodes || *c->exclude_nodes ? " (after --include-nodes/--exclude-nodes)" : "");
        return -1;
    }
    if (!quiet)
        fprintf(stderr, "onnxq quantize: weight-only: %lld weight%s, %lld bytes of float32 -> %lld bytes (%.4f, 1/%.2f) "
                        "(scales%s included)\n", (long long)n, n == 1 ? "" : "s", (long long)fb, (long long)qb,
                (double)qb / (double)fb, (double)fb / (double)qb, c->weight_symmetric ? "" : " and zero points");
    return 0;
}

int cmd_quantize(int argc, char **argv)
{
    qconfig c;
    config_default(&c);
    const char *in = NULL, *out = NULL, *config_file = NULL;
    bool print_config = false, quiet = false;
    const char *json_out = NULL; /* --json: src/cli/quantize_report.c */
    static cli_qreport report;
    cli_fallback_args fb = {.max_fallback = 10}; /* --target-sqnr hook: src/cli/quantize_fallback.c */
    bool fallback = false, fallback_met = true;
    int rc = CLI_OK;
    cJSON *cj = NULL;
    oq_registry *reg = NULL;
    oq_pipeline *pl = NULL;
    oq_model *m = NULL;
    char *meta = NULL;
    size_t meta_len = 0;
    oq_diag d;
    oq_diag_init(&d);
    oq_image_opts img; /* validated by the shared parser; the pipeline gets the text */
    oq_image_opts_default(&img, 0, 0);
    cli_data_opts data;
    cli_data_opts_init(&data);
    char *dims_text = NULL, *values_text = NULL;

    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            config_file = argv[i + 1];
    if (config_file) {
        if (oq_json_parse_file(config_file, &cj, &d) != OQ_OK) {
            cli_print_diag(&d);
            rc = CLI_BAD;
            goto done;
        }
        if (load_config(&c, cj, config_file) != 0) {
            rc = CLI_BAD;
            goto done;
        }
    }
    const char *cfg_act = c.act_dtype, *cfg_wdt = c.weight_dtype, *cfg_ops = c.op_types;
    c.cfg_depthwise = c.depthwise;
    bool wsym_option = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        const char *v = has ? argv[i + 1] : NULL;
        int bad = 0;
        if (cli_is_help(a)) {
            help(stdout);
            goto done;
        }
        int shared = strcmp(a, "--seed") != 0 ? cli_data_option("quantize", argc, argv, &i, &data) : 0;
        if (shared == 0) {
            shared = cli_image_option("quantize", argc, argv, &i, &img);
            if (shared > 0) /* keep the text for the config (the pass parses it again) */
                image_option_text(&c, a, argv[i], &img);
        }
        if (shared < 0) {
            rc = CLI_BAD;
            goto done;
        }
        if (shared > 0)
            continue;
#define STR(flag, field) else if (strcmp(a, flag) == 0 && has) { c.field = v; i++; }
#define I64(flag, field) else if (strcmp(a, flag) == 0 && has) { bad = parse_i64(v, &c.field); i++; }
#define F64(flag, field) else if (strcmp(a, flag) == 0 && has) { bad = parse_f64(v, &c.field); i++; }
#define FLAG(flag, field, val) else if (strcmp(a, flag) == 0) { c.field = val; }
        if (strcmp(a, "-o") == 0 && has) {
            out = v;
            i++;
        } else if (strcmp(a, "--config") == 0 && has) {
            i++;
        }
        STR("--mode", mode)
        STR("--calib", calib)
        STR("--calib-images", calib_images)
        I64("--calib-random", calib_random)
        I64("--seed", seed)
        I64("--max-samples", max_samples)
        STR("--method", method)
        else if (strcmp(a, "--percentile") == 0 && has) {
            bad = parse_f64(v, &c.percentile);
            i++;
            if (!bad && !(c.percentile > 0 && c.percentile <= 100)) {
                cli_error("quantize", "--percentile %s: must be in (0, 100]", v);
                rc = CLI_BAD;
                goto done;
            }
        }
        else if (strcmp(a, "--smooth-quant") == 0 && has) {
            c.smooth_asked = true;
            if (!strcmp(v, "auto"))
                c.smooth_quant = SMOOTH_AUTO;
            else if (!strcmp(v, "off"))
                c.smooth_quant = -1;
            else
                bad = parse_f64(v, &c.smooth_quant);
            i++;
            if (!bad && !(c.smooth_quant >= 0 && c.smooth_quant <= 1) && c.smooth_quant != SMOOTH_AUTO &&
                strcmp(v, "off") != 0) {
                cli_error("quantize", "--smooth-quant %s: auto, off or a number in [0, 1] (typical 0.5)", v);
                rc = CLI_BAD;
                goto done;
            }
        }
        F64("--averaging", averaging)
        STR("--nan-policy", nan_policy)
        STR("--act-dtype", act_dtype)
        FLAG("--act-symmetric", act_symmetric, true)
        STR("--weight-dtype", weight_dtype)
        else if (strcmp(a, "--weight-asymmetric") == 0) { c.weight_symmetric = false; wsym_option = true; }
        STR("--target", target)
        else if (strcmp(a, "--prepare") == 0 || strcmp(a, "--no-prepare") == 0) {
            c.prepare = a[2] == 'p';
            c.src_prepare = "option";
        }
        else if (strcmp(a, "--bias-correction") == 0 || strcmp(a, "--no-bias-correction") == 0) {
            c.bias_correction = a[2] == 'b';
            c.src_bias_correction = "option";
        }
        STR("--mode", mode)
        STR("--format", wformat)
        STR("--algo", algo)
        STR("--weight-scale-dtype", wscale_dtype)
        I64("--accuracy-level", accuracy_level)
        F64("--gptq-damp", gptq_damp)
        FLAG("--per-tensor", per_channel, false)
        I64("--weight-block-size", weight_block_size)
        FLAG("--reduce-range", reduce_range, true)
        STR("--op-types", op_types)
        STR("--embedding-dtype", embedding_dtype)
        STR("--depthwise", depthwise)
        STR("--include-nodes", include_nodes)
        STR("--exclude-nodes", exclude_nodes)
        STR("--overrides", overrides)
        I64("--threads", threads)
        else if (strcmp(a, "--target-sqnr") == 0 && has) { bad = parse_f64(v, &fb.target_sqnr_db); fallback = true; i++; }
        else if (strcmp(a, "--max-fallback") == 0 && has) { bad = parse_i64(v, &fb.max_fallback); i++; }
        else if (strcmp(a, "--eval") == 0 && has) { fb.eval = v; i++; }
        else if (strcmp(a, "--fallback-search") == 0 && has) { fb.search = v; i++; }
        else if (strcmp(a, "--print-config") == 0) print_config = true;
        else if (strcmp(a, "--json") == 0 && has) { json_out = v; i++; }
        else if (strcmp(a, "--quiet") == 0) { quiet = true; cli_set_verbosity(CLI_QUIET); }
        else if (strcmp(a, "--verbose") == 0) cli_set_verbosity(CLI_VERBOSE);
        else if (a[0] == '-' && a[1]) {
            cli_error("quantize", "unknown option \"%s\" (or missing its value)", a);
            rc = CLI_BAD;
            goto done;
        } else if (!in) {
            in = a;
        } else {
            cli_error("quantize", "unexpected argument \"%s\"", a);
            rc = CLI_BAD;
            goto done;
        }
#undef STR
#undef I64
#undef F64
#undef FLAG
        if (bad) {
            cli_error("quantize", "%s: \"%s\" is not a number", a, v);
            rc = CLI_BAD;
            goto done;
        }
    }
    if (strcmp(c.mode, "static") && strcmp(c.mode, "dynamic") && !weight_only(&c)) {
        cli_error("quantize", "--mode \"%s\": unknown (static, dynamic, weight-only)", c.mode);
        rc = CLI_BAD;
        goto done;
    }
    if (strcmp(c.embedding_dtype, "int8") && strcmp(c.embedding_dtype, "float")) {
        cli_error("quantize", "--embedding-dtype \"%s\": int8 or float", c.embedding_dtype);
        rc = CLI_BAD;
        goto done;
    }
    /* weight-only's own defaults (int4, MatMul,Gemm, symmetric) stand where the target's
     * would: "mode" in --print-config's sources */
    bool wo_wdt = !c.weight_dtype, wo_ops = !c.op_types, wo_sym = !wsym_option && !c.weight_symmetric_set;
    if (weight_only(&c) &&
        resolve_weight_only(&c, c.act_dtype || c.act_symmetric || !c.per_channel || c.reduce_range || *c.overrides ||
                                    fallback) != 0) {
        rc = CLI_BAD;
        goto done;
    }
    c.fallback = fallback;
    if (resolve_target(&c, cfg_act, cfg_wdt, cfg_ops, wsym_option) != 0) {
        rc = CLI_BAD;
        goto done;
    }
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
    if (!in || (!out && !print_config)) {
        cli_error("quantize", "%s", !in ? "missing input model" : "missing -o OUT");
        help(stderr);
        rc = CLI_BAD;
        goto done;
    }
    bool dynamic = strcmp(c.mode, "dynamic") == 0;
    if (!c.smooth_asked && (dynamic || weight_only(&c) || (!c.calib && !c.calib_images && c.calib_random <= 0)))
        c.smooth_quant = -1; /* the default applies to static mode with calibration data */
    if (dynamic && smooth_on(&c)) {
        cli_error("quantize", "--smooth-quant is for --mode static (it moves activation outliers into weights "
                              "before activations are quantized)");
        rc = CLI_BAD;
        goto done;
    }
    if (dynamic) { /* nothing to calibrate: refuse what only calibration would use (docs/quantize.md) */
        const char *na = c.calib ? "--calib" : c.calib_images ? "--calib-images" : c.calib_random > 0 ? "--calib-random"
                         : fallback ? "--target-sqnr" : fb.eval ? "--eval" : *c.overrides ? "--overrides"
                         : c.weight_block_size ? "--weight-block-size" : data.n_dims ? "--dim"
                         : data.n_values ? "--input-value" : NULL;
        if (na) {
            cli_error("quantize", "--mode dynamic: %s does not apply (activations are quantized at run time from "
                      "each tensor's own range: no calibration)", na);
            rc = CLI_BAD;
            goto done;
        }
        if (strcmp(c.act_dtype, "uint8") != 0 || c.act_symmetric) {
            cli_error("quantize", "--mode dynamic: activations are uint8 asymmetric (DynamicQuantizeLinear); "
                      "--act-dtype %s%s does not apply", c.act_dtype, c.act_symmetric ? " --act-symmetric" : "");
            rc = CLI_BAD;
            goto done;
        }
        if (strcmp(c.weight_dtype, "uint8") != 0 && strcmp(c.weight_dtype, "int8") != 0) {
            cli_error("quantize", "--mode dynamic: --weight-dtype %s: uint8 or int8 (MatMulInteger takes 8-bit weights)",
                      c.weight_dtype);
            rc = CLI_BAD;
            goto done;
        }
    }
    int nsrc = (c.calib != NULL) + (c.calib_images != NULL) + (c.calib_random > 0);
    if (nsrc > 1) {
        cli_error("quantize", "give only one of --calib, --calib-images, --calib-random");
        rc = CLI_BAD;
        goto done;
    }
    if (weight_only(&c) && nsrc == 0 && strcmp(c.algo, "gptq") == 0) {
        cli_error("quantize", "--algo gptq: no calibration data: give --calib DIR, --calib-images DIR or --calib-random N");
        rc = CLI_BAD;
        goto done;
    }
    if (weight_only(&c) && nsrc > 0 && strcmp(c.algo, "rtn") == 0 && !quiet)
        fprintf(stderr, "onnxq quantize: note: --algo rtn uses no calibration data (the samples are ignored; "
                        "--algo gptq uses them)\n");
    if (weight_only(&c) && smooth_on(&c)) {
        cli_error("quantize", "--smooth-quant is for --mode static (it moves activation outliers into weights "
                              "before activations are quantized)");
        rc = CLI_BAD;
        goto done;
    }
    bool bc_asked = !strcmp(c.src_bias_correction, "option") || !strcmp(c.src_bias_correction, "config");
    if (c.bias_correction && bc_asked && strcmp(c.mode, "static") != 0) {
        cli_error("quantize", "--bias-correction is for --mode static (it corrects the biases of the quantized "
                              "Conv/Gemm layers against the float model on the calibration data)");
        rc = CLI_BAD;
        goto done;
    }
    if (c.bias_correction && nsrc == 0) {
        if (bc_asked) {
            cli_error("quantize", "--bias-correction needs calibration data: give --calib DIR, --calib-images DIR or "
                                  "--calib-random N");
            rc = CLI_BAD;
            goto done;
        }
        c.bias_correction = 0; /* --overrides alone: nothing to measure with */
        c.src_bias_correction = "data";
    }
    if (nsrc == 0 && smooth_on(&c)) {
        cli_error("quantize", "--smooth-quant needs calibration data: give --calib DIR, --calib-images DIR or "
                              "--calib-random N");
        rc = CLI_BAD;
        goto done;
    }
    if (nsrc == 0 && !*c.overrides && !weight_only(&c) && !dynamic) {
        cli_error("quantize", "no calibration data: give --calib DIR, --calib-images DIR or --calib-random N");
        rc = CLI_BAD;
        goto done;
    }
    if (data.n_dims || data.n_values) {
        dims_text = cli_kv_join(data.dims, data.n_dims);
        values_text = cli_kv_join(data.values, data.n_values);
        if (!dims_text || !values_text) {
            rc = CLI_FAIL;
            goto done;
        }
        if (data.n_dims)
            c.dims = dims_text;
        if (data.n_values)
            c.input_values = values_text;
    }
    /* paths checked before any work (exit 2): an output that cannot be written, or data
     * that is not a folder, is known now rather than after calibration */
    {
        const char *inputs[1] = {in};
        if ((!print_config && cli_check_output("quantize", "-o", out, false, inputs, 1) != CLI_OK) ||
            (json_out && cli_check_output("quantize", "--json", json_out, true, inputs, 1) != CLI_OK) ||
            (c.calib && cli_check_input_dir("quantize", "--calib", c.calib) != CLI_OK) ||
            (c.calib_images && cli_check_input_dir("quantize", "--calib-images", c.calib_images) != CLI_OK) ||
            (fb.eval && cli_check_input_dir("quantize", "--eval", fb.eval) != CLI_OK)) {
            rc = CLI_BAD;
            goto done;
        }
    }
    reg = cli_registry("quantize", NULL, 0, &rc);
    if (!reg)
        goto done;
    c.fold_bias = oq_registry_find(reg, "fold-bias") != NULL;
    c.qdq_cleanup = oq_registry_find(reg, "qdq-cleanup") != NULL;
    if (!(m = cli_load_model_rc(in, &rc)))
        goto done;
    d.file = in;
    c.opset_in = oq_model_opset(m, "");
    c.opset_target = c.opset_in < 13 ? 13 : c.opset_in;
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
        if (oq_json_parse_file(c.overrides, &ov, &d) != OQ_OK) {
            cli_print_diag(&d);
            rc = CLI_BAD;
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
        fprintf(stderr, "onnxq quantize: --target host: %s (%s)\n", c.tgt->name, oq_target_host_reason());
    c.pipeline = weight_only(&c) ? build_wonly_pipeline(&c, !quiet) : build_pipeline(&c, !quiet);
    if (!c.pipeline) {
        rc = CLI_FAIL;
        goto done;
    }
    if (print_config) {
        json_writer w;
        json_init(&w, stdout, 2);
        write_config(&w, &c);
        rc = json_finish(&w) == 0 ? CLI_OK : CLI_FAIL;
        goto done;
    }
    if (c.calib_random > 0 && !quiet)
        fprintf(stderr, "onnxq quantize: warning: --calib-random: ranges from random data are not meaningful "
                        "(use it for smoke tests only; give --calib or --calib-images for a real model)\n");
    if (strstr(c.act_dtype, "16") && strstr(c.weight_dtype, "16") && !quiet)
        fprintf(stderr, "onnxq quantize: warning: 16-bit activations with 16-bit weights: integer kernels that "
                        "accumulate in int32 can overflow (onnxruntime's optimized path does on PaddleOCR det); "
                        "prefer --weight-dtype int8 with 16-bit activations\n");
    if (!c.fold_bias && !quiet)
        fprintf(stderr, "onnxq quantize: note: pass fold-bias is not available; insert-qdq quantizes biases itself\n");
    if (!c.qdq_cleanup && !quiet)
        fprintf(stderr, "onnxq quantize: note: pass qdq-cleanup is not available; skipped\n");
    size_t err_pos = 0;
    if (oq_pipeline_parse(reg, c.pipeline, &pl, &err_pos, &d) != OQ_OK) {
        cli_print_diag(&d);
        rc = CLI_BAD;
        goto done;
    }
    oq_pipeline_run_options ro = {0};
    memset(&report, 0, sizeof report);
    ro.after_pass = cli_qreport_after_pass;
    ro.user = &report;
    oq_status st = oq_pipeline_run(pl, m, &ro, &d);
    report.smooth_quant = cli_take_metadata(m, OQ_SMOOTH_METADATA_KEY);
    if (st == OQ_OK && !quiet)
        cli_qreport_print_calibration(&report, stderr);
    qdq_counts qc = qdq_counts_of(&report.passes);
    if (st == OQ_OK && weight_only(&c) && wonly_report(&report.passes, &c, quiet, &d) != 0) {
        cli_print_diag(&d);
        rc = CLI_FAIL;
        goto done;
    }
    if (st == OQ_OK && qc.seen && qc.selected == 0) {
        /* writing the float model back and exiting 0 would hide that nothing happened */
        const char *filt = *c.include_nodes || *c.exclude_nodes ? " (after --include-nodes/--exclude-nodes)" : "";
        if (dynamic)
            oq_diag_add(&d, OQ_SEV_ERROR, OQ_ERR_UNSUPPORTED, NULL, NULL, NULL,
                        "no node quantized: no node of the op types %s%s with a constant float weight (--mode dynamic "
                        "quantizes weights held in initializers; `onnxq dump` lists the model's op types)",
                        c.op_types, filt);
        else if (qc.not_calibrated > 0)
            oq_diag_add(&d, OQ_SEV_ERROR, OQ_ERR_UNSUPPORTED, NULL, NULL, NULL,
                        "no node quantized: the %lld node%s of the requested op types %s%s %s inside subgraphs "
                        "never executed during calibration (calibrate with data that takes those branches)",
                        (long long)qc.not_calibrated, qc.not_calibrated == 1 ? "" : "s", c.op_types, filt,
                        qc.not_calibrated == 1 ? "is" : "are all");
        else
            oq_diag_add(&d, OQ_SEV_ERROR, OQ_ERR_UNSUPPORTED, NULL, NULL, NULL,
                        "no node quantized: no node of the requested op types %s%s in the model or its subgraphs "
                        "(--op-types; `onnxq dump` lists the model's op types)", c.op_types, filt);
        cli_print_diag(&d);
        rc = CLI_FAIL;
        goto done;
    }
    if (st == OQ_OK) {
        oq_diag cd;
        oq_diag_init(&cd);
        if (oq_model_check(m, &cd) != OQ_OK) {
            oq_diag_add(&d, OQ_SEV_ERROR, OQ_ERR_INTERNAL, NULL, NULL, NULL, "the quantized model is invalid:");
            for (size_t k = 0; k < cd.count; k++)
                oq_diag_add(&d, cd.entries[k].severity, cd.entries[k].code, cd.entries[k].file, cd.entries[k].node,
                            cd.entries[k].op, "%s", cd.entries[k].message);
            st = OQ_ERR_INTERNAL;
        }
        oq_diag_free(&cd);
    }
    cli_fallback_args fa = {in, fb.target_sqnr_db, fb.max_fallback, fb.eval, c.calib, c.calib_images, c.size,
                            c.mean, c.std, c.layout, c.bgr, c.scale, c.calib_random, c.seed, c.max_samples,
                            c.threads, quiet, fb.search, c.grey, c.dims, c.input_values, OQ_ARITH_REFERENCE, NULL, NULL};
    fa.arith = c.tgt->arith;
    fa.target = c.tgt->name;
    fa.weight_dtype = c.weight_dtype;
    if (st == OQ_OK && c.bias_correction) { /* before the saturation check and the fallback measure the model */
        strb pb = {0};
        prep_passes(&pb, &c);
        st = pb.p ? cli_quantize_bias_correct(&fa, reg, pb.p, m, &report.bias, &report.bias_seconds, &d)
                  : oq_diag_error(&d, OQ_ERR_NOMEM, "out of memory");
        free(pb.p);
        report.bias_correction = st == OQ_OK;
    }
    if (st == OQ_OK && c.tgt->arith != OQ_ARITH_REFERENCE && (c.calib || c.calib_images || c.calib_random > 0) &&
        !weight_only(&c)) {
        /* the saturation check: what the target's arithmetic loses, per layer */
        size_t nw = 0;
        oq_diag sd;
        oq_diag_init(&sd);
        if (cli_quantize_satcheck(&fa, m, &nw, &sd) != OQ_OK) { /* a check, not the job: warn */
            char msg[512] = "unknown error";
            const oq_diag_entry *e = oq_diag_first_error(&sd);
            if (e)
                oq_diag_format(e, msg, sizeof msg);
            if (!quiet)
                fprintf(stderr, "onnxq quantize: warning: saturation check not done: %s\n", msg);
        }
        oq_diag_free(&sd);
    }
    if (st == OQ_OK && fallback)
        st = cli_quantize_fallback(&fa, m, &fallback_met, &d);
    if (st == OQ_OK) {
        FILE *ms = open_memstream(&meta, &meta_len);
        if (!ms) {
            rc = CLI_FAIL;
            goto done;
        }
        json_writer w;
        json_init(&w, ms, 0);
        write_config(&w, &c);
        json_finish(&w);
        fclose(ms);
        if (meta_len && meta[meta_len - 1] == '\n')
            meta[meta_len - 1] = 0;
        oq_model_set_metadata(m, "onnxq.quantize.config", meta);
        oq_write_options wo = {0};
        st = oq_model_write(m, out, &wo, &d);
    }
    if (st != OQ_OK && !quiet && isatty(fileno(stderr)))
        fputs("\r\033[K", stderr); /* a progress line cut short: the error starts on a clean line */
    cli_print_diag(&d);
    report.fallback = fallback;
    report.fallback_met = fallback_met;
    report.diag = &d;
    if (json_out && cli_qreport_write(&report, json_out, in, out, st, write_config_cb, &c) != CLI_OK && st == OQ_OK)
        rc = CLI_FAIL;
    if (st != OQ_OK)
        rc = st == OQ_ERR_USAGE || st == OQ_ERR_UNSUPPORTED || st == OQ_ERR_NUMERIC || st == OQ_ERR_PARSE ||
                     st == OQ_ERR_INVALID
                 ? CLI_BAD
                 : CLI_FAIL;
    else {
        if (!quiet)
            fprintf(stderr, "onnxq quantize: wrote %s\n", out);
        if (!fallback_met) { /* the model is written, but the asked-for accuracy is not there */
            fprintf(stderr, "onnxq quantize: %s: --target-sqnr %g dB not met (exit 1)\n", out, fb.target_sqnr_db);
            rc = CLI_FAIL;
        }
    }
done:
    free(report.smooth_quant);
    report.smooth_quant = NULL;
    free(report.calibration);
    report.calibration = NULL;
    free(dims_text);
    free(values_text);
    cli_data_opts_free(&data);
    free(meta);
    free(c.pipeline);
    cJSON_Delete(cj);
    oq_pipeline_free(pl);
    oq_registry_free(reg);
    oq_model_free(m);
    oq_diag_free(&d);
    return rc;
}
