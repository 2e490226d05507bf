/* onnxq verify FLOAT QUANT: how far the quantized model is from the float one, per
 * output and per layer, in one streaming pass. docs/verify.md */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli/cli.h"
#include "cli/report.h"
#include "cli/samples.h"
#include "onnxq/pass.h"
#include "onnxq/target.h"
#include "onnxq/verify.h"

#define MAX_DIMS 64
#define HTML_BINS 60

typedef struct verify_opts {
    const char *fmodel, *qmodel;
    const char *data_dir, *images_dir;
    long random_n;
    cli_data_opts data;
    oq_image_opts img;
    const char *json, *html;
    bool has_min;
    double min_sqnr;
    int top;
    int threads;
    bool no_isolation;
    bool quiet;
    const char *target;         /* --target (NULL: reference) */
    const oq_target *tgt;
} verify_opts;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: onnxq verify FLOAT QUANT [--data DIR | --calib-images DIR [image options]\n"
            "                    | --random N [--seed S] [--dim NAME=N]... [--input-value NAME=V]...]\n"
            "                    [--json FILE|-]\n"
            "                    [--html FILE] [--min-sqnr DB] [--top K] [--threads N]\n"
            "                    [--target T]\n\n"
            "Run the float model and its quantized version on the same samples and report,\n"
            "per graph output, SQNR (dB), cosine similarity, max and mean absolute error and\n"
            "top-1/top-5 agreement for class scores, and for an output made by a Concat the\n"
            "same per Concat input (a slice; the worst slice decides); per layer (tensors\n"
            "matched by name), the accumulated error and the isolated error of the layer\n"
            "alone, with the range the quantizer chose against the range seen in the float\n"
            "model.\n\n"
            "  --data DIR         one sub-folder per sample with <input name>.npy|.pb or\n"
            "                     input_N.pb, one test_data_set folder, or a flat folder of\n"
            "                     .npy/.pb files (one sample each); docs/data.md\n"
            "  --calib-images DIR PNG/JPEG files, one sample each (single-input models):\n"
            "%s"
            "  --random N         N samples of generated data (any dtype; docs/data.md)\n"
            "%s"
            "  --json FILE        every number as JSON   --html FILE  one self-contained page\n"
            "                     (FILE - : standard output, instead of the table)\n"
            "  --min-sqnr DB      exit 1 unless every output (every slice of it) reaches DB\n"
            "  --top K            layers listed (worst first; default 10)\n"
            "  --threads N        worker threads per model (default: one per CPU)\n"
            "  --no-isolation     skip the isolated per-layer error (faster)\n"
            "  --target T         run the quantized model with T's integer arithmetic\n"
            "                     (reference (default), avx2, ort-x86, ort-x86-vnni, host; the\n"
            "                     float model stays float) and report per layer and output the\n"
            "                     SQNR of T's arithmetic against reference (column \"arith dB\")\n"
            "  --quiet            no table and no progress (progress: a self-updating line on\n"
            "                     a terminal, a line every 10%% otherwise, on stderr)\n\n"
            "Exit: 0 ok (and --min-sqnr met), 1 --min-sqnr missed or the run failed, 2 bad\n"
            "input.\n",
            cli_image_options_help, cli_data_options_help);
}

