/* onnxq dump [--json] [--stats] [--dot] MODEL — inspect a model.
 *
 * Text (default), one JSON document (--json, schema in docs/dump.md) or Graphviz
 * (--dot). --stats adds per-tensor statistics of every initializer and Constant-node
 * tensor, with per-output-channel min/max for Conv/ConvTranspose/Gemm/MatMul weights.
 * Output depends only on the model file: no addresses, times or hash orders.
 * What is shown comes from the library (include/onnxq/inspect.h, ir/text.h): this file
 * parses the arguments and renders text and JSON.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "io/json_writer.h"
#include "ir/text.h"
#include "job/job-impl.h"
#include "onnxq/inspect.h"
#include "onnxq/stats.h"

#define LIST_SHOW 16      /* lists/tensors up to this many values are shown whole */
#define LIST_HEAD 10      /* otherwise the first LIST_HEAD values, then "..." */
#define STR_SHOW 48       /* string values longer than this are cut */
#define CHAN_SHOW 16      /* text: per-channel rows shown whole up to this many */

/* ---------------------------------------------------------------- types, values -- */

static const char *domain_label(const char *d)
{
    return oq_domain_is_default(d) ? "ai.onnx" : d;
}

/* Element i of a dense tensor view. */
static void sb_elem(oq_sbuf *b, const void *data, int32_t dtype, int64_t i)
{
    const uint8_t *p = data;
    double x;
    switch (dtype) {
    case OQ_DTYPE_INT64: {
        int64_t v;
        memcpy(&v, p + (size_t)i * 8, 8);
        oq_sb_printf(b, "%" PRId64, v);
        return;
    }
    case OQ_DTYPE_UINT64: {
        uint64_t v;
        memcpy(&v, p + (size_t)i * 8, 8);
        oq_sb_printf(b, "%" PRIu64, v);
        return;
    }
    case OQ_DTYPE_BOOL:
        oq_sb_puts(b, p[i] ? "true" : "false");
        return;
    case OQ_DTYPE_STRING: {
        const oq_bytes *s = (const oq_bytes *)data + i;
        size_t n = s->len > STR_SHOW ? STR_SHOW : s->len;
        oq_sb_name_n(b, (const char *)s->data, n);
        if (n < s->len)
            oq_sb_puts(b, "...");
        return;
    }
    case OQ_DTYPE_COMPLEX64:
    case OQ_DTYPE_COMPLEX128: {
        double re, im;
        if (dtype == OQ_DTYPE_COMPLEX64) {
            float f[2];
            memcpy(f, p + (size_t)i * 8, 8);
            re = f[0];
            im = f[1];
        } else {
            double d[2];
            memcpy(d, p + (size_t)i * 16, 16);
            re = d[0];
            im = d[1];
        }
        oq_sb_puts(b, "(");
        oq_sb_real(b, re, dtype == OQ_DTYPE_COMPLEX64);
        oq_sb_puts(b, im < 0 ? "" : "+");
        oq_sb_real(b, im, dtype == OQ_DTYPE_COMPLEX64);
        oq_sb_puts(b, "j)");
        return;
    }
    default:
        break;
    }
    if (!oq_elems_to_double(data, dtype, i, 1, &x)) {
        oq_sb_puts(b, "?");
        return;
    }
    if (oq_dtype_is_float(dtype))
        oq_sb_real(b, x, dtype != OQ_DTYPE_DOUBLE);
    else
        oq_sb_printf(b, "%.0f", x);
}

/* tensor float32[2, 3] {1, 2, 3, 4, 5, 6}; long ones show the first values. */
static void sb_tensor(oq_sbuf *b, oq_tensor *t)
{
    oq_sb_puts(b, "tensor ");
    oq_sb_puts(b, oq_dtype_name(t->dtype));
    oq_sb_dims(b, t->dims, t->rank);
    int64_t n = oq_tensor_numel(t);
    if (oq_tensor_is_external(t)) {
        oq_sb_printf(b, " (%" PRId64 " values, external)", n);
        return;
    }
    const void *data = oq_dump_tensor_peek(t);
    if (!data) {
        oq_sb_printf(b, " (%" PRId64 " values)", n);
        return;
    }
    int64_t show = n <= LIST_SHOW ? n : LIST_HEAD;
    oq_sb_puts(b, " {");
    for (int64_t i = 0; i < show; i++) {
        if (i)
            oq_sb_puts(b, ", ");
        sb_elem(b, data, t->dtype, i);
    }
    if (show < n)
        oq_sb_printf(b, ", ... (%" PRId64 " values)", n);
    oq_sb_puts(b, "}");
}

