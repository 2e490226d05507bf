/* The document `onnxq dump --json` writes (schema onnxq.dump/1, docs/dump.md), for every
 * front end: the command and the Python package's onnxq.dump. Moved from src/cli/cmd_dump.c,
 * which keeps the text and Graphviz renderings. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/json_writer.h"
#include "ir/text.h"
#include "job/job-impl.h"
#include "onnxq/inspect.h"
#include "onnxq/stats.h"

#define LIST_SHOW 16      /* lists/tensors up to this many values are shown whole */
#define LIST_HEAD 10      /* otherwise the first LIST_HEAD values, then "..." */
#define STR_SHOW 48       /* string values longer than this are cut */

static bool tensor_values_printable(int32_t dtype)
{
    return oq_stats_dtype_supported(dtype) || dtype == OQ_DTYPE_STRING ||
           dtype == OQ_DTYPE_COMPLEX64 || dtype == OQ_DTYPE_COMPLEX128;
}

/* Dense data of a tensor for display, or NULL (errors are not fatal here). */
const void *oq_dump_tensor_peek(oq_tensor *t)
{
    if (!tensor_values_printable(t->dtype) || oq_tensor_numel(t) < 0)
        return NULL;
    oq_diag d;
    oq_diag_init(&d);
    const void *data = oq_tensor_data(t, &d);
    oq_diag_free(&d);
    return data;
}


typedef struct dump_ctx {
    oq_model *m;
    const char *path;
    bool stats;
    oq_inspect in;        /* the library's inspection (include/onnxq/inspect.h) */
    bool oom;
    bool failed;          /* a tensor could not be read for --stats */
    void (*report)(const oq_diag *d, void *user);
    void *user;
} dump_ctx;

static void compute_stats(dump_ctx *c, const oq_inspect_tensor *r, oq_inspect_stats *ts)
{
    oq_diag d;
    oq_diag_init(&d);
    d.file = c->path;
    oq_status st = oq_inspect_tensor_stats(r, ts, &d);
    if (d.count && c->report)
        c->report(&d, c->user);
    if (st == OQ_ERR_NOMEM)
        c->oom = true;
    else if (st != OQ_OK)
        c->failed = true;
    oq_diag_free(&d);
}

/* ---------------------------------------------------------------- JSON ----------- */

static void json_type(json_writer *w, const oq_type *t)
{
    if (!t) {
        json_null(w);
        return;
    }
    static const char *const kinds[] = {
        [OQ_TYPE_NONE] = "none", [OQ_TYPE_TENSOR] = "tensor", [OQ_TYPE_SEQUENCE] = "sequence",
        [OQ_TYPE_MAP] = "map", [OQ_TYPE_OPAQUE] = "opaque",
        [OQ_TYPE_SPARSE_TENSOR] = "sparse_tensor", [OQ_TYPE_OPTIONAL] = "optional"};
    json_begin_object_inline(w);
    const char *k = (unsigned)t->kind < sizeof kinds / sizeof kinds[0] ? kinds[t->kind] : NULL;
    json_kv_string(w, "kind", k ? k : "none");
    switch (t->kind) {
    case OQ_TYPE_TENSOR:
    case OQ_TYPE_SPARSE_TENSOR:
        json_key(w, "elem_type");
        json_string(w, t->has_elem_type ? oq_dtype_name(t->elem_type) : NULL);
        json_key(w, "shape");
        if (!t->shape) {
            json_null(w);
            break;
        }
        json_begin_array_inline(w);
        for (size_t i = 0; i < t->shape->rank; i++) {
            const oq_dim *d = &t->shape->dims[i];
            if (d->kind == OQ_DIM_VALUE)
                json_int(w, d->value);
            else if (d->kind == OQ_DIM_PARAM && d->param)
                json_string(w, d->param);
            else
                json_null(w);
        }
        json_end_array(w);
        break;
    case OQ_TYPE_SEQUENCE:
    case OQ_TYPE_OPTIONAL:
        json_key(w, "elem");
        json_type(w, t->elem);
        break;
    case OQ_TYPE_MAP:
        json_key(w, "key_type");
        json_string(w, t->has_key_type ? oq_dtype_name(t->key_type) : NULL);
        json_key(w, "value");
        json_type(w, t->elem);
        break;
    case OQ_TYPE_OPAQUE:
        json_kv_string(w, "domain", t->opaque_domain);
        json_kv_string(w, "name", t->opaque_name);
        break;
    default:
        break;
    }
    json_end_object(w);
}

