/* The executor gives the same outputs before and after each pass: on the three
 * PaddleOCR models (det at 1x3x160x160, rec at 1x3x48x160, cls at 1x3x48x192, one
 * fixed pseudo-random input) and on every ONNX backend test model the executor runs
 * (inputs from test_data_set_0). Bit for bit for every pass, the executor-backed
 * fold-constants included (it runs the very kernels the plan runs); within 1e-5
 * relative (plus 1e-6 absolute) where fold-batchnorm, fold-linear and fuse-activations
 * reassociate float math (HardSwish computes x * (x (1/6) + 1/2), the chain it replaces
 * x * (x + 3) / 6).
 * Skipped (with a warning) when the models or the data are not installed. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "onnxq/onnxq.h"
#include "onnxq/pass.h"
#include "onnxq/tensor_io.h"

#define ASSETS ONNXQ_CACHE_DIR "/ocr/package/assets"
#define DATA "/usr/share/libonnx-testdata/data"
#define MAX_IO 16

typedef struct outputs {
    size_t n;
    oq_rt_tensor t[MAX_IO];
} outputs;

static void outputs_free(outputs *o)
{
    for (size_t i = 0; i < o->n; i++)
        oq_rt_tensor_release(&o->t[i]);
    o->n = 0;
}

static void print_diag(const oq_diag *d)
{
    char buf[1024];
    for (size_t i = 0; i < d->count; i++) {
        oq_diag_format(&d->entries[i], buf, sizeof buf);
        cr_log_info("%s", buf);
    }
}

/* Compile and run; OQ_OK and every output in *o, or the failing status. */
static oq_status run_exec(oq_model *m, const oq_rt_tensor *in, size_t n_in, outputs *o,
                          oq_diag *d)
{
    oq_plan *p = NULL;
    oq_plan_options po = oq_plan_options_default();
    po.threads = 1;
    memset(o, 0, sizeof *o);
    oq_status st = oq_plan_compile(m, &po, &p, d);
    if (st != OQ_OK)
        return st;
    if (oq_plan_n_outputs(p) > MAX_IO || oq_plan_n_inputs(p) != n_in) {
        oq_plan_free(p);
        return OQ_ERR_UNSUPPORTED;
    }
    o->n = oq_plan_n_outputs(p);
    st = oq_plan_run(p, in, n_in, o->t, o->n, d);
    if (st != OQ_OK)
        o->n = 0;
    oq_plan_free(p);
    return st;
}

static bool is_float(int32_t dt)
{
    return dt == OQ_DTYPE_FLOAT || dt == OQ_DTYPE_DOUBLE;
}

/* Compare; returns a message (static buffer) on the first disagreement, else NULL. */
static const char *compare(const outputs *a, const outputs *b, double tol, double *worst)
{
    static char msg[256];
    if (a->n != b->n) {
        snprintf(msg, sizeof msg, "%zu outputs before, %zu after", a->n, b->n);
        return msg;
    }
    for (size_t i = 0; i < a->n; i++) {
        const oq_rt_tensor *x = &a->t[i], *y = &b->t[i];
        char s1[128], s2[128];
        bool same = x->dtype == y->dtype && x->rank == y->rank && x->nbytes == y->nbytes;
        for (size_t j = 0; same && j < x->rank; j++)
            same = x->dims[j] == y->dims[j];
        if (!same) {
            snprintf(msg, sizeof msg, "output %zu: %s before, %s after", i,
                     oq_rt_tensor_describe(x, s1, sizeof s1), oq_rt_tensor_describe(y, s2, sizeof s2));
            return msg;
        }
        if (x->nbytes == 0 || memcmp(x->data, y->data, (size_t)x->nbytes) == 0)
            continue;
        if (tol == 0 || !is_float(x->dtype)) {
            snprintf(msg, sizeof msg, "output %zu (%s): not bit-identical", i,
                     oq_rt_tensor_describe(x, s1, sizeof s1));
            return msg;
        }
        int64_t n = oq_rt_tensor_numel(x);
        for (int64_t k = 0; k < n; k++) {
            double u = x->dtype == OQ_DTYPE_FLOAT ? ((const float *)x->data)[k] : ((const double *)x->data)[k];
            double v = y->dtype == OQ_DTYPE_FLOAT ? ((const float *)y->data)[k] : ((const double *)y->data)[k];
            if (isnan(u) && isnan(v))
                continue;
            double diff = fabs(u - v);
            if (diff > *worst)
                *worst = diff;
            if (!(diff <= tol * fabs(u) + 1e-6)) {
                snprintf(msg, sizeof msg, "output %zu element %lld: %.9g before, %.9g after", i,
                         (long long)k, u, v);
                return msg;
            }
        }
    }
    return NULL;
}

