/* The quantize job's --json summary (docs/quantize.md) and the log of the passes it ran. */
#include "job/job-impl.h"

#include <math.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "onnxq/calib.h"

char *oq_job_take_metadata(oq_model *m, const char *key)
{
    for (size_t i = 0; i < m->metadata.count; i++) {
        oq_kv *kv = &m->metadata.items[i];
        if (!kv->key || strcmp(kv->key, key) != 0)
            continue;
        char *v = strdup(kv->value ? kv->value : "");
        memmove(kv, kv + 1, (m->metadata.count - i - 1) * sizeof(oq_kv));
        m->metadata.count--;
        return v;
    }
    return NULL;
}

void oq_job_pass_log_after_pass(const oq_pass_event *ev, oq_model *m, void *user)
{
    oq_job_pass_log *log = user;
    (void)m;
    if (log->n >= OQ_JOB_PASS_LOG_MAX)
        return;
    snprintf(log->names[log->n], sizeof log->names[log->n], "%s", ev->pass->name);
    log->results[log->n] = *ev->result;
    log->secs[log->n] = ev->seconds;
    log->iterations[log->n] = ev->iterations;
    log->n++;
}

void oq_job_report_passes(json_writer *w, const oq_job_pass_log *log)
{
    double total = 0;
    json_key(w, "passes");
    json_begin_array(w);
    for (size_t i = 0; i < log->n; i++) {
        const oq_pass_result *r = &log->results[i];
        total += log->secs[i];
        json_begin_object(w);
        json_kv_string(w, "name", log->names[i]);
        json_kv_bool(w, "changed", r->changed);
        json_kv_int(w, "iterations", log->iterations[i]);
        json_kv_double(w, "seconds", log->secs[i]);
        json_key(w, "stats");
        json_begin_object(w);
        for (size_t k = 0; k < r->n_stats; k++)
            json_kv_int(w, r->stats[k].name, r->stats[k].value);
        json_end_object(w);
        json_end_object(w);
    }
    json_end_array(w);
    json_kv_double(w, "seconds", total);
}

void oq_job_qreport_after_pass(const oq_pass_event *ev, oq_model *m, void *user)
{
    oq_job_qreport *r = user;
    oq_job_pass_log_after_pass(ev, m, &r->passes);
    if (ev->status != OQ_OK || strcmp(ev->pass->name, "calibrate") != 0)
        return;
    for (size_t i = 0; i < m->metadata.count; i++) {
        const oq_kv *kv = &m->metadata.items[i];
        if (kv->key && kv->value && strcmp(kv->key, OQ_CALIB_METADATA_KEY) == 0) {
            free(r->calibration);
            r->calibration = strdup(kv->value);
        }
    }
}

void oq_job_qreport_print_calibration(const oq_job_qreport *r, const jlog *lg)
{
    oq_calib_table t;
    if (!r->calibration || oq_calib_table_from_json(r->calibration, &t, NULL) != OQ_OK)
        return;
    if (t.method == OQ_CALIB_AUTO) {
        size_t n[OQ_AUTO_CANDIDATES] = {0}, in_sample = 0;
        for (size_t i = 0; i < t.count; i++) {
            int c = oq_auto_candidate_from_name(t.items[i].choice);
            if (c >= 0)
                n[c]++;
            in_sample += c >= 0 && !t.items[i].held_out;
        }
        char *line = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&line, &len);
        if (f) {
            fprintf(f, "onnxq quantize: calibration auto: %zu tensors, candidates scored on %llu of %llu samples held out:",
                    t.count, (unsigned long long)t.held_out_samples, (unsigned long long)t.samples);
            for (int c = 0; c < OQ_AUTO_CANDIDATES; c++)
                fprintf(f, "%s %s %zu", c ? "," : "", oq_auto_candidate_name(c), n[c]);
            if (in_sample)
                fprintf(f, " (%zu chosen in-sample)", in_sample);
            fclose(f);
            if (line)
                say(lg, "%s", line);
            free(line);
        }
    }
    oq_calib_table_free(&t);
}

void oq_job_qreport_print_select(const oq_job_select_result *r, const jlog *lg)
{
    char *line = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&line, &len);
    if (!f)
        return;
    if (r->too_big) {
        fprintf(f, "onnxq quantize: calibration: %s (the model's weights are over %llu MiB: the %zu methods are not "
                "judged on copies of it; --method chooses one)", r->names[r->chosen],
                (unsigned long long)(OQ_SELECT_WEIGHT_BYTES_MAX >> 20), r->n);
    } else if (r->held_out == 0) {
        fprintf(f, "onnxq quantize: calibration: %s (too few samples to hold out the %d needed to choose among %zu "
                "methods)", r->names[r->chosen], 2 * OQ_CALIB_HOLDOUT_EVERY, r->n);
    } else {
        const char *part = r->worst_part[r->chosen];
        fprintf(f, "onnxq quantize: calibration: %s, chosen on %llu held-out samples by the worst output part's mean SQNR "
                "(%s",
                r->names[r->chosen], (unsigned long long)r->held_out, part);
        bool higher = false;
        for (size_t i = 0; i < r->n; i++) {
            fprintf(f, "%s %s %.2f dB", i ? "," : ":", r->names[i], r->worst_db[i]);
            if (i && r->se_db[i] > 0)
                fprintf(f, " (+-%.2f)", r->se_db[i]);
            higher |= i && r->worst_db[i] > r->worst_db[0];
        }
        fprintf(f, ")");
        if (r->chosen == 0 && higher)
            fprintf(f, "; none better than %s by over %.0f standard errors (+-)", r->names[0], OQ_JUDGE_Z);
        fprintf(f, "; %.1f s", r->seconds);
    }
    fclose(f);
    if (line)
        say(lg, "%s", line);
    free(line);
}