static void json_dims(json_writer *w, const int64_t *dims, size_t rank)
{
    json_begin_array_inline(w);
    for (size_t i = 0; i < rank; i++)
        json_int(w, dims[i]);
    json_end_array(w);
}

static void json_elem(json_writer *w, const void *data, int32_t dtype, int64_t i)
{
    const uint8_t *p = data;
    double x;
    switch (dtype) {
    case OQ_DTYPE_INT64: {
        int64_t v;
        memcpy(&v, p + (size_t)i * 8, 8);
        json_int(w, v);
        return;
    }
    case OQ_DTYPE_UINT64: {
        uint64_t v;
        memcpy(&v, p + (size_t)i * 8, 8);
        json_uint(w, v);
        return;
    }
    case OQ_DTYPE_BOOL:
        json_bool(w, p[i] != 0);
        return;
    case OQ_DTYPE_STRING: {
        const oq_bytes *s = (const oq_bytes *)data + i;
        json_string_n(w, (const char *)s->data, s->len);
        return;
    }
    case OQ_DTYPE_COMPLEX64: {
        float f[2];
        memcpy(f, p + (size_t)i * 8, 8);
        json_begin_array_inline(w);
        json_float(w, f[0]);
        json_float(w, f[1]);
        json_end_array(w);
        return;
    }
    case OQ_DTYPE_COMPLEX128: {
        double d[2];
        memcpy(d, p + (size_t)i * 16, 16);
        json_begin_array_inline(w);
        json_double(w, d[0]);
        json_double(w, d[1]);
        json_end_array(w);
        return;
    }
    default:
        break;
    }
    if (!oq_elems_to_double(data, dtype, i, 1, &x))
        json_null(w);
    else if (dtype == OQ_DTYPE_DOUBLE)
        json_double(w, x);
    else if (oq_dtype_is_float(dtype))
        json_float(w, (float)x);
    else
        json_int(w, (int64_t)x);
}

static void json_tensor(json_writer *w, oq_tensor *t)
{
    int64_t n = oq_tensor_numel(t);
    json_begin_object_inline(w);
    json_kv_string(w, "name", t->name);
    json_kv_string(w, "dtype", oq_dtype_name(t->dtype));
    json_key(w, "dims");
    json_dims(w, t->dims, t->rank);
    json_kv_int(w, "elements", n);
    json_kv_int(w, "bytes", oq_inspect_tensor_bytes(t));
    if (oq_tensor_is_external(t)) {
        json_kv_bool(w, "external", true);
    } else if (n >= 0 && n <= LIST_SHOW) {
        const void *data = oq_dump_tensor_peek(t);
        if (data) {
            json_key(w, "values");
            json_begin_array_inline(w);
            for (int64_t i = 0; i < n; i++)
                json_elem(w, data, t->dtype, i);
            json_end_array(w);
        }
    }
    json_end_object(w);
}

static void json_graph(dump_ctx *c, json_writer *w, oq_graph *g);