static int parse(int argc, char **argv, verify_opts *o)
{
    memset(o, 0, sizeof *o);
    cli_data_opts_init(&o->data);
    o->top = 10;
    oq_image_opts_default(&o->img, 0, 0);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_next = i + 1 < argc;
        int r = cli_image_option("verify", argc, argv, &i, &o->img);
        if (r == 0)
            r = cli_data_option("verify", argc, argv, &i, &o->data);
        if (r < 0)
            return CLI_BAD;
        if (r > 0)
            continue;
        if (cli_is_help(a)) {
            usage(stdout);
            return -1;
        } else if (strcmp(a, "--data") == 0 && has_next) {
            o->data_dir = argv[++i];
        } else if ((strcmp(a, "--calib-images") == 0 || strcmp(a, "--images") == 0) &&
                   has_next) {
            o->images_dir = argv[++i];
        } else if (strcmp(a, "--random") == 0 && has_next) {
            char *end;
            o->random_n = strtol(argv[++i], &end, 10);
            if (*end || o->random_n < 1) {
                cli_error("verify", "--random wants a positive count, got \"%s\"", argv[i]);
                return CLI_BAD;
            }
        } else if (strcmp(a, "--json") == 0 && has_next) {
            o->json = argv[++i];
        } else if (strcmp(a, "--html") == 0 && has_next) {
            o->html = argv[++i];
        } else if (strcmp(a, "--min-sqnr") == 0 && has_next) {
            char *end;
            o->min_sqnr = strtod(argv[++i], &end);
            if (*end || end == argv[i] || isnan(o->min_sqnr)) {
                cli_error("verify", "--min-sqnr wants a number of dB, got \"%s\"", argv[i]);
                return CLI_BAD;
            }
            o->has_min = true;
        } else if (strcmp(a, "--top") == 0 && has_next) {
            if (!cli_positive_count("verify", a, argv[++i], &o->top))
                return CLI_BAD;
        } else if (strcmp(a, "--threads") == 0 && has_next) {
            if (!cli_positive_count("verify", a, argv[++i], &o->threads))
                return CLI_BAD;
        } else if (strcmp(a, "--target") == 0 && has_next) {
            o->target = argv[++i];
            o->tgt = oq_target_find(o->target);
            if (!o->tgt) {
                cli_error("verify", "unknown target \"%s\" (known: %s)", o->target, oq_target_names());
                return CLI_BAD;
            }
        } else if (strcmp(a, "--no-isolation") == 0) {
            o->no_isolation = true;
        } else if (strcmp(a, "--quiet") == 0) {
            o->quiet = true;
            cli_set_verbosity(CLI_QUIET);
        } else if (a[0] == '-') {
            cli_error("verify", "unknown or incomplete option %s (try --help)", a);
            return CLI_BAD;
        } else if (!o->fmodel) {
            o->fmodel = a;
        } else if (!o->qmodel) {
            o->qmodel = a;
        } else {
            cli_error("verify", "more than two models given (%s)", a);
            return CLI_BAD;
        }
    }
    if (!o->fmodel || !o->qmodel) {
        usage(stderr);
        return CLI_BAD;
    }
    int sources = (o->data_dir != NULL) + (o->images_dir != NULL) + (o->random_n > 0);
    if (sources != 1) {
        cli_error("verify", "give exactly one of --data DIR, --calib-images DIR, --random N");
        return CLI_BAD;
    }
    return CLI_OK;
}

/* ------------------------------------------------------------ helpers ------- */


static const char *fmt_db(double s, char *buf, size_t size)
{
    if (isnan(s))
        snprintf(buf, size, "-");
    else if (isinf(s))
        snprintf(buf, size, "%sinf", s > 0 ? "+" : "-");
    else
        snprintf(buf, size, "%.2f", s);
    return buf;
}

static const char *fmt_g(double x, char *buf, size_t size)
{
    if (isnan(x))
        snprintf(buf, size, "-");
    else
        snprintf(buf, size, "%.4g", x);
    return buf;
}

static double clipped_pct(const oq_verify_layer *L)
{
    return L->obs.count ? 100.0 * L->clipped / (double)L->obs.count : NAN;
}

/* the worst slice of the output decides (include/onnxq/verify.h) */
static bool output_pass(const oq_verify_output *o, double min)
{
    if (!oq_verify_output_judged(o)) /* an integer output: not judged by SQNR */
        return true;
    double s = oq_verify_output_worst(o, NULL, NULL);
    return !isnan(s) && s >= min;
}

/* "LABEL" of slice k of o, with where it comes from when the output is split */
static const char *slice_from(const oq_verify_output *o, size_t k, char *buf, size_t size)
{
    if (k >= o->n_slices || o->slices[k].axis < 0)
        return "";
    const oq_verify_slice *sl = &o->slices[k];
    snprintf(buf, size, "%s (%s)", sl->tensor, sl->op_type);
    return buf;
}

static int64_t peak_rss_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return -1;
    return (int64_t)ru.ru_maxrss * 1024;
}

/* ------------------------------------------------------------ terminal ------ */

