/* onnxq dump [--json] [--stats] [--dot] MODEL — inspect a model.
 *
 * Text (default), one JSON document (--json, schema in docs/dump.md) or Graphviz
 * (--dot). --stats adds per-tensor statistics of every initializer and Constant-node
 * tensor, with per-output-channel min/max for Conv/ConvTranspose/Gemm/MatMul weights.
 * Output depends only on the model file: no addresses, times or hash orders.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/json.h"
#include "onnxq/stats.h"

#define LIST_SHOW 16      /* lists/tensors up to this many values are shown whole */
#define LIST_HEAD 10      /* otherwise the first LIST_HEAD values, then "..." */
#define STR_SHOW 48       /* string values longer than this are cut */
#define CHAN_SHOW 16      /* text: per-channel rows shown whole up to this many */

/* ---------------------------------------------------------------- string builder - */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        sb_add(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_add(b, big, (size_t)n);
    free(big);
}

static const char *sb_str(const sbuf *b) { return b->p ? b->p : ""; }
static void sb_reset(sbuf *b) { b->len = 0; if (b->p) b->p[0] = '\0'; }
static void sb_free(sbuf *b) { free(b->p); memset(b, 0, sizeof *b); }

/* Text with C-style escapes for control characters, `"`, `\` and invalid UTF-8;
 * quoted when `quote`. */
static void sb_escaped(sbuf *b, const char *s, size_t n, bool quote);

/* A name in text output: bare when it is made of plain characters, else quoted with
 * C-style escapes (also for the empty name). */
static void sb_name_n(sbuf *b, const char *s, size_t n)
{
    bool plain = n > 0;
    for (size_t i = 0; i < n && plain; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("_.:/-+@#[]()<>", c)))
            plain = false;
    }
    if (plain)
        sb_add(b, s, n);
    else
        sb_escaped(b, s, n, true);
}

static void sb_escaped(sbuf *b, const char *s, size_t n, bool quote)
{
    if (quote)
        sb_puts(b, "\"");
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if ((c == '"' && quote) || c == '\\') {
            char e[2] = {'\\', (char)c};
            sb_add(b, e, 2);
            i++;
        } else if (c == '\n') {
            sb_puts(b, "\\n");
            i++;
        } else if (c == '\t') {
            sb_puts(b, "\\t");
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            sb_printf(b, "\\x%02x", c);
            i++;
        } else {
            size_t len = json_utf8_len((const unsigned char *)s + i, n - i);
            if (len == 0) {
                sb_printf(b, "\\x%02x", c);
                i++;
            } else {
                sb_add(b, s + i, len);
                i += len;
            }
        }
    }
    if (quote)
        sb_puts(b, "\"");
}

/* Free text (producer, doc string, metadata): escaped but not quoted. */
static void sb_text(sbuf *b, const char *s)
{
    sb_escaped(b, s ? s : "", s ? strlen(s) : 0, false);
}

static void sb_name(sbuf *b, const char *s) { sb_name_n(b, s ? s : "", s ? strlen(s) : 0); }

/* Shortest %g form that reads back to the same value (float32 or double). */
static void sb_real(sbuf *b, double v, bool f32)
{
    if (isnan(v)) {
        sb_puts(b, "nan");
        return;
    }
    if (isinf(v)) {
        sb_puts(b, v > 0 ? "inf" : "-inf");
        return;
    }
    char buf[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (f32 ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v)
            break;
    }
    sb_puts(b, buf);
}

/* ---------------------------------------------------------------- types, values -- */

static const char *domain_label(const char *d)
{
    return oq_domain_is_default(d) ? "ai.onnx" : d;
}

static void sb_dims(sbuf *b, const int64_t *dims, size_t rank)
{
    sb_puts(b, "[");
    for (size_t i = 0; i < rank; i++)
        sb_printf(b, "%s%" PRId64, i ? ", " : "", dims[i]);
    sb_puts(b, "]");
}

/* float32[1, 3, N, ?]; "[...]" when the rank is unknown, "[]" for a scalar. */
static void sb_type(sbuf *b, const oq_type *t)
{
    if (!t) {
        sb_puts(b, "?");
        return;
    }
    switch (t->kind) {
    case OQ_TYPE_TENSOR:
    case OQ_TYPE_SPARSE_TENSOR:
        if (t->kind == OQ_TYPE_SPARSE_TENSOR)
            sb_puts(b, "sparse ");
        sb_puts(b, t->has_elem_type ? oq_dtype_name(t->elem_type) : "?");
        if (!t->shape) {
            sb_puts(b, "[...]");
            break;
        }
        sb_puts(b, "[");
        for (size_t i = 0; i < t->shape->rank; i++) {
            const oq_dim *d = &t->shape->dims[i];
            if (i)
                sb_puts(b, ", ");
            if (d->kind == OQ_DIM_VALUE)
                sb_printf(b, "%" PRId64, d->value);
            else if (d->kind == OQ_DIM_PARAM && d->param)
                sb_name(b, d->param);
            else
                sb_puts(b, "?");
        }
        sb_puts(b, "]");
        break;
    case OQ_TYPE_SEQUENCE:
        sb_puts(b, "seq(");
        sb_type(b, t->elem);
        sb_puts(b, ")");
        break;
    case OQ_TYPE_OPTIONAL:
        sb_puts(b, "optional(");
        sb_type(b, t->elem);
        sb_puts(b, ")");
        break;
    case OQ_TYPE_MAP:
        sb_printf(b, "map(%s, ", t->has_key_type ? oq_dtype_name(t->key_type) : "?");
        sb_type(b, t->elem);
        sb_puts(b, ")");
        break;
    case OQ_TYPE_OPAQUE:
        sb_printf(b, "opaque(%s%s%s)", t->opaque_domain ? t->opaque_domain : "",
                  t->opaque_domain && *t->opaque_domain ? "." : "",
                  t->opaque_name ? t->opaque_name : "");
        break;
    default:
        sb_puts(b, "?");
        break;
    }
}