static oq_status apply(oq_registry *reg, const char *pipeline, oq_model *m, oq_pass_result *r,
                       oq_diag *d)
{
    return oq_pass_run_simple(reg, pipeline, m, r, d);
}

static int64_t stat_of(const oq_pass_result *r, const char *name)
{
    for (size_t i = 0; i < r->n_stats; i++)
        if (strcmp(r->stats[i].name, name) == 0)
            return r->stats[i].value;
    return 0;
}

/* ------------------------------------------------------------------ PaddleOCR ---- */

typedef struct pass_case {
    const char *pipeline;
    double tol;
} pass_case;

#define FULL "constant-to-initializer,fold-constants,eliminate-identity,eliminate-dead," \
             "dedupe-initializers,fold-batchnorm,infer-shapes"

#define PREP "constant-to-initializer,upgrade-opset{to=14},fold-batchnorm,fuse-activations," \
             "fold-linear,eliminate-dead"

static const pass_case ocr_passes[] = {
    {"constant-to-initializer", 0},
    {"fold-constants", 0},
    {"constant-to-initializer,fold-constants{max-bytes=0}", 0},
    {"eliminate-identity", 0},
    {"eliminate-dead", 0},
    {"dedupe-initializers", 0},
    {"fold-batchnorm", 1e-5},
    {"infer-shapes", 0},
    {FULL, 1e-5},
    {"upgrade-opset{to=13}", 0},
    {"upgrade-opset{to=21}", 0},
    {"fuse-activations", 1e-5},
    {"constant-to-initializer,fold-linear", 1e-5},
    {PREP, 1e-5},
};

static const struct {
    const char *file;
    int64_t dims[4];
} ocr_models[] = {
    {"ch_PP-OCRv4_det_infer.onnx", {1, 3, 160, 160}},
    {"ch_PP-OCRv4_rec_infer.onnx", {1, 3, 48, 160}},
    {"ch_ppocr_mobile_v2.0_cls_infer.onnx", {1, 3, 48, 192}},
};

Test(equiv, paddleocr_outputs_agree_before_and_after_each_pass, .timeout = 900)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", ASSETS, ocr_models[0].file);
    if (access(path, R_OK) != 0) {
        cr_log_warn("PaddleOCR models not found in %s: skipped", ASSETS);
        return;
    }
    oq_registry *reg = NULL;
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_registry_new(&reg, &d), OQ_OK);
    for (size_t mi = 0; mi < sizeof ocr_models / sizeof ocr_models[0]; mi++) {
        snprintf(path, sizeof path, "%s/%s", ASSETS, ocr_models[mi].file);
        oq_rt_tensor in;
        cr_assert_eq(oq_rt_tensor_alloc(&in, OQ_DTYPE_FLOAT, ocr_models[mi].dims, 4), OQ_OK);
        uint32_t s = 12345;
        float *x = in.data;
        for (int64_t k = 0; k < oq_rt_tensor_numel(&in); k++) {
            s = s * 1103515245u + 12345u;
            x[k] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
        }
        oq_model *m = NULL;
        cr_assert_eq(oq_model_read(path, NULL, &m, &d), OQ_OK, "%s", path);
        outputs before;
        oq_status st = run_exec(m, &in, 1, &before, &d);
        print_diag(&d);
        cr_assert_eq(st, OQ_OK, "%s does not run before any pass", path);
        oq_model_free(m);
        for (size_t pi = 0; pi < sizeof ocr_passes / sizeof ocr_passes[0]; pi++) {
            oq_diag_clear(&d);
            cr_assert_eq(oq_model_read(path, NULL, &m, &d), OQ_OK);
            oq_pass_result r;
            st = apply(reg, ocr_passes[pi].pipeline, m, &r, &d);
            print_diag(&d);
            cr_assert_eq(st, OQ_OK, "%s on %s failed", ocr_passes[pi].pipeline, ocr_models[mi].file);
            cr_assert_eq(oq_model_check(m, &d), OQ_OK, "%s on %s: checker rejects the result",
                         ocr_passes[pi].pipeline, ocr_models[mi].file);
            outputs after;
            st = run_exec(m, &in, 1, &after, &d);
            print_diag(&d);
            cr_assert_eq(st, OQ_OK, "%s on %s: result does not run", ocr_passes[pi].pipeline,
                         ocr_models[mi].file);
            double worst = 0;
            const char *why = compare(&before, &after, ocr_passes[pi].tol, &worst);
            cr_assert_null(why, "%s on %s: %s", ocr_passes[pi].pipeline, ocr_models[mi].file, why);
            cr_log_info("%s | %s | %s (max abs diff %g)", ocr_models[mi].file,
                        ocr_passes[pi].pipeline, ocr_passes[pi].tol == 0 ? "bit-identical" : "agree",
                        worst);
            outputs_free(&after);
            oq_model_free(m);
        }
        outputs_free(&before);
        oq_rt_tensor_release(&in);
    }
    oq_registry_free(reg);
    oq_diag_free(&d);
}

