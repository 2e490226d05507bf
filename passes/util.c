/* Helpers shared by the built-in passes. */
#include "pass-impl.h"

#include <regex.h>

#include <stdlib.h>
#include <string.h>

bool oq_pass_is_op(const oq_node *n, const char *op)
{
    return n->op_type && strcmp(n->op_type, op) == 0 && oq_domain_is_default(n->domain);
}

static void detach_subgraphs(oq_node *n)
{
    oq_graph *subs[16];
    size_t k = oq_node_subgraphs(n, subs, 16);
    oq_graph **all = subs;
    if (k > 16) {
        all = malloc(k * sizeof(*all));
        if (!all)
            return;
        oq_node_subgraphs(n, all, k);
    }
    for (size_t i = 0; i < k; i++)
        for (oq_node *c = all[i]->first; c;) {
            oq_node *next = c->next;
            oq_pass_remove_node(c);
            c = next;
        }
    if (all != subs)
        free(all);
}

void oq_pass_remove_node(oq_node *n)
{
    detach_subgraphs(n);
    oq_node_remove(n);
}

static oq_status visit(oq_graph *g, oq_graph_visit_fn fn, void *ctx)
{
    oq_status s = fn(g, ctx);
    if (s != OQ_OK)
        return s;
    for (oq_node *n = g->first; n; n = n->next) {
        oq_graph *subs[16];
        size_t k = oq_node_subgraphs(n, subs, 16);
        for (size_t i = 0; i < k && i < 16; i++) {
            s = visit(subs[i], fn, ctx);
            if (s != OQ_OK)
                return s;
        }
    }
    return OQ_OK;
}

oq_status oq_pass_for_each_graph(oq_model *m, oq_graph_visit_fn fn, void *ctx)
{
    if (!m->graph)
        return OQ_OK;
    return visit(m->graph, fn, ctx);
}

oq_status oq_pass_tensor_to_double(oq_tensor *t, double **out, int64_t *n, oq_diag *d)
{
    *out = NULL;
    int64_t numel = oq_tensor_numel(t);
    const void *data = oq_tensor_data(t, d);
    if (!data || numel < 0)
        return OQ_ERR_INVALID;
    double *v = malloc((size_t)(numel ? numel : 1) * sizeof(double));
    if (!v)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < numel; i++) {
        switch (t->dtype) {
        case OQ_DTYPE_FLOAT: { float f; memcpy(&f, (const char *)data + 4 * i, 4); v[i] = f; break; }
        case OQ_DTYPE_DOUBLE: memcpy(&v[i], (const char *)data + 8 * i, 8); break;
        case OQ_DTYPE_FLOAT16: { uint16_t h; memcpy(&h, (const char *)data + 2 * i, 2); v[i] = oq_half_to_float(h); break; }
        case OQ_DTYPE_BFLOAT16: { uint16_t h; memcpy(&h, (const char *)data + 2 * i, 2); v[i] = oq_bfloat16_to_float(h); break; }
        case OQ_DTYPE_INT32: { int32_t x; memcpy(&x, (const char *)data + 4 * i, 4); v[i] = x; break; }
        case OQ_DTYPE_INT64: { int64_t x; memcpy(&x, (const char *)data + 8 * i, 8); v[i] = (double)x; break; }
        default:
            free(v);
            return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "tensor \"%s\": %s data not supported here",
                                 t->name ? t->name : "", oq_dtype_name(t->dtype));
        }
    }
    *out = v;
    *n = numel;
    return OQ_OK;
}

oq_tensor *oq_pass_tensor_from_double(oq_model *m, const char *name, int32_t dtype,
                                      const int64_t *dims, size_t rank, const double *v)
{
    int64_t numel = oq_dims_numel(dims, rank);
    int64_t nb = numel < 0 ? -1 : oq_dtype_nbytes(dtype, numel);
    if (nb < 0)
        return NULL;
    uint8_t *buf = malloc((size_t)(nb ? nb : 1));
    if (!buf)
        return NULL;
    for (int64_t i = 0; i < numel; i++) {
        switch (dtype) {
        case OQ_DTYPE_FLOAT: { float f = (float)v[i]; memcpy(buf + 4 * i, &f, 4); break; }
        case OQ_DTYPE_DOUBLE: memcpy(buf + 8 * i, &v[i], 8); break;
        case OQ_DTYPE_FLOAT16: { uint16_t h = oq_float_to_half((float)v[i]); memcpy(buf + 2 * i, &h, 2); break; }
        case OQ_DTYPE_BFLOAT16: { uint16_t h = oq_float_to_bfloat16((float)v[i]); memcpy(buf + 2 * i, &h, 2); break; }
        default:
            free(buf);
            return NULL;
        }
    }
    oq_tensor *t = oq_tensor_new(m, name, dtype, dims, rank, buf, nb);
    free(buf);
    return t;
}

