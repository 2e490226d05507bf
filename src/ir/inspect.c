/* Inspecting a model (what onnxq dump shows): include/onnxq/inspect.h. */
#include "onnxq/inspect.h"

#include <stdlib.h>
#include <string.h>

#include "ir/text.h"
#include "ir/grow.h"

/* ---------------------------------------------------------------- collection ----- */

typedef struct ictx {
    oq_model *m;
    oq_inspect *in;
    size_t cap_tensors, cap_ops;
    bool oom;
} ictx;

static bool is_constant_node(const oq_node *n)
{
    return n && n->op_type && strcmp(n->op_type, "Constant") == 0 &&
           oq_domain_is_default(n->domain);
}

int64_t oq_inspect_tensor_bytes(const oq_tensor *t)
{
    int64_t n = oq_tensor_numel(t);
    if (n < 0)
        return 0;
    if (t->dtype == OQ_DTYPE_STRING) {
        int64_t s = 0;
        for (size_t i = 0; i < t->n_string_data; i++)
            s += (int64_t)t->string_data[i].len;
        return s;
    }
    int64_t b = oq_dtype_nbytes(t->dtype, n);
    return b < 0 ? 0 : b;
}

static void count_param(ictx *c, int src, int32_t dtype, int64_t numel, int64_t bytes)
{
    if (dtype < 0 || dtype >= OQ_DTYPE_COUNT)
        dtype = OQ_DTYPE_UNDEFINED;
    oq_inspect_params *d = &c->in->params[dtype];
    d->tensors[src]++;
    d->elements[src] += numel < 0 ? 0 : numel;
    d->bytes[src] += bytes;
}

static void add_tensor(ictx *c, oq_tensor *t, const char *name, bool constant,
                       const char *scope, oq_value *v)
{
    oq_inspect *in = c->in;
    oq_inspect_tensor *p = oq_grow(in->tensors, in->n_tensors, &c->cap_tensors, sizeof *p, 64);
    if (!p) {
        c->oom = true;
        return;
    }
    in->tensors = p;
    int64_t bytes = oq_inspect_tensor_bytes(t);
    in->tensors[in->n_tensors++] = (oq_inspect_tensor){t, name ? name : "", constant, scope, v, bytes};
    count_param(c, constant ? 1 : 0, t->dtype, oq_tensor_numel(t), bytes);
}

static void count_op(ictx *c, const oq_node *n)
{
    const char *op = n->op_type ? n->op_type : "";
    const char *dom = oq_domain_is_default(n->domain) ? "" : n->domain;
    oq_inspect *in = c->in;
    in->n_nodes++;
    for (size_t i = 0; i < in->n_ops; i++)
        if (strcmp(in->ops[i].op_type, op) == 0 && strcmp(in->ops[i].domain, dom) == 0) {
            in->ops[i].count++;
            return;
        }
    oq_inspect_op *p = oq_grow(in->ops, in->n_ops, &c->cap_ops, sizeof *p, 32);
    if (!p) {
        c->oom = true;
        return;
    }
    in->ops = p;
    in->ops[in->n_ops++] = (oq_inspect_op){op, dom, 1};
}

static int op_cmp(const void *pa, const void *pb)
{
    const oq_inspect_op *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    int r = strcmp(a->op_type, b->op_type);
    return r ? r : strcmp(a->domain, b->domain);
}

/* Constant nodes: value (tensor), value_float(s), value_int(s), value_string(s),
 * sparse_value. */
static void collect_constant(ictx *c, oq_node *n, const char *scope)
{
    oq_value *out = n->n_outputs ? n->outputs[0] : NULL;
    for (size_t i = 0; i < n->n_attrs; i++) {
        const oq_attr *a = n->attrs[i];
        if (!a->name)
            continue;
        if (strcmp(a->name, "value") == 0 && a->t)
            add_tensor(c, a->t, out ? out->name : a->t->name, true, scope, out);
        else if (strcmp(a->name, "value_float") == 0)
            count_param(c, 1, OQ_DTYPE_FLOAT, 1, 4);
        else if (strcmp(a->name, "value_floats") == 0)
            count_param(c, 1, OQ_DTYPE_FLOAT, (int64_t)a->n_floats, 4 * (int64_t)a->n_floats);
        else if (strcmp(a->name, "value_int") == 0)
            count_param(c, 1, OQ_DTYPE_INT64, 1, 8);
        else if (strcmp(a->name, "value_ints") == 0)
            count_param(c, 1, OQ_DTYPE_INT64, (int64_t)a->n_ints, 8 * (int64_t)a->n_ints);
        else if (strcmp(a->name, "value_string") == 0)
            count_param(c, 1, OQ_DTYPE_STRING, 1, (int64_t)a->s.len);
        else if (strcmp(a->name, "value_strings") == 0) {
            int64_t bytes = 0;
            for (size_t k = 0; k < a->n_strings; k++)
                bytes += (int64_t)a->strings[k].len;
            count_param(c, 1, OQ_DTYPE_STRING, (int64_t)a->n_strings, bytes);
        } else if (strcmp(a->name, "sparse_value") == 0 && a->sparse_tensor &&
                   a->sparse_tensor->values) {
            const oq_tensor *t = a->sparse_tensor->values;
            count_param(c, 1, t->dtype, oq_tensor_numel(t), oq_inspect_tensor_bytes(t));
        }
    }
}

