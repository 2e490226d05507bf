/* The quantize job's default calibration, --method select: which range method (a
 * percentile, min/max, MSE) suits this model is judged where it matters, on the model's
 * outputs, with samples calibration did not fit. calibrate{method=select} observed every
 * fourth sample apart and left each candidate's ranges twice in the model: from the other
 * samples (the fit share) and from all of them. Here each candidate's fit ranges go through
 * the rest of the pipeline on a copy of the model, the copy runs the held-out samples with
 * the target's arithmetic, and verify's worst output part (an output, or one input of a
 * Concat that makes an output) decides. The winner's ranges over every sample are kept.
 * docs/calibration.md "select". */
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

oq_status oq_job_judge(oq_model *fm, oq_model *qm, oq_calib_source *src, const uint64_t *held, size_t nh,
                       oq_verify_float_cache *fc, const oq_quantize_fallback_args *a, double *db, char *part,
                       size_t part_size, oq_diag *d)
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
    oq_status st = oq_verify_new(fm, qm, &vo, &v, d);
    if (st != OQ_OK)
        return st;
    const oq_plan *fp = oq_verify_float_plan(v);
    size_t n_in = oq_plan_n_inputs(fp);
    in = calloc(n_in ? n_in : 1, sizeof *in);
    if (!in) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "calibration choice: out of memory");
        goto done;
    }
    for (size_t k = 0; k < nh && st == OQ_OK; k++) {
        char label[512];
        st = oq_calib_source_sample(src, fp, held[k], in, n_in, label, sizeof label, d);
        if (st == OQ_OK)
            st = oq_verify_sample(v, in, n_in, label, d);
        for (size_t i = 0; i < n_in; i++)
            oq_rt_tensor_release(&in[i]);
    }
    if (st == OQ_OK) {
        size_t wo, ws;
        *db = oq_verify_worst(v, &wo, &ws);
        part[0] = 0;
        if (wo != SIZE_MAX)
            oq_verify_slice_label(oq_verify_output_at(v, wo), ws, part, part_size);
        if (isnan(*db))
            *db = -INFINITY; /* nothing comparable: the worst */
    }
done:
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
    uint8_t *buf = NULL;
    size_t len = 0;
    oq_status st = OQ_OK;
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
            oq_pipeline_run_options ro = {0};
            if ((st = oq_pipeline_run(pl, qm, &ro, d)) != OQ_OK)
                goto done;
            if ((st = oq_job_judge(fm, qm, src, held, nh, fc, a, &r->worst_db[i], r->worst_part[i],
                            sizeof r->worst_part[i], d)) != OQ_OK)
                goto done;
            oq_model_free(qm);
            qm = NULL;
            if (i > 0 && r->worst_db[i] > r->worst_db[best] + OQ_SELECT_MARGIN_DB)
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