/* One-line form of an attribute value (graphs are printed by the caller). */
static void sb_attr(oq_sbuf *b, const oq_attr *a)
{
    size_t n, show;
    if (a->ref_attr_name) {
        oq_sb_printf(b, "@%s (reference to a function attribute)", a->ref_attr_name);
        return;
    }
    switch (a->type) {
    case OQ_ATTR_FLOAT: oq_sb_real(b, a->f, true); break;
    case OQ_ATTR_INT: oq_sb_printf(b, "%" PRId64, a->i); break;
    case OQ_ATTR_STRING:
        oq_sb_name_n(b, (const char *)a->s.data, a->s.len > STR_SHOW ? STR_SHOW : a->s.len);
        if (a->s.len > STR_SHOW)
            oq_sb_printf(b, "... (%zu bytes)", a->s.len);
        break;
    case OQ_ATTR_TENSOR:
        if (a->t)
            sb_tensor(b, a->t);
        break;
    case OQ_ATTR_SPARSE_TENSOR:
        oq_sb_puts(b, "sparse ");
        if (a->sparse_tensor) {
            const oq_sparse_tensor *s = a->sparse_tensor;
            oq_sb_puts(b, s->values ? oq_dtype_name(s->values->dtype) : "?");
            oq_sb_dims(b, s->dims, s->rank);
            oq_sb_printf(b, " (%" PRId64 " stored values)",
                      s->values ? oq_tensor_numel(s->values) : 0);
        }
        break;
    case OQ_ATTR_TYPE_PROTO: oq_sb_type(b, a->tp); break;
    case OQ_ATTR_FLOATS:
    case OQ_ATTR_INTS:
    case OQ_ATTR_STRINGS:
        n = a->type == OQ_ATTR_FLOATS ? a->n_floats
            : a->type == OQ_ATTR_INTS ? a->n_ints : a->n_strings;
        show = n <= LIST_SHOW ? n : LIST_HEAD;
        oq_sb_puts(b, "[");
        for (size_t i = 0; i < show; i++) {
            if (i)
                oq_sb_puts(b, ", ");
            if (a->type == OQ_ATTR_FLOATS)
                oq_sb_real(b, a->floats[i], true);
            else if (a->type == OQ_ATTR_INTS)
                oq_sb_printf(b, "%" PRId64, a->ints[i]);
            else {
                size_t len = a->strings[i].len > STR_SHOW ? STR_SHOW : a->strings[i].len;
                oq_sb_name_n(b, (const char *)a->strings[i].data, len);
                if (len < a->strings[i].len)
                    oq_sb_puts(b, "...");
            }
        }
        if (show < n)
            oq_sb_printf(b, ", ... (%zu values)", n);
        oq_sb_puts(b, "]");
        break;
    case OQ_ATTR_TENSORS:
        oq_sb_printf(b, "%zu tensors [", a->n_tensors);
        for (size_t i = 0; i < a->n_tensors && i < LIST_HEAD; i++) {
            if (i)
                oq_sb_puts(b, ", ");
            oq_sb_puts(b, oq_dtype_name(a->tensors[i]->dtype));
            oq_sb_dims(b, a->tensors[i]->dims, a->tensors[i]->rank);
        }
        oq_sb_puts(b, a->n_tensors > LIST_HEAD ? ", ...]" : "]");
        break;
    case OQ_ATTR_SPARSE_TENSORS: oq_sb_printf(b, "%zu sparse tensors", a->n_sparse_tensors); break;
    case OQ_ATTR_TYPE_PROTOS:
        oq_sb_puts(b, "[");
        for (size_t i = 0; i < a->n_type_protos; i++) {
            if (i)
                oq_sb_puts(b, ", ");
            oq_sb_type(b, a->type_protos[i]);
        }
        oq_sb_puts(b, "]");
        break;
    default:
        oq_sb_printf(b, "(attribute type %d)", (int)a->type);
        break;
    }
}