static void collect(ictx *c, oq_graph *g, const char *scope)
{
    for (size_t i = 0; i < g->n_initializers; i++) {
        oq_tensor *t = g->initializers[i];
        add_tensor(c, t, t->name, false, scope,
                   oq_graph_find_local(g, t->name ? t->name : ""));
    }
    c->in->n_sparse_initializers += (int64_t)g->n_sparse_initializers;
    size_t idx = 0;
    for (oq_node *n = g->first; n; n = n->next, idx++) {
        count_op(c, n);
        if (is_constant_node(n))
            collect_constant(c, n, scope);
        for (size_t i = 0; i < n->n_attrs; i++) {
            const oq_attr *a = n->attrs[i];
            size_t ng = a->type == OQ_ATTR_GRAPH ? (a->g ? 1 : 0) : a->n_graphs;
            for (size_t k = 0; k < ng; k++) {
                oq_graph *sub = a->type == OQ_ATTR_GRAPH ? a->g : a->graphs[k];
                oq_sbuf s = {0};
                if (*scope)
                    oq_sb_printf(&s, "%s/", scope);
                if (n->name && *n->name)
                    oq_sb_puts(&s, n->name);
                else
                    oq_sb_printf(&s, "#%zu", idx);
                oq_sb_printf(&s, ".%s", a->name ? a->name : "");
                if (a->type == OQ_ATTR_GRAPHS)
                    oq_sb_printf(&s, "[%zu]", k);
                char *sc = oq_model_strdup(c->m, oq_sb_str(&s));
                if (s.oom || !sc)
                    c->oom = true;
                oq_sb_free(&s);
                if (sc)
                    collect(c, sub, sc);
            }
        }
    }
}

/* Output-channel axis for a weight, found from its first Conv/Gemm/MatMul consumer. */
static int weight_axis(const oq_inspect_tensor *r, const oq_node **consumer)
{
    *consumer = NULL;
    if (!r->value)
        return -1;
    for (size_t i = 0; i < r->value->n_uses; i++) {
        const oq_use *u = &r->value->uses[i];
        int ax = oq_weight_channel_axis(u->node, u->index, r->tensor->rank);
        if (ax >= 0 && r->tensor->dims[ax] > 0) {
            *consumer = u->node;
            return ax;
        }
    }
    return -1;
}


oq_status oq_inspect_model(oq_model *m, oq_inspect *out, oq_diag *d)
{
    memset(out, 0, sizeof *out);
    ictx c = {m, out, 0, 0, false};
    if (m->graph)
        collect(&c, m->graph, "");
    if (c.oom) {
        oq_inspect_free(out);
        return oq_diag_error(d, OQ_ERR_NOMEM, "inspect: out of memory");
    }
    if (out->n_ops > 1)
        qsort(out->ops, out->n_ops, sizeof *out->ops, op_cmp);
    return OQ_OK;
}

void oq_inspect_free(oq_inspect *in)
{
    free(in->tensors);
    free(in->ops);
    memset(in, 0, sizeof *in);
}

/* ---------------------------------------------------------------- statistics ----- */

oq_status oq_inspect_tensor_stats(const oq_inspect_tensor *r, oq_inspect_stats *ts, oq_diag *d)
{
    memset(ts, 0, sizeof *ts);
    ts->axis = -1;
    if (!oq_stats_dtype_supported(r->tensor->dtype)) {
        ts->skipped = oq_dtype_name(r->tensor->dtype);
        return OQ_OK;
    }
    oq_status st = oq_tensor_stats(r->tensor, &ts->s, d);
    if (st != OQ_OK) {
        ts->skipped = "unreadable";
        return st;
    }
    ts->axis = ts->s.count > 0 ? weight_axis(r, &ts->consumer) : -1;
    if (ts->axis < 0)
        return OQ_OK;
    ts->channels = r->tensor->dims[ts->axis];
    ts->mins = malloc((size_t)ts->channels * sizeof(double));
    ts->maxs = malloc((size_t)ts->channels * sizeof(double));
    if (!ts->mins || !ts->maxs)
        st = oq_diag_error(d, OQ_ERR_NOMEM, "inspect: out of memory");
    else if (oq_tensor_channel_minmax(r->tensor, (size_t)ts->axis, ts->mins, ts->maxs, d) != OQ_OK)
        st = OQ_OK; /* the per-tensor statistics stand; d says why there are no channels */
    else
        return OQ_OK;
    free(ts->mins);
    free(ts->maxs);
    ts->mins = ts->maxs = NULL;
    ts->axis = -1;
    ts->consumer = NULL;
    ts->channels = 0;
    return st;
}

