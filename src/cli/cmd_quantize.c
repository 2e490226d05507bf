/* onnxq quantize IN -o OUT [--calib DIR | --calib-images DIR ... | --calib-random N] [options]
 *
 * The arguments as oq_quantize_options, the job in libonnxq (include/onnxq/quantize.h,
 * src/job/quantize.c), and what it returns printed: the notes and summaries on stderr, the
 * errors one line each, --print-config and --json. docs/quantize.md */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/samples.h"
#include "onnxq/quantize.h"

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
            "  --algo A               rtn (default: round to nearest) | gptq | awq (both need --calib/...)\n"
            "  --gptq-damp D          GPTQ dampening, fraction of the mean Hessian diagonal (default 0.01)\n"
            "  --gptq-act-order       GPTQ: features in order of decreasing input energy\n\n"
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
            "  --method M             select (default) | auto | minmax | percentile | entropy | mse;\n"
            "                         select: percentile 99.99, 99.999, minmax or mse for the whole\n"
            "                         model, whichever gives the best worst output part on held-out\n"
            "                         calibration samples; auto: per tensor, by the tensor's error\n"
            "  --percentile P         percentile P (default 99.99; 99.999 for 16-bit activations)\n"
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
            "  --min-intensity T      a Conv doing fewer than T multiply-adds per element it reads from or\n"
            "                         writes to float ops stays float (0: off; default 64 with AVX2\n"
            "                         arithmetic - ort-x86 on any CPU, avx2, host without VNNI - where\n"
            "                         onnxruntime's integer convolution gains less than the Q/DQ and\n"
            "                         layout changes around it cost; 0 elsewhere)\n"
            "  --weight-rounding M    nearest | gptq: int8 weights rounded to nearest, or with GPTQ for\n"
            "                         the least layer output error on the calibration samples, kept\n"
            "                         when held-out samples agree (static mode; default: the target's)\n"
            "  --embedding-dtype T    int8 (default) | float: Gathers of large constant tables\n"
            "                         (embeddings) read an int8 table, one scale per row (static and\n"
            "                         dynamic modes; docs/passes/quantize-gather.md); weight-only:\n"
            "                         float (default) | int4 | int8: GatherBlockQuantized blocks, a tied\n"
            "                         LM head MatMulNBits (docs/passes/quantize-embeddings.md)\n"
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


/* ------------------------------------------------------------ main */


/* An image option the shared parser (cli_image_option) accepted: keep its text. */
static void image_option_text(oq_quantize_options *c, const char *opt, const char *val, const oq_image_opts *img)
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

static void log_line(const char *line, void *user)
{
    (void)user;
    fprintf(stderr, "%s\n", line);
}

typedef struct cli_checks {
    const char *in, *out, *json_out, *calib, *calib_images, *eval;
    bool print_config;
} cli_checks;

/* After the options are resolved: an input and -o (the usage on stderr when missing). */
static int check_resolved(void *user)
{
    const cli_checks *k = user;
    if (!k->in || (!k->out && !k->print_config)) {
        cli_error("quantize", "%s", !k->in ? "missing input model" : "missing -o OUT");
        help(stderr);
        return -1;
    }
    return 0;
}

/* Before any work: an output that cannot be written, or data that is not a folder. */
static int check_paths(void *user)
{
    const cli_checks *k = user;
    const char *inputs[1] = {k->in};
    if ((!k->print_config && cli_check_output("quantize", "-o", k->out, false, inputs, 1) != CLI_OK) ||
        (k->json_out && cli_check_output("quantize", "--json", k->json_out, true, inputs, 1) != CLI_OK) ||
        (k->calib && cli_check_input_dir("quantize", "--calib", k->calib) != CLI_OK) ||
        (k->calib_images && cli_check_input_dir("quantize", "--calib-images", k->calib_images) != CLI_OK) ||
        (k->eval && cli_check_input_dir("quantize", "--eval", k->eval) != CLI_OK))
        return -1;
    return 0;
}

/* The summary to --json FILE|- (atomically for a file). */
static int write_summary(const char *path, const char *text)
{
    cli_output o;
    if (cli_output_open("quantize", &o, path) != CLI_OK)
        return CLI_FAIL;
    fputs(text, o.f);
    return cli_output_close("quantize", &o);
}