static void print_table(const verify_opts *o, const oq_verify *v, const char *source,
                        const size_t *worst, size_t n_worst, int64_t rss)
{
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
    bool ar = o->tgt && o->tgt->arith != OQ_ARITH_REFERENCE;
    printf("verify: %s vs %s: %llu samples (%s), isolated errors %s\n", o->fmodel, o->qmodel,
           (unsigned long long)oq_verify_n_samples(v), source,
           oq_verify_has_isolation(v) ? "computed" : "not computed");
    if (o->tgt)
        printf("quantized model: target %s, %s arithmetic%s\n", o->tgt->name, oq_arith_name(o->tgt->arith),
               ar ? " (arith dB: its SQNR against the reference arithmetic)" : "");
    printf("\noutputs\n  %-24s %9s %9s %11s %11s %8s %8s%s\n", "name", "SQNR dB", "cosine",
           "max|err|", "mean|err|", "top-1", "top-k", ar ? "  arith dB" : "");
    for (size_t i = 0; i < oq_verify_n_outputs(v); i++) {
        const oq_verify_output *out = oq_verify_output_at(v, i);
        char t1[32] = "-", tk[32] = "-";
        if (out->class_scores && out->rows) {
            snprintf(t1, sizeof t1, "%.2f%%", 100.0 * (double)out->top1_agree / (double)out->rows);
            snprintf(tk, sizeof tk, "%.2f%%", 100.0 * (double)out->topk_agree / (double)out->rows);
        }
        printf("  %-24s %9s %9s %11s %11s %8s %8s", out->name,
               fmt_db(oq_err_sqnr_db(&out->err), b1, sizeof b1),
               out->err.n ? (snprintf(b2, sizeof b2, "%.6f", oq_err_cosine(&out->err)), b2) : "-",
               fmt_g(out->err.n ? out->err.maxad : NAN, b3, sizeof b3),
               fmt_g(oq_err_mean_abs(&out->err), b4, sizeof b4), t1, tk);
        if (ar)
            printf(" %9s", fmt_db(oq_err_sqnr_db(&out->arith), b5, sizeof b5));
        printf("\n");
        if (out->class_scores && out->rows)
            printf("  %-24s (class scores: %llu rows, top-k is k=%d: float top-1 in the "
                   "quantized top %d)\n", "", (unsigned long long)out->rows, out->topk, out->topk);
        for (size_t k = 0; out->n_slices > 1 && k < out->n_slices; k++) {
            const oq_err_acc *e = &out->slices[k].err;
            char lb[256], fr[512];
            printf("    %-22s %9s %9s %11s %11s  from %s\n",
                   oq_verify_slice_label(out, k, lb, sizeof lb), fmt_db(oq_err_sqnr_db(e), b1, sizeof b1),
                   e->n ? (snprintf(b2, sizeof b2, "%.6f", oq_err_cosine(e)), b2) : "-",
                   fmt_g(e->n ? e->maxad : NAN, b3, sizeof b3), fmt_g(oq_err_mean_abs(e), b4, sizeof b4),
                   slice_from(out, k, fr, sizeof fr));
        }
        if (out->slice_note)
            printf("    (not split by its Concat %s: %s)\n", out->concat ? out->concat : "", out->slice_note);
    }
    size_t wo, ws;
    double wdb = oq_verify_worst(v, &wo, &ws);
    if (wo != SIZE_MAX) {
        const oq_verify_output *out = oq_verify_output_at(v, wo);
        char lb[256], fr[512];
        const char *from = slice_from(out, ws, fr, sizeof fr);
        printf("  worst: %s%s%s, SQNR %s dB\n", oq_verify_slice_label(out, ws, lb, sizeof lb),
               *from ? " from " : "", from, fmt_db(wdb, b1, sizeof b1));
    }
    size_t show = n_worst < (size_t)o->top ? n_worst : (size_t)o->top;
    bool any_act = false;
    for (size_t r = 0; r < show; r++)
        any_act |= oq_verify_layer_at(v, worst[r])->act_name != NULL;
    printf("\nlayers, worst isolated SQNR first (%zu of %zu compared%s)\n", show, n_worst,
           any_act ? "; \"Conv+silu\": the error after the activation every reader applies" : "");
    printf("  %-24s %-14s %8s %8s %8s %21s %21s %8s%s\n", "tensor", "op", "iso dB", "acc dB",
           "qdq dB", "quantizer range", "float range", "clipped", ar ? " arith dB" : "");
    for (size_t r = 0; r < show; r++) {
        const oq_verify_layer *L = oq_verify_layer_at(v, worst[r]);
        char qr[64] = "-", fr[64] = "-", cp[32] = "-";
        if (L->has_qrange)
            snprintf(qr, sizeof qr, "[%.4g, %.4g]", L->qmin, L->qmax);
        float mn, mx;
        if (oq_observer_minmax(&L->obs, &mn, &mx))
            snprintf(fr, sizeof fr, "[%.4g, %.4g]", (double)mn, (double)mx);
        if (L->has_qrange && L->obs.count)
            snprintf(cp, sizeof cp, "%.3f%%", clipped_pct(L));
        char ab[64] = "";
        if (ar)
            snprintf(ab, sizeof ab, " %8s", L->has_arith ? fmt_db(oq_err_sqnr_db(&L->arith), b2, sizeof b2) : "-");
        char op[64];
        snprintf(op, sizeof op, "%s%s%s", L->op_type, L->act_name ? "+" : "", L->act_name ? L->act_name : "");
        printf("  %-24s %-14s %8s %8s %8s %21s %21s %8s%s%s\n", L->name, op,
               L->has_iso ? fmt_db(oq_err_sqnr_db(&L->iso), b5, sizeof b5) : "-",
               fmt_db(oq_err_sqnr_db(&L->acc), b6, sizeof b6),
               fmt_db(oq_err_sqnr_db(&L->own), b1, sizeof b1), qr, fr, cp, ab,
               L->shape_mismatch ? " (shape mismatch)" : "");
    }
    size_t nw = oq_verify_n_weights(v);
    if (nw) {
        double worst_w = INFINITY;
        const char *wn = NULL;
        for (size_t i = 0; i < nw; i++) {
            const oq_verify_weight *w = oq_verify_weight_at(v, i);
            double s = oq_err_sqnr_db(&w->err);
            if (!isnan(s) && s < worst_w) {
                worst_w = s;
                wn = w->name;
            }
        }
        printf("\nweights: %zu quantized", nw);
        if (wn)
            printf(", lowest SQNR %s dB (%s)", fmt_db(worst_w, b1, sizeof b1), wn);
        printf("\n");
    }
    printf("\nmemory: peak RSS %.1f MiB, float tensors held for one sample %.1f MiB\n",
           (double)rss / 1048576.0, (double)oq_verify_peak_store_bytes(v) / 1048576.0);
}