void oq_inspect_stats_free(oq_inspect_stats *s)
{
    free(s->mins);
    free(s->maxs);
    s->mins = s->maxs = NULL;
}

/* ---------------------------------------------------------------- type text ------ */

static char *sb_take(oq_sbuf *b)
{
    if (b->oom) {
        oq_sb_free(b);
        return NULL;
    }
    oq_sb_puts(b, ""); /* allocated even when empty */
    return b->oom ? NULL : b->p;
}

char *oq_type_text(const oq_type *t)
{
    oq_sbuf b = {0};
    oq_sb_type(&b, t);
    return sb_take(&b);
}

char *oq_value_type_text(const oq_value *v)
{
    oq_sbuf b = {0};
    if (!oq_sb_value_type(&b, v)) {
        oq_sb_free(&b);
        return NULL;
    }
    return sb_take(&b);
}

/* ---------------------------------------------------------------- Graphviz ------- */

typedef struct dctx {
    FILE *out;
    uint8_t *declared;    /* bitmap over value ids */
    size_t declared_bits;
    unsigned dot_counter;
    bool oom;
} dctx;

static void put_indent(FILE *f, int n)
{
    for (int i = 0; i < n; i++)
        fputc(' ', f);
}

/* Contents of a DOT double-quoted string: `"` and `\` escaped, control characters and
 * invalid UTF-8 bytes replaced by '?'. "\n" in `s` is written as a line break. */
static void dot_esc_n(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            fputc('\\', f);
            fputc(ch, f);
            i++;
        } else if (ch == '\n') {
            fputs("\\n", f);
            i++;
        } else if (ch < 0x20 || ch == 0x7f) {
            fputc('?', f);
            i++;
        } else {
            size_t len = oq_utf8_len((const unsigned char *)s + i, n - i);
            if (len == 0) {
                fputc('?', f);
                i++;
            } else {
                fwrite(s + i, 1, len, f);
                i += len;
            }
        }
    }
}

static void dot_esc(FILE *f, const char *s) { dot_esc_n(f, s ? s : "", s ? strlen(s) : 0); }

static bool dot_declared(dctx *c, const oq_value *v)
{
    if (!c->declared || v->id >= c->declared_bits)
        return false;
    return (c->declared[v->id / 8] >> (v->id % 8)) & 1;
}

static void dot_mark(dctx *c, const oq_value *v)
{
    if (c->declared && v->id < c->declared_bits)
        c->declared[v->id / 8] |= (uint8_t)(1u << (v->id % 8));
}

/* A box-less node for a graph input, initializer or undefined value. */
static void dot_value_node(dctx *c, const oq_value *v, int indent)
{
    if (dot_declared(c, v))
        return;
    dot_mark(c, v);
    oq_sbuf b = {0};
    oq_sb_puts(&b, v->name ? v->name : "");
    oq_sb_puts(&b, "\n");
    if (!oq_sb_value_type(&b, v))
        oq_sb_puts(&b, "?");
    put_indent(c->out, indent);
    fprintf(c->out, "v%u [label=\"", (unsigned)v->id);
    dot_esc(c->out, oq_sb_str(&b));
    if (v->kind == OQ_VALUE_INPUT || v->is_graph_input)
        fputs("\", shape=ellipse, fillcolor=\"#cfe2ff\"];\n", c->out);
    else if (v->kind == OQ_VALUE_INITIALIZER)
        fputs("\", shape=note, fillcolor=\"#fff3cd\", fontsize=9];\n", c->out);
    else
        fputs("\", shape=ellipse, style=dashed];\n", c->out);
    c->oom |= b.oom;
    oq_sb_free(&b);
}

/* Edge from where value v comes from to the DOT node `to`, labelled with its type. */
static void dot_edge(dctx *c, const oq_value *v, const char *to, int indent)
{
    char from[32];
    if (v->kind == OQ_VALUE_NODE && v->producer) {
        snprintf(from, sizeof from, "n%u", (unsigned)v->producer->id);
    } else {
        dot_value_node(c, v, indent);
        snprintf(from, sizeof from, "v%u", (unsigned)v->id);
    }
    oq_sbuf b = {0};
    put_indent(c->out, indent);
    fprintf(c->out, "%s -> %s", from, to);
    if (oq_sb_value_type(&b, v)) {
        fputs(" [label=\"", c->out);
        dot_esc(c->out, oq_sb_str(&b));
        fputs("\"]", c->out);
    }
    fputs(";\n", c->out);
    c->oom |= b.oom;
    oq_sb_free(&b);
}

