/* The quantize job's default calibration, --method select: which range method (a
 * percentile, min/max, MSE) suits this model is judged where it matters, on the model's
 * outputs, with samples calibration did not fit. calibrate{method=select} observed every
 * fourth sample apart and left each candidate's ranges twice in the model: from the other
 * samples (the fit share) and from all of them. Here each candidate's fit ranges go through
 * the rest of the pipeline on a copy of the model, the copy runs the held-out samples with
 * the target's arithmetic, and the worst output part (an output, or one input of a Concat
 * that makes an output; each part's SQNR per sample, averaged over the samples) decides:
 * another candidate replaces the first only when it is better by more than the noise of
 * those samples (a jackknife standard error). The winner's ranges over every sample are
 * kept. docs/calibration.md "select". */
#include "job/job-impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnxq/calib.h"
#include "onnxq/verify.h"

static char *take_prefixed(oq_model *m, const char *prefix, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "%s%s", prefix, name);
    return oq_job_take_metadata(m, key);
}

uint64_t oq_job_weight_bytes(const oq_model *m)
{
    uint64_t n = 0;
    for (size_t i = 0; m->graph && i < m->graph->n_initializers; i++) {
        const oq_tensor *t = m->graph->initializers[i];
        int64_t e = oq_tensor_numel(t), b = e > 0 ? oq_dtype_nbytes(t->dtype, e) : 0;
        n += b > 0 ? (uint64_t)b : 0;
    }
    return n;
}

/* The parts verify judges, in order: each output's slices (one, the whole output, without
 * a Concat). */
static size_t n_parts(const oq_verify *v)
{
    size_t n = 0;
    for (size_t i = 0; i < oq_verify_n_outputs(v); i++) {
        const oq_verify_output *o = oq_verify_output_at(v, i);
        n += o->n_slices ? o->n_slices : 1;
    }
    return n;
}

/* Each part's running sums (n, sum x^2, sum (x-y)^2) into out[3 * part ...]. */
static void part_sums(const oq_verify *v, double *out)
{
    size_t p = 0;
    for (size_t i = 0; i < oq_verify_n_outputs(v); i++) {
        const oq_verify_output *o = oq_verify_output_at(v, i);
        for (size_t k = 0; k < (o->n_slices ? o->n_slices : 1); k++, p++) {
            const oq_err_acc *e = o->n_slices ? &o->slices[k].err : &o->err;
            out[3 * p] = (double)e->n;
            out[3 * p + 1] = e->sxx;
            out[3 * p + 2] = e->sdd;
        }
    }
}

void oq_job_score_free(oq_job_score *s)
{
    free(s->sums);
    s->sums = NULL;
}

/* Each sample's SQNR of a part is clamped to this (identical outputs: +Inf; an all-zero float
 * part: -Inf), so that one sample cannot take the mean anywhere. */
#define SAMPLE_DB_CLAMP 150.0

/* The score over every sample but `skip` (SIZE_MAX: none): per part, the mean over the
 * samples of each sample's SQNR (samples where the part has no elements left out), and the
 * worst part; *worst_part (may be NULL) its index. INFINITY when no part has elements. */
static double score_without(const oq_job_score *s, size_t skip, size_t *worst_part)
{
    double worst = INFINITY;
    if (worst_part)
        *worst_part = SIZE_MAX;
    for (size_t p = 0; p < s->n_parts; p++) {
        double sum = 0;
        size_t m = 0;
        for (size_t k = 0; k < s->n_samples; k++) {
            const double *e = s->sums + (k * s->n_parts + p) * 3;
            if (k == skip || e[0] == 0)
                continue;
            double db = e[2] == 0 ? SAMPLE_DB_CLAMP : e[1] == 0 ? -SAMPLE_DB_CLAMP : 10.0 * log10(e[1] / e[2]);
            sum += fmax(-SAMPLE_DB_CLAMP, fmin(SAMPLE_DB_CLAMP, db));
            m++;
        }
        if (m && sum / (double)m < worst) {
            worst = sum / (double)m;
            if (worst_part)
                *worst_part = p;
        }
    }
    return worst;
}

/* The label of part p (n_parts order) of v. */
static void part_label(const oq_verify *v, size_t p, char *buf, size_t size)
{
    for (size_t i = 0; i < oq_verify_n_outputs(v); i++) {
        const oq_verify_output *o = oq_verify_output_at(v, i);
        size_t n = o->n_slices ? o->n_slices : 1;
        if (p < n) {
            oq_verify_slice_label(o, o->n_slices ? p : SIZE_MAX, buf, size);
            return;
        }
        p -= n;
    }
}

double oq_job_score_diff(const oq_job_score *a, const oq_job_score *b, double *se)
{
    double diff = a->db - b->db;
    if (se)
        *se = 0;
    size_t n = a->n_samples;
    if (!se || !a->sums || !b->sums || n < 3 || b->n_samples != n || !isfinite(diff))
        return diff;
    double *dk = malloc(n * sizeof *dk), mean = 0;
    if (!dk)
        return diff;
    for (size_t k = 0; k < n; k++) {
        dk[k] = score_without(a, k, NULL) - score_without(b, k, NULL);
        if (!isfinite(dk[k])) {
            free(dk);
            return diff;
        }
        mean += dk[k] / (double)n;
    }
    double ss = 0;
    for (size_t k = 0; k < n; k++)
        ss += (dk[k] - mean) * (dk[k] - mean);
    free(dk);
    *se = sqrt((double)(n - 1) / (double)n * ss);
    return diff;
}

