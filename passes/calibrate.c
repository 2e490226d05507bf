/* calibrate: run the float model over calibration samples (oq_calibrate, src/quant/calib.c)
 * and store the table tensor -> (min, max, chosen range) as JSON in the model's
 * metadata_props under "onnxq.calibration", where insert-qdq reads it. The graph itself
 * is not changed. Exactly one source: data=DIR, images=DIR (with size=HxW, mean, std,
 * bgr, layout, scale) or random=N. docs/passes/calibrate.md */
#include "pass-impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "onnxq/calib.h"

/* Observe only inputs and outputs of nodes whose op type is in a comma-separated list. */
typedef struct want_ctx {
    const char *list;
} want_ctx;

static bool node_wanted(const oq_node *n, const char *list)
{
    return n && n->op_type && oq_domain_is_default(n->domain) && oq_pass_name_in_list(list, n->op_type);
}

static bool want_value(const oq_value *v, void *user)
{
    const want_ctx *w = user;
    if (v->kind == OQ_VALUE_NODE && node_wanted(v->producer, w->list))
        return true;
    for (size_t i = 0; i < v->n_uses; i++)
        if (node_wanted(v->uses[i].node, w->list))
            return true;
    return false;
}

/* The inputs smooth-quant{search=true} chose alpha for were judged with min/max ranges
 * over the calibration samples (its records with "range": "minmax"): give them those
 * ranges, whatever the method (minmax false: only the next rule). An input with channels
 * split off gets the range of the other channels ("split_min", "split_max"): the layers
 * read those channels with zero weights, and the whole range would waste the 8 bits on
 * them. Returns how many entries changed. */
static int64_t smoothed_minmax(const oq_model *m, oq_calib_table *t, bool symmetric, bool minmax)
{
    const char *js = oq_model_get_metadata(m, OQ_SMOOTH_METADATA_KEY);
    cJSON *root = NULL;
    int64_t n = 0;
    if (!js || oq_json_parse(js, strlen(js), "smooth-quant record", &root, NULL) != OQ_OK)
        return 0;
    const cJSON *layers = oq_json_get(root, "layers"), *l;
    cJSON_ArrayForEach(l, layers) {
        const cJSON *r = oq_json_get(l, "range"), *in = oq_json_get(l, "smoothed_input");
        const cJSON *s0 = oq_json_get(l, "split_min"), *s1 = oq_json_get(l, "split_max");
        bool split = cJSON_IsNumber(s0) && cJSON_IsNumber(s1) && s0->valuedouble <= s1->valuedouble;
        if (!cJSON_IsString(in) || (!split && (!minmax || !cJSON_IsString(r) || strcmp(r->valuestring, "minmax") != 0)))
            continue;
        for (size_t i = 0; i < t->count; i++) {
            oq_calib_entry *e = &t->items[i];
            if (strcmp(e->name, in->valuestring) != 0 || e->count == 0)
                continue;
            float lo = split ? (float)s0->valuedouble : e->min, hi = split ? (float)s1->valuedouble : e->max;
            if (symmetric) {
                float a = fabsf(lo) > fabsf(hi) ? fabsf(lo) : fabsf(hi);
                lo = -a;
                hi = a;
            }
            if (lo != e->lo || hi != e->hi) {
                e->lo = lo;
                e->hi = hi;
                e->choice = e->choice ? "minmax" : NULL;
                n++;
            }
        }
    }
    cJSON_Delete(root);
    return n;
}

/* smooth-quant in calibration's sample loop: the table was gathered on the model before
 * smoothing. Every tensor but the smoothed ones holds the same numbers after it (X/s
 * times s W is X W); a smoothed input the search judged with min/max ranges gets the
 * min/max of X/s, known from X's per-channel extremes, and so do the tensors before X
 * that a fold through Relu/LeakyRelu/Add(constant) scaled with it. *rerun: a smoothed
 * input's range cannot be derived (alpha given: its range is the method's on X/s; a
 * broadcast in the fold chain; X not observed): calibrate again. */