/* ------------------------------------------------------------ JSON ---------- */

/* The library's report (src/job/verify_report.c) to --json FILE|-. */
static int write_json(const verify_opts *o, const oq_verify *v, const char *source, int64_t rss, bool pass)
{
    oq_verify_report_info info = {o->fmodel, o->qmodel, source, o->tgt, o->top, o->has_min, o->min_sqnr, pass, rss, 1};
    char *text = oq_verify_report_json(v, &info);
    if (!text) {
        cli_error("verify", "out of memory");
        return CLI_FAIL;
    }
    cli_output out;
    int rc = cli_output_open("verify", &out, o->json);
    if (rc == CLI_OK) {
        fputs(text, out.f);
        rc = cli_output_close("verify", &out);
    }
    free(text);
    return rc;
}

/* ------------------------------------------------------------ HTML ---------- */

static void html_text(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
    }
}

static void html_bar_chart(FILE *f, const oq_verify *v, const bool *is_worst, size_t n_hl)
{
    size_t n = 0, total = oq_verify_n_layers(v);
    double top = 10, bottom = 0;
    for (size_t i = 0; i < total; i++) {
        const oq_verify_layer *L = oq_verify_layer_at(v, i);
        if (!oq_verify_layer_compared(L))
            continue;
        n++;
        double s[2] = {oq_err_sqnr_db(&L->acc), L->has_iso ? oq_err_sqnr_db(&L->iso) : NAN};
        for (int k = 0; k < 2; k++) {
            if (isfinite(s[k]) && s[k] > top)
                top = s[k];
            if (isfinite(s[k]) && s[k] < bottom)
                bottom = s[k];
        }
    }
    if (n == 0) {
        fputs("<p>No layer could be compared.</p>\n", f);
        return;
    }
    if (top > 80)
        top = 80; /* beyond 80 dB the difference does not matter; capped bars get a mark */
    top = ceil(top / 10) * 10;
    bottom = floor(bottom / 10) * 10;
    const double W = 1100, H = 400, left = 50, right = 10, tp = 20, bm = 110;
    double pw = W - left - right, ph = H - tp - bm;
    double step = pw / (double)n, bw = step * 0.8;
#define Y(val) (tp + ph * (top - (val)) / (top - bottom))
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"per-layer SQNR\">\n",
            W, H, W, H);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#fff\"/>\n", W, H);
    for (double g = bottom; g <= top + 1e-9; g += 10) {
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%.0f</text>\n",
                left, W - right, Y(g), Y(g), left - 4, Y(g) + 4, g);
    }
    fprintf(f, "<text x=\"12\" y=\"%.1f\" font-size=\"12\" transform=\"rotate(-90 12 %.1f)\" "
               "text-anchor=\"middle\">SQNR (dB)</text>\n", tp + ph / 2, tp + ph / 2);
    size_t k = 0;
    double last_label = -1e9; /* labels closer than 12 px would overlap: skipped */
    for (size_t i = 0; i < total; i++) {
        const oq_verify_layer *L = oq_verify_layer_at(v, i);
        if (!oq_verify_layer_compared(L))
            continue;
        double x = left + step * (double)k + (step - bw) / 2;
        double acc = oq_err_sqnr_db(&L->acc), iso = L->has_iso ? oq_err_sqnr_db(&L->iso) : NAN;
        double a = isnan(acc) ? bottom : acc > top ? top : acc < bottom ? bottom : acc;
        const char *fill = is_worst[i] ? "#d62728" : "#4c78a8";
        char b1[32], b2[32];
        fprintf(f, "<g><title>");
        html_text(f, L->name);
        fprintf(f, " (%s): accumulated %s dB, isolated %s dB</title>", L->op_type,
                fmt_db(acc, b1, sizeof b1), fmt_db(iso, b2, sizeof b2));
        double y0 = Y(0 > bottom ? 0 : bottom);
        fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>",
                x, a >= 0 ? Y(a) : y0, bw, fabs(Y(a) - y0), fill);
        if (!isnan(iso)) {
            double c = iso > top ? top : iso < bottom ? bottom : iso;
            fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"3\" fill=\"#111\"/>",
                    x, Y(c) - 1.5, bw);
        }
        if ((n <= 40 || is_worst[i]) && x + bw / 2 - last_label >= 12) {
            last_label = x + bw / 2;
            fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\" "
                       "transform=\"rotate(-45 %.2f %.1f)\"%s>", x + bw / 2, tp + ph + 12,
                    x + bw / 2, tp + ph + 12, is_worst[i] ? " fill=\"#d62728\"" : "");
            html_text(f, strlen(L->name) > 24 ? L->name + strlen(L->name) - 24 : L->name);
            fputs("</text>", f);
        }
        if (acc > top)
            fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"9\" text-anchor=\"middle\">%s"
                       "</text>", x + bw / 2, tp - 4, isinf(acc) ? "&#8734;" : "^");
        fprintf(f, "</g>\n");
        k++;
    }
    fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n",
            left, W - right, Y(0 > bottom ? 0 : bottom), Y(0 > bottom ? 0 : bottom));
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">layers in graph order "
               "(%zu) &#8212; bars: accumulated SQNR, black ticks: isolated SQNR, red: the worst "
               "%zu by isolated SQNR; bars beyond %.0f dB are cut (^, &#8734; identical)</text>\n",
            left, H - 4, n, n_hl, top);
    fputs("</svg>\n", f);