static bool is_constant_node(const oq_node *n)
{
    return n && n->op_type && strcmp(n->op_type, "Constant") == 0 &&
           oq_domain_is_default(n->domain);
}

/* The tensor a Constant node holds in its "value" attribute, or NULL. */
static oq_tensor *constant_tensor(const oq_node *n)
{
    if (!is_constant_node(n))
        return NULL;
    oq_attr *a = oq_node_attr(n, "value");
    return a && a->t ? a->t : NULL;
}

/* Best known type of a value as text; false (nothing written) when unknown. */
static bool sb_value_type(sbuf *b, const oq_value *v)
{
    if (!v)
        return false;
    if (v->type) {
        sb_type(b, v->type);
        return true;
    }
    const oq_tensor *t = v->initializer;
    if (!t && v->kind == OQ_VALUE_NODE && v->producer_index == 0)
        t = constant_tensor(v->producer);
    if (t) {
        sb_puts(b, oq_dtype_name(t->dtype));
        sb_dims(b, t->dims, t->rank);
        return true;
    }
    return false;
}

/* Element i of a dense tensor view. */
static void sb_elem(sbuf *b, const void *data, int32_t dtype, int64_t i)
{
    const uint8_t *p = data;
    double x;
    switch (dtype) {
    case OQ_DTYPE_INT64: {
        int64_t v;
        memcpy(&v, p + (size_t)i * 8, 8);
        sb_printf(b, "%" PRId64, v);
        return;
    }
    case OQ_DTYPE_UINT64: {
        uint64_t v;
        memcpy(&v, p + (size_t)i * 8, 8);
        sb_printf(b, "%" PRIu64, v);
        return;
    }
    case OQ_DTYPE_BOOL:
        sb_puts(b, p[i] ? "true" : "false");
        return;
    case OQ_DTYPE_STRING: {
        const oq_bytes *s = (const oq_bytes *)data + i;
        size_t n = s->len > STR_SHOW ? STR_SHOW : s->len;
        sb_name_n(b, (const char *)s->data, n);
        if (n < s->len)
            sb_puts(b, "...");
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
        sb_puts(b, "(");
        sb_real(b, re, dtype == OQ_DTYPE_COMPLEX64);
        sb_puts(b, im < 0 ? "" : "+");
        sb_real(b, im, dtype == OQ_DTYPE_COMPLEX64);
        sb_puts(b, "j)");
        return;
    }
    default:
        break;
    }
    if (!oq_elems_to_double(data, dtype, i, 1, &x)) {
        sb_puts(b, "?");
        return;
    }
    if (oq_dtype_is_float(dtype))
        sb_real(b, x, dtype != OQ_DTYPE_DOUBLE);
    else
        sb_printf(b, "%.0f", x);
}

static bool tensor_values_printable(int32_t dtype)
{
    return oq_stats_dtype_supported(dtype) || dtype == OQ_DTYPE_STRING ||
           dtype == OQ_DTYPE_COMPLEX64 || dtype == OQ_DTYPE_COMPLEX128;
}

/* Dense data of a tensor for display, or NULL (errors are not fatal here). */
static const void *tensor_peek(oq_tensor *t)
{
    if (!tensor_values_printable(t->dtype) || oq_tensor_numel(t) < 0)
        return NULL;
    oq_diag d;
    oq_diag_init(&d);
    const void *data = oq_tensor_data(t, &d);
    oq_diag_free(&d);
    return data;
}

/* tensor float32[2, 3] {1, 2, 3, 4, 5, 6}; long ones show the first values. */
static void sb_tensor(sbuf *b, oq_tensor *t)
{
    sb_puts(b, "tensor ");
    sb_puts(b, oq_dtype_name(t->dtype));
    sb_dims(b, t->dims, t->rank);
    int64_t n = oq_tensor_numel(t);
    if (oq_tensor_is_external(t)) {
        sb_printf(b, " (%" PRId64 " values, external)", n);
        return;
    }
    const void *data = tensor_peek(t);
    if (!data) {
        sb_printf(b, " (%" PRId64 " values)", n);
        return;
    }
    int64_t show = n <= LIST_SHOW ? n : LIST_HEAD;
    sb_puts(b, " {");
    for (int64_t i = 0; i < show; i++) {
        if (i)
            sb_puts(b, ", ");
        sb_elem(b, data, t->dtype, i);
    }
    if (show < n)
        sb_printf(b, ", ... (%" PRId64 " values)", n);
    sb_puts(b, "}");
}