int cmd_quantize(int argc, char **argv)
{
    oq_quantize_options c;
    oq_quantize_options_default(&c);
    const char *in = NULL, *out = NULL, *config_file = NULL;
    bool print_config = false, quiet = false;
    const char *json_out = NULL; /* --json: the job's summary */
    int rc = CLI_OK;
    oq_quantize_job *job = NULL;
    oq_quantize_result res;
    memset(&res, 0, sizeof res);
    oq_model *m = NULL;
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
    if (config_file && oq_quantize_options_load_file(&c, config_file, true, &d) != OQ_OK) {
        cli_print_diag(&d);
        rc = CLI_BAD;
        goto done;
    }
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
        else if (strcmp(a, "--min-intensity") == 0 && has) {
            bad = parse_f64(v, &c.min_intensity);
            c.config_min_intensity = false;
            i++;
            if (!bad && !(c.min_intensity >= 0)) {
                cli_error("quantize", "--min-intensity %s: must be >= 0 (0: off)", v);
                rc = CLI_BAD;
                goto done;
            }
        }
        else if (strcmp(a, "--smooth-quant") == 0 && has) {
            c.smooth_quant_set = true;
            if (!strcmp(v, "auto"))
                c.smooth_quant = OQ_QUANTIZE_SMOOTH_AUTO;
            else if (!strcmp(v, "off"))
                c.smooth_quant = -1;
            else
                bad = parse_f64(v, &c.smooth_quant);
            i++;
            if (!bad && !(c.smooth_quant >= 0 && c.smooth_quant <= 1) && c.smooth_quant != OQ_QUANTIZE_SMOOTH_AUTO &&
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
        else if (strcmp(a, "--weight-asymmetric") == 0) { c.weight_symmetric = 0; c.config_weight_symmetric = false; }
        STR("--target", target)
        else if (strcmp(a, "--prepare") == 0 || strcmp(a, "--no-prepare") == 0) {
            c.prepare = a[2] == 'p';
            c.config_prepare = false;
        }
        else if (strcmp(a, "--bias-correction") == 0 || strcmp(a, "--no-bias-correction") == 0) {
            c.bias_correction = a[2] == 'b';
            c.config_bias_correction = false;
        }
        STR("--mode", mode)
        STR("--format", format)
        STR("--algo", algo)
        STR("--weight-scale-dtype", weight_scale_dtype)
        I64("--accuracy-level", accuracy_level)
        F64("--gptq-damp", gptq_damp)
        FLAG("--gptq-act-order", gptq_act_order, true)
        FLAG("--per-tensor", per_channel, false)
        I64("--weight-block-size", weight_block_size)
        FLAG("--reduce-range", reduce_range, true)
        STR("--op-types", op_types)
        STR("--embedding-dtype", embedding_dtype)
        STR("--depthwise", depthwise)
        STR("--weight-rounding", weight_rounding)
        STR("--include-nodes", include_nodes)
        STR("--exclude-nodes", exclude_nodes)
        STR("--overrides", overrides)
        I64("--threads", threads)
        else if (strcmp(a, "--target-sqnr") == 0 && has) { bad = parse_f64(v, &c.target_sqnr_db); c.fallback = true; i++; }
        I64("--max-fallback", max_fallback)
        STR("--eval", eval)
        STR("--fallback-search", fallback_search)
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
    c.quiet = quiet;
    c.progress_stderr = true;
    c.log = log_line;
    c.resolve_only = print_config;
    cli_checks checks = {in, out, json_out, c.calib, c.calib_images, c.eval, print_config};
    c.check_resolved = check_resolved;
    c.check_paths = check_paths;
    c.check_user = &checks;
    oq_status st = oq_quantize_job_new(&c, &job, &d);
    if (st != OQ_OK) {
        cli_print_diag(&d);
        rc = oq_quantize_exit_code(st);
        goto done;
    }
    if (!(m = cli_load_model_rc(in, &rc)))
        goto done;
    st = oq_quantize_job_run(job, in, m, out, &res, &d);
    m = NULL; /* the job's now */
    if (print_config) {
        if (st == OQ_OK)
            fputs(res.config, stdout);
        else
            cli_print_diag(&d);
        rc = st == OQ_OK ? (fflush(stdout) == 0 ? CLI_OK : CLI_FAIL) : oq_quantize_exit_code(st);
        goto done;
    }
    if (st != OQ_OK && !quiet && isatty(fileno(stderr)))
        fputs("\r\033[K", stderr); /* a progress line cut short: the error starts on a clean line */
    cli_print_diag(&d);
    rc = res.exit_code;
    if (json_out && res.summary && write_summary(json_out, res.summary) != CLI_OK && st == OQ_OK)
        rc = CLI_FAIL;
    if (st == OQ_OK) {
        if (!quiet)
            fprintf(stderr, "onnxq quantize: wrote %s\n", out);
        if (!res.fallback_met) /* the model is written, but the asked-for accuracy is not there */
            fprintf(stderr, "onnxq quantize: %s: --target-sqnr %g dB not met (exit 1)\n", out, c.target_sqnr_db);
    }
done:
    oq_quantize_result_free(&res);
    oq_quantize_job_free(job);
    free(dims_text);
    free(values_text);
    cli_data_opts_free(&data);
    oq_quantize_options_free(&c);
    oq_model_free(m);
    oq_diag_free(&d);
    return rc;
}
