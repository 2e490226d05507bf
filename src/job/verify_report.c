/* The verify report (docs/verify.md "JSON") for any front end: `onnxq verify --json` and the
 * Python package's onnxq.verify write the same document from an oq_verify. */
#include "onnxq/verify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json_writer.h"
#include "onnxq/target.h"

bool oq_verify_layer_compared(const oq_verify_layer *L)
{
    return L->acc.n > 0 || L->iso.n > 0;
}

static double layer_key(const oq_verify_layer *L)
{
    double s = L->has_iso && L->iso.n ? oq_err_sqnr_db(&L->iso) : oq_err_sqnr_db(&L->acc);
    return isnan(s) ? INFINITY : s;
}

static _Thread_local const oq_verify *g_sort_v;

static int cmp_worst(const void *a, const void *b)
{
    const oq_verify_layer *x = oq_verify_layer_at(g_sort_v, *(const size_t *)a);
    const oq_verify_layer *y = oq_verify_layer_at(g_sort_v, *(const size_t *)b);
    double kx = layer_key(x), ky = layer_key(y);
    if (kx != ky)
        return kx < ky ? -1 : 1;
    double ax = oq_err_sqnr_db(&x->acc), ay = oq_err_sqnr_db(&y->acc);
    if (isnan(ax))
        ax = INFINITY;
    if (isnan(ay))
        ay = INFINITY;
    if (ax != ay)
        return ax < ay ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* indices of compared layers, worst first */
size_t *oq_verify_worst_layers(const oq_verify *v, size_t *n)
{
    size_t total = oq_verify_n_layers(v), k = 0;
    size_t *idx = malloc((total + 1) * sizeof *idx);
    if (!idx)
        return NULL;
    for (size_t i = 0; i < total; i++)
        if (oq_verify_layer_compared(oq_verify_layer_at(v, i)))
            idx[k++] = i;
    g_sort_v = v;
    qsort(idx, k, sizeof *idx, cmp_worst);
    *n = k;
    return idx;
}

/* the worst slice of the output decides (include/onnxq/verify.h) */
static bool output_pass(const oq_verify_output *o, double min)
{
    double s = oq_verify_output_worst(o, NULL, NULL);
    return !isnan(s) && s >= min;
}

/* ------------------------------------------------------------ JSON ---------- */

static void json_err(json_writer *w, const char *key, const oq_err_acc *e)
{
    json_key(w, key);
    json_begin_object(w);
    json_kv_double(w, "sqnr_db", oq_err_sqnr_db(e));
    json_kv_double(w, "cosine", oq_err_cosine(e));
    json_kv_double(w, "max_abs_err", e->n ? e->maxad : NAN);
    json_kv_double(w, "mean_abs_err", oq_err_mean_abs(e));
    json_kv_double(w, "mse", e->n ? e->sdd / (double)e->n : NAN);
    json_key(w, "elements");
    json_uint(w, e->n);
    json_key(w, "nonfinite_skipped");
    json_uint(w, e->nonfinite);
    json_kv_double(w, "sum_sq_ref", e->sxx);
    json_kv_double(w, "sum_sq_err", e->sdd);
    json_end_object(w);
}

/* "worst": {output, slice (index or null), label, tensor, sqnr_db} of output o: its worst
 * slice (slice SIZE_MAX: found here) */
static void json_worst(json_writer *w, const oq_verify_output *o, size_t slice)
{
    size_t k;
    double db = oq_verify_output_worst(o, &k, NULL);
    if (slice != SIZE_MAX)
        k = slice;
    char lb[256];
    json_key(w, "worst");
    json_begin_object(w);
    json_kv_string(w, "output", o->name);
    json_key(w, "slice");
    if (k == SIZE_MAX)
        json_null(w);
    else
        json_int(w, (int64_t)k);
    json_kv_string(w, "label", oq_verify_slice_label(o, k, lb, sizeof lb));
    json_kv_string(w, "tensor", k < o->n_slices ? o->slices[k].tensor : o->name);
    json_kv_double(w, "sqnr_db", db);
    json_end_object(w);
}

/* Histogram of L rebinned to `bins` bins over [lo, hi]; false when empty. */
bool oq_verify_layer_histogram(const oq_verify_layer *L, double *lo, double *hi, uint64_t *out, int bins)
{
    const oq_histogram *h = &L->obs.hist;
    float mn, mx;
    if (!oq_observer_minmax(&L->obs, &mn, &mx) || h->total == 0 || !(h->width > 0))
        return false;
    double a = mn, b = mx;
    if (L->has_qrange) {
        a = a < L->qmin ? a : L->qmin;
        b = b > L->qmax ? b : L->qmax;
    }
    if (!(b > a)) {
        a -= 0.5;
        b += 0.5;
    }
    double pad = (b - a) * 0.02;
    a -= pad;
    b += pad;
    memset(out, 0, (size_t)bins * sizeof *out);
    for (int i = 0; i < OQ_HIST_BINS; i++) {
        if (!h->counts[i])
            continue;
        double c = h->lo + ((double)i + 0.5) * h->width;
        int k = (int)floor((c - a) / (b - a) * bins);
        k = k < 0 ? 0 : k >= bins ? bins - 1 : k;
        out[k] += h->counts[i];
    }
    *lo = a;
    *hi = b;
    return true;
}

char *oq_verify_report_json(const oq_verify *v, const oq_verify_report_info *o)
{
    size_t n_worst = 0;
    size_t *worst = oq_verify_worst_layers(v, &n_worst);
    char *text = NULL;
    size_t len = 0;
    FILE *ms = worst ? open_memstream(&text, &len) : NULL;
    if (!ms) {
        free(worst);
        return NULL;
    }
    json_writer jw;
    json_writer *w = &jw;
    json_init(w, ms, o->indent);
    json_begin_object(w);
    json_kv_int(w, "version", 1);
    const char *source = o->source;
    int64_t rss = o->peak_rss_bytes;
    bool pass = o->pass;
    json_kv_string(w, "float_model", o->float_model);
    json_kv_string(w, "quant_model", o->quant_model);
    json_kv_string(w, "source", source);
    json_key(w, "samples");
    json_uint(w, oq_verify_n_samples(v));
    json_kv_bool(w, "isolation", oq_verify_has_isolation(v));
    bool ar = o->target && o->target->arith != OQ_ARITH_REFERENCE;
    json_kv_string(w, "target", o->target ? o->target->name : "reference");
    json_kv_string(w, "arithmetic", oq_arith_name(o->target ? o->target->arith : OQ_ARITH_REFERENCE));
    json_key(w, "outputs");
    json_begin_array(w);
    for (size_t i = 0; i < oq_verify_n_outputs(v); i++) {
        const oq_verify_output *out = oq_verify_output_at(v, i);
        json_begin_object(w);
        json_kv_string(w, "name", out->name);
        json_key(w, "shape");
        json_begin_array_inline(w);
        for (size_t j = 0; j < out->rank; j++)
            json_int(w, out->dims[j]);
        json_end_array(w);
        json_err(w, "error", &out->err);
        if (ar)
            json_err(w, "target_vs_reference", &out->arith);
        json_kv_bool(w, "class_scores", out->class_scores);
        if (out->class_scores) {
            json_key(w, "rows");
            json_uint(w, out->rows);
            json_kv_int(w, "k", out->topk);
            json_kv_double(w, "top1_agreement",
                           out->rows ? (double)out->top1_agree / (double)out->rows : NAN);
            json_kv_double(w, "topk_agreement",
                           out->rows ? (double)out->topk_agree / (double)out->rows : NAN);
        }
        json_key(w, "slices");
        json_begin_array(w);
        for (size_t k = 0; k < out->n_slices; k++) {
            const oq_verify_slice *sl = &out->slices[k];
            char lb[256];
            json_begin_object(w);
            json_kv_string(w, "label", oq_verify_slice_label(out, k, lb, sizeof lb));
            json_kv_string(w, "tensor", sl->tensor);
            json_kv_string(w, "node", sl->node);
            json_kv_string(w, "op_type", sl->op_type);
            json_key(w, "axis");
            if (sl->axis < 0) {
                json_null(w);
            } else {
                json_int(w, sl->axis);
                json_kv_int(w, "start", sl->start);
                json_kv_int(w, "end", sl->end);
            }
            json_err(w, "error", &sl->err);
            json_end_object(w);
        }
        json_end_array(w);
        json_kv_string(w, "concat", out->concat);
        if (out->slice_note)
            json_kv_string(w, "slice_note", out->slice_note);
        json_worst(w, out, SIZE_MAX);
        if (o->has_min)
            json_kv_bool(w, "meets_min_sqnr", output_pass(out, o->min_sqnr));
        json_end_object(w);
    }
    json_end_array(w);
    {
        size_t wo, ws;
        oq_verify_worst(v, &wo, &ws);
        if (wo != SIZE_MAX) {
            json_worst(w, oq_verify_output_at(v, wo), ws);
        } else {
            json_key(w, "worst");
            json_null(w);
        }
    }
    json_key(w, "layers");
    json_begin_array(w);
    for (size_t i = 0; i < oq_verify_n_layers(v); i++) {
        const oq_verify_layer *L = oq_verify_layer_at(v, i);
        if (!oq_verify_layer_compared(L))
            continue;
        json_begin_object(w);
        json_kv_string(w, "tensor", L->name);
        json_kv_string(w, "node", L->node);
        json_kv_string(w, "op_type", L->op_type);
        json_kv_string(w, "after_activation", L->act_name); /* null: compared as is */
        json_kv_int(w, "graph_order", (int64_t)L->order);
        json_kv_bool(w, "quantized", L->quantized);
        if (L->has_qrange) {
            json_key(w, "scale");
            json_float(w, L->scale);
            json_kv_int(w, "zero_point", L->zero_point);
            json_kv_string(w, "qtype", oq_dtype_name(L->qdtype));
            json_key(w, "quant_range");
            json_begin_array_inline(w);
            json_double(w, L->qmin);
            json_double(w, L->qmax);
            json_end_array(w);
            json_kv_double(w, "clipped_fraction",
                           L->obs.count ? L->clipped / (double)L->obs.count : NAN);
        }
        float mn, mx;
        if (oq_observer_minmax(&L->obs, &mn, &mx)) {
            json_key(w, "float_range");
            json_begin_array_inline(w);
            json_float(w, mn);
            json_float(w, mx);
            json_end_array(w);
        }
        if (L->has_qrange)
            json_err(w, "output_qdq", &L->own);
        json_err(w, "accumulated", &L->acc);
        if (L->has_iso)
            json_err(w, "isolated", &L->iso);
        if (ar && L->has_arith)
            json_err(w, "target_vs_reference", &L->arith);
        json_kv_bool(w, "shape_mismatch", L->shape_mismatch);
        uint64_t counts[OQ_VERIFY_REPORT_BINS];
        double lo, hi;
        if (oq_verify_layer_histogram(L, &lo, &hi, counts, OQ_VERIFY_REPORT_BINS)) {
            json_key(w, "histogram");
            json_begin_object(w);
            json_kv_double(w, "lo", lo);
            json_kv_double(w, "hi", hi);
            json_key(w, "counts");
            json_begin_array_inline(w);
            for (int k = 0; k < OQ_VERIFY_REPORT_BINS; k++)
                json_uint(w, counts[k]);
            json_end_array(w);
            json_end_object(w);
        }
        json_end_object(w);
    }
    json_end_array(w);
    json_key(w, "worst_layers");
    json_begin_array(w);
    for (size_t r = 0; r < n_worst && r < (size_t)o->top; r++)
        json_string(w, oq_verify_layer_at(v, worst[r])->name);
    json_end_array(w);
    json_key(w, "weights");
    json_begin_array(w);
    for (size_t i = 0; i < oq_verify_n_weights(v); i++) {
        const oq_verify_weight *wt = oq_verify_weight_at(v, i);
        json_begin_object(w);
        json_kv_string(w, "name", wt->name);
        json_kv_string(w, "consumer_op", wt->consumer_op);
        json_kv_bool(w, "per_channel", wt->per_channel);
        json_kv_int(w, "channels", wt->channels);
        json_err(w, "error", &wt->err);
        json_end_object(w);
    }
    json_end_array(w);
    json_key(w, "memory");
    json_begin_object(w);
    json_kv_int(w, "peak_rss_bytes", rss);
    json_kv_int(w, "float_tensors_held_bytes", oq_verify_peak_store_bytes(v));
    json_end_object(w);
    if (o->has_min) {
        json_kv_double(w, "min_sqnr_db", o->min_sqnr);
        json_kv_bool(w, "pass", pass);
    }
    json_end_object(w);
    int jr = json_finish(w);
    fclose(ms);
    free(worst);
    if (jr != 0) {
        free(text);
        return NULL;
    }
    return text;
}