int64_t oq_pass_const_ints(const oq_value *v, int64_t *out, int64_t max, oq_diag *d)
{
    oq_tensor *t = oq_value_const_tensor(v);
    if (!t || (t->dtype != OQ_DTYPE_INT64 && t->dtype != OQ_DTYPE_INT32))
        return -1;
    int64_t n = oq_tensor_numel(t);
    const void *data = oq_tensor_data(t, d);
    if (!data || n < 0 || n > max)
        return -1;
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == OQ_DTYPE_INT64) {
            memcpy(&out[i], (const char *)data + 8 * i, 8);
        } else {
            int32_t x;
            memcpy(&x, (const char *)data + 4 * i, 4);
            out[i] = x;
        }
    }
    return n;
}

oq_value *oq_pass_add_ints(oq_graph *g, const char *base, const int64_t *v, size_t n)
{
    int64_t dims[1] = {(int64_t)n};
    return oq_graph_add_initializer(g, base, OQ_DTYPE_INT64, dims, 1, v, (int64_t)(n * 8));
}

size_t oq_pass_value_refs(const oq_value *v)
{
    return v->n_uses + (oq_value_is_graph_output(v) ? 1 : 0);
}

size_t oq_pass_prune_value_info(oq_graph *g)
{
    size_t k = 0, removed = 0;
    for (size_t i = 0; i < g->n_value_info; i++) {
        oq_value *v = g->value_info[i]->value;
        if (v && v->kind == OQ_VALUE_UNDEFINED && v->n_uses == 0 && !oq_value_is_graph_output(v)) {
            removed++;
            continue;
        }
        g->value_info[k++] = g->value_info[i];
    }
    g->n_value_info = k;
    return removed;
}

void oq_pass_drop_if_unused(oq_value *v)
{
    if (!v || oq_pass_value_refs(v) > 0 || v->is_graph_input)
        return;
    if (v->kind == OQ_VALUE_INITIALIZER)
        oq_graph_remove_initializer(v->graph, v);
    else if (v->kind == OQ_VALUE_NODE && v->producer && oq_pass_is_op(v->producer, "Constant"))
        oq_pass_remove_node(v->producer);
}

static bool op_in(const oq_node *n, const char *const *list)
{
    for (; *list; list++)
        if (oq_pass_is_op(n, *list))
            return true;
    return false;
}

/* element-wise, one data input, same rank and type as input 0 */
static const char *const unary_same[] = {
    "Relu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "HardSwish", "LeakyRelu", "Elu", "Selu",
    "Exp", "Log", "Sqrt", "Abs", "Neg", "Erf", "Softmax", "LogSoftmax", "Hardmax", "Identity",
    "Dropout", "BatchNormalization", "InstanceNormalization", "LayerNormalization", "PRelu",
    "Softplus", "Softsign", "Reciprocal", "Floor", "Ceil", "Round", "Sin", "Cos", "Mish",
    "Gelu", "LRN", "Celu", "ThresholdedRelu", "Sign", NULL};
/* same rank as input 0, same element type */
static const char *const rank_same[] = {
    "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool", "Resize",
    "Upsample", "Pad", "Slice", "Tile", NULL};
static const char *const binary[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum",
                                     "Mean", "Where", NULL};