bool oq_job_clearly_better(const oq_job_score *a, const oq_job_score *b, double *se)
{
    double e, gain = oq_job_score_diff(a, b, &e);
    if (se)
        *se = e;
    return gain > OQ_SELECT_MARGIN_DB && gain > OQ_JUDGE_Z * e;
}

oq_status oq_job_judge(oq_model *fm, oq_model *qm, oq_calib_source *src, const uint64_t *held, size_t nh,
                       oq_verify_float_cache *fc, const oq_quantize_fallback_args *a, oq_job_score *sc, oq_diag *d)
{
    oq_verify_options vo = oq_verify_options_default();
    vo.threads = (int)a->threads;
    vo.isolated = false;
    vo.arith = a->arith;
    vo.arith_loss = false;
    vo.float_ranges = false;
    vo.outputs_only = true;
    vo.float_cache = fc; /* the float model runs the held-out samples once, for every candidate */
    oq_verify *v = NULL;
    oq_rt_tensor *in = NULL;
    double *prev = NULL, *now = NULL;
    memset(sc, 0, sizeof *sc);
    sc->db = -INFINITY;
    oq_status st = oq_verify_new(fm, qm, &vo, &v, d);
    if (st != OQ_OK)
        return st;
    const oq_plan *fp = oq_verify_float_plan(v);
    size_t n_in = oq_plan_n_inputs(fp), np = 0;
    in = calloc(n_in ? n_in : 1, sizeof *in);
    if (!in) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "calibration choice: out of memory");
        goto done;
    }
    bool per_sample = true; /* each sample's sums, while the parts stay the same */
    for (size_t k = 0; k < nh && st == OQ_OK; k++) {
        char label[512];
        st = oq_calib_source_sample(src, fp, held[k], in, n_in, label, sizeof label, d);
        if (st == OQ_OK)
            st = oq_verify_sample(v, in, n_in, label, d);
        for (size_t i = 0; i < n_in; i++)
            oq_rt_tensor_release(&in[i]);
        if (st != OQ_OK || !per_sample)
            continue;
        if (k == 0) {
            np = n_parts(v);
            sc->sums = np ? calloc(nh * np * 3, sizeof *sc->sums) : NULL;
            prev = np ? calloc(np * 3, sizeof *prev) : NULL;
            now = np ? malloc(np * 3 * sizeof *now) : NULL;
        }
        if (!sc->sums || !prev || !now || n_parts(v) != np) {
            per_sample = false; /* judged all the same, without the noise estimate */
            continue;
        }
        part_sums(v, now);
        for (size_t j = 0; j < np * 3; j++) {
            sc->sums[k * np * 3 + j] = now[j] - prev[j];
            prev[j] = now[j];
        }
    }
    if (st == OQ_OK) {
        size_t wo, ws;
        sc->db = oq_verify_worst(v, &wo, &ws);
        if (wo != SIZE_MAX)
            oq_verify_slice_label(oq_verify_output_at(v, wo), ws, sc->part, sizeof sc->part);
        if (isnan(sc->db))
            sc->db = -INFINITY; /* nothing comparable: the worst */
        if (per_sample && sc->sums) {
            /* the judgement: each sample's SQNR per part, averaged, the worst part */
            sc->n_samples = nh;
            sc->n_parts = np;
            size_t wp;
            double db = score_without(sc, SIZE_MAX, &wp);
            if (wp != SIZE_MAX) {
                sc->db = db;
                part_label(v, wp, sc->part, sizeof sc->part);
            }
        }
    }
done:
    if (!sc->n_samples) {
        free(sc->sums);
        sc->sums = NULL;
    }
    free(prev);
    free(now);
    free(in);
    oq_verify_free(v);
    return st;
}

size_t oq_job_held_out(uint64_t ns, uint64_t weight_bytes, uint64_t held[OQ_SELECT_HELD_OUT_CAP])
{
    /* 8 held-out samples, up to 32 for a small model (a few held-out windows of a
     * recurrent model or a few photos are a noisy judge, and there they cost little) */
    size_t want = OQ_SELECT_HELD_OUT_MAX, nh = 0;
    while (want < OQ_SELECT_HELD_OUT_CAP && weight_bytes * (want * 2 / OQ_SELECT_HELD_OUT_MAX) <= OQ_SELECT_SMALL_BYTES)
        want *= 2;
    for (uint64_t k = 0; k < ns && nh < want; k++)
        if (oq_calib_sample_held_out(k))
            held[nh++] = k;
    return nh;
}