/* "kept", "held_out_samples", "held_out_worst_db_with", "..._without", "held_out_worst_part",
 * "held_out_se_db" */
static void write_check(json_writer *w, const oq_job_bc_guard *g)
{
    json_kv_bool(w, "kept", g->kept);
    json_kv_int(w, "held_out_samples", (int64_t)g->held_out); /* 0: not checked */
    json_key(w, "held_out_worst_db_with");
    if (g->held_out && isfinite(g->db_with))
        json_double(w, g->db_with);
    else
        json_null(w);
    json_key(w, "held_out_worst_db_without");
    if (g->held_out && isfinite(g->db_without))
        json_double(w, g->db_without);
    else
        json_null(w);
    json_kv_string(w, "held_out_worst_part", g->held_out ? g->part_with : NULL);
    json_key(w, "held_out_se_db"); /* the difference's standard error; null: not estimated */
    if (g->held_out && g->se_db > 0)
        json_double(w, g->se_db);
    else
        json_null(w);
}

static void write_bias(json_writer *w, const oq_biascorr_result *b, const oq_job_bc_guard *g, double seconds)
{
    json_begin_object(w);
    json_kv_int(w, "layers", (int64_t)b->layers);
    json_kv_int(w, "changed", (int64_t)b->changed);
    json_kv_int(w, "skipped", (int64_t)b->skipped);
    json_kv_int(w, "samples", (int64_t)b->samples);
    json_kv_double(w, "mean_abs_steps", b->mean_abs_steps);
    json_kv_double(w, "max_relative_shift", b->max_rel_shift);
    json_kv_string(w, "max_relative_shift_node", b->max_rel_node);
    write_check(w, g);
    json_kv_double(w, "seconds", seconds);
    json_end_object(w);
}

static void write_select(json_writer *w, const oq_job_select_result *r)
{
    json_key(w, "calibration_choice"); /* null: --method select did not run */
    if (!r->n) {
        json_null(w);
        return;
    }
    json_begin_object(w);
    json_kv_string(w, "chosen", r->names[r->chosen]);
    json_kv_int(w, "held_out_samples", (int64_t)r->held_out);
    json_kv_bool(w, "model_too_large", r->too_big);
    json_key(w, "candidates");
    json_begin_array(w);
    for (size_t i = 0; i < r->n; i++) {
        json_begin_object(w);
        json_kv_string(w, "name", r->names[i]);
        json_key(w, "worst_sqnr_db"); /* null: not judged */
        if (r->held_out)
            json_double(w, r->worst_db[i]);
        else
            json_null(w);
        json_kv_string(w, "worst_part", r->held_out ? r->worst_part[i] : NULL);
        if (i) { /* against the first candidate: the difference's standard error, and whether it is clear */
            json_key(w, "se_vs_first_db");
            if (r->held_out && r->se_db[i] > 0)
                json_double(w, r->se_db[i]);
            else
                json_null(w);
            json_kv_bool(w, "clearly_better", r->clear[i]);
        }
        json_end_object(w);
    }
    json_end_array(w);
    json_kv_double(w, "seconds", r->seconds);
    json_end_object(w);
}

/* "calibration": the method, the samples and every tensor's range and what chose it */
static void write_calibration(json_writer *w, const char *json)
{
    oq_calib_table t;
    json_key(w, "calibration");
    if (!json || oq_calib_table_from_json(json, &t, NULL) != OQ_OK) {
        json_null(w);
        return;
    }
    json_begin_object(w);
    json_kv_string(w, "method", oq_calib_method_name(t.method));
    json_kv_int(w, "samples", (int64_t)t.samples);
    json_kv_int(w, "held_out_samples", (int64_t)t.held_out_samples);
    json_key(w, "tensors");
    json_begin_array(w);
    for (size_t i = 0; i < t.count; i++) {
        const oq_calib_entry *e = &t.items[i];
        json_begin_object(w);
        json_kv_string(w, "tensor", e->name);
        json_kv_string(w, "method", e->choice ? e->choice : oq_calib_method_name(t.method));
        if (e->choice)
            json_kv_bool(w, "held_out", e->held_out);
        json_kv_double(w, "min", e->min);
        json_kv_double(w, "max", e->max);
        json_kv_double(w, "lo", e->lo);
        json_kv_double(w, "hi", e->hi);
        json_kv_string(w, "after_activation", e->act); /* null: the method's range as is */
        json_end_object(w);
    }
    json_end_array(w);
    json_end_object(w);
    oq_calib_table_free(&t);
}