static void json_attr(dump_ctx *c, json_writer *w, const oq_attr *a)
{
    bool big = a->type == OQ_ATTR_GRAPH || a->type == OQ_ATTR_GRAPHS ||
               a->type == OQ_ATTR_TENSORS || a->type == OQ_ATTR_SPARSE_TENSORS;
    if (big)
        json_begin_object(w);
    else
        json_begin_object_inline(w);
    json_kv_string(w, "name", a->name);
    const char *tn = oq_attr_type_name(a->type);
    json_kv_string(w, "type", tn);
    if (a->ref_attr_name) {
        json_kv_string(w, "ref_attr_name", a->ref_attr_name);
        json_end_object(w);
        return;
    }
    json_key(w, "value");
    switch (a->type) {
    case OQ_ATTR_FLOAT: json_float(w, a->f); break;
    case OQ_ATTR_INT: json_int(w, a->i); break;
    case OQ_ATTR_STRING: json_string_n(w, (const char *)a->s.data, a->s.len); break;
    case OQ_ATTR_TENSOR:
        if (a->t)
            json_tensor(w, a->t);
        else
            json_null(w);
        break;
    case OQ_ATTR_GRAPH:
        if (a->g)
            json_graph(c, w, a->g);
        else
            json_null(w);
        break;
    case OQ_ATTR_FLOATS:
        json_begin_array_inline(w);
        for (size_t i = 0; i < a->n_floats; i++)
            json_float(w, a->floats[i]);
        json_end_array(w);
        break;
    case OQ_ATTR_INTS:
        json_begin_array_inline(w);
        for (size_t i = 0; i < a->n_ints; i++)
            json_int(w, a->ints[i]);
        json_end_array(w);
        break;
    case OQ_ATTR_STRINGS:
        json_begin_array_inline(w);
        for (size_t i = 0; i < a->n_strings; i++)
            json_string_n(w, (const char *)a->strings[i].data, a->strings[i].len);
        json_end_array(w);
        break;
    case OQ_ATTR_TENSORS:
        json_begin_array(w);
        for (size_t i = 0; i < a->n_tensors; i++)
            json_tensor(w, a->tensors[i]);
        json_end_array(w);
        break;
    case OQ_ATTR_GRAPHS:
        json_begin_array(w);
        for (size_t i = 0; i < a->n_graphs; i++)
            json_graph(c, w, a->graphs[i]);
        json_end_array(w);
        break;
    case OQ_ATTR_SPARSE_TENSOR:
    case OQ_ATTR_SPARSE_TENSORS: {
        size_t n = a->type == OQ_ATTR_SPARSE_TENSOR ? (a->sparse_tensor ? 1 : 0)
                                                    : a->n_sparse_tensors;
        if (a->type == OQ_ATTR_SPARSE_TENSORS)
            json_begin_array(w);
        else if (!n)
            json_null(w);
        for (size_t i = 0; i < n; i++) {
            const oq_sparse_tensor *s =
                a->type == OQ_ATTR_SPARSE_TENSOR ? a->sparse_tensor : a->sparse_tensors[i];
            json_begin_object(w);
            json_key(w, "dims");
            json_dims(w, s->dims, s->rank);
            json_key(w, "values");
            if (s->values)
                json_tensor(w, s->values);
            else
                json_null(w);
            json_key(w, "indices");
            if (s->indices)
                json_tensor(w, s->indices);
            else
                json_null(w);
            json_end_object(w);
        }
        if (a->type == OQ_ATTR_SPARSE_TENSORS)
            json_end_array(w);
        break;
    }
    case OQ_ATTR_TYPE_PROTO: json_type(w, a->tp); break;
    case OQ_ATTR_TYPE_PROTOS:
        json_begin_array(w);
        for (size_t i = 0; i < a->n_type_protos; i++)
            json_type(w, a->type_protos[i]);
        json_end_array(w);
        break;
    default: json_null(w); break;
    }
    json_end_object(w);
}

static void json_vinfos(json_writer *w, oq_vinfo **vi, size_t n)
{
    json_begin_array(w);
    for (size_t i = 0; i < n; i++) {
        oq_value *v = vi[i]->value;
        json_begin_object_inline(w);
        json_kv_string(w, "name", v ? v->name : "");
        json_key(w, "type");
        json_type(w, vi[i]->type ? vi[i]->type : v ? v->type : NULL);
        json_kv_bool(w, "initializer", v && v->initializer);
        json_end_object(w);
    }
    json_end_array(w);
}

static void json_names(json_writer *w, oq_value **vs, size_t n)
{
    json_begin_array_inline(w);
    for (size_t i = 0; i < n; i++)
        json_string(w, vs[i] ? vs[i]->name : "");
    json_end_array(w);
}

static void json_graph(dump_ctx *c, json_writer *w, oq_graph *g)
{
    json_begin_object(w);
    json_kv_string(w, "name", g->name);
    json_key(w, "inputs");
    json_vinfos(w, g->inputs, g->n_inputs);
    json_key(w, "outputs");
    json_vinfos(w, g->outputs, g->n_outputs);
    json_key(w, "initializers");
    json_begin_array_inline(w);
    for (size_t i = 0; i < g->n_initializers; i++)
        json_string(w, g->initializers[i]->name);
    json_end_array(w);
    json_key(w, "nodes");
    json_begin_array(w);
    size_t idx = 0;
    for (oq_node *n = g->first; n; n = n->next, idx++) {
        json_begin_object(w);
        json_kv_int(w, "index", (int64_t)idx);
        json_kv_string(w, "name", n->name ? n->name : "");
        json_kv_string(w, "op", n->op_type ? n->op_type : "");
        json_kv_string(w, "domain", oq_domain_is_default(n->domain) ? "" : n->domain);
        json_key(w, "inputs");
        json_names(w, n->inputs, n->n_inputs);
        json_key(w, "outputs");
        json_names(w, n->outputs, n->n_outputs);
        json_key(w, "attributes");
        json_begin_array(w);
        for (size_t i = 0; i < n->n_attrs; i++)
            json_attr(c, w, n->attrs[i]);
        json_end_array(w);
        json_end_object(w);
    }
    json_end_array(w);
    json_end_object(w);
}