/* One-line form of an attribute value (graphs are printed by the caller). */
static void sb_attr(sbuf *b, const oq_attr *a)
{
    size_t n, show;
    if (a->ref_attr_name) {
        sb_printf(b, "@%s (reference to a function attribute)", a->ref_attr_name);
        return;
    }
    switch (a->type) {
    case OQ_ATTR_FLOAT: sb_real(b, a->f, true); break;
    case OQ_ATTR_INT: sb_printf(b, "%" PRId64, a->i); break;
    case OQ_ATTR_STRING:
        sb_name_n(b, (const char *)a->s.data, a->s.len > STR_SHOW ? STR_SHOW : a->s.len);
        if (a->s.len > STR_SHOW)
            sb_printf(b, "... (%zu bytes)", a->s.len);
        break;
    case OQ_ATTR_TENSOR:
        if (a->t)
            sb_tensor(b, a->t);
        break;
    case OQ_ATTR_SPARSE_TENSOR:
        sb_puts(b, "sparse ");
        if (a->sparse_tensor) {
            const oq_sparse_tensor *s = a->sparse_tensor;
            sb_puts(b, s->values ? oq_dtype_name(s->values->dtype) : "?");
            sb_dims(b, s->dims, s->rank);
            sb_printf(b, " (%" PRId64 " stored values)",
                      s->values ? oq_tensor_numel(s->values) : 0);
        }
        break;
    case OQ_ATTR_TYPE_PROTO: sb_type(b, a->tp); break;
    case OQ_ATTR_FLOATS:
    case OQ_ATTR_INTS:
    case OQ_ATTR_STRINGS:
        n = a->type == OQ_ATTR_FLOATS ? a->n_floats
            : a->type == OQ_ATTR_INTS ? a->n_ints : a->n_strings;
        show = n <= LIST_SHOW ? n : LIST_HEAD;
        sb_puts(b, "[");
        for (size_t i = 0; i < show; i++) {
            if (i)
                sb_puts(b, ", ");
            if (a->type == OQ_ATTR_FLOATS)
                sb_real(b, a->floats[i], true);
            else if (a->type == OQ_ATTR_INTS)
                sb_printf(b, "%" PRId64, a->ints[i]);
            else {
                size_t len = a->strings[i].len > STR_SHOW ? STR_SHOW : a->strings[i].len;
                sb_name_n(b, (const char *)a->strings[i].data, len);
                if (len < a->strings[i].len)
                    sb_puts(b, "...");
            }
        }
        if (show < n)
            sb_printf(b, ", ... (%zu values)", n);
        sb_puts(b, "]");
        break;
    case OQ_ATTR_TENSORS:
        sb_printf(b, "%zu tensors [", a->n_tensors);
        for (size_t i = 0; i < a->n_tensors && i < LIST_HEAD; i++) {
            if (i)
                sb_puts(b, ", ");
            sb_puts(b, oq_dtype_name(a->tensors[i]->dtype));
            sb_dims(b, a->tensors[i]->dims, a->tensors[i]->rank);
        }
        sb_puts(b, a->n_tensors > LIST_HEAD ? ", ...]" : "]");
        break;
    case OQ_ATTR_SPARSE_TENSORS: sb_printf(b, "%zu sparse tensors", a->n_sparse_tensors); break;
    case OQ_ATTR_TYPE_PROTOS:
        sb_puts(b, "[");
        for (size_t i = 0; i < a->n_type_protos; i++) {
            if (i)
                sb_puts(b, ", ");
            sb_type(b, a->type_protos[i]);
        }
        sb_puts(b, "]");
        break;
    default:
        sb_printf(b, "(attribute type %d)", (int)a->type);
        break;
    }
}

/* ---------------------------------------------------------------- collection ----- */

typedef struct tensor_ref {
    oq_tensor *t;
    const char *name;    /* value name (Constant: its output) */
    bool constant;       /* from a Constant node, else an initializer */
    const char *scope;   /* "" for the main graph, else "node.attr/..." */
    oq_value *value;     /* the value it defines, or NULL */
} tensor_ref;

typedef struct op_count {
    const char *op, *domain;
    int64_t count;
} op_count;

typedef struct dtype_total {
    int64_t tensors[2], elements[2], bytes[2]; /* [0] initializers, [1] Constant nodes */
} dtype_total;

typedef struct dump_ctx {
    oq_model *m;
    const char *path;
    FILE *out;
    bool stats;
    tensor_ref *tensors;
    size_t n_tensors, cap_tensors;
    op_count *ops;
    size_t n_ops, cap_ops;
    int64_t n_nodes_all;
    int64_t n_sparse_init;
    dtype_total by_dtype[OQ_DTYPE_COUNT];
    bool oom;
    bool failed;          /* a tensor could not be read for --stats */
    /* dot */
    uint8_t *declared;    /* bitmap over value ids */
    size_t declared_bits;
    unsigned dot_counter;
} dump_ctx;

static int64_t tensor_bytes(const oq_tensor *t)
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