/* A parsed JSON value written back (the pass's record, embedded in the report). */
static void write_value(json_writer *w, const cJSON *j)
{
    if (cJSON_IsBool(j)) {
        json_bool(w, cJSON_IsTrue(j));
    } else if (cJSON_IsNumber(j)) {
        json_double(w, j->valuedouble);
    } else if (cJSON_IsString(j)) {
        json_string(w, j->valuestring);
    } else if (cJSON_IsArray(j)) {
        json_begin_array(w);
        for (const cJSON *e = j->child; e; e = e->next)
            write_value(w, e);
        json_end_array(w);
    } else if (cJSON_IsObject(j)) {
        json_begin_object(w);
        for (const cJSON *e = j->child; e; e = e->next) {
            json_key(w, e->string);
            write_value(w, e);
        }
        json_end_object(w);
    } else {
        json_null(w);
    }
}

char *oq_job_qreport_write(const oq_job_qreport *r, const char *in, const char *out, oq_status st,
                           void (*config)(json_writer *w, const void *cfg), const void *cfg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *ms = open_memstream(&text, &len);
    if (!ms)
        return NULL;
    json_writer jw;
    json_writer *w = &jw;
    json_init(w, ms, 2);
    json_begin_object(w);
    json_kv_int(w, "version", 1);
    json_kv_string(w, "input", in);
    json_kv_string(w, "output", st == OQ_OK ? out : NULL);
    json_kv_string(w, "status", oq_status_name(st));
    json_key(w, "config");
    config(w, cfg);
    oq_job_report_passes(w, &r->passes);
    json_key(w, "smooth_quant"); /* null: not run */
    cJSON *sq = NULL;
    if (r->smooth_quant && oq_json_parse(r->smooth_quant, strlen(r->smooth_quant), "smooth-quant record", &sq, NULL) == OQ_OK)
        write_value(w, sq);
    else
        json_null(w);
    cJSON_Delete(sq);
    write_calibration(w, r->calibration);
    write_select(w, &r->select);
    json_key(w, "bias_correction"); /* null: not run */
    if (r->bias_correction)
        write_bias(w, &r->bias, &r->bias_check, r->bias_seconds);
    else
        json_null(w);
    json_key(w, "weight_rounding"); /* null: not run */
    if (r->weight_rounding) {
        json_begin_object(w);
        json_kv_string(w, "method", "gptq");
        json_kv_int(w, "layers", (int64_t)r->wround.layers);
        json_kv_int(w, "skipped", (int64_t)r->wround.skipped);
        json_kv_int(w, "weights", r->wround.values);
        json_kv_int(w, "changed", r->wround.changed);
        json_kv_int(w, "samples", (int64_t)r->wround.samples);
        json_kv_int(w, "passes", (int64_t)r->wround.passes);
        json_kv_double(w, "mean_layer_gain_db", r->wround.mean_gain_db);
        json_kv_double(w, "least_layer_gain_db", r->wround.worst_gain_db);
        json_kv_string(w, "least_layer_gain_node", r->wround.worst_node);
        write_check(w, &r->wround_check);
        json_kv_double(w, "seconds", r->wround_seconds);
        json_end_object(w);
    } else {
        json_null(w);
    }
    json_key(w, "fallback");
    if (r->fallback) {
        json_begin_object(w);
        json_kv_bool(w, "target_met", r->fallback_met);
        json_kv_int(w, "bias_corrections_again", (int64_t)r->bias_again); /* one after each step */
        json_key(w, "last_bias_correction_again"); /* null: none (no step, or bias correction off) */
        if (r->bias_again)
            write_bias(w, &r->bias2, &r->bias2_check, r->bias2_seconds);
        else
            json_null(w);
        json_end_object(w);
    } else {
        json_null(w);
    }
    /* every note and warning, also those the terminal showed as one line per kind */
    json_key(w, "diagnostics");
    json_begin_array(w);
    for (size_t i = 0; r->diag && i < r->diag->count; i++) {
        const oq_diag_entry *e = &r->diag->entries[i];
        json_begin_object(w);
        json_kv_string(w, "severity", e->severity == OQ_SEV_ERROR     ? "error"
                                      : e->severity == OQ_SEV_WARNING ? "warning"
                                                                      : "note");
        json_kv_string(w, "node", e->node);
        json_kv_string(w, "op", e->op);
        json_kv_string(w, "message", e->message);
        json_end_object(w);
    }
    json_end_array(w);
    json_end_object(w);
    int jr = json_finish(w);
    fclose(ms);
    if (jr != 0) {
        free(text);
        return NULL;
    }
    return text;
}