static void json_stats(dump_ctx *c, json_writer *w)
{
    json_begin_array(w);
    for (size_t i = 0; i < c->in.n_tensors; i++) {
        const oq_inspect_tensor *r = &c->in.tensors[i];
        oq_inspect_stats ts;
        compute_stats(c, r, &ts);
        json_begin_object(w);
        json_kv_string(w, "name", r->name);
        json_kv_string(w, "source", r->constant ? "constant" : "initializer");
        json_kv_string(w, "scope", r->scope);
        json_kv_bool(w, "external", oq_tensor_is_external(r->tensor));
        json_kv_string(w, "dtype", oq_dtype_name(r->tensor->dtype));
        json_key(w, "dims");
        json_dims(w, r->tensor->dims, r->tensor->rank);
        json_kv_int(w, "elements", oq_tensor_numel(r->tensor));
        if (ts.skipped) {
            json_kv_string(w, "skipped", ts.skipped);
            json_end_object(w);
            continue;
        }
        /* no finite value: NaN statistics are written as null */
        w->nonfinite_null = true;
        json_kv_double(w, "min", ts.s.min);
        json_kv_double(w, "max", ts.s.max);
        json_kv_double(w, "mean", ts.s.mean);
        json_kv_double(w, "std", ts.s.std);
        json_kv_int(w, "zeros", ts.s.zeros);
        json_kv_int(w, "nans", ts.s.nans);
        json_kv_int(w, "pos_infs", ts.s.pos_infs);
        json_kv_int(w, "neg_infs", ts.s.neg_infs);
        json_kv_int(w, "finite", ts.s.finite);
        if (ts.axis >= 0) {
            json_key(w, "per_channel");
            json_begin_object(w);
            json_kv_int(w, "axis", ts.axis);
            json_kv_string(w, "op", ts.consumer->op_type);
            json_kv_string(w, "node", ts.consumer->name ? ts.consumer->name : "");
            json_key(w, "min");
            json_begin_array_inline(w);
            for (int64_t k = 0; k < ts.channels; k++)
                json_double(w, ts.mins[k]);
            json_end_array(w);
            json_key(w, "max");
            json_begin_array_inline(w);
            for (int64_t k = 0; k < ts.channels; k++)
                json_double(w, ts.maxs[k]);
            json_end_array(w);
            json_end_object(w);
        }
        w->nonfinite_null = false;
        json_end_object(w);
        oq_inspect_stats_free(&ts);
    }
    json_end_array(w);
}

