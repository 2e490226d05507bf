/* Small graph builders shared by the pass test suites (tests/test_pass*.c). */
#ifndef ONNXQ_TEST_PASS_UTIL_H
#define ONNXQ_TEST_PASS_UTIL_H
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnxq/exec.h"
#include "onnxq/onnxq.h"
#include "onnxq/calib.h"
#include "onnxq/pass.h"
#include "onnxq/quant.h"

static inline oq_model *tp_model(int64_t opset)
{
    oq_model *m = oq_model_new();
    cr_assert(m);
    oq_model_set_opset(m, "", opset);
    m->has_ir_version = true;
    m->ir_version = 8;
    m->graph->name = oq_model_strdup(m, "g");
    return m;
}

static inline oq_value *tp_value(oq_model *m, const char *name)
{
    oq_value *v = oq_graph_find_value(m->graph, name);
    if (!v)
        v = oq_graph_new_value(m->graph, name);
    cr_assert(v, "value %s", name);
    return v;
}

static inline oq_value *tp_input(oq_model *m, const char *name, int32_t dt, const int64_t *dims,
                                 size_t rank)
{
    oq_value *v = tp_value(m, name);
    cr_assert(oq_graph_add_input(m->graph, v, dims ? oq_type_tensor(m, dt, dims, NULL, rank) : NULL));
    return v;
}

static inline oq_value *tp_init(oq_model *m, const char *name, int32_t dt, const int64_t *dims,
                                size_t rank, const void *data)
{
    int64_t n = oq_dims_numel(dims, rank);
    oq_value *v = tp_value(m, name);
    oq_tensor *t = oq_tensor_new(m, name, dt, dims, rank, data, oq_dtype_nbytes(dt, n));
    cr_assert(t);
    cr_assert_eq(oq_graph_set_initializer(m->graph, v, t), OQ_OK);
    return v;
}

static inline oq_value *tp_init_f(oq_model *m, const char *name, const int64_t *dims, size_t rank,
                                  const float *data)
{
    return tp_init(m, name, OQ_DTYPE_FLOAT, dims, rank, data);
}

/* "a,b" style lists of value names; "" = omitted. */
static inline size_t tp_split(oq_model *m, const char *list, oq_value **out)
{
    size_t n = 0;
    if (!list || !*list)
        return 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *p = buf, *tok; (tok = strsep(&p, ",")) != NULL;) {
        (void)save;
        out[n++] = *tok ? tp_value(m, tok) : NULL;
    }
    return n;
}

static inline oq_node *tp_node(oq_model *m, const char *op, const char *name, const char *ins,
                               const char *outs)
{
    oq_value *iv[16], *ov[16];
    size_t ni = tp_split(m, ins, iv), no = tp_split(m, outs, ov);
    oq_node *n = oq_node_new(m->graph, op, NULL, name, iv, ni, ov, no);
    cr_assert(n);
    oq_graph_append(m->graph, n);
    return n;
}

static inline void tp_output(oq_model *m, const char *name)
{
    cr_assert(oq_graph_add_output(m->graph, tp_value(m, name), NULL));
}

static inline void tp_output_typed(oq_model *m, const char *name, int32_t dt, const int64_t *dims,
                                   size_t rank)
{
    cr_assert(oq_graph_add_output(m->graph, tp_value(m, name), oq_type_tensor(m, dt, dims, NULL, rank)));
}

static inline void tp_print_diag(const oq_diag *d)
{
    char buf[1024];
    for (size_t i = 0; i < d->count; i++) {
        oq_diag_format(&d->entries[i], buf, sizeof buf);
        cr_log_info("%s", buf);
    }
}

/* Check the model, write it and read it back (so the result is a valid file). */
static inline void tp_assert_valid(oq_model *m)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_status s = oq_model_check(m, &d);
    tp_print_diag(&d);
    cr_assert_eq(s, OQ_OK, "checker rejects the model after the pass");
    uint8_t *buf = NULL;
    size_t len = 0;
    cr_assert_eq(oq_model_write_buffer(m, &buf, &len, &d), OQ_OK);
    oq_model *back = NULL;
    s = oq_model_read_buffer(buf, len, "roundtrip.onnx", NULL, &back, &d);
    tp_print_diag(&d);
    cr_assert_eq(s, OQ_OK, "written model does not read back");
    oq_model_free(back);
    free(buf);
    oq_diag_free(&d);
}

/* A one-thread plan of m, which must compile; messages printed and kept in d
 * (initialized here). */
static inline oq_plan *tp_plan(oq_model *m, oq_diag *d)
{
    oq_diag_init(d);
    oq_plan *p = NULL;
    oq_plan_options po = oq_plan_options_default();
    po.threads = 1;
    oq_status st = oq_plan_compile(m, &po, &p, d);
    tp_print_diag(d);
    cr_assert_eq(st, OQ_OK, "plan does not compile");
    return p;
}