/* ---------------------------------------------------------------- context -------- */

typedef struct dump_ctx {
    oq_model *m;
    const char *path;
    FILE *out;
    bool stats;
    oq_inspect in;        /* the library's inspection (include/onnxq/inspect.h) */
    bool oom;
    bool failed;          /* a tensor could not be read for --stats */
} dump_ctx;

static void compute_stats(dump_ctx *c, const oq_inspect_tensor *r, oq_inspect_stats *ts)
{
    oq_diag d;
    oq_diag_init(&d);
    d.file = c->path;
    oq_status st = oq_inspect_tensor_stats(r, ts, &d);
    if (d.count)
        cli_print_diag(&d);
    if (st == OQ_ERR_NOMEM)
        c->oom = true;
    else if (st != OQ_OK)
        c->failed = true;
    oq_diag_free(&d);
}

/* ---------------------------------------------------------------- text ----------- */

static void put_indent(FILE *f, int n)
{
    for (int i = 0; i < n; i++)
        fputc(' ', f);
}

static void text_vinfos(dump_ctx *c, oq_vinfo **vi, size_t n, int indent)
{
    oq_sbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        oq_sb_reset(&b);
        oq_value *v = vi[i]->value;
        oq_sb_name(&b, v ? v->name : NULL);
        oq_sb_puts(&b, ": ");
        if (vi[i]->type)
            oq_sb_type(&b, vi[i]->type);
        else if (!oq_sb_value_type(&b, v))
            oq_sb_puts(&b, "?");
        if (v && v->initializer)
            oq_sb_puts(&b, "  (has an initializer)");
        put_indent(c->out, indent);
        fprintf(c->out, "%s\n", oq_sb_str(&b));
    }
    c->oom |= b.oom;
    oq_sb_free(&b);
}

static void text_graph_nodes(dump_ctx *c, const oq_graph *g, int indent);