static void count_param(dump_ctx *c, int src, int32_t dtype, int64_t numel, int64_t bytes)
{
    if (dtype < 0 || dtype >= OQ_DTYPE_COUNT)
        dtype = OQ_DTYPE_UNDEFINED;
    dtype_total *d = &c->by_dtype[dtype];
    d->tensors[src]++;
    d->elements[src] += numel < 0 ? 0 : numel;
    d->bytes[src] += bytes;
}

static void add_tensor(dump_ctx *c, oq_tensor *t, const char *name, bool constant,
                       const char *scope, oq_value *v)
{
    if (c->n_tensors == c->cap_tensors) {
        size_t cap = c->cap_tensors ? c->cap_tensors * 2 : 64;
        tensor_ref *p = realloc(c->tensors, cap * sizeof *p);
        if (!p) {
            c->oom = true;
            return;
        }
        c->tensors = p;
        c->cap_tensors = cap;
    }
    c->tensors[c->n_tensors++] = (tensor_ref){t, name ? name : "", constant, scope, v};
    count_param(c, constant ? 1 : 0, t->dtype, oq_tensor_numel(t), tensor_bytes(t));
}

static void count_op(dump_ctx *c, const oq_node *n)
{
    const char *op = n->op_type ? n->op_type : "";
    const char *dom = oq_domain_is_default(n->domain) ? "" : n->domain;
    c->n_nodes_all++;
    for (size_t i = 0; i < c->n_ops; i++)
        if (strcmp(c->ops[i].op, op) == 0 && strcmp(c->ops[i].domain, dom) == 0) {
            c->ops[i].count++;
            return;
        }
    if (c->n_ops == c->cap_ops) {
        size_t cap = c->cap_ops ? c->cap_ops * 2 : 32;
        op_count *p = realloc(c->ops, cap * sizeof *p);
        if (!p) {
            c->oom = true;
            return;
        }
        c->ops = p;
        c->cap_ops = cap;
    }
    c->ops[c->n_ops++] = (op_count){op, dom, 1};
}

static int op_cmp(const void *pa, const void *pb)
{
    const op_count *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    int r = strcmp(a->op, b->op);
    return r ? r : strcmp(a->domain, b->domain);
}

/* Constant nodes: value (tensor), value_float(s), value_int(s), value_string(s),
 * sparse_value. */
static void collect_constant(dump_ctx *c, oq_node *n, const char *scope)
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
            count_param(c, 1, t->dtype, oq_tensor_numel(t), tensor_bytes(t));
        }
    }
}

static void collect(dump_ctx *c, oq_graph *g, const char *scope)
{
    for (size_t i = 0; i < g->n_initializers; i++) {
        oq_tensor *t = g->initializers[i];
        add_tensor(c, t, t->name, false, scope,
                   oq_graph_find_local(g, t->name ? t->name : ""));
    }
    c->n_sparse_init += (int64_t)g->n_sparse_initializers;
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
                sbuf s = {0};
                if (*scope)
                    sb_printf(&s, "%s/", scope);
                if (n->name && *n->name)
                    sb_puts(&s, n->name);
                else
                    sb_printf(&s, "#%zu", idx);
                sb_printf(&s, ".%s", a->name ? a->name : "");
                if (a->type == OQ_ATTR_GRAPHS)
                    sb_printf(&s, "[%zu]", k);
                char *sc = oq_model_strdup(c->m, sb_str(&s));
                if (s.oom || !sc)
                    c->oom = true;
                sb_free(&s);
                if (sc)
                    collect(c, sub, sc);
            }
        }
    }
}

/* Output-channel axis for a weight, found from its first Conv/Gemm/MatMul consumer. */
static int weight_axis(const tensor_ref *r, const oq_node **consumer)
{
    *consumer = NULL;
    if (!r->value)
        return -1;
    for (size_t i = 0; i < r->value->n_uses; i++) {
        const oq_use *u = &r->value->uses[i];
        int ax = oq_weight_channel_axis(u->node, u->index, r->t->rank);
        if (ax >= 0 && r->t->dims[ax] > 0) {
            *consumer = u->node;
            return ax;
        }
    }
    return -1;
}

typedef struct tensor_stats {
    bool ok;
    const char *skipped;   /* reason when no statistics (string, complex, error) */
    oq_stats s;
    int axis;
    const oq_node *consumer;
    double *mins, *maxs;   /* axis >= 0 */
    int64_t nch;
} tensor_stats;

static void compute_stats(dump_ctx *c, const tensor_ref *r, tensor_stats *ts)
{
    memset(ts, 0, sizeof *ts);
    ts->axis = -1;
    if (!oq_stats_dtype_supported(r->t->dtype)) {
        ts->skipped = oq_dtype_name(r->t->dtype);
        return;
    }
    oq_diag d;
    oq_diag_init(&d);
    d.file = c->path;
    if (oq_tensor_stats(r->t, &ts->s, &d) != OQ_OK) {
        cli_print_diag(&d);
        oq_diag_free(&d);
        ts->skipped = "unreadable";
        c->failed = true;
        return;
    }
    ts->ok = true;
    ts->axis = ts->s.count > 0 ? weight_axis(r, &ts->consumer) : -1;
    if (ts->axis >= 0) {
        ts->nch = r->t->dims[ts->axis];
        ts->mins = malloc((size_t)ts->nch * sizeof(double));
        ts->maxs = malloc((size_t)ts->nch * sizeof(double));
        if (!ts->mins || !ts->maxs ||
            oq_tensor_channel_minmax(r->t, (size_t)ts->axis, ts->mins, ts->maxs, &d) != OQ_OK) {
            cli_print_diag(&d);
            if (!ts->mins || !ts->maxs)
                c->oom = true;
            free(ts->mins);
            free(ts->maxs);
            ts->mins = ts->maxs = NULL;
            ts->axis = -1;
        }
    }
    oq_diag_free(&d);
}