/* ------------------------------------------------------------------ backend ------ */

static const pass_case backend_passes[] = {
    {"constant-to-initializer", 0},
    {"fold-constants", 0},
    {"eliminate-identity", 0},
    {"eliminate-dead", 0},
    {"dedupe-initializers", 0},
    {"fold-batchnorm", 1e-5},
    {"infer-shapes", 0},
    {FULL, 1e-5},
    {"fuse-activations", 1e-5},
    {"constant-to-initializer,fold-linear", 1e-5},
};

/* test_data_set_0 inputs of dir; count, or -1 when unreadable */
static int read_inputs(const char *dir, oq_rt_tensor *in, oq_diag *d)
{
    int n = 0;
    for (; n < MAX_IO; n++) {
        char p[700];
        snprintf(p, sizeof p, "%s/test_data_set_0/input_%d.pb", dir, n);
        if (access(p, R_OK) != 0)
            break;
        if (oq_tensor_file_read(p, &in[n], NULL, d) != OQ_OK) {
            for (int i = 0; i < n; i++)
                oq_rt_tensor_release(&in[i]);
            return -1;
        }
    }
    return n;
}

Test(equiv, backend_models_agree_before_and_after_each_pass, .timeout = 900)
{
    static const char *const sets[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
    if (access(DATA "/node", R_OK) != 0) {
        cr_log_warn("ONNX backend test data not found in %s: skipped", DATA);
        return;
    }
    oq_registry *reg = NULL;
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_registry_new(&reg, &d), OQ_OK);
    int models = 0, runs = 0, folded_models = 0, shape_models = 0, node_models = 0;
    for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
        char base[256];
        snprintf(base, sizeof base, "%s/%s", DATA, sets[si]);
        DIR *dir = opendir(base);
        if (!dir)
            continue;
        for (struct dirent *e; (e = readdir(dir)) != NULL;) {
            if (e->d_name[0] == '.')
                continue;
            char mdir[600], path[700];
            snprintf(mdir, sizeof mdir, "%s/%s", base, e->d_name);
            snprintf(path, sizeof path, "%s/model.onnx", mdir);
            oq_rt_tensor in[MAX_IO];
            oq_model *m = NULL;
            oq_diag_clear(&d);
            if (access(path, R_OK) != 0 || oq_model_read(path, NULL, &m, &d) != OQ_OK)
                continue;
            int n_in = read_inputs(mdir, in, &d);
            outputs before;
            if (n_in < 0 || run_exec(m, in, (size_t)n_in, &before, &d) != OQ_OK) {
                for (int i = 0; i < n_in; i++)
                    oq_rt_tensor_release(&in[i]);
                oq_model_free(m);
                continue; /* not a model the executor runs */
            }
            oq_model_free(m);
            models++;
            for (size_t pi = 0; pi < sizeof backend_passes / sizeof backend_passes[0]; pi++) {
                oq_diag_clear(&d);
                cr_assert_eq(oq_model_read(path, NULL, &m, &d), OQ_OK);
                oq_pass_result r;
                oq_status st = apply(reg, backend_passes[pi].pipeline, m, &r, &d);
                print_diag(&d);
                cr_assert_eq(st, OQ_OK, "%s on %s failed", backend_passes[pi].pipeline, mdir);
                cr_assert_eq(oq_model_check(m, &d), OQ_OK, "%s on %s: checker rejects the result",
                             backend_passes[pi].pipeline, mdir);
                if (pi == 1 && r.changed)
                    folded_models++;
                if (pi == 1 && stat_of(&r, "shapes_folded") > 0)
                    shape_models++;
                if (pi == 1 && stat_of(&r, "nodes_folded") > 0)
                    node_models++;
                outputs after;
                st = run_exec(m, in, (size_t)n_in, &after, &d);
                print_diag(&d);
                cr_assert_eq(st, OQ_OK, "%s on %s: result does not run", backend_passes[pi].pipeline,
                             mdir);
                double worst = 0;
                const char *why = compare(&before, &after, backend_passes[pi].tol, &worst);
                cr_assert_null(why, "%s on %s: %s", backend_passes[pi].pipeline, mdir, why);
                outputs_free(&after);
                oq_model_free(m);
                runs++;
            }
            outputs_free(&before);
            for (int i = 0; i < n_in; i++)
                oq_rt_tensor_release(&in[i]);
        }
        closedir(dir);
    }
    cr_log_info("%d backend models, %d pass runs agree; fold-constants changed %d of them "
                "(Shape/Size folded in %d, other nodes in %d)", models, runs, folded_models, shape_models,
                node_models);
    cr_assert_gt(models, 500, "only %d backend models ran", models);
    cr_assert_gt(folded_models, 10);
    oq_registry_free(reg);
    oq_diag_free(&d);
}