static void dot_graph(dctx *c, const oq_graph *g, int indent)
{
    FILE *f = c->out;
    for (size_t i = 0; i < g->n_inputs; i++)
        if (g->inputs[i]->value)
            dot_value_node(c, g->inputs[i]->value, indent);
    for (size_t i = 0; i < g->n_initializers; i++) {
        oq_value *v = oq_graph_find_local(g, g->initializers[i]->name ? g->initializers[i]->name : "");
        if (v && v->n_uses)
            dot_value_node(c, v, indent);
    }
    for (const oq_node *n = g->first; n; n = n->next) {
        char id[32];
        snprintf(id, sizeof id, "n%u", (unsigned)n->id);
        put_indent(f, indent);
        fprintf(f, "%s [label=\"", id);
        if (!oq_domain_is_default(n->domain)) {
            dot_esc(f, n->domain);
            fputs("::", f);
        }
        dot_esc(f, n->op_type);
        if (n->name && *n->name) {
            fputs("\\n", f);
            dot_esc(f, n->name);
        }
        fputs("\"];\n", f);
        for (size_t i = 0; i < n->n_inputs; i++)
            if (n->inputs[i])
                dot_edge(c, n->inputs[i], id, indent);
        for (size_t i = 0; i < n->n_attrs; i++) {
            const oq_attr *a = n->attrs[i];
            size_t ng = a->type == OQ_ATTR_GRAPH ? (a->g ? 1 : 0)
                        : a->type == OQ_ATTR_GRAPHS ? a->n_graphs : 0;
            for (size_t k = 0; k < ng; k++) {
                const oq_graph *sub = a->type == OQ_ATTR_GRAPH ? a->g : a->graphs[k];
                put_indent(f, indent);
                fprintf(f, "subgraph cluster_%u {\n", c->dot_counter++);
                put_indent(f, indent + 2);
                fputs("label=\"", f);
                dot_esc(f, n->op_type);
                if (n->name && *n->name) {
                    fputc(' ', f);
                    dot_esc(f, n->name);
                }
                fputs(": ", f);
                dot_esc(f, a->name);
                if (a->type == OQ_ATTR_GRAPHS)
                    fprintf(f, "[%zu]", k);
                fputs("\"; style=dashed;\n", f);
                dot_graph(c, sub, indent + 2);
                put_indent(f, indent);
                fputs("}\n", f);
                /* tie the cluster to the node that owns it (dotted, no arrow) */
                if (sub->first) {
                    put_indent(f, indent);
                    fprintf(f, "%s -> n%u [style=dotted, arrowhead=none];\n", id,
                            (unsigned)sub->first->id);
                }
            }
        }
    }
    for (size_t i = 0; i < g->n_outputs; i++) {
        const oq_value *v = g->outputs[i]->value;
        if (!v)
            continue;
        char id[32];
        snprintf(id, sizeof id, "out%u", c->dot_counter++);
        put_indent(f, indent);
        fprintf(f, "%s [label=\"", id);
        dot_esc(f, v->name);
        fputs("\", shape=ellipse, fillcolor=\"#d1e7dd\"];\n", f);
        dot_edge(c, v, id, indent);
    }
}

oq_status oq_inspect_write_dot(oq_model *m, const char *title, FILE *f, oq_diag *d)
{
    dctx c = {f, NULL, (size_t)m->next_id + 1, 0, false};
    c.declared = calloc(c.declared_bits / 8 + 1, 1);
    if (!c.declared)
        return oq_diag_error(d, OQ_ERR_NOMEM, "inspect: out of memory");
    fputs("digraph onnx {\n", f);
    fputs("  graph [rankdir=TB, fontname=\"Helvetica\", label=\"", f);
    dot_esc(f, title);
    if (m->graph && m->graph->name && *m->graph->name) {
        fputs(": ", f);
        dot_esc(f, m->graph->name);
    }
    fputs("\"];\n", f);
    fputs("  node [shape=box, style=\"rounded,filled\", fillcolor=\"#eeeeee\", "
          "fontname=\"Helvetica\", fontsize=10];\n", f);
    fputs("  edge [fontname=\"Helvetica\", fontsize=8];\n", f);
    if (m->graph)
        dot_graph(&c, m->graph, 2);
    fputs("}\n", f);
    free(c.declared);
    if (c.oom)
        return oq_diag_error(d, OQ_ERR_NOMEM, "inspect: out of memory");
    if (ferror(f))
        return oq_diag_error(d, OQ_ERR_IO, "inspect: cannot write the Graphviz output");
    return OQ_OK;
}