oq_status oq_job_select_calibration(const oq_quantize_fallback_args *a, const oq_registry *reg, const char *rest,
                                    oq_model *m, oq_job_select_result *r, oq_diag *d)
{
    double t0 = oq_job_now_s();
    memset(r, 0, sizeof *r);
    char *list = oq_job_take_metadata(m, OQ_CALIB_SELECT_KEY);
    char *all[OQ_CALIB_SELECT_MAX] = {0}, *fit[OQ_CALIB_SELECT_MAX] = {0};
    oq_calib_source *src = NULL;
    oq_pipeline *pl = NULL;
    oq_model *fm = NULL, *qm = NULL;
    oq_verify_float_cache *fc = NULL;
    oq_job_score sc[OQ_CALIB_SELECT_MAX];
    uint8_t *buf = NULL;
    size_t len = 0;
    oq_status st = OQ_OK;
    memset(sc, 0, sizeof sc);
    if (!list)
        return OQ_OK;
    for (char *p = list, *e; *p && r->n < OQ_CALIB_SELECT_MAX; p = e ? e + 1 : p + strlen(p)) {
        e = strchr(p, ',');
        if (e)
            *e = 0;
        snprintf(r->names[r->n], sizeof r->names[r->n], "%s", p);
        all[r->n] = take_prefixed(m, OQ_CALIB_SELECT_ALL_PREFIX, p);
        fit[r->n] = take_prefixed(m, OQ_CALIB_SELECT_FIT_PREFIX, p);
        if (!all[r->n] || !fit[r->n]) {
            st = oq_diag_error(d, OQ_ERR_INTERNAL, "calibration choice: candidate \"%s\" has no tables", p);
            goto done;
        }
        r->worst_db[r->n] = NAN;
        r->n++;
        if (!e)
            break;
    }
    if (r->n == 0)
        goto done;
    if ((st = oq_job_open_source(a, false, &src, d)) != OQ_OK)
        goto done;
    uint64_t wb = oq_job_weight_bytes(m), held[OQ_SELECT_HELD_OUT_CAP];
    size_t nh = oq_job_held_out(oq_calib_source_count(src), wb, held);
    r->held_out = nh;
    size_t best = 0;
    if (wb > OQ_SELECT_WEIGHT_BYTES_MAX && nh >= 2 && r->n > 1) {
        /* each candidate is judged on a copy: two more copies of a model this size would
         * not fit memory (or a serialized buffer) */
        r->too_big = true;
        nh = 0;
    }
    if (nh >= 2 && r->n > 1) {
        /* the float model as calibration left it (smoothed), and one copy per candidate */
        if ((st = oq_model_write_buffer(m, &buf, &len, d)) != OQ_OK)
            goto done;
        if ((st = oq_model_read_buffer(buf, len, a->in, NULL, &fm, d)) != OQ_OK)
            goto done;
        size_t err_pos = 0;
        if ((st = oq_pipeline_parse(reg, rest, &pl, &err_pos, d)) != OQ_OK)
            goto done;
        if (!(fc = oq_verify_float_cache_new())) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < r->n; i++) {
            if ((st = oq_model_read_buffer(buf, len, a->in, NULL, &qm, d)) != OQ_OK)
                goto done;
            oq_model_set_metadata(qm, OQ_CALIB_METADATA_KEY, fit[i]);
            /* a candidate's notes and warnings are the chosen one's again when the job runs
             * its pipeline: kept only when it fails */
            oq_pipeline_run_options ro = {0};
            oq_diag cd;
            oq_diag_init(&cd);
            st = oq_pipeline_run(pl, qm, &ro, &cd);
            if (st != OQ_OK)
                oq_diag_append(d, &cd);
            oq_diag_free(&cd);
            if (st != OQ_OK)
                goto done;
            if ((st = oq_job_judge(fm, qm, src, held, nh, fc, a, &sc[i], d)) != OQ_OK)
                goto done;
            r->worst_db[i] = sc[i].db;
            snprintf(r->worst_part[i], sizeof r->worst_part[i], "%s", sc[i].part);
            oq_model_free(qm);
            qm = NULL;
        }
        /* the first candidate unless another is better on these samples by more than
         * their noise: OQ_JUDGE_Z standard errors of the difference (and the margin) */
        for (size_t i = 1; i < r->n; i++) {
            r->clear[i] = oq_job_clearly_better(&sc[i], &sc[0], &r->se_db[i]);
            if (r->clear[i] && (best == 0 || r->worst_db[i] > r->worst_db[best]))
                best = i;
        }
    } else {
        r->held_out = 0; /* too few samples to hold any out: the first candidate */
    }
    r->chosen = best;
    oq_model_set_metadata(m, OQ_CALIB_METADATA_KEY, all[best]);
done:
    r->seconds = oq_job_now_s() - t0;
    for (size_t i = 0; i < OQ_CALIB_SELECT_MAX; i++) {
        free(all[i]);
        free(fit[i]);
        oq_job_score_free(&sc[i]);
    }
    free(list);
    free(buf);
    oq_verify_float_cache_free(fc);
    oq_model_free(qm);
    oq_model_free(fm);
    oq_pipeline_free(pl);
    oq_calib_source_free(src);
    return st;
}