static oq_status patch_smoothed(oq_calib_table *t, const oq_sq_run *sq, bool *rerun, oq_diag *d)
{
    *rerun = false;
    for (size_t i = 0; i < oq_sq_n_inputs(sq); i++) {
        oq_sq_input in;
        if (oq_sq_smoothed(sq, i, &in) && (!in.judged_minmax || !in.derived)) {
            *rerun = true;
            return OQ_OK;
        }
    }
    for (size_t i = 0; i < oq_sq_n_inputs(sq); i++) {
        oq_sq_input in;
        if (!oq_sq_smoothed(sq, i, &in))
            continue;
        size_t at = t->count;
        for (size_t k = 0; k < t->count && at == t->count; k++)
            if (t->items[k].name && strcmp(t->items[k].name, in.orig) == 0)
                at = k;
        if (at == t->count) { /* X was not observed: let calibration see X/s */
            *rerun = true;
            return OQ_OK;
        }
        oq_calib_entry e = t->items[at];
        e.name = strdup(in.now);
        e.first_nonfinite = e.first_nonfinite ? strdup(e.first_nonfinite) : NULL;
        if (!e.name) {
            free(e.first_nonfinite);
            return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        }
        e.min = e.lo = in.min;
        e.max = e.hi = in.max;
        e.choice = NULL;
        e.held_out = false;
        for (size_t k = 0; k < in.n_chain; k++) { /* tensors before X that a fold scaled */
            const sq_chain_range *cr = &in.chain[k];
            for (size_t j = 0; j < t->count && cr->now; j++) {
                oq_calib_entry *ce = &t->items[j];
                if (!ce->name || strcmp(ce->name, cr->orig) != 0)
                    continue;
                char *nn = strdup(cr->now);
                if (!nn) {
                    free(e.name);
                    free(e.first_nonfinite);
                    return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
                }
                free(ce->name);
                ce->name = nn;
                ce->min = ce->lo = cr->min;
                ce->max = ce->hi = cr->max;
                ce->choice = NULL;
                break;
            }
        }
        if (in.replaced) { /* X's own entry is now X/s's */
            free(t->items[at].name);
            free(t->items[at].first_nonfinite);
            t->items[at] = e;
            continue;
        }
        oq_calib_entry *ni = realloc(t->items, (t->count + 1) * sizeof *ni);
        if (!ni) {
            free(e.name);
            free(e.first_nonfinite);
            return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        }
        t->items = ni;
        memmove(t->items + at + 2, t->items + at + 1, (t->count - at - 1) * sizeof *ni);
        t->items[at + 1] = e; /* the Mul's output, right after X */
        t->count++;
    }
    return OQ_OK;
}

/* smooth-quant=off|search|ALPHA */
static oq_status smooth_params(const oq_pass_options *opts, bool *on, oq_sq_params *p, oq_diag *d)
{
    const char *v = oq_pass_opt_string(opts, "smooth-quant", "off");
    oq_sq_params_default(p);
    *on = strcmp(v, "off") != 0;
    if (!*on)
        return OQ_OK;
    if (strcmp(v, "search") == 0) {
        p->search = true;
        p->split_ratio = oq_pass_opt_float(opts, "smooth-split-ratio", 4.0);
        p->split_gain_db = oq_pass_opt_float(opts, "smooth-split-min-gain-db", 1.0);
        p->split_z = oq_pass_opt_float(opts, "smooth-split-z", 2.0);
        /* for comparisons through onnxq quantize: "RATIO,GAIN_DB,Z" */
        const char *env = getenv("ONNXQ_SMOOTH_SPLIT");
        if (env && sscanf(env, "%lf,%lf,%lf", &p->split_ratio, &p->split_gain_db, &p->split_z) < 1)
            return oq_diag_error(d, OQ_ERR_USAGE, "ONNXQ_SMOOTH_SPLIT \"%s\": RATIO[,GAIN_DB[,Z]]", env);
        if (!(p->split_ratio == 0 || p->split_ratio >= 1) || !(p->split_gain_db >= 0) || !(p->split_z >= 0))
            return oq_diag_error(d, OQ_ERR_USAGE, "calibrate: smooth-split-ratio %g (0 or at least 1), "
                                 "smooth-split-min-gain-db %g, smooth-split-z %g (at least 0)", p->split_ratio,
                                 p->split_gain_db, p->split_z);
        return OQ_OK;
    }
    char *end;
    p->alpha = strtod(v, &end);
    if (end == v || *end || !(p->alpha >= 0 && p->alpha <= 1))
        return oq_diag_error(d, OQ_ERR_USAGE, "calibrate: smooth-quant \"%s\": off, search or an alpha in [0, 1]", v);
    return OQ_OK;
}