static void free_stats(tensor_stats *ts)
{
    free(ts->mins);
    free(ts->maxs);
}

/* ---------------------------------------------------------------- text ----------- */

static void put_indent(FILE *f, int n)
{
    for (int i = 0; i < n; i++)
        fputc(' ', f);
}

static void text_vinfos(dump_ctx *c, oq_vinfo **vi, size_t n, int indent)
{
    sbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        sb_reset(&b);
        oq_value *v = vi[i]->value;
        sb_name(&b, v ? v->name : NULL);
        sb_puts(&b, ": ");
        if (vi[i]->type)
            sb_type(&b, vi[i]->type);
        else if (!sb_value_type(&b, v))
            sb_puts(&b, "?");
        if (v && v->initializer)
            sb_puts(&b, "  (has an initializer)");
        put_indent(c->out, indent);
        fprintf(c->out, "%s\n", sb_str(&b));
    }
    c->oom |= b.oom;
    sb_free(&b);
}

static void text_graph_nodes(dump_ctx *c, const oq_graph *g, int indent);

static void text_node(dump_ctx *c, const oq_node *n, size_t idx, int indent)
{
    sbuf b = {0};
    sb_printf(&b, "#%zu ", idx);
    sb_name(&b, n->op_type);
    if (n->name && *n->name) {
        sb_puts(&b, " ");
        sb_name(&b, n->name);
    }
    if (!oq_domain_is_default(n->domain)) {
        sb_puts(&b, "  domain ");
        sb_name(&b, n->domain);
    }
    put_indent(c->out, indent);
    fprintf(c->out, "%s\n", sb_str(&b));
    for (int io = 0; io < 2; io++) {
        size_t cnt = io ? n->n_outputs : n->n_inputs;
        oq_value **vs = io ? n->outputs : n->inputs;
        sb_reset(&b);
        sb_puts(&b, io ? "outputs: " : "inputs:  ");
        for (size_t i = 0; i < cnt; i++) {
            if (i)
                sb_puts(&b, ", ");
            sb_name(&b, vs[i] ? vs[i]->name : "");
        }
        if (cnt == 0)
            sb_puts(&b, "(none)");
        put_indent(c->out, indent + 4);
        fprintf(c->out, "%s\n", sb_str(&b));
    }
    for (size_t i = 0; i < n->n_attrs; i++) {
        const oq_attr *a = n->attrs[i];
        size_t ng = a->ref_attr_name ? 0
                    : a->type == OQ_ATTR_GRAPH ? (a->g ? 1 : 0)
                    : a->type == OQ_ATTR_GRAPHS ? a->n_graphs : 0;
        sb_reset(&b);
        sb_name(&b, a->name);
        sb_puts(&b, " = ");
        if (a->type == OQ_ATTR_GRAPH || a->type == OQ_ATTR_GRAPHS) {
            /* GRAPH:  name = graph NAME (N nodes, M initializers), body below;
             * GRAPHS: name = K graphs, then "[k] graph NAME (...)" for each */
            int body = indent + 8;
            if (a->ref_attr_name) {
                sb_attr(&b, a);
            } else if (a->type == OQ_ATTR_GRAPHS) {
                sb_printf(&b, "%zu graph%s", ng, ng == 1 ? "" : "s");
                body = indent + 10;
            }
            for (size_t k = 0; k < ng; k++) {
                const oq_graph *sub = a->type == OQ_ATTR_GRAPH ? a->g : a->graphs[k];
                if (a->type == OQ_ATTR_GRAPHS) {
                    put_indent(c->out, indent + 4);
                    fprintf(c->out, "%s\n", sb_str(&b));
                    sb_reset(&b);
                    sb_printf(&b, "  [%zu] ", k);
                }
                sb_puts(&b, "graph ");
                sb_name(&b, sub->name);
                sb_printf(&b, " (%zu node%s, %zu initializer%s)", sub->n_nodes,
                          sub->n_nodes == 1 ? "" : "s", sub->n_initializers,
                          sub->n_initializers == 1 ? "" : "s");
                put_indent(c->out, indent + 4);
                fprintf(c->out, "%s\n", sb_str(&b));
                sb_reset(&b);
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
                fprintf(c->out, "%s\n", sb_str(&b));
            }
            continue;
        }
        sb_attr(&b, a);
        put_indent(c->out, indent + 4);
        fprintf(c->out, "%s\n", sb_str(&b));
    }
    c->oom |= b.oom;
    sb_free(&b);
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
            c->n_tensors);
    sbuf b = {0};
    for (size_t i = 0; i < c->n_tensors; i++) {
        const tensor_ref *r = &c->tensors[i];
        tensor_stats ts;
        compute_stats(c, r, &ts);
        sb_reset(&b);
        sb_name(&b, r->name);
        sb_printf(&b, "  [%s%s", r->constant ? "Constant" : "initializer",
                  oq_tensor_is_external(r->t) ? ", external data" : "");
        if (*r->scope) {
            sb_puts(&b, " in ");
            sb_name(&b, r->scope);
        }
        sb_printf(&b, "] %s", oq_dtype_name(r->t->dtype));
        sb_dims(&b, r->t->dims, r->t->rank);
        sb_printf(&b, ", %" PRId64 " elements", oq_tensor_numel(r->t));
        fprintf(f, "  %s\n", sb_str(&b));
        if (!ts.ok) {
            fprintf(f, "      skipped (%s)\n", ts.skipped);
            continue;
        }
        const oq_stats *s = &ts.s;
        fprintf(f, "      min %.6g  max %.6g  mean %.6g  std %.6g  zeros %" PRId64
                   "  nan %" PRId64 "  inf %" PRId64 "\n",
                s->min, s->max, s->mean, s->std, s->zeros, s->nans, s->pos_infs + s->neg_infs);
        if (ts.axis >= 0) {
            sb_reset(&b);
            sb_name(&b, ts.consumer->op_type);
            if (ts.consumer->name && *ts.consumer->name) {
                sb_puts(&b, " ");
                sb_name(&b, ts.consumer->name);
            }
            fprintf(f, "      per output channel (axis %d, weight of %s), %" PRId64
                       " channels: min .. max\n",
                    ts.axis, sb_str(&b), ts.nch);
            int64_t widest = 0;
            for (int64_t k = 0; k < ts.nch; k++)
                if (ts.maxs[k] - ts.mins[k] > ts.maxs[widest] - ts.mins[widest])
                    widest = k;
            for (int64_t k = 0; k < ts.nch; k++) {
                if (ts.nch > CHAN_SHOW && k == 8) {
                    fprintf(f, "        ... (%" PRId64 " more)\n", ts.nch - 10);
                    k = ts.nch - 3; /* then the last two */
                    continue;
                }
                fprintf(f, "        [%" PRId64 "] %.6g .. %.6g\n", k, ts.mins[k], ts.maxs[k]);
            }
            if (ts.nch > CHAN_SHOW)
                fprintf(f, "        widest: [%" PRId64 "] %.6g .. %.6g\n", widest, ts.mins[widest],
                        ts.maxs[widest]);
        }
        free_stats(&ts);
    }
    c->oom |= b.oom;
    sb_free(&b);
}