static void text_node(dump_ctx *c, const oq_node *n, size_t idx, int indent)
{
    oq_sbuf b = {0};
    oq_sb_printf(&b, "#%zu ", idx);
    oq_sb_name(&b, n->op_type);
    if (n->name && *n->name) {
        oq_sb_puts(&b, " ");
        oq_sb_name(&b, n->name);
    }
    if (!oq_domain_is_default(n->domain)) {
        oq_sb_puts(&b, "  domain ");
        oq_sb_name(&b, n->domain);
    }
    put_indent(c->out, indent);
    fprintf(c->out, "%s\n", oq_sb_str(&b));
    for (int io = 0; io < 2; io++) {
        size_t cnt = io ? n->n_outputs : n->n_inputs;
        oq_value **vs = io ? n->outputs : n->inputs;
        oq_sb_reset(&b);
        oq_sb_puts(&b, io ? "outputs: " : "inputs:  ");
        for (size_t i = 0; i < cnt; i++) {
            if (i)
                oq_sb_puts(&b, ", ");
            oq_sb_name(&b, vs[i] ? vs[i]->name : "");
        }
        if (cnt == 0)
            oq_sb_puts(&b, "(none)");
        put_indent(c->out, indent + 4);
        fprintf(c->out, "%s\n", oq_sb_str(&b));
    }
    for (size_t i = 0; i < n->n_attrs; i++) {
        const oq_attr *a = n->attrs[i];
        size_t ng = a->ref_attr_name ? 0
                    : a->type == OQ_ATTR_GRAPH ? (a->g ? 1 : 0)
                    : a->type == OQ_ATTR_GRAPHS ? a->n_graphs : 0;
        oq_sb_reset(&b);
        oq_sb_name(&b, a->name);
        oq_sb_puts(&b, " = ");
        if (a->type == OQ_ATTR_GRAPH || a->type == OQ_ATTR_GRAPHS) {
            /* GRAPH:  name = graph NAME (N nodes, M initializers), body below;
             * GRAPHS: name = K graphs, then "[k] graph NAME (...)" for each */
            int body = indent + 8;
            if (a->ref_attr_name) {
                sb_attr(&b, a);
            } else if (a->type == OQ_ATTR_GRAPHS) {
                oq_sb_printf(&b, "%zu graph%s", ng, ng == 1 ? "" : "s");
                body = indent + 10;
            }
            for (size_t k = 0; k < ng; k++) {
                const oq_graph *sub = a->type == OQ_ATTR_GRAPH ? a->g : a->graphs[k];
                if (a->type == OQ_ATTR_GRAPHS) {
                    put_indent(c->out, indent + 4);
                    fprintf(c->out, "%s\n", oq_sb_str(&b));
                    oq_sb_reset(&b);
                    oq_sb_printf(&b, "  [%zu] ", k);
                }
                oq_sb_puts(&b, "graph ");
                oq_sb_name(&b, sub->name);
                oq_sb_printf(&b, " (%zu node%s, %zu initializer%s)", sub->n_nodes,
                          sub->n_nodes == 1 ? "" : "s", sub->n_initializers,
                          sub->n_initializers == 1 ? "" : "s");
                put_indent(c->out, indent + 4);
                fprintf(c->out, "%s\n", oq_sb_str(&b));
                oq_sb_reset(&b);
                put_indent(c->out, body);
                fprintf(c->out, "inputs (%zu):%s\n", sub->n_inputs, sub->n_inputs ? "" : " none");
                text_vinfos(c, sub->inputs, sub->n_inputs, body + 2);
                put_indent(c->out, body);
                fprintf(c->out, "outputs (%zu):%s\n", sub->n_outputs,
                        sub->n_outputs ? "" : " none");
                text_vinfos(c, sub->outputs, sub->n_outputs, body + 2);
                put_indent(c->out, body);
                fprintf(c->out, "nodes (%zu):\n", sub->n_nodes);
                text_graph_nodes(c, sub, body + 2);
            }
            if (ng == 0) {
                put_indent(c->out, indent + 4);
                fprintf(c->out, "%s\n", oq_sb_str(&b));
            }
            continue;
        }
        sb_attr(&b, a);
        put_indent(c->out, indent + 4);
        fprintf(c->out, "%s\n", oq_sb_str(&b));
    }
    c->oom |= b.oom;
    oq_sb_free(&b);
}

static void text_graph_nodes(dump_ctx *c, const oq_graph *g, int indent)
{
    size_t idx = 0;
    for (const oq_node *n = g->first; n; n = n->next)
        text_node(c, n, idx++, indent);
}

static void text_stats(dump_ctx *c)
{
    FILE *f = c->out;
    fprintf(f, "statistics (%zu tensors; min/max/mean/std over finite values, std with ddof 0):\n",
            c->in.n_tensors);
    oq_sbuf b = {0};
    for (size_t i = 0; i < c->in.n_tensors; i++) {
        const oq_inspect_tensor *r = &c->in.tensors[i];
        oq_inspect_stats ts;
        compute_stats(c, r, &ts);
        oq_sb_reset(&b);
        oq_sb_name(&b, r->name);
        oq_sb_printf(&b, "  [%s%s", r->constant ? "Constant" : "initializer",
                  oq_tensor_is_external(r->tensor) ? ", external data" : "");
        if (*r->scope) {
            oq_sb_puts(&b, " in ");
            oq_sb_name(&b, r->scope);
        }
        oq_sb_printf(&b, "] %s", oq_dtype_name(r->tensor->dtype));
        oq_sb_dims(&b, r->tensor->dims, r->tensor->rank);
        oq_sb_printf(&b, ", %" PRId64 " elements", oq_tensor_numel(r->tensor));
        fprintf(f, "  %s\n", oq_sb_str(&b));
        if (ts.skipped) {
            fprintf(f, "      skipped (%s)\n", ts.skipped);
            continue;
        }
        const oq_stats *s = &ts.s;
        fprintf(f, "      min %.6g  max %.6g  mean %.6g  std %.6g  zeros %" PRId64
                   "  nan %" PRId64 "  inf %" PRId64 "\n",
                s->min, s->max, s->mean, s->std, s->zeros, s->nans, s->pos_infs + s->neg_infs);
        if (ts.axis >= 0) {
            oq_sb_reset(&b);
            oq_sb_name(&b, ts.consumer->op_type);
            if (ts.consumer->name && *ts.consumer->name) {
                oq_sb_puts(&b, " ");
                oq_sb_name(&b, ts.consumer->name);
            }
            fprintf(f, "      per output channel (axis %d, weight of %s), %" PRId64
                       " channels: min .. max\n",
                    ts.axis, oq_sb_str(&b), ts.channels);
            int64_t widest = 0;
            for (int64_t k = 0; k < ts.channels; k++)
                if (ts.maxs[k] - ts.mins[k] > ts.maxs[widest] - ts.mins[widest])
                    widest = k;
            for (int64_t k = 0; k < ts.channels; k++) {
                if (ts.channels > CHAN_SHOW && k == 8) {
                    fprintf(f, "        ... (%" PRId64 " more)\n", ts.channels - 10);
                    k = ts.channels - 3; /* then the last two */
                    continue;
                }
                fprintf(f, "        [%" PRId64 "] %.6g .. %.6g\n", k, ts.mins[k], ts.maxs[k]);
            }
            if (ts.channels > CHAN_SHOW)
                fprintf(f, "        widest: [%" PRId64 "] %.6g .. %.6g\n", widest, ts.mins[widest],
                        ts.maxs[widest]);
        }
        oq_inspect_stats_free(&ts);
    }
    c->oom |= b.oom;
    oq_sb_free(&b);
}