/* candidates=LIST for method=select: "minmax", "mse", "entropy" or "pP" (percentile P),
 * comma-separated; each on top of base (dtype, symmetric, reduce-range). */
static oq_status parse_candidates(const char *list, const oq_range_request *base, oq_range_request *out,
                                  char (*names)[OQ_CALIB_SELECT_NAME_MAX], size_t *n, oq_diag *d)
{
    *n = 0;
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 0 || len >= OQ_CALIB_SELECT_NAME_MAX || *n == OQ_CALIB_SELECT_MAX)
            return oq_diag_error(d, OQ_ERR_USAGE, "calibrate: candidates \"%s\": at most %d names of at most %d "
                                 "characters (minmax, mse, entropy, pP)", list, OQ_CALIB_SELECT_MAX,
                                 OQ_CALIB_SELECT_NAME_MAX - 1);
        char nm[OQ_CALIB_SELECT_NAME_MAX];
        memcpy(nm, p, len);
        nm[len] = 0;
        oq_range_request r = *base;
        char *end = NULL;
        if (!strcmp(nm, "minmax"))
            r.method = OQ_CALIB_MINMAX;
        else if (!strcmp(nm, "mse"))
            r.method = OQ_CALIB_MSE;
        else if (!strcmp(nm, "entropy"))
            r.method = OQ_CALIB_ENTROPY;
        else if (nm[0] == 'p' && (r.percentile = strtod(nm + 1, &end), end != nm + 1 && !*end) &&
                 r.percentile > 0 && r.percentile <= 100)
            r.method = OQ_CALIB_PERCENTILE;
        else
            return oq_diag_error(d, OQ_ERR_USAGE, "calibrate: candidate \"%s\" unknown (minmax, mse, entropy, or pP "
                                 "for percentile P in (0, 100], e.g. p99.99)", nm);
        for (size_t i = 0; i < *n; i++)
            if (!strcmp(names[i], nm))
                return oq_diag_error(d, OQ_ERR_USAGE, "calibrate: candidate \"%s\" given twice", nm);
        memcpy(names[*n], nm, len + 1);
        out[(*n)++] = r;
        p = e ? e + 1 : p + len;
    }
    if (*n == 0)
        return oq_diag_error(d, OQ_ERR_USAGE, "calibrate: method=select needs candidates");
    return OQ_OK;
}

static oq_status set_table(oq_model *m, const char *key, const oq_calib_table *t, oq_diag *d)
{
    char *json = oq_calib_table_to_json(t);
    if (!json)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    oq_model_set_metadata(m, key, json);
    free(json);
    return OQ_OK;
}

