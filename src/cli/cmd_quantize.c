/* onnxq quantize IN -o OUT [--calib DIR | --calib-images DIR ... | --calib-random N] [options]
 *
 * Static post-training quantization as a pipeline of passes:
 *   [upgrade-opset{to=13|21}] constant-to-initializer calibrate insert-qdq [fold-bias]
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
#include "onnxq/calib.h"
#include "onnxq/pass.h"
#include "cli/quantize_fallback.h"

typedef struct qconfig {
    const char *calib, *calib_images;
    int64_t calib_random;
    int64_t seed;
    int64_t max_samples;
    const char *size, *mean, *std, *layout;
    bool bgr;
    double scale;
    const char *method;
    double percentile;
    double averaging;
    const char *nan_policy;
    const char *act_dtype, *weight_dtype;
    bool act_symmetric, weight_symmetric, per_channel, reduce_range;
    int64_t weight_block_size;
    const char *op_types, *include_nodes, *exclude_nodes, *overrides;
    int64_t threads;
    /* resolved */
    int64_t opset_in, opset_target;
    bool fold_bias, qdq_cleanup;
    char *pipeline;
} qconfig;

static void config_default(qconfig *c)
{
    memset(c, 0, sizeof(*c));
    c->seed = 1;
    c->size = "";
    c->mean = "0,0,0";
    c->std = "1,1,1";
    c->layout = "nchw";
    c->scale = 255.0;
    c->method = "percentile";
    c->percentile = 99.999;
    c->nan_policy = "error";
    c->act_dtype = "uint8";
    c->weight_dtype = "int8";
    c->weight_symmetric = true;
    c->per_channel = true;
    c->op_types = "Conv,ConvTranspose,Gemm,MatMul";
    c->include_nodes = "";
    c->exclude_nodes = "";
    c->overrides = "";
}