static void text_params(dump_ctx *c)
{
    FILE *f = c->out;
    int64_t tot[3][2] = {{0}}; /* tensors, elements, bytes x src */
    for (int d = 0; d < OQ_DTYPE_COUNT; d++)
        for (int s = 0; s < 2; s++) {
            tot[0][s] += c->in.params[d].tensors[s];
            tot[1][s] += c->in.params[d].elements[s];
            tot[2][s] += c->in.params[d].bytes[s];
        }
    fprintf(f, "parameters (all graphs): %" PRId64 " elements, %" PRId64 " bytes\n",
            tot[1][0] + tot[1][1], tot[2][0] + tot[2][1]);
    fprintf(f, "  held in initializers: %" PRId64 " tensors, %" PRId64 " elements, %" PRId64
               " bytes\n", tot[0][0], tot[1][0], tot[2][0]);
    fprintf(f, "  held in Constant nodes: %" PRId64 " tensors, %" PRId64 " elements, %" PRId64
               " bytes\n", tot[0][1], tot[1][1], tot[2][1]);
    if (c->in.n_sparse_initializers)
        fprintf(f, "  sparse initializers (not counted above): %" PRId64 "\n", c->in.n_sparse_initializers);
    if (tot[0][0] + tot[0][1] == 0)
        return;
    fprintf(f, "  %-14s %8s %14s %14s %16s %16s\n", "dtype", "tensors", "elements", "bytes",
            "init elements", "const elements");
    for (int d = 0; d < OQ_DTYPE_COUNT; d++) {
        const oq_inspect_params *t = &c->in.params[d];
        if (t->tensors[0] + t->tensors[1] == 0)
            continue;
        fprintf(f, "  %-14s %8" PRId64 " %14" PRId64 " %14" PRId64 " %16" PRId64 " %16" PRId64 "\n",
                oq_dtype_name(d), t->tensors[0] + t->tensors[1], t->elements[0] + t->elements[1],
                t->bytes[0] + t->bytes[1], t->elements[0], t->elements[1]);
    }
}

