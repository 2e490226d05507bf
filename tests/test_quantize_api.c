/* The quantize job's C API (include/onnxq/quantize.h) and the fed sample source
 * (oq_calib_source_feed, include/onnxq/calib.h): samples read back as fed, errors naming
 * the input and the sample, a job on fed samples against the same job on the folder they
 * came from (every byte equal but the config's record of the data source), option errors
 * as the command's line, and oq_stop_request. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnxq/onnxq.h"
#include "onnxq/quantize.h"
#include "onnxq/target.h"
#include "onnxq/tensor_io.h"

#define MODEL ONNXQ_SOURCE_DIR "/models/shapes_cnn.onnx"
#define CALIB ONNXQ_SOURCE_DIR "/models/calib"

static char *first_error(const oq_diag *d)
{
    static char line[1024];
    const oq_diag_entry *e = oq_diag_first_error(d);
    line[0] = 0;
    if (e)
        oq_diag_format(e, line, sizeof line);
    return line;
}

/* The bundled model's 32 samples, fed one by one from their .npy files. */
static oq_calib_source *feed_calib(oq_diag *d)
{
    oq_calib_source *src = NULL;
    cr_assert_eq(oq_calib_source_feed(&src, d), OQ_OK);
    for (int k = 0; k < 32; k++) {
        char path[512];
        snprintf(path, sizeof path, CALIB "/sample_%03d/image.npy", k);
        oq_rt_tensor t;
        memset(&t, 0, sizeof t);
        cr_assert_eq(oq_tensor_file_read(path, &t, NULL, d), OQ_OK, "%s", path);
        const char *names[1] = {"image"};
        cr_assert_eq(oq_calib_source_feed_add(src, names, &t, 1, d), OQ_OK, "%s", first_error(d));
        oq_rt_tensor_release(&t);
    }
    return src;
}

Test(feed, samples_read_back_as_fed)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_calib_source *src = NULL;
    cr_assert_eq(oq_calib_source_feed(&src, &d), OQ_OK);
    enum { N = 3 * 24 * 24 };
    static float buf[N], want[3][N];
    int64_t dims[4] = {1, 3, 24, 24};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < N; i++)
            want[k][i] = buf[i] = (float)(k * 1000 + i) * 0.001f;
        oq_rt_tensor t;
        oq_rt_tensor_borrow(&t, OQ_DTYPE_FLOAT, dims, 4, buf);
        const char *names[1] = {"image"};
        cr_assert_eq(oq_calib_source_feed_add(src, names, &t, 1, &d), OQ_OK);
        buf[0] = -1; /* the caller's buffer changes after the call: the sample does not */
    }
    oq_rt_tensor t;
    oq_rt_tensor_borrow(&t, OQ_DTYPE_FLOAT, dims, 4, buf);
    const char *other[1] = {"x"};
    cr_assert_eq(oq_calib_source_feed_add(src, other, &t, 1, &d), OQ_OK);
    cr_assert_eq(oq_calib_source_count(src), 4);
    oq_model *m = NULL;
    cr_assert_eq(oq_model_read(MODEL, NULL, &m, &d), OQ_OK);
    oq_plan_options po = oq_plan_options_default();
    oq_plan *p = NULL;
    cr_assert_eq(oq_plan_compile(m, &po, &p, &d), OQ_OK);
    char label[64];
    for (int k = 2; k >= 0; k--) { /* in any order, as often as asked */
        oq_rt_tensor in;
        memset(&in, 0, sizeof in);
        cr_assert_eq(oq_calib_source_sample(src, p, (uint64_t)k, &in, 1, label, sizeof label, &d), OQ_OK);
        cr_assert_eq(in.dtype, OQ_DTYPE_FLOAT);
        cr_assert_eq(in.rank, 4);
        cr_assert_eq(in.dims[3], 24);
        cr_assert(memcmp(in.data, want[k], sizeof want[k]) == 0, "sample %d read back differs", k);
        char lw[16];
        snprintf(lw, sizeof lw, "#%d", k + 1);
        cr_assert_str_eq(label, lw);
        oq_rt_tensor_release(&in);
    }
    /* the plan's input is "image": the fourth sample has "x" */
    oq_rt_tensor in;
    memset(&in, 0, sizeof in);
    cr_assert_eq(oq_calib_source_sample(src, p, 3, &in, 1, label, sizeof label, &d), OQ_ERR_USAGE);
    cr_assert_str_eq(first_error(&d), "fed sample 4: no array for input \"image\" (the sample has \"x\")");
    oq_plan_free(p);
    oq_model_free(m);
    /* another source over the same samples, by number (what the passes' feed=ID does) */
    oq_calib_source *again = NULL;
    oq_diag_clear(&d);
    cr_assert_eq(oq_calib_source_from_feed_id(oq_calib_source_feed_id(src), &again, &d), OQ_OK);
    cr_assert_eq(oq_calib_source_count(again), 4);
    oq_calib_source_free(src); /* the samples stay while `again` reads them */
    oq_calib_source_limit(again, 2);
    cr_assert_eq(oq_calib_source_count(again), 2);
    oq_calib_source_free(again);
    cr_assert_eq(oq_calib_source_from_feed_id(999, &again, &d), OQ_ERR_USAGE);
    oq_diag_free(&d);
}