#undef Y
}

static void html_histogram(FILE *f, const oq_verify_layer *L)
{
    uint64_t c[HTML_BINS];
    double lo, hi;
    if (!oq_verify_layer_histogram(L, &lo, &hi, c, HTML_BINS))
        return;
    const double W = 340, H = 150, left = 8, right = 8, tp = 8, bm = 30;
    double pw = W - left - right, ph = H - tp - bm, mxl = 0;
    for (int k = 0; k < HTML_BINS; k++)
        if (log10(1.0 + (double)c[k]) > mxl)
            mxl = log10(1.0 + (double)c[k]);
    if (mxl <= 0)
        mxl = 1;
    fprintf(f, "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
               "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">"
               "<rect width=\"%.0f\" height=\"%.0f\" fill=\"#fafafa\" stroke=\"#ccc\"/>\n",
            W, H, W, H, W, H);
    double bw = pw / HTML_BINS;
    for (int k = 0; k < HTML_BINS; k++) {
        if (!c[k])
            continue;
        double h = ph * log10(1.0 + (double)c[k]) / mxl;
        fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                   "fill=\"#4c78a8\"/>", left + bw * k, tp + ph - h, bw, h);
    }
#define X(val) (left + pw * ((val) - lo) / (hi - lo))
    if (L->has_qrange) {
        fprintf(f, "\n<line x1=\"%.2f\" x2=\"%.2f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#d62728\" "
                   "stroke-width=\"2\" stroke-dasharray=\"4 2\"/>", X(L->qmin), X(L->qmin), tp,
                tp + ph);
        fprintf(f, "<line x1=\"%.2f\" x2=\"%.2f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#d62728\" "
                   "stroke-width=\"2\" stroke-dasharray=\"4 2\"/>", X(L->qmax), X(L->qmax), tp,
                tp + ph);
    }
#undef X
    fprintf(f, "\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\">%.4g</text>"
               "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%.4g</text>",
            left, H - 16, lo, W - right, H - 16, hi);
    if (L->has_qrange)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\" "
                   "fill=\"#d62728\">clip [%.4g, %.4g], %.3f%% outside</text>",
                W / 2, H - 4, L->qmin, L->qmax, clipped_pct(L));
    fprintf(f, "</svg><figcaption>");
    html_text(f, L->name);
    char b1[32], b2[32];
    fprintf(f, " (%s) iso %s dB, acc %s dB</figcaption></figure>\n", L->op_type,
            fmt_db(L->has_iso ? oq_err_sqnr_db(&L->iso) : NAN, b1, sizeof b1),
            fmt_db(oq_err_sqnr_db(&L->acc), b2, sizeof b2));
}