static oq_status run(oq_model *m, const oq_pass_options *opts, oq_pass_result *res, oq_diag *d)
{
    oq_calib_options o;
    oq_calib_options_default(&o);
    const char *method = oq_pass_opt_string(opts, "method", "percentile");
    bool select = strcmp(method, "select") == 0;
    int mi = select ? (int)OQ_CALIB_PERCENTILE : oq_calib_method_from_name(method);
    if (mi < 0)
        return oq_diag_error(d, OQ_ERR_USAGE,
                             "calibrate: method \"%s\" unknown (select, auto, minmax, percentile, entropy, mse)", method);
    o.range.method = (oq_calib_method)mi;
    const char *dt = oq_pass_opt_string(opts, "dtype", "uint8");
    o.range.dtype = oq_dtype_from_name(dt);
    o.range.percentile = oq_pass_opt_float(opts, "percentile", oq_default_percentile(o.range.dtype));
    if (!(o.range.percentile > 0 && o.range.percentile <= 100))
        return oq_diag_error(d, OQ_ERR_USAGE, "calibrate: percentile must be in (0, 100]");
    int32_t qmin, qmax;
    if (oq_qrange(o.range.dtype, false, &qmin, &qmax) != OQ_OK || o.range.dtype == OQ_DTYPE_INT32)
        return oq_diag_error(d, OQ_ERR_USAGE,
                             "calibrate: dtype \"%s\" is not an activation type (uint8, int8, uint16, int16)", dt);
    o.range.symmetric = oq_pass_opt_bool(opts, "symmetric", false);
    o.range.reduce_range = oq_pass_opt_bool(opts, "reduce-range", false);
    o.averaging_constant = oq_pass_opt_float(opts, "averaging", 0.0);
    o.act_ranges = oq_pass_opt_bool(opts, "act-ranges", true);
    if (o.averaging_constant < 0 || o.averaging_constant > 1)
        return oq_diag_error(d, OQ_ERR_USAGE, "calibrate: averaging must be in [0, 1]");
    if (o.averaging_constant > 0 && o.range.method != OQ_CALIB_MINMAX)
        return oq_diag_error(d, OQ_ERR_USAGE, "calibrate: averaging applies to method=minmax only");
    oq_range_request cand[OQ_CALIB_SELECT_MAX];
    char names[OQ_CALIB_SELECT_MAX][OQ_CALIB_SELECT_NAME_MAX];
    size_t nc = 1;
    oq_status st;
    if (select) {
        char dflt[64];
        snprintf(dflt, sizeof dflt, "p%.10g,p%s,minmax,mse", o.range.percentile,
                 o.range.percentile == 99.999 ? "99.99" : "99.999");
        const char *given = oq_pass_opt_string(opts, "candidates", "");
        if ((st = parse_candidates(*given ? given : dflt, &o.range, cand, names, &nc, d)) != OQ_OK)
            return st;
    }
    const char *np = oq_pass_opt_string(opts, "nan-policy", "error");
    if (strcmp(np, "error") == 0)
        o.nan_policy = OQ_NAN_ERROR;
    else if (strcmp(np, "ignore") == 0)
        o.nan_policy = OQ_NAN_IGNORE;
    else if (strcmp(np, "quantized") == 0)
        o.nan_policy = OQ_NAN_QUANTIZED;
    else
        return oq_diag_error(d, OQ_ERR_USAGE, "calibrate: nan-policy \"%s\" unknown (quantized, error, ignore)", np);
    o.threads = (int)oq_pass_opt_int(opts, "threads", 0);
    oq_calib_progress_state ps;
    memset(&ps, 0, sizeof ps);
    if (oq_pass_opt_bool(opts, "progress", false)) {
        o.progress = oq_calib_progress_stderr;
        o.progress_user = &ps;
    }
    want_ctx wc = {oq_pass_opt_string(opts, "op-types", "")};
    if (*wc.list) {
        o.want = want_value;
        o.want_user = &wc;
    }
    bool smooth;
    oq_sq_params sp;
    st = smooth_params(opts, &smooth, &sp, d);
    if (st != OQ_OK)
        return st;
    oq_calib_source *src = NULL;
    if ((st = oq_pass_calib_source(opts, "calibrate", &src, d)) != OQ_OK)
        return st;
    oq_sq_run *sq = NULL;
    oq_calib_hooks sh;
    if (smooth && (st = oq_sq_begin(m, &sp, true, &sq, &sh, d)) != OQ_OK) {
        oq_calib_source_free(src);
        return st;
    }
    if (oq_sq_n_inputs(sq) > 0)
        o.also = &sh;

    /* t[0]: the table insert-qdq reads; method=select: t[0..nc) every sample's ranges of
     * each candidate, t[nc..2nc) the fit share's */
    oq_calib_table t[2 * OQ_CALIB_SELECT_MAX];
    size_t nt = select ? 2 * nc : 1;
    memset(t, 0, sizeof t);
    st = select ? oq_calibrate_candidates(m, src, &o, cand, nc, t + nc, t, d) : oq_calibrate(m, src, &o, &t[0], d);
    if (st == OQ_OK && o.also) { /* choose and apply the smoothing, then the ranges it changed */
        oq_pass_result sres;
        memset(&sres, 0, sizeof sres);
        sres.struct_size = sizeof sres;
        bool rerun = false;
        st = oq_sq_finish(sq, m, t[0].samples, &sres, d);
        for (size_t i = 0; i < nt && st == OQ_OK && sres.changed && !rerun; i++)
            st = patch_smoothed(&t[i], sq, &rerun, d);
        for (size_t i = 0; i < sres.n_stats; i++) {
            if (!strcmp(sres.stats[i].name, "layers_smoothed"))
                oq_pass_stat_add(res, "smooth_layers", sres.stats[i].value);
            else if (!strcmp(sres.stats[i].name, "muls_inserted"))
                oq_pass_stat_add(res, "smooth_muls_inserted", sres.stats[i].value);
            else if (!strcmp(sres.stats[i].name, "layers_split"))
                oq_pass_stat_add(res, "smooth_layers_split", sres.stats[i].value);
            else if (!strcmp(sres.stats[i].name, "channels_split"))
                oq_pass_stat_add(res, "smooth_channels_split", sres.stats[i].value);
        }
        if (st == OQ_OK && rerun) { /* X/s's range needs its own statistics */
            for (size_t i = 0; i < nt; i++)
                oq_calib_table_free(&t[i]);
            o.also = NULL;
            oq_pass_stat_add(res, "smooth_recalibrated", 1);
            st = select ? oq_calibrate_candidates(m, src, &o, cand, nc, t + nc, t, d)
                        : oq_calibrate(m, src, &o, &t[0], d);
        }
    }
    oq_sq_free(sq);
    oq_calib_source_free(src);
    if (st == OQ_OK) {
        int64_t n = 0;
        bool mm = oq_pass_opt_bool(opts, "smoothed-minmax", true);
        for (size_t i = 0; i < nt; i++) { /* every candidate's table the same way: count the first's */
            int64_t k = smoothed_minmax(m, &t[i], o.range.symmetric, mm);
            if (i == 0)
                n = k;
        }
        oq_pass_stat_add(res, "smoothed_minmax", n);
    }
    if (st == OQ_OK)
        st = set_table(m, OQ_CALIB_METADATA_KEY, &t[0], d);
    if (st == OQ_OK && select) { /* the candidates, for the choice on held-out samples */
        char list[OQ_CALIB_SELECT_MAX * OQ_CALIB_SELECT_NAME_MAX] = "";
        for (size_t i = 0; i < nc && st == OQ_OK; i++) {
            char key[128];
            snprintf(key, sizeof key, "%s%s", OQ_CALIB_SELECT_ALL_PREFIX, names[i]);
            st = set_table(m, key, &t[i], d);
            snprintf(key, sizeof key, "%s%s", OQ_CALIB_SELECT_FIT_PREFIX, names[i]);
            if (st == OQ_OK)
                st = set_table(m, key, &t[nc + i], d);
            strcat(list, i ? "," : "");
            strcat(list, names[i]);
        }
        if (st == OQ_OK)
            oq_model_set_metadata(m, OQ_CALIB_SELECT_KEY, list);
        oq_pass_stat_add(res, "select_candidates", (int64_t)nc);
    }
    if (st != OQ_OK) {
        for (size_t i = 0; i < nt; i++)
            oq_calib_table_free(&t[i]);
        return st;
    }
    oq_pass_stat_add(res, "samples", (int64_t)t[0].samples);
    oq_pass_stat_add(res, "tensors_observed", (int64_t)t[0].count);
    oq_pass_stat_add(res, "nan_excluded", (int64_t)t[0].nan_total);
    oq_pass_stat_add(res, "inf_excluded", (int64_t)t[0].inf_total);
    int64_t n_act = 0;
    for (size_t i = 0; i < t[0].count; i++)
        n_act += t[0].items[i].act != NULL;
    oq_pass_stat_add(res, "act_ranges_narrowed", n_act);
    if (t[0].method == OQ_CALIB_AUTO) { /* what auto chose: tensors per candidate */
        int64_t n[OQ_AUTO_CANDIDATES] = {0};
        for (size_t i = 0; i < t[0].count; i++) {
            int c = oq_auto_candidate_from_name(t[0].items[i].choice);
            if (c >= 0)
                n[c]++;
        }
        static const char *const stat[OQ_AUTO_CANDIDATES] = {"auto_minmax", "auto_p99_999", "auto_p99_99",
                                                             "auto_p99_9", "auto_mse"};
        for (int c = 0; c < OQ_AUTO_CANDIDATES; c++)
            oq_pass_stat_add(res, stat[c], n[c]);
        oq_pass_stat_add(res, "auto_held_out_samples", (int64_t)t[0].held_out_samples);
    }
    for (size_t i = 0; i < nt; i++)
        oq_calib_table_free(&t[i]);
    res->changed = true;
    return OQ_OK;
}