Test(feed, bad_samples_are_refused)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_calib_source *src = NULL;
    cr_assert_eq(oq_calib_source_feed(&src, &d), OQ_OK);
    float a[2] = {1, 2};
    int64_t dims[1] = {2};
    oq_rt_tensor t[2];
    oq_rt_tensor_borrow(&t[0], OQ_DTYPE_FLOAT, dims, 1, a);
    oq_rt_tensor_borrow(&t[1], OQ_DTYPE_FLOAT, dims, 1, a);
    const char *twice[2] = {"x", "x"};
    cr_assert_eq(oq_calib_source_feed_add(src, twice, t, 2, &d), OQ_ERR_USAGE);
    cr_assert_str_eq(first_error(&d), "fed sample 1: input \"x\" given twice");
    oq_diag_clear(&d);
    const char *empty[1] = {""};
    cr_assert_eq(oq_calib_source_feed_add(src, empty, t, 1, &d), OQ_ERR_USAGE);
    oq_diag_clear(&d);
    t[0].nbytes = 4; /* not 2 floats */
    const char *one[1] = {"x"};
    cr_assert_eq(oq_calib_source_feed_add(src, one, t, 1, &d), OQ_ERR_USAGE);
    cr_assert_eq(oq_calib_source_count(src), 0);
    oq_calib_source_free(src);
    oq_diag_free(&d);
}

/* The model's bytes without its "onnxq.quantize.config" entry, and that entry. */
static uint8_t *model_without_config(const char *path, size_t *len, char **config)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_model *m = NULL;
    cr_assert_eq(oq_model_read(path, NULL, &m, &d), OQ_OK);
    *config = NULL;
    for (size_t i = 0; i < m->metadata.count; i++)
        if (strcmp(m->metadata.items[i].key, "onnxq.quantize.config") == 0) {
            *config = strdup(m->metadata.items[i].value);
            memmove(&m->metadata.items[i], &m->metadata.items[i + 1],
                    (m->metadata.count - i - 1) * sizeof m->metadata.items[0]);
            m->metadata.count--;
            break;
        }
    uint8_t *buf = NULL;
    cr_assert_eq(oq_model_write_buffer(m, &buf, len, &d), OQ_OK);
    oq_model_free(m);
    oq_diag_free(&d);
    return buf;
}