static int json_model(dump_ctx *c, FILE *out)
{
    const oq_model *m = c->m;
    json_writer w;
    json_init(&w, out, 2);
    json_begin_object(&w);
    json_kv_int(&w, "version", 1);
    json_kv_string(&w, "schema", "onnxq.dump/1");
    json_kv_string(&w, "file", c->path);
    json_key(&w, "producer");
    json_begin_object(&w);
    json_kv_string(&w, "name", m->producer_name);
    json_kv_string(&w, "version", m->producer_version);
    json_end_object(&w);
    json_key(&w, "ir_version");
    if (m->has_ir_version)
        json_int(&w, m->ir_version);
    else
        json_null(&w);
    json_key(&w, "model_version");
    if (m->has_model_version)
        json_int(&w, m->model_version);
    else
        json_null(&w);
    json_kv_string(&w, "domain", m->domain);
    json_kv_string(&w, "doc_string", m->doc_string);
    json_key(&w, "opset_import");
    json_begin_array(&w);
    for (size_t i = 0; i < m->n_opsets; i++) {
        json_begin_object_inline(&w);
        json_kv_string(&w, "domain", oq_domain_is_default(m->opsets[i].domain) ? ""
                                                                              : m->opsets[i].domain);
        json_kv_int(&w, "version", m->opsets[i].version);
        json_end_object(&w);
    }
    json_end_array(&w);
    json_key(&w, "metadata");
    json_begin_array(&w);
    for (size_t i = 0; i < m->metadata.count; i++) {
        json_begin_object_inline(&w);
        json_kv_string(&w, "key", m->metadata.items[i].key);
        json_kv_string(&w, "value", m->metadata.items[i].value);
        json_end_object(&w);
    }
    json_end_array(&w);
    json_key(&w, "functions");
    json_begin_array(&w);
    for (size_t i = 0; i < m->n_functions; i++) {
        json_begin_object_inline(&w);
        json_kv_string(&w, "domain", m->functions[i]->domain);
        json_kv_string(&w, "name", m->functions[i]->name);
        json_end_object(&w);
    }
    json_end_array(&w);
    json_kv_int(&w, "training_info", (int64_t)m->n_training_info);
    json_kv_int(&w, "node_count", c->in.n_nodes);

    json_key(&w, "op_histogram");
    json_begin_array(&w);
    for (size_t i = 0; i < c->in.n_ops; i++) {
        json_begin_object_inline(&w);
        json_kv_string(&w, "op", c->in.ops[i].op_type);
        json_kv_string(&w, "domain", c->in.ops[i].domain);
        json_kv_int(&w, "count", c->in.ops[i].count);
        json_end_object(&w);
    }
    json_end_array(&w);

    json_key(&w, "parameters");
    json_begin_object(&w);
    int64_t tot[3][2] = {{0}};
    for (int d = 0; d < OQ_DTYPE_COUNT; d++)
        for (int s = 0; s < 2; s++) {
            tot[0][s] += c->in.params[d].tensors[s];
            tot[1][s] += c->in.params[d].elements[s];
            tot[2][s] += c->in.params[d].bytes[s];
        }
    json_kv_int(&w, "tensors", tot[0][0] + tot[0][1]);
    json_kv_int(&w, "elements", tot[1][0] + tot[1][1]);
    json_kv_int(&w, "bytes", tot[2][0] + tot[2][1]);
    static const char *const src_names[2] = {"initializers", "constants"};
    for (int s = 0; s < 2; s++) {
        json_key(&w, src_names[s]);
        json_begin_object_inline(&w);
        json_kv_int(&w, "tensors", tot[0][s]);
        json_kv_int(&w, "elements", tot[1][s]);
        json_kv_int(&w, "bytes", tot[2][s]);
        json_end_object(&w);
    }
    json_kv_int(&w, "sparse_initializers", c->in.n_sparse_initializers);
    json_key(&w, "by_dtype");
    json_begin_array(&w);
    for (int d = 0; d < OQ_DTYPE_COUNT; d++) {
        const oq_inspect_params *t = &c->in.params[d];
        if (t->tensors[0] + t->tensors[1] == 0)
            continue;
        json_begin_object_inline(&w);
        json_kv_string(&w, "dtype", oq_dtype_name(d));
        json_kv_int(&w, "tensors", t->tensors[0] + t->tensors[1]);
        json_kv_int(&w, "elements", t->elements[0] + t->elements[1]);
        json_kv_int(&w, "bytes", t->bytes[0] + t->bytes[1]);
        json_kv_int(&w, "initializer_elements", t->elements[0]);
        json_kv_int(&w, "constant_elements", t->elements[1]);
        json_end_object(&w);
    }
    json_end_array(&w);
    json_end_object(&w);

    json_key(&w, "graph");
    if (m->graph)
        json_graph(c, &w, m->graph);
    else
        json_null(&w);
    if (c->stats) {
        json_key(&w, "stats");
        json_stats(c, &w);
    }
    json_end_object(&w);
    return json_finish(&w);
}


oq_status oq_inspect_write_json(oq_model *m, const char *path, bool stats, FILE *f,
                                void (*report)(const oq_diag *d, void *user), void *user,
                                oq_inspect_json_result *res, oq_diag *d)
{
    dump_ctx c;
    memset(&c, 0, sizeof c);
    memset(res, 0, sizeof *res);
    c.m = m;
    c.path = path;
    c.stats = stats;
    c.report = report;
    c.user = user;
    oq_status st = oq_inspect_model(m, &c.in, d);
    if (st != OQ_OK) {
        res->oom = st == OQ_ERR_NOMEM;
        return st;
    }
    res->incomplete = json_model(&c, f) != 0 && !ferror(f);
    res->oom = c.oom;
    res->stats_failed = c.failed;
    oq_inspect_free(&c.in);
    if (ferror(f))
        return oq_diag_error(d, OQ_ERR_IO, "cannot write the output");
    return res->oom ? OQ_ERR_NOMEM : res->incomplete ? OQ_ERR_UNSUPPORTED : res->stats_failed ? OQ_ERR_IO : OQ_OK;
}