static void text_model(dump_ctx *c)
{
    FILE *f = c->out;
    const oq_model *m = c->m;
    oq_sbuf b = {0};
    oq_sb_name(&b, c->path);
    fprintf(f, "model: %s\n", oq_sb_str(&b));
    oq_sb_reset(&b);
    if ((m->producer_name && *m->producer_name) || (m->producer_version && *m->producer_version)) {
        oq_sb_text(&b, m->producer_name);
        if (m->producer_version && *m->producer_version) {
            oq_sb_puts(&b, " ");
            oq_sb_text(&b, m->producer_version);
        }
    } else {
        oq_sb_puts(&b, "(none)");
    }
    fprintf(f, "producer: %s\n", oq_sb_str(&b));
    if (m->has_ir_version)
        fprintf(f, "ir_version: %" PRId64 "\n", m->ir_version);
    else
        fprintf(f, "ir_version: (none)\n");
    if (m->has_model_version)
        fprintf(f, "model_version: %" PRId64 "\n", m->model_version);
    if (m->domain && *m->domain) {
        oq_sb_reset(&b);
        oq_sb_name(&b, m->domain);
        fprintf(f, "domain: %s\n", oq_sb_str(&b));
    }
    if (m->doc_string && *m->doc_string) {
        oq_sb_reset(&b);
        size_t len = strlen(m->doc_string);
        oq_sb_escaped(&b, m->doc_string, len > 72 ? 72 : len, false);
        fprintf(f, "doc_string: %s%s\n", oq_sb_str(&b), len > 72 ? "..." : "");
    }
    oq_sb_reset(&b);
    for (size_t i = 0; i < m->n_opsets; i++) {
        if (i)
            oq_sb_puts(&b, ", ");
        oq_sb_name(&b, domain_label(m->opsets[i].domain));
        oq_sb_printf(&b, " %" PRId64, m->opsets[i].version);
    }
    fprintf(f, "opset_import: %s\n", m->n_opsets ? oq_sb_str(&b) : "(none)");
    for (size_t i = 0; i < m->metadata.count; i++) {
        oq_sb_reset(&b);
        oq_sb_name(&b, m->metadata.items[i].key);
        oq_sb_puts(&b, " = ");
        oq_sb_text(&b, m->metadata.items[i].value);
        fprintf(f, "metadata: %s\n", oq_sb_str(&b));
    }
    if (m->n_functions) {
        oq_sb_reset(&b);
        for (size_t i = 0; i < m->n_functions; i++) {
            if (i)
                oq_sb_puts(&b, ", ");
            oq_sb_name(&b, m->functions[i]->domain);
            oq_sb_puts(&b, ":");
            oq_sb_name(&b, m->functions[i]->name);
        }
        fprintf(f, "functions (%zu): %s\n", m->n_functions, oq_sb_str(&b));
    }
    if (m->n_training_info)
        fprintf(f, "training_info: %zu\n", m->n_training_info);
    const oq_graph *g = m->graph;
    if (!g) {
        fprintf(f, "graph: (none)\n");
        oq_sb_free(&b);
        return;
    }
    oq_sb_reset(&b);
    oq_sb_name(&b, g->name);
    fprintf(f, "graph: %s: %zu node%s (%" PRId64 " incl. subgraphs), %zu initializer%s\n",
            oq_sb_str(&b), g->n_nodes, g->n_nodes == 1 ? "" : "s", c->in.n_nodes,
            g->n_initializers, g->n_initializers == 1 ? "" : "s");
    fprintf(f, "inputs (%zu):\n", g->n_inputs);
    text_vinfos(c, g->inputs, g->n_inputs, 2);
    fprintf(f, "outputs (%zu):\n", g->n_outputs);
    text_vinfos(c, g->outputs, g->n_outputs, 2);
    fprintf(f, "op types (%zu distinct, %" PRId64 " nodes incl. subgraphs):\n", c->in.n_ops,
            c->in.n_nodes);
    for (size_t i = 0; i < c->in.n_ops; i++) {
        oq_sb_reset(&b);
        oq_sb_name(&b, c->in.ops[i].op_type);
        if (*c->in.ops[i].domain) {
            oq_sb_puts(&b, "  domain ");
            oq_sb_name(&b, c->in.ops[i].domain);
        }
        fprintf(f, "  %6" PRId64 "  %s\n", c->in.ops[i].count, oq_sb_str(&b));
    }
    text_params(c);
    if (c->stats)
        text_stats(c);
    fprintf(f, "nodes (%zu):\n", g->n_nodes);
    text_graph_nodes(c, g, 2);
    c->oom |= b.oom;
    oq_sb_free(&b);
}

/* ---------------------------------------------------------------- command -------- */