Test(quantize, fed_samples_equal_the_folder)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_quantize_options o;
    oq_quantize_options_default(&o);
    o.calib = CALIB;
    oq_quantize_result r;
    const char *out_dir = ONNXQ_BINARY_DIR "/test_quantize_api.dir.onnx";
    const char *out_fed = ONNXQ_BINARY_DIR "/test_quantize_api.fed.onnx";
    cr_assert_eq(oq_quantize(MODEL, out_dir, &o, &r, &d), OQ_OK, "%s", first_error(&d));
    cr_assert_eq(r.exit_code, 0);
    cr_assert(strstr(r.summary, "\"status\": \"ok\"") != NULL);
    cr_assert(strstr(r.pipeline, "calibrate{data=") != NULL);
    oq_quantize_result_free(&r);

    oq_calib_source *src = feed_calib(&d);
    o.calib = NULL;
    o.source = src;
    cr_assert_eq(oq_quantize(MODEL, out_fed, &o, &r, &d), OQ_OK, "%s", first_error(&d));
    cr_assert(strstr(r.pipeline, "calibrate{feed=") != NULL, "%s", r.pipeline);
    oq_quantize_result_free(&r);
    oq_calib_source_free(src);

    size_t la, lb;
    char *ca, *cb;
    uint8_t *a = model_without_config(out_dir, &la, &ca), *b = model_without_config(out_fed, &lb, &cb);
    cr_assert_eq(la, lb);
    cr_assert(memcmp(a, b, la) == 0, "the quantized models differ beyond the config record");
    cr_assert(strstr(ca, "\"calib\":\"" CALIB "\"") != NULL);
    cr_assert(strstr(cb, "\"calib\":null") != NULL);
    free(a);
    free(b);
    free(ca);
    free(cb);
    oq_quantize_options_free(&o);
    oq_diag_free(&d);
}

Test(quantize, option_errors_read_as_the_command)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_quantize_options o;
    oq_quantize_options_default(&o);
    o.calib = CALIB;
    o.target = "bogus";
    oq_quantize_result r;
    cr_assert_eq(oq_quantize(MODEL, "/nonexistent/x.onnx", &o, &r, &d), OQ_ERR_USAGE);
    char want[512];
    snprintf(want, sizeof want, "onnxq quantize: --target \"bogus\": unknown target (one of: %s)", oq_target_names());
    cr_assert_str_eq(first_error(&d), want);
    oq_diag_clear(&d);
    o.target = "ort-x86";
    o.calib = NULL; /* no data */
    cr_assert_eq(oq_quantize(MODEL, "/nonexistent/x.onnx", &o, &r, &d), OQ_ERR_USAGE);
    cr_assert_str_eq(first_error(&d),
                     "onnxq quantize: no calibration data: give --calib DIR, --calib-images DIR or --calib-random N");
    oq_diag_clear(&d);
    /* options as JSON: the caller's keys (target_sqnr) accepted, a config file's refused */
    const char *js = "{\"act_dtype\":\"int8\",\"target_sqnr\":30}";
    cr_assert_eq(oq_quantize_options_load(&o, js, strlen(js), "options", false, &d), OQ_OK);
    cr_assert(o.fallback && o.target_sqnr_db == 30);
    cr_assert_str_eq(o.act_dtype, "int8");
    cr_assert_eq(oq_quantize_options_load(&o, js, strlen(js), "cfg.json", true, &d), OQ_ERR_USAGE);
    cr_assert_str_eq(first_error(&d), "onnxq quantize: cfg.json: unknown key \"target_sqnr\"");
    oq_quantize_options_free(&o);
    oq_diag_free(&d);
}

Test(quantize, stop_request)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_quantize_options o;
    oq_quantize_options_default(&o);
    o.calib = CALIB;
    oq_stop_request();
    cr_assert_eq(oq_quantize(MODEL, ONNXQ_BINARY_DIR "/test_quantize_api.stop.onnx", &o, NULL, &d), OQ_ERR_STOPPED);
    cr_assert_str_eq(oq_diag_first_error(&d)->message, "stopped");
    oq_stop_clear();
    oq_diag_free(&d);
}