/* Scalar scale / zero point initializers named P_scale, P_zero_point (zero point of
 * dtype zdt). */
static inline void tp_qparams(oq_model *m, const char *p, float scale, int32_t zdt, int32_t zp)
{
    static const int64_t dims[1] = {1}; /* rank 0: not read */
    char s[64], z[64];
    snprintf(s, sizeof s, "%s_scale", p);
    snprintf(z, sizeof z, "%s_zero_point", p);
    tp_init_f(m, s, dims, 0, &scale);
    uint8_t zb[4];
    cr_assert_eq(oq_pack_ints(zdt, &zp, 1, zb, NULL), OQ_OK);
    tp_init(m, z, zdt, dims, 0, zb);
}

/* Run a pipeline with the built-in passes, its messages into d (initialized here). */
static inline oq_status tp_run_diag(oq_model *m, const char *pipeline, oq_pass_result *r,
                                    oq_diag *d)
{
    oq_registry *reg = NULL;
    oq_diag_init(d);
    cr_assert_eq(oq_registry_new(&reg, d), OQ_OK);
    oq_status s = oq_pass_run_simple(reg, pipeline, m, r, d);
    oq_registry_free(reg);
    return s;
}

/* Run a pipeline, assert it succeeds and leaves a valid model. */
static inline oq_pass_result tp_run(oq_model *m, const char *pipeline)
{
    oq_diag d;
    oq_pass_result r;
    oq_status s = tp_run_diag(m, pipeline, &r, &d);
    tp_print_diag(&d);
    cr_assert_eq(s, OQ_OK, "pipeline %s failed", pipeline);
    oq_diag_free(&d);
    tp_assert_valid(m);
    return r;
}

/* Run a pipeline expected to fail; returns the status, message of the first error
 * copied to msg. */
static inline oq_status tp_run_fail(oq_model *m, const char *pipeline, char *msg, size_t size)
{
    oq_diag d;
    oq_pass_result r;
    oq_status s = tp_run_diag(m, pipeline, &r, &d);
    const oq_diag_entry *e = oq_diag_first_error(&d);
    if (msg)
        oq_diag_format(e, msg, size);
    cr_assert(e, "no error recorded");
    oq_diag_free(&d);
    return s;
}

/* Store a calibration table in the model the way the calibrate pass does: names[i] gets
 * the range r[i] (min = lo, max = hi). */
static inline void tp_set_calib_table(oq_model *m, const char *const *names, const float (*r)[2], size_t n)
{
    oq_calib_table t;
    memset(&t, 0, sizeof t);
    t.items = calloc(n, sizeof(oq_calib_entry));
    for (size_t i = 0; i < n; i++) {
        t.items[i].name = strdup(names[i]);
        t.items[i].min = t.items[i].lo = r[i][0];
        t.items[i].max = t.items[i].hi = r[i][1];
    }
    t.count = n;
    char *j = oq_calib_table_to_json(&t);
    cr_assert(j);
    oq_model_set_metadata(m, OQ_CALIB_METADATA_KEY, j);
    free(j);
    oq_calib_table_free(&t);
}

static inline int64_t tp_stat(const oq_pass_result *r, const char *name)
{
    for (size_t i = 0; i < r->n_stats; i++)
        if (strcmp(r->stats[i].name, name) == 0)
            return r->stats[i].value;
    return 0;
}

static inline size_t tp_count_op(const oq_model *m, const char *op)
{
    size_t k = 0;
    for (oq_node *n = m->graph->first; n; n = n->next)
        if (strcmp(n->op_type, op) == 0)
            k++;
    return k;
}

static inline oq_node *tp_find_op(const oq_model *m, const char *op)
{
    for (oq_node *n = m->graph->first; n; n = n->next)
        if (strcmp(n->op_type, op) == 0)
            return n;
    return NULL;
}

static inline const float *tp_floats(oq_value *v)
{
    oq_tensor *t = oq_value_const_tensor(v);
    cr_assert(t, "value %s is not constant", v ? v->name : "(null)");
    cr_assert_eq(t->dtype, OQ_DTYPE_FLOAT);
    const float *f = oq_tensor_data(t, NULL);
    cr_assert(f);
    return f;
}

static inline int64_t tp_ints(oq_value *v, int64_t *out, int64_t max)
{
    oq_tensor *t = oq_value_const_tensor(v);
    cr_assert(t, "value %s is not constant", v ? v->name : "(null)");
    cr_assert_eq(t->dtype, OQ_DTYPE_INT64);
    const int64_t *p = oq_tensor_data(t, NULL);
    int64_t n = oq_tensor_numel(t);
    cr_assert(p && n <= max);
    memcpy(out, p, (size_t)n * sizeof(int64_t));
    return n;
}
#endif