static int64_t rank_rec(const oq_value *v, int depth)
{
    if (!v || depth > 200)
        return -1;
    if (v->type && v->type->kind == OQ_TYPE_TENSOR && v->type->shape)
        return (int64_t)v->type->shape->rank;
    oq_tensor *t = oq_value_const_tensor(v);
    if (t)
        return (int64_t)t->rank;
    const oq_node *p = v->kind == OQ_VALUE_NODE ? v->producer : NULL;
    if (!p || p->n_inputs == 0 || v->producer_index != 0)
        return -1;
    if (op_in(p, unary_same) || op_in(p, rank_same) || oq_pass_is_op(p, "Cast"))
        return rank_rec(p->inputs[0], depth + 1);
    if (op_in(p, binary)) {
        int64_t r = -1;
        for (size_t i = 0; i < p->n_inputs; i++) {
            int64_t ri = rank_rec(p->inputs[i], depth + 1);
            if (ri < 0)
                return -1;
            if (ri > r)
                r = ri;
        }
        return r;
    }
    if ((oq_pass_is_op(p, "Conv") || oq_pass_is_op(p, "ConvTranspose")) && p->n_inputs >= 2)
        return rank_rec(p->inputs[1], depth + 1);
    if (oq_pass_is_op(p, "Transpose")) {
        const int64_t *perm;
        int64_t np = oq_node_attr_ints(p, "perm", &perm);
        return np >= 0 ? np : rank_rec(p->inputs[0], depth + 1);
    }
    if (oq_pass_is_op(p, "Reshape") && p->n_inputs >= 2) {
        oq_tensor *s = oq_value_const_tensor(p->inputs[1]);
        return s && s->rank == 1 ? s->dims[0] : -1;
    }
    if (oq_pass_is_op(p, "Shape"))
        return 1;
    if (oq_pass_is_op(p, "Flatten"))
        return 2;
    if (oq_pass_is_op(p, "MatMul") && p->n_inputs == 2) {
        int64_t a = rank_rec(p->inputs[0], depth + 1), b = rank_rec(p->inputs[1], depth + 1);
        if (a < 2 || b < 2)
            return -1;
        return a > b ? a : b;
    }
    if (oq_pass_is_op(p, "Gemm"))
        return 2;
    if (oq_pass_is_op(p, "Concat")) {
        for (size_t i = 0; i < p->n_inputs; i++) {
            int64_t r = rank_rec(p->inputs[i], depth + 1);
            if (r >= 0)
                return r;
        }
        return -1;
    }
    if (oq_pass_is_op(p, "Squeeze") || oq_pass_is_op(p, "Unsqueeze")) {
        const int64_t *ax;
        int64_t na = oq_node_attr_ints(p, "axes", &ax);
        if (na < 0 && p->n_inputs >= 2 && p->inputs[1]) {
            oq_tensor *s = oq_value_const_tensor(p->inputs[1]);
            na = s && s->rank == 1 ? s->dims[0] : -1;
        }
        int64_t r = rank_rec(p->inputs[0], depth + 1);
        if (na < 0 || r < 0)
            return -1;
        return oq_pass_is_op(p, "Squeeze") ? r - na : r + na;
    }
    if (op_in(p, (const char *const[]){"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin",
                                       "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
                                       "ReduceLogSumExp", "ReduceSumSquare", NULL})) {
        int64_t r = rank_rec(p->inputs[0], depth + 1);
        if (r < 0 || oq_node_attr_int(p, "keepdims", 1))
            return r;
        const int64_t *ax;
        int64_t na = oq_node_attr_ints(p, "axes", &ax);
        if (na < 0 && p->n_inputs >= 2 && p->inputs[1]) {
            oq_tensor *s = oq_value_const_tensor(p->inputs[1]);
            na = s && s->rank == 1 ? s->dims[0] : -1;
        }
        return na < 0 ? -1 : r - na;
    }
    return -1;
}

int64_t oq_pass_value_rank(const oq_value *v)
{
    return rank_rec(v, 0);
}

static int32_t type_rec(const oq_value *v, int depth)
{
    if (!v || depth > 200)
        return -1;
    if (v->type && v->type->kind == OQ_TYPE_TENSOR && v->type->has_elem_type && v->type->elem_type > 0)
        return v->type->elem_type;
    oq_tensor *t = oq_value_const_tensor(v);
    if (t)
        return t->dtype;
    const oq_node *p = v->kind == OQ_VALUE_NODE ? v->producer : NULL;
    if (!p || p->n_inputs == 0 || v->producer_index != 0)
        return -1;
    if (oq_pass_is_op(p, "Cast")) {
        oq_attr *a = oq_node_attr(p, "to");
        return a ? (int32_t)a->i : -1;
    }
    if (oq_pass_is_op(p, "Shape") || oq_pass_is_op(p, "Size"))
        return OQ_DTYPE_INT64;
    if (op_in(p, unary_same) || op_in(p, rank_same) || op_in(p, binary) ||
        oq_pass_is_op(p, "Conv") || oq_pass_is_op(p, "ConvTranspose") ||
        oq_pass_is_op(p, "MatMul") || oq_pass_is_op(p, "Gemm") || oq_pass_is_op(p, "Transpose") ||
        oq_pass_is_op(p, "Reshape") || oq_pass_is_op(p, "Flatten") || oq_pass_is_op(p, "Concat") ||
        oq_pass_is_op(p, "Squeeze") || oq_pass_is_op(p, "Unsqueeze") ||
        oq_pass_is_op(p, "ReduceMean") || oq_pass_is_op(p, "ReduceSum") ||
        oq_pass_is_op(p, "Gather") || oq_pass_is_op(p, "Split"))
        return type_rec(p->inputs[oq_pass_is_op(p, "Where") ? 1 : 0], depth + 1);
    return -1;
}