static int write_html(const verify_opts *o, const oq_verify *v, const char *source,
                      const size_t *worst, size_t n_worst, bool pass)
{
    size_t total = oq_verify_n_layers(v);
    bool *is_worst = calloc(total + 1, sizeof *is_worst);
    if (!is_worst)
        return CLI_FAIL;
    cli_output dst;
    if (cli_output_open("verify", &dst, o->html) != CLI_OK) {
        free(is_worst);
        return CLI_FAIL;
    }
    FILE *f = dst.f;
    size_t show = n_worst < (size_t)o->top ? n_worst : (size_t)o->top;
    /* highlighted in the chart: the worst fifth of the layers, at most --top */
    size_t hl = n_worst / 5 ? n_worst / 5 : 1;
    hl = hl < show ? hl : show;
    for (size_t r = 0; r < hl; r++)
        is_worst[worst[r]] = true;
    char b1[32], b2[32], b3[32], b4[32];
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<title>onnxq verify</title>\n<style>\n"
          "body{font-family:sans-serif;margin:16px;color:#111;background:#fff}\n"
          "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;"
          "padding:3px 8px;font-size:13px;text-align:right}th{background:#eee}\n"
          "td.l{text-align:left}.bad{color:#d62728;font-weight:bold}.ok{color:#2ca02c}\n"
          "figure{display:inline-block;margin:4px}figcaption{font-size:12px}\n"
          "</style></head><body>\n<h1>onnxq verify</h1>\n<p>", f);
    html_text(f, o->fmodel);
    fputs(" (float) vs ", f);
    html_text(f, o->qmodel);
    fprintf(f, " (quantized): %llu samples from ", (unsigned long long)oq_verify_n_samples(v));
    html_text(f, source);
    fputs(".", f);
    if (o->has_min)
        fprintf(f, " Minimum output SQNR %.2f dB: <span class=\"%s\">%s</span>.", o->min_sqnr,
                pass ? "ok" : "bad", pass ? "met" : "NOT met");
    fputs("</p>\n<h2>Outputs</h2>\n<table><tr><th>output</th><th>SQNR dB</th><th>cosine</th>"
          "<th>max |err|</th><th>mean |err|</th><th>top-1</th><th>top-k</th></tr>\n", f);
    for (size_t i = 0; i < oq_verify_n_outputs(v); i++) {
        const oq_verify_output *out = oq_verify_output_at(v, i);
        fputs("<tr><td class=\"l\">", f);
        html_text(f, out->name);
        fprintf(f, "</td><td>%s</td><td>%.6f</td><td>%s</td><td>%s</td>",
                fmt_db(oq_err_sqnr_db(&out->err), b1, sizeof b1), oq_err_cosine(&out->err),
                fmt_g(out->err.n ? out->err.maxad : NAN, b2, sizeof b2),
                fmt_g(oq_err_mean_abs(&out->err), b3, sizeof b3));
        if (out->class_scores && out->rows)
            fprintf(f, "<td>%.2f%%</td><td>%.2f%% (k=%d)</td></tr>\n",
                    100.0 * (double)out->top1_agree / (double)out->rows,
                    100.0 * (double)out->topk_agree / (double)out->rows, out->topk);
        else
            fputs("<td>-</td><td>-</td></tr>\n", f);
        for (size_t k = 0; out->n_slices > 1 && k < out->n_slices; k++) {
            const oq_err_acc *e = &out->slices[k].err;
            char lb[256], fr[512];
            fputs("<tr><td class=\"l\">&nbsp;&nbsp;", f);
            html_text(f, oq_verify_slice_label(out, k, lb, sizeof lb));
            fputs(" from ", f);
            html_text(f, slice_from(out, k, fr, sizeof fr));
            fprintf(f, "</td><td>%s</td><td>%.6f</td><td>%s</td><td>%s</td><td>-</td><td>-</td></tr>\n",
                    fmt_db(oq_err_sqnr_db(e), b1, sizeof b1), oq_err_cosine(e),
                    fmt_g(e->n ? e->maxad : NAN, b2, sizeof b2), fmt_g(oq_err_mean_abs(e), b3, sizeof b3));
        }
    }
    {
        size_t wo, ws;
        double wdb = oq_verify_worst(v, &wo, &ws);
        if (wo != SIZE_MAX) {
            char lb[256];
            fputs("<tr><td class=\"l\" colspan=\"7\">worst: ", f);
            html_text(f, oq_verify_slice_label(oq_verify_output_at(v, wo), ws, lb, sizeof lb));
            fprintf(f, ", SQNR %s dB</td></tr>\n", fmt_db(wdb, b1, sizeof b1));
        }
    }
    fputs("</table>\n<h2>Per-layer SQNR</h2>\n", f);
    html_bar_chart(f, v, is_worst, hl);
    fprintf(f, "<h2>Worst layers</h2>\n<table><tr><th>#</th><th>tensor</th><th>op</th>"
               "<th>isolated dB</th><th>accumulated dB</th><th>output QDQ dB</th>"
               "<th>quantizer range</th>"
               "<th>float range</th><th>clipped</th></tr>\n");
    for (size_t r = 0; r < show; r++) {
        const oq_verify_layer *L = oq_verify_layer_at(v, worst[r]);
        float mn = NAN, mx = NAN;
        oq_observer_minmax(&L->obs, &mn, &mx);
        fprintf(f, "<tr><td>%zu</td><td class=\"l\">", r + 1);
        html_text(f, L->name);
        fputs("</td><td class=\"l\">", f);
        html_text(f, L->op_type);
        fprintf(f, "</td><td>%s</td><td>%s</td><td>%s</td>",
                L->has_iso ? fmt_db(oq_err_sqnr_db(&L->iso), b1, sizeof b1) : "-",
                fmt_db(oq_err_sqnr_db(&L->acc), b2, sizeof b2),
                fmt_db(oq_err_sqnr_db(&L->own), b3, sizeof b3));
        if (L->has_qrange)
            fprintf(f, "<td>[%.4g, %.4g]</td>", L->qmin, L->qmax);
        else
            fputs("<td>-</td>", f);
        fprintf(f, "<td>[%.4g, %.4g]</td><td>%s</td></tr>\n", (double)mn, (double)mx,
                L->has_qrange ? (snprintf(b4, sizeof b4, "%.3f%%", clipped_pct(L)), b4) : "-");
    }
    fputs("</table>\n<h2>Float activation histograms</h2>\n<p>Worst layers first; counts on a "
          "log scale (log10(1+count)), the quantizer's clipping range as dashed red lines."
          "</p>\n<div>\n", f);
    size_t hist_shown = 0;
    for (size_t r = 0; r < n_worst && hist_shown < 24; r++) {
        const oq_verify_layer *L = oq_verify_layer_at(v, worst[r]);
        if (!L->obs.count)
            continue;
        html_histogram(f, L);
        hist_shown++;
    }
    fputs("</div>\n</body></html>\n", f);
    free(is_worst);
    return cli_output_close("verify", &dst);
}