static void text_params(dump_ctx *c)
{
    FILE *f = c->out;
    int64_t tot[3][2] = {{0}}; /* tensors, elements, bytes x src */
    for (int d = 0; d < OQ_DTYPE_COUNT; d++)
        for (int s = 0; s < 2; s++) {
            tot[0][s] += c->by_dtype[d].tensors[s];
            tot[1][s] += c->by_dtype[d].elements[s];
            tot[2][s] += c->by_dtype[d].bytes[s];
        }
    fprintf(f, "parameters (all graphs): %" PRId64 " elements, %" PRId64 " bytes\n",
            tot[1][0] + tot[1][1], tot[2][0] + tot[2][1]);
    fprintf(f, "  held in initializers: %" PRId64 " tensors, %" PRId64 " elements, %" PRId64
               " bytes\n", tot[0][0], tot[1][0], tot[2][0]);
    fprintf(f, "  held in Constant nodes: %" PRId64 " tensors, %" PRId64 " elements, %" PRId64
               " bytes\n", tot[0][1], tot[1][1], tot[2][1]);
    if (c->n_sparse_init)
        fprintf(f, "  sparse initializers (not counted above): %" PRId64 "\n", c->n_sparse_init);
    if (tot[0][0] + tot[0][1] == 0)
        return;
    fprintf(f, "  %-14s %8s %14s %14s %16s %16s\n", "dtype", "tensors", "elements", "bytes",
            "init elements", "const elements");
    for (int d = 0; d < OQ_DTYPE_COUNT; d++) {
        const dtype_total *t = &c->by_dtype[d];
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
    sbuf b = {0};
    sb_name(&b, c->path);
    fprintf(f, "model: %s\n", sb_str(&b));
    sb_reset(&b);
    if ((m->producer_name && *m->producer_name) || (m->producer_version && *m->producer_version)) {
        sb_text(&b, m->producer_name);
        if (m->producer_version && *m->producer_version) {
            sb_puts(&b, " ");
            sb_text(&b, m->producer_version);
        }
    } else {
        sb_puts(&b, "(none)");
    }
    fprintf(f, "producer: %s\n", sb_str(&b));
    if (m->has_ir_version)
        fprintf(f, "ir_version: %" PRId64 "\n", m->ir_version);
    else
        fprintf(f, "ir_version: (none)\n");
    if (m->has_model_version)
        fprintf(f, "model_version: %" PRId64 "\n", m->model_version);
    if (m->domain && *m->domain) {
        sb_reset(&b);
        sb_name(&b, m->domain);
        fprintf(f, "domain: %s\n", sb_str(&b));
    }
    if (m->doc_string && *m->doc_string) {
        sb_reset(&b);
        size_t len = strlen(m->doc_string);
        sb_escaped(&b, m->doc_string, len > 72 ? 72 : len, false);
        fprintf(f, "doc_string: %s%s\n", sb_str(&b), len > 72 ? "..." : "");
    }
    sb_reset(&b);
    for (size_t i = 0; i < m->n_opsets; i++) {
        if (i)
            sb_puts(&b, ", ");
        sb_name(&b, domain_label(m->opsets[i].domain));
        sb_printf(&b, " %" PRId64, m->opsets[i].version);
    }
    fprintf(f, "opset_import: %s\n", m->n_opsets ? sb_str(&b) : "(none)");
    for (size_t i = 0; i < m->metadata.count; i++) {
        sb_reset(&b);
        sb_name(&b, m->metadata.items[i].key);
        sb_puts(&b, " = ");
        sb_text(&b, m->metadata.items[i].value);
        fprintf(f, "metadata: %s\n", sb_str(&b));
    }
    if (m->n_functions) {
        sb_reset(&b);
        for (size_t i = 0; i < m->n_functions; i++) {
            if (i)
                sb_puts(&b, ", ");
            sb_name(&b, m->functions[i]->domain);
            sb_puts(&b, ":");
            sb_name(&b, m->functions[i]->name);
        }
        fprintf(f, "functions (%zu): %s\n", m->n_functions, sb_str(&b));
    }
    if (m->n_training_info)
        fprintf(f, "training_info: %zu\n", m->n_training_info);
    const oq_graph *g = m->graph;
    if (!g) {
        fprintf(f, "graph: (none)\n");
        sb_free(&b);
        return;
    }
    sb_reset(&b);
    sb_name(&b, g->name);
    fprintf(f, "graph: %s: %zu node%s (%" PRId64 " incl. subgraphs), %zu initializer%s\n",
            sb_str(&b), g->n_nodes, g->n_nodes == 1 ? "" : "s", c->n_nodes_all,
            g->n_initializers, g->n_initializers == 1 ? "" : "s");
    fprintf(f, "inputs (%zu):\n", g->n_inputs);
    text_vinfos(c, g->inputs, g->n_inputs, 2);
    fprintf(f, "outputs (%zu):\n", g->n_outputs);
    text_vinfos(c, g->outputs, g->n_outputs, 2);
    qsort(c->ops, c->n_ops, sizeof *c->ops, op_cmp);
    fprintf(f, "op types (%zu distinct, %" PRId64 " nodes incl. subgraphs):\n", c->n_ops,
            c->n_nodes_all);
    for (size_t i = 0; i < c->n_ops; i++) {
        sb_reset(&b);
        sb_name(&b, c->ops[i].op);
        if (*c->ops[i].domain) {
            sb_puts(&b, "  domain ");
            sb_name(&b, c->ops[i].domain);
        }
        fprintf(f, "  %6" PRId64 "  %s\n", c->ops[i].count, sb_str(&b));
    }
    text_params(c);
    if (c->stats)
        text_stats(c);
    fprintf(f, "nodes (%zu):\n", g->n_nodes);
    text_graph_nodes(c, g, 2);
    c->oom |= b.oom;
    sb_free(&b);
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
    json_kv_int(w, "bytes", tensor_bytes(t));
    if (oq_tensor_is_external(t)) {
        json_kv_bool(w, "external", true);
    } else if (n >= 0 && n <= LIST_SHOW) {
        const void *data = tensor_peek(t);
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
    for (size_t i = 0; i < c->n_tensors; i++) {
        const tensor_ref *r = &c->tensors[i];
        tensor_stats ts;
        compute_stats(c, r, &ts);
        json_begin_object(w);
        json_kv_string(w, "name", r->name);
        json_kv_string(w, "source", r->constant ? "constant" : "initializer");
        json_kv_string(w, "scope", r->scope);
        json_kv_bool(w, "external", oq_tensor_is_external(r->t));
        json_kv_string(w, "dtype", oq_dtype_name(r->t->dtype));
        json_key(w, "dims");
        json_dims(w, r->t->dims, r->t->rank);
        json_kv_int(w, "elements", oq_tensor_numel(r->t));
        if (!ts.ok) {
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
            for (int64_t k = 0; k < ts.nch; k++)
                json_double(w, ts.mins[k]);
            json_end_array(w);
            json_key(w, "max");
            json_begin_array_inline(w);
            for (int64_t k = 0; k < ts.nch; k++)
                json_double(w, ts.maxs[k]);
            json_end_array(w);
            json_end_object(w);
        }
        w->nonfinite_null = false;
        json_end_object(w);
        free_stats(&ts);
    }
    json_end_array(w);
}

static int json_model(dump_ctx *c)
{
    const oq_model *m = c->m;
    json_writer w;
    json_init(&w, c->out, 2);
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
    json_kv_int(&w, "node_count", c->n_nodes_all);

    qsort(c->ops, c->n_ops, sizeof *c->ops, op_cmp);
    json_key(&w, "op_histogram");
    json_begin_array(&w);
    for (size_t i = 0; i < c->n_ops; i++) {
        json_begin_object_inline(&w);
        json_kv_string(&w, "op", c->ops[i].op);
        json_kv_string(&w, "domain", c->ops[i].domain);
        json_kv_int(&w, "count", c->ops[i].count);
        json_end_object(&w);
    }
    json_end_array(&w);

    json_key(&w, "parameters");
    json_begin_object(&w);
    int64_t tot[3][2] = {{0}};
    for (int d = 0; d < OQ_DTYPE_COUNT; d++)
        for (int s = 0; s < 2; s++) {
            tot[0][s] += c->by_dtype[d].tensors[s];
            tot[1][s] += c->by_dtype[d].elements[s];
            tot[2][s] += c->by_dtype[d].bytes[s];
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
    json_kv_int(&w, "sparse_initializers", c->n_sparse_init);
    json_key(&w, "by_dtype");
    json_begin_array(&w);
    for (int d = 0; d < OQ_DTYPE_COUNT; d++) {
        const dtype_total *t = &c->by_dtype[d];
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

/* ---------------------------------------------------------------- Graphviz ------- */

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
            size_t len = json_utf8_len((const unsigned char *)s + i, n - i);
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

static bool dot_declared(dump_ctx *c, const oq_value *v)
{
    if (!c->declared || v->id >= c->declared_bits)
        return false;
    return (c->declared[v->id / 8] >> (v->id % 8)) & 1;
}

static void dot_mark(dump_ctx *c, const oq_value *v)
{
    if (c->declared && v->id < c->declared_bits)
        c->declared[v->id / 8] |= (uint8_t)(1u << (v->id % 8));
}

/* A box-less node for a graph input, initializer or undefined value. */
static void dot_value_node(dump_ctx *c, const oq_value *v, int indent)
{
    if (dot_declared(c, v))
        return;
    dot_mark(c, v);
    sbuf b = {0};
    sb_puts(&b, v->name ? v->name : "");
    sb_puts(&b, "\n");
    if (!sb_value_type(&b, v))
        sb_puts(&b, "?");
    put_indent(c->out, indent);
    fprintf(c->out, "v%u [label=\"", (unsigned)v->id);
    dot_esc(c->out, sb_str(&b));
    if (v->kind == OQ_VALUE_INPUT || v->is_graph_input)
        fputs("\", shape=ellipse, fillcolor=\"#cfe2ff\"];\n", c->out);
    else if (v->kind == OQ_VALUE_INITIALIZER)
        fputs("\", shape=note, fillcolor=\"#fff3cd\", fontsize=9];\n", c->out);
    else
        fputs("\", shape=ellipse, style=dashed];\n", c->out);
    c->oom |= b.oom;
    sb_free(&b);
}

/* Edge from where value v comes from to the DOT node `to`, labelled with its type. */
static void dot_edge(dump_ctx *c, const oq_value *v, const char *to, int indent)
{
    char from[32];
    if (v->kind == OQ_VALUE_NODE && v->producer) {
        snprintf(from, sizeof from, "n%u", (unsigned)v->producer->id);
    } else {
        dot_value_node(c, v, indent);
        snprintf(from, sizeof from, "v%u", (unsigned)v->id);
    }
    sbuf b = {0};
    put_indent(c->out, indent);
    fprintf(c->out, "%s -> %s", from, to);
    if (sb_value_type(&b, v)) {
        fputs(" [label=\"", c->out);
        dot_esc(c->out, sb_str(&b));
        fputs("\"]", c->out);
    }
    fputs(";\n", c->out);
    c->oom |= b.oom;
    sb_free(&b);
}

static void dot_graph(dump_ctx *c, const oq_graph *g, int indent)
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

static int dot_model(dump_ctx *c)
{
    FILE *f = c->out;
    c->declared_bits = (size_t)c->m->next_id + 1;
    c->declared = calloc(c->declared_bits / 8 + 1, 1);
    if (!c->declared)
        return -1;
    fputs("digraph onnx {\n", f);
    fputs("  graph [rankdir=TB, fontname=\"Helvetica\", label=\"", f);
    dot_esc(f, c->path);
    if (c->m->graph && c->m->graph->name && *c->m->graph->name) {
        fputs(": ", f);
        dot_esc(f, c->m->graph->name);
    }
    fputs("\"];\n", f);
    fputs("  node [shape=box, style=\"rounded,filled\", fillcolor=\"#eeeeee\", "
          "fontname=\"Helvetica\", fontsize=10];\n", f);
    fputs("  edge [fontname=\"Helvetica\", fontsize=8];\n", f);
    if (c->m->graph)
        dot_graph(c, c->m->graph, 2);
    fputs("}\n", f);
    return 0;
}

/* ---------------------------------------------------------------- command -------- */

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
    if (m->graph)
        collect(&c, m->graph, "");
    int rc = CLI_OK;
    if (c.oom) {
        cli_error("dump", "out of memory");
        rc = CLI_FAIL;
        goto done;
    }
    if (dot) {
        if (dot_model(&c) != 0)
            c.oom = true;
    } else if (json) {
        if (json_model(&c) != 0 && !ferror(stdout)) {
            cli_error("dump", "JSON output is incomplete (nesting deeper than %d levels)",
                      JSON_MAX_DEPTH);
            c.failed = true;
        }
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
    free(c.tensors);
    free(c.ops);
    free(c.declared);
    oq_model_free(m);
    return rc;
}