static const oq_pass_option_def options[] = {
    OQ_PASS_CALIB_SOURCE_OPTIONS,
    {"method", OQ_OPT_STRING, "percentile",
     "minmax, percentile, entropy, mse, auto (per tensor, on held-out samples) or select (every candidate's ranges "
     "for onnxq quantize's choice on held-out samples)"},
    {"candidates", OQ_OPT_STRING, "",
     "method=select: minmax, mse, entropy or pP, comma-separated (default: the dtype's percentile, the other of "
     "99.99/99.999, minmax, mse)"},
    {"percentile", OQ_OPT_FLOAT, "99.99", "for method=percentile (default 99.99 for 8-bit dtypes, 99.999 for 16-bit)"},
    {"averaging", OQ_OPT_FLOAT, "0", "minmax moving-average constant in (0,1] (0: exact min/max)"},
    {"dtype", OQ_OPT_STRING, "uint8", "activation type the range is chosen for"},
    {"symmetric", OQ_OPT_BOOL, "false", "symmetric activation ranges"},
    {"reduce-range", OQ_OPT_BOOL, "false", "ranges for one bit less"},
    {"act-ranges", OQ_OPT_BOOL, "true",
     "the range of a tensor read only as x * g(x) (SiLU, HardSwish) narrowed on its saturated side to the least "
     "error after the activation"},
    {"nan-policy", OQ_OPT_STRING, "error",
     "error: stop at the first NaN/Inf; ignore: exclude and count; quantized: as ignore, and insert-qdq refuses "
     "to quantize a tensor that had any"},
    {"threads", OQ_OPT_INT, "0", "executor threads (0: one per CPU)"},
    {"op-types", OQ_OPT_STRING, "", "observe only inputs/outputs of these op types (comma-separated; empty: every float tensor)"},
    {"progress", OQ_OPT_BOOL, "false", "progress on stderr (a bar on a terminal)"},
    {"smooth-quant", OQ_OPT_STRING, "off",
     "search or ALPHA: smooth-quant's SmoothQuant in this pass's sample loop (one float pass where the smoothed "
     "ranges follow from per-channel extremes; else calibration runs again after smoothing)"},
    {"smooth-split-ratio", OQ_OPT_FLOAT, "4",
     "smooth-quant=search: channels this many times the median peak may be split off into a float MatMul (0: never)"},
    {"smooth-split-min-gain-db", OQ_OPT_FLOAT, "1",
     "smooth-quant=search: split them off when the held-out output SQNR rises by more than this"},
    {"smooth-split-z", OQ_OPT_FLOAT, "2",
     "smooth-quant=search: and when the mean gain per held-out sample exceeds this many standard errors, "
     "on at least 3 samples (0: no such rule)"},
    {"smoothed-minmax", OQ_OPT_BOOL, "true",
     "min/max ranges for the inputs smooth-quant's search chose alpha for (the ranges it judged them with)"},
};

const oq_pass oq_pass_calibrate = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "calibrate",
    .summary = "run calibration samples through the model; store tensor ranges in metadata for insert-qdq",
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .run = run,
};