/* ------------------------------------------------------------ main ---------- */

int cmd_verify(int argc, char **argv)
{
    verify_opts o;
    int rc = parse(argc, argv, &o);
    if (rc != CLI_OK) {
        cli_data_opts_free(&o.data);
        return rc < 0 ? CLI_OK : rc;
    }
    oq_status st;
    oq_diag d;
    oq_diag_init(&d);
    oq_model *fm = NULL, *qm = NULL;
    oq_verify *v = NULL;
    oq_rt_tensor *in = NULL;
    size_t n_in = 0, *worst = NULL, n_worst = 0;
    cli_samples src;
    memset(&src, 0, sizeof src);
    char source[4200];
    /* outputs checked before any work; "-" is standard output, and then the table
     * stays off it (the JSON or HTML is the whole of standard output) */
    const char *models[2] = {o.fmodel, o.qmodel};
    if ((o.json && cli_check_output("verify", "--json", o.json, true, models, 2) != CLI_OK) ||
        (o.html && cli_check_output("verify", "--html", o.html, true, models, 2) != CLI_OK) ||
        (o.data_dir && cli_check_input_dir("verify", "--data", o.data_dir) != CLI_OK) ||
        (o.images_dir && cli_check_input_dir("verify", "--calib-images", o.images_dir) != CLI_OK)) {
        rc = CLI_BAD;
        goto done;
    }
    if (cli_is_stdout(o.json) && cli_is_stdout(o.html)) {
        cli_error("verify", "--json - and --html - cannot both go to standard output");
        rc = CLI_BAD;
        goto done;
    }
    bool table_to_stdout = !o.quiet && !cli_is_stdout(o.json) && !cli_is_stdout(o.html);
    rc = CLI_FAIL;
    fm = cli_load_model(o.fmodel, &st);
    if (!fm) {
        rc = cli_exit_code(st);
        goto done;
    }
    qm = cli_load_model(o.qmodel, &st);
    if (!qm) {
        rc = cli_exit_code(st);
        goto done;
    }
    /* float16 models: both computed in float32 inside, their float16 interface kept
     * (onnxq's executor has no float16 Conv; passes/widen_float16.c) */
    if (oq_model_widen_float16(fm, NULL, &d) != OQ_OK || oq_model_widen_float16(qm, NULL, &d) != OQ_OK) {
        cli_print_diag(&d);
        rc = CLI_FAIL;
        goto done;
    }
    oq_verify_options vo = oq_verify_options_default();
    vo.threads = o.threads;
    vo.isolated = !o.no_isolation;
    vo.prepare_reference = oq_pass_prepare_float_reference;
    if (o.tgt) {
        vo.arith = o.tgt->arith;
        if (strcmp(o.target, "host") == 0 && !o.quiet)
            fprintf(stderr, "verify: target host is %s (%s): %s arithmetic\n", o.tgt->name,
                    oq_target_host_reason(), oq_arith_name(o.tgt->arith));
    }
    st = oq_verify_new(fm, qm, &vo, &v, &d);
    if (st != OQ_OK) {
        cli_print_diag(&d);
        rc = st == OQ_ERR_NOMEM || st == OQ_ERR_INTERNAL ? CLI_FAIL : CLI_BAD;
        goto done;
    }
    if (o.data_dir) {
        st = cli_samples_open_dir("verify", &src, o.data_dir, &o.data);
        snprintf(source, sizeof source, "%s", o.data_dir);
    } else if (o.images_dir) {
        st = cli_samples_open_images("verify", &src, o.images_dir, &o.img, &o.data);
        snprintf(source, sizeof source, "images in %s", o.images_dir);
    } else {
        st = cli_samples_open_random("verify", &src, (uint64_t)o.random_n, &o.data, true);
        snprintf(source, sizeof source, "random data, seed %llu", (unsigned long long)o.data.seed);
    }
    if (st != OQ_OK) {
        rc = cli_exit_code(st);
        goto done;
    }
    const oq_plan *fp = oq_verify_float_plan(v);
    n_in = oq_plan_n_inputs(fp);
    in = calloc(n_in + 1, sizeof *in);
    if (!in)
        goto done;
    oq_calib_progress_state ps; /* done/total, rate, time left on stderr (--quiet: none) */
    memset(&ps, 0, sizeof ps);
    ps.what = "verify";
    if (!o.quiet)
        oq_calib_progress_stderr(0, src.count, "", &ps);
    for (uint64_t k = 0; k < src.count; k++) {
        char name[4200];
        st = cli_samples_load(&src, k, fp, in, name, sizeof name, &d);
        if (st != OQ_OK) {
            oq_calib_progress_clear(&ps);
            cli_print_diag(&d);
            rc = cli_exit_code(st);
            goto done;
        }
        st = oq_verify_sample(v, in, n_in, name, &d);
        for (size_t i = 0; i < n_in; i++)
            oq_rt_tensor_release(&in[i]);
        if (st != OQ_OK) {
            oq_calib_progress_clear(&ps);
            /* one line: the sample and the cause */
            char msg[1024] = "";
            const oq_diag_entry *e = oq_diag_first_error(&d);
            if (e)
                oq_diag_format(e, msg, sizeof msg);
            fprintf(stderr, "onnxq verify: sample %s: %s\n", name, *msg ? msg : oq_status_name(st));
            rc = cli_exit_code(st);
            goto done;
        }
        if (!o.quiet)
            oq_calib_progress_stderr(k + 1, src.count, name, &ps);
    }
    cli_print_diag(&d); /* warnings */
    worst = oq_verify_worst_layers(v, &n_worst);
    if (!worst)
        goto done;
    bool pass = true;
    if (o.has_min)
        for (size_t i = 0; i < oq_verify_n_outputs(v); i++)
            pass &= output_pass(oq_verify_output_at(v, i), o.min_sqnr);
    int64_t rss = peak_rss_bytes();
    if (table_to_stdout)
        print_table(&o, v, source, worst, n_worst, rss);
    if (o.json && write_json(&o, v, source, rss, pass) != CLI_OK)
        goto done;
    if (o.html && write_html(&o, v, source, worst, n_worst, pass) != CLI_OK)
        goto done;
    if (o.has_min) {
        for (size_t i = 0; i < oq_verify_n_outputs(v); i++) {
            const oq_verify_output *out = oq_verify_output_at(v, i);
            char b[32], bw[32], lb[256], fr[512];
            size_t k;
            double db = oq_verify_output_worst(out, &k, NULL);
            if (output_pass(out, o.min_sqnr))
                continue;
            if (out->n_slices > 1 && k != SIZE_MAX)
                fprintf(stderr, "onnxq verify: output \"%s\": part %s from %s: SQNR %s dB is below "
                                "--min-sqnr %.2f (whole output %s dB)\n",
                        out->name, oq_verify_slice_label(out, k, lb, sizeof lb), slice_from(out, k, fr, sizeof fr),
                        fmt_db(db, b, sizeof b), o.min_sqnr,
                        fmt_db(oq_err_sqnr_db(&out->err), bw, sizeof bw));
            else
                fprintf(stderr, "onnxq verify: output \"%s\": SQNR %s dB is below --min-sqnr "
                                "%.2f\n", out->name, fmt_db(db, b, sizeof b), o.min_sqnr);
        }
        if (table_to_stdout)
            printf("min-sqnr %.2f dB: %s\n", o.min_sqnr, pass ? "met" : "NOT met");
    }
    rc = pass ? CLI_OK : CLI_FAIL;
done:
    for (size_t i = 0; in && i < n_in; i++)
        oq_rt_tensor_release(&in[i]);
    free(in);
    free(worst);
    cli_samples_free(&src);
    oq_verify_free(v);
    oq_model_free(fm);
    oq_model_free(qm);
    cli_data_opts_free(&o.data);
    oq_diag_free(&d);
    return rc;
}