int32_t oq_pass_value_elem_type(const oq_value *v)
{
    return type_rec(v, 0);
}

oq_value *oq_pass_new_initializer(oq_graph *g, const char *base, int32_t dtype, const int64_t *dims, size_t rank,
                                  const double *vals)
{
    char *name = oq_graph_unique_name(g, base);
    oq_value *v = name ? oq_graph_new_value(g, name) : NULL;
    oq_tensor *t = v ? oq_pass_tensor_from_double(g->model, name, dtype, dims, rank, vals) : NULL;
    if (!t || oq_graph_set_initializer(g, v, t) != OQ_OK)
        return NULL;
    return v;
}

bool oq_pass_name_in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        if (e > p && (size_t)(e - p) == n && strncmp(p, name, n) == 0)
            return true;
        p = e;
    }
    return false;
}

char *oq_pass_unique_name2(oq_graph *g, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);
    if (!s)
        return NULL;
    memcpy(s, a, la);
    memcpy(s + la, b, lb + 1);
    char *u = oq_graph_unique_name(g, s);
    free(s);
    return u;
}

oq_status oq_pass_compile_regex(const char *who, const char *opt, const char *pat, regex_t *re, bool *has, oq_diag *d)
{
    if (!pat || !*pat)
        return OQ_OK;
    int rc = regcomp(re, pat, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        char buf[200];
        regerror(rc, re, buf, sizeof buf);
        return oq_diag_error(d, OQ_ERR_USAGE, "%s: %s \"%s\": %s", who, opt, pat, buf);
    }
    *has = true;
    return OQ_OK;
}

bool oq_pass_node_name_selected(const oq_node *n, const regex_t *inc, const regex_t *exc)
{
    const char *name = n->name ? n->name : "";
    return !(inc && regexec(inc, name, 0, NULL, 0) != 0) && !(exc && regexec(exc, name, 0, NULL, 0) == 0);
}

void *oq_pass_scale_bytes(const float *s, int64_t n, int32_t dt, int64_t *nbytes)
{
    *nbytes = n * (dt == OQ_DTYPE_FLOAT16 || dt == OQ_DTYPE_BFLOAT16 ? 2 : 4);
    void *b = malloc((size_t)(*nbytes ? *nbytes : 1));
    if (!b)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        if (dt == OQ_DTYPE_FLOAT16)
            ((uint16_t *)b)[i] = oq_float_to_half(s[i]);
        else if (dt == OQ_DTYPE_BFLOAT16)
            ((uint16_t *)b)[i] = oq_float_to_bfloat16(s[i]);
        else
            ((float *)b)[i] = s[i];
    }
    return b;
}

bool oq_pass_is_zero_pad(const oq_node *p)
{
    if (!oq_pass_is_op(p, "Pad") || strcmp(oq_node_attr_string(p, "mode", "constant"), "constant") != 0)
        return false;
    if (oq_node_opset(p) < 11)
        return oq_node_attr_float(p, "value", 0.0f) == 0.0f;
    if (p->n_inputs < 3 || !p->inputs[2] || !*p->inputs[2]->name)
        return true;
    oq_tensor *cv = oq_value_const_tensor(p->inputs[2]);
    double *val = NULL;
    int64_t cnt = 0;
    if (!cv || oq_tensor_numel(cv) != 1 || oq_pass_tensor_to_double(cv, &val, &cnt, NULL) != OQ_OK)
        return false;
    bool zero = cnt == 1 && val[0] == 0.0;
    free(val);
    return zero;
}