static void help(FILE *f)
{
    fprintf(f,
            "usage: onnxq quantize IN -o OUT [--calib DIR | --calib-images DIR --size HxW ... |\n"
            "                       --calib-random N] [options]\n\n"
            "Static post-training quantization to a QDQ model (onnxruntime, TensorRT-style).\n"
            "Defaults: activations uint8 asymmetric per tensor, weights int8 symmetric per\n"
            "channel, bias int32, percentile 99.999 calibration, Conv/ConvTranspose/Gemm/MatMul.\n\n"
            "calibration data:\n"
            "  --calib DIR            one subfolder per sample with <input>.pb/.npy or input_N.pb,\n"
            "                         or a flat folder of .npy/.pb files (one-input models)\n"
            "  --calib-images DIR     PNG/JPEG images, with --size HxW [--mean a,b,c] [--std a,b,c]\n"
            "                         [--bgr] [--layout nchw|nhwc] [--scale 255]\n"
            "  --calib-random N       N random samples (smoke test: ranges are meaningless)\n"
            "  --seed S               seed for --calib-random (default 1)\n"
            "  --max-samples N        use at most N samples\n"
            "  --method M             minmax | percentile | entropy | mse (default percentile)\n"
            "  --percentile P         for percentile (default 99.999)\n"
            "  --averaging C          minmax moving-average constant in (0,1]\n"
            "  --nan-policy P         error (default) | ignore (exclude NaN/Inf, report counts)\n"
            "quantization:\n"
            "  --act-dtype T          uint8 (default) | int8 | uint16 | int16 (16-bit: opset 21)\n"
            "  --act-symmetric        symmetric activations\n"
            "  --weight-dtype T       int8 (default) | uint8 | int16 | uint16 | int4 | uint4\n"
            "  --weight-asymmetric    asymmetric weights (default symmetric)\n"
            "  --per-tensor           one weight scale per tensor (default per channel)\n"
            "  --weight-block-size N  blocked weights along the reduction axis (opset 21)\n"
            "  --reduce-range         one bit less (int8 [-64,63], uint8 [0,127], ...)\n"
            "  --op-types A,B,..      op types to quantize (default Conv,ConvTranspose,Gemm,MatMul)\n"
            "  --include-nodes REGEX  only nodes whose name matches (POSIX extended regex)\n"
            "  --exclude-nodes REGEX  skip nodes whose name matches\n"
            "  --overrides FILE       JSON {tensor: {scale, zero_point, dtype, min, max}}\n"
            "other:\n"
            "  --config FILE          load a configuration (JSON as printed by --print-config)\n"
            "  --print-config         print the resolved configuration as JSON and exit\n"
            "  --threads N            executor threads for calibration (default: all CPUs)\n"
            "  --quiet                no progress output\n"
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

static bool needs21(const char *dt)
{
    return strstr(dt, "16") != NULL || strstr(dt, "4") != NULL;
}

static char *build_pipeline(qconfig *c, bool progress)
{
    strb b = {0};
    bool f;
    if (c->opset_target > c->opset_in) {
        char buf[64];
        snprintf(buf, sizeof buf, "upgrade-opset{to=%lld},", (long long)c->opset_target);
        sadd(&b, buf);
    }
    sadd(&b, "constant-to-initializer,fold-batchnorm");
    if (c->calib || c->calib_images || c->calib_random > 0) {
        sadd(&b, ",calibrate");
        f = true;
        if (c->calib)
            sopt(&b, &f, "data", c->calib);
        if (c->calib_images) {
            sopt(&b, &f, "images", c->calib_images);
            sopt(&b, &f, "mean", c->mean);
            sopt(&b, &f, "std", c->std);
            soptb(&b, &f, "bgr", c->bgr);
            sopt(&b, &f, "layout", c->layout);
            soptf(&b, &f, "scale", "%.17g", c->scale);
        }
        if (c->calib_random > 0) {
            soptf(&b, &f, "random", "%.0f", (double)c->calib_random);
            soptf(&b, &f, "seed", "%.0f", (double)c->seed);
        }
        if (*c->size)
            sopt(&b, &f, "size", c->size);
        if (c->max_samples > 0)
            soptf(&b, &f, "max-samples", "%.0f", (double)c->max_samples);
        sopt(&b, &f, "method", c->method);
        soptf(&b, &f, "percentile", "%.17g", c->percentile);
        if (c->averaging > 0)
            soptf(&b, &f, "averaging", "%.17g", c->averaging);
        sopt(&b, &f, "dtype", c->act_dtype);
        soptb(&b, &f, "symmetric", c->act_symmetric);
        soptb(&b, &f, "reduce-range", c->reduce_range);
        sopt(&b, &f, "nan-policy", c->nan_policy);
        soptf(&b, &f, "threads", "%.0f", (double)c->threads);
        /* observe what insert-qdq may quantize: the selected ops and the ops around them */
        strb ot = {0};
        sadd(&ot, c->op_types);
        sadd(&ot, ",Relu,Clip,Concat,Softmax,Sigmoid,Reshape,Transpose,Flatten,Squeeze,Unsqueeze,MaxPool,Slice,"
                  "Gather,Resize");
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
    return b.p;
}

/* ------------------------------------------------------------ config JSON */

static void write_config(json_writer *w, const qconfig *c)
{
    json_begin_object(w);
    json_kv_string(w, "calib", c->calib);
    json_kv_string(w, "calib_images", c->calib_images);
    json_kv_int(w, "calib_random", c->calib_random);
    json_kv_int(w, "seed", c->seed);
    json_kv_int(w, "max_samples", c->max_samples);
    json_kv_string(w, "size", c->size);
    json_kv_string(w, "mean", c->mean);
    json_kv_string(w, "std", c->std);
    json_kv_bool(w, "bgr", c->bgr);
    json_kv_string(w, "layout", c->layout);
    json_kv_double(w, "scale", c->scale);
    json_kv_string(w, "method", c->method);
    json_kv_double(w, "percentile", c->percentile);
    json_kv_double(w, "averaging", c->averaging);
    json_kv_string(w, "nan_policy", c->nan_policy);
    json_kv_string(w, "act_dtype", c->act_dtype);
    json_kv_bool(w, "act_symmetric", c->act_symmetric);
    json_kv_string(w, "weight_dtype", c->weight_dtype);
    json_kv_bool(w, "weight_symmetric", c->weight_symmetric);
    json_kv_bool(w, "per_channel", c->per_channel);
    json_kv_int(w, "weight_block_size", c->weight_block_size);
    json_kv_bool(w, "reduce_range", c->reduce_range);
    json_kv_string(w, "op_types", c->op_types);
    json_kv_string(w, "include_nodes", c->include_nodes);
    json_kv_string(w, "exclude_nodes", c->exclude_nodes);
    json_kv_string(w, "overrides", c->overrides);
    json_kv_int(w, "threads", c->threads);
    json_key(w, "resolved");
    json_begin_object(w);
    json_kv_int(w, "opset_in", c->opset_in);
    json_kv_int(w, "opset_out", c->opset_target > c->opset_in ? c->opset_target : c->opset_in);
    json_kv_bool(w, "bias_by_fold_bias", c->fold_bias);
    json_kv_bool(w, "qdq_cleanup", c->qdq_cleanup);
    json_kv_string(w, "pipeline", c->pipeline);
    json_end_object(w);
    json_end_object(w);
}

/* Apply a JSON config object; strings point into j (kept alive by the caller). */
static int load_config(qconfig *c, const oq_json *j, const char *path)
{
    if (j->type != OQ_JSON_OBJECT) {
        cli_error("quantize", "%s: expected a JSON object", path);
        return -1;
    }
    for (size_t i = 0; i < j->n; i++) {
        const char *k = j->keys[i];
        const oq_json *v = &j->items[i];
        const char **sp = NULL;
        int64_t *ip = NULL;
        double *dp = NULL;
        bool *bp = NULL;
        if (!strcmp(k, "calib")) sp = &c->calib;
        else if (!strcmp(k, "calib_images")) sp = &c->calib_images;
        else if (!strcmp(k, "calib_random")) ip = &c->calib_random;
        else if (!strcmp(k, "seed")) ip = &c->seed;
        else if (!strcmp(k, "max_samples")) ip = &c->max_samples;
        else if (!strcmp(k, "size")) sp = &c->size;
        else if (!strcmp(k, "mean")) sp = &c->mean;
        else if (!strcmp(k, "std")) sp = &c->std;
        else if (!strcmp(k, "bgr")) bp = &c->bgr;
        else if (!strcmp(k, "layout")) sp = &c->layout;
        else if (!strcmp(k, "scale")) dp = &c->scale;
        else if (!strcmp(k, "method")) sp = &c->method;
        else if (!strcmp(k, "percentile")) dp = &c->percentile;
        else if (!strcmp(k, "averaging")) dp = &c->averaging;
        else if (!strcmp(k, "nan_policy")) sp = &c->nan_policy;
        else if (!strcmp(k, "act_dtype")) sp = &c->act_dtype;
        else if (!strcmp(k, "act_symmetric")) bp = &c->act_symmetric;
        else if (!strcmp(k, "weight_dtype")) sp = &c->weight_dtype;
        else if (!strcmp(k, "weight_symmetric")) bp = &c->weight_symmetric;
        else if (!strcmp(k, "per_channel")) bp = &c->per_channel;
        else if (!strcmp(k, "weight_block_size")) ip = &c->weight_block_size;
        else if (!strcmp(k, "reduce_range")) bp = &c->reduce_range;
        else if (!strcmp(k, "op_types")) sp = &c->op_types;
        else if (!strcmp(k, "include_nodes")) sp = &c->include_nodes;
        else if (!strcmp(k, "exclude_nodes")) sp = &c->exclude_nodes;
        else if (!strcmp(k, "overrides")) sp = &c->overrides;
        else if (!strcmp(k, "threads")) ip = &c->threads;
        else if (!strcmp(k, "resolved")) continue; /* output only */
        else {
            cli_error("quantize", "%s: unknown key \"%s\"", path, k);
            return -1;
        }
        bool ok;
        if (sp) {
            ok = v->type == OQ_JSON_STRING || v->type == OQ_JSON_NULL;
            if (ok)
                *sp = v->type == OQ_JSON_STRING ? v->str : NULL;
            if (ok && !*sp && (sp == &c->size || sp == &c->mean || sp == &c->std || sp == &c->layout ||
                               sp == &c->method || sp == &c->nan_policy || sp == &c->act_dtype ||
                               sp == &c->weight_dtype || sp == &c->op_types || sp == &c->include_nodes ||
                               sp == &c->exclude_nodes || sp == &c->overrides))
                ok = false;
        } else if (bp) {
            ok = v->type == OQ_JSON_BOOL;
            if (ok)
                *bp = v->b;
        } else {
            ok = v->type == OQ_JSON_NUMBER;
            if (ok && ip) {
                ok = v->num == (double)(int64_t)v->num;
                *ip = (int64_t)v->num;
            } else if (ok) {
                *dp = v->num;
            }
        }
        if (!ok) {
            cli_error("quantize", "%s: key \"%s\" has the wrong type", path, k);
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ main */

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

static void after_pass(const oq_pass_event *ev, oq_model *m, void *user)
{
    qdq_counts *q = user;
    (void)m;
    if (!ev->pass || strcmp(ev->pass->name, "insert-qdq") != 0 || !ev->result || ev->status != OQ_OK)
        return;
    q->seen = true;
    for (size_t i = 0; i < ev->result->n_stats; i++) {
        if (strcmp(ev->result->stats[i].name, "nodes_selected") == 0)
            q->selected = ev->result->stats[i].value;
        else if (strcmp(ev->result->stats[i].name, "nodes_not_calibrated") == 0)
            q->not_calibrated = ev->result->stats[i].value;
    }
}

int cmd_quantize(int argc, char **argv)
{
    qconfig c;
    config_default(&c);
    const char *in = NULL, *out = NULL, *config_file = NULL;
    bool print_config = false, quiet = false;
    cli_fallback_args fb = {.max_fallback = 10}; /* --target-sqnr hook: src/cli/quantize_fallback.c */
    bool fallback = false, fallback_met = true;
    int rc = CLI_OK;
    oq_json *cj = NULL;
    oq_registry *reg = NULL;
    oq_pipeline *pl = NULL;
    oq_model *m = NULL;
    char *meta = NULL;
    size_t meta_len = 0;
    oq_diag d;
    oq_diag_init(&d);

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
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        const char *v = has ? argv[i + 1] : NULL;
        int bad = 0;
        if (cli_is_help(a)) {
            help(stdout);
            goto done;
        }
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
        STR("--calib", calib)
        STR("--calib-images", calib_images)
        I64("--calib-random", calib_random)
        I64("--seed", seed)
        I64("--max-samples", max_samples)
        STR("--size", size)
        STR("--mean", mean)
        STR("--std", std)
        STR("--layout", layout)
        F64("--scale", scale)
        FLAG("--bgr", bgr, true)
        STR("--method", method)
        F64("--percentile", percentile)
        F64("--averaging", averaging)
        STR("--nan-policy", nan_policy)
        STR("--act-dtype", act_dtype)
        FLAG("--act-symmetric", act_symmetric, true)
        STR("--weight-dtype", weight_dtype)
        FLAG("--weight-asymmetric", weight_symmetric, false)
        FLAG("--per-tensor", per_channel, false)
        I64("--weight-block-size", weight_block_size)
        FLAG("--reduce-range", reduce_range, true)
        STR("--op-types", op_types)
        STR("--include-nodes", include_nodes)
        STR("--exclude-nodes", exclude_nodes)
        STR("--overrides", overrides)
        I64("--threads", threads)
        else if (strcmp(a, "--target-sqnr") == 0 && has) { bad = parse_f64(v, &fb.target_sqnr_db); fallback = true; i++; }
        else if (strcmp(a, "--max-fallback") == 0 && has) { bad = parse_i64(v, &fb.max_fallback); i++; }
        else if (strcmp(a, "--eval") == 0 && has) { fb.eval = v; i++; }
        else if (strcmp(a, "--fallback-search") == 0 && has) { fb.search = v; i++; }
        else if (strcmp(a, "--print-config") == 0) print_config = true;
        else if (strcmp(a, "--quiet") == 0) quiet = true;
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
    if (!in || (!out && !print_config)) {
        cli_error("quantize", "%s", !in ? "missing input model" : "missing -o OUT");
        help(stderr);
        rc = CLI_BAD;
        goto done;
    }
    int nsrc = (c.calib != NULL) + (c.calib_images != NULL) + (c.calib_random > 0);
    if (nsrc > 1) {
        cli_error("quantize", "give only one of --calib, --calib-images, --calib-random");
        rc = CLI_BAD;
        goto done;
    }
    if (nsrc == 0 && !*c.overrides) {
        cli_error("quantize", "no calibration data: give --calib DIR, --calib-images DIR or --calib-random N");
        rc = CLI_BAD;
        goto done;
    }
    if (c.calib_images && !*c.size) {
        cli_error("quantize", "--calib-images needs --size HxW");
        rc = CLI_BAD;
        goto done;
    }
    reg = cli_registry("quantize", NULL, 0, &rc);
    if (!reg)
        goto done;
    c.fold_bias = oq_registry_find(reg, "fold-bias") != NULL;
    c.qdq_cleanup = oq_registry_find(reg, "qdq-cleanup") != NULL;
    oq_status st;
    m = cli_load_model(in, &st);
    if (!m) {
        rc = cli_exit_code(st);
        goto done;
    }
    d.file = in;
    c.opset_in = oq_model_opset(m, "");
    c.opset_target = c.opset_in < 13 ? 13 : c.opset_in;
    if ((needs21(c.act_dtype) || needs21(c.weight_dtype) || c.weight_block_size > 0) && c.opset_target < 21)
        c.opset_target = 21;
    if (*c.overrides && c.opset_target < 21) {
        /* a 16-bit or 4-bit dtype in the overrides (mixed precision) needs opset 21 too */
        oq_json *ov = NULL;
        if (oq_json_parse_file(c.overrides, &ov, &d) != OQ_OK) {
            cli_print_diag(&d);
            rc = CLI_BAD;
            goto done;
        }
        for (size_t i = 0; ov && ov->type == OQ_JSON_OBJECT && i < ov->n; i++) {
            const oq_json *dt = oq_json_get(&ov->items[i], "dtype");
            if (dt && dt->type == OQ_JSON_STRING && needs21(dt->str))
                c.opset_target = 21;
        }
        oq_json_free(ov);
    }
    c.pipeline = build_pipeline(&c, !quiet);
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
    if (c.calib_random > 0)
        fprintf(stderr, "onnxq quantize: warning: --calib-random: ranges from random data are not meaningful "
                        "(use it for smoke tests only; give --calib or --calib-images for a real model)\n");
    if (strstr(c.act_dtype, "16") && strstr(c.weight_dtype, "16"))
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
    qdq_counts qc = {0};
    ro.after_pass = after_pass;
    ro.user = &qc;
    st = oq_pipeline_run(pl, m, &ro, &d);
    if (st == OQ_OK && qc.seen && qc.selected == 0) {
        /* writing the float model back and exiting 0 would hide that nothing happened */
        const char *filt = *c.include_nodes || *c.exclude_nodes ? " (after --include-nodes/--exclude-nodes)" : "";
        if (qc.not_calibrated > 0)
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
    if (st == OQ_OK && fallback) {
        cli_fallback_args fa = {in, fb.target_sqnr_db, fb.max_fallback, fb.eval, c.calib, c.calib_images, c.size,
                                c.mean, c.std, c.layout, c.bgr, c.scale, c.calib_random, c.seed, c.max_samples,
                                c.threads, quiet, fb.search};
        st = cli_quantize_fallback(&fa, m, &fallback_met, &d);
    }
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
    cli_print_diag(&d);
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
    free(meta);
    free(c.pipeline);
    oq_json_free(cj);
    oq_pipeline_free(pl);
    oq_registry_free(reg);
    oq_model_free(m);
    oq_diag_free(&d);
    return rc;
}