/* What --stats could not compute for a tensor, printed when it happens. */
static void print_stats_diag(const oq_diag *d, void *user)
{
    (void)user;
    cli_print_diag(d);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: onnxq dump [--json | --dot] [--stats] MODEL\n"
            "\n"
            "Show what is in an ONNX model: producer, IR version, opset imports, graph\n"
            "inputs and outputs with types and shapes, an op-type histogram, parameter\n"
            "counts and bytes by dtype (initializers and Constant-node tensors), then every\n"
            "node with its inputs, outputs and attributes (subgraphs indented).\n"
            "\n"
            "  --json    one JSON document instead of text (schema: docs/dump.md); '--json -'\n"
            "            is the same (standard output, as with the other commands)\n"
            "  --stats   add min/max/mean/std/zero/NaN/Inf per initializer and Constant\n"
            "            tensor, and per-output-channel min/max of Conv/ConvTranspose/\n"
            "            Gemm/MatMul weights (text or JSON)\n"
            "  --dot     Graphviz of the graph: onnxq dump --dot m.onnx | dot -Tsvg > m.svg\n"
            "\n"
            "Exit status: 0 ok, 1 output or data error, 2 bad usage or unreadable model.\n");
}

int cmd_dump(int argc, char **argv)
{
    bool json = false, stats = false, dot = false, opts_done = false;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!opts_done && a[0] == '-' && a[1] != '\0') {
            if (cli_is_help(a)) {
                usage(stdout);
                return CLI_OK;
            } else if (strcmp(a, "--json") == 0) {
                json = true;
                if (i + 1 < argc && cli_is_stdout(argv[i + 1]))
                    i++; /* --json - : standard output, as for every command */
            } else if (strcmp(a, "--stats") == 0) {
                stats = true;
            } else if (strcmp(a, "--dot") == 0) {
                dot = true;
            } else if (strcmp(a, "--") == 0) {
                opts_done = true;
            } else {
                cli_error("dump", "unknown option \"%s\" (see onnxq dump --help)", a);
                return CLI_BAD;
            }
            continue;
        }
        if (path) {
            cli_error("dump", "more than one MODEL given (\"%s\" and \"%s\")", path, a);
            return CLI_BAD;
        }
        path = a;
    }
    if (!path) {
        cli_error("dump", "no MODEL given");
        usage(stderr);
        return CLI_BAD;
    }
    if (dot && (json || stats)) {
        cli_error("dump", "--dot cannot be combined with %s", json ? "--json" : "--stats");
        return CLI_BAD;
    }
    oq_status st = OQ_OK;
    oq_model *m = cli_load_model(path, &st);
    if (!m)
        return cli_exit_code(st == OQ_OK ? OQ_ERR_INTERNAL : st);

    dump_ctx c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.path = path;
    c.out = stdout;
    c.stats = stats;
    int rc = CLI_OK;
    oq_diag d;
    oq_diag_init(&d);
    if (oq_inspect_model(m, &c.in, &d) != OQ_OK) {
        cli_error("dump", "out of memory");
        rc = CLI_FAIL;
        goto done;
    }
    if (dot) {
        /* write errors are found below, as for text and JSON */
        if (oq_inspect_write_dot(m, path, stdout, &d) == OQ_ERR_NOMEM)
            c.oom = true;
    } else if (json) { /* the library's document (src/job/dump_json.c) */
        oq_inspect_json_result jr;
        oq_inspect_write_json(m, path, stats, stdout, print_stats_diag, NULL, &jr, &d);
        if (jr.incomplete) {
            cli_error("dump", "JSON output is incomplete (nesting deeper than %d levels)",
                      JSON_MAX_DEPTH);
            c.failed = true;
        }
        c.oom |= jr.oom;
        c.failed |= jr.stats_failed;
    } else {
        text_model(&c);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error("dump", "cannot write the output");
        rc = CLI_FAIL;
    } else if (c.oom) {
        cli_error("dump", "out of memory");
        rc = CLI_FAIL;
    } else if (c.failed) {
        rc = CLI_FAIL;
    }
done:
    oq_inspect_free(&c.in);
    oq_diag_free(&d);
    oq_model_free(m);
    return rc;
}
