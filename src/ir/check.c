/* Structural checker: SSA, definition before use (in list order, through scopes),
 * opset imports, attribute payloads, tensors. */
#include "ir/ir-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ck {
    const oq_model *m;
    oq_diag *d;
    uint8_t *defined; /* bitmap by value id */
    size_t nbits;
    int errors;
    const oq_function *fn;
} ck;

#define MAX_ERRORS 20

static bool is_def(ck *c, const oq_value *v)
{
    return v->id < c->nbits && (c->defined[v->id >> 3] >> (v->id & 7)) & 1;
}

static void set_def(ck *c, const oq_value *v)
{
    if (v->id < c->nbits)
        c->defined[v->id >> 3] |= (uint8_t)(1u << (v->id & 7));
}

static void err(ck *c, const oq_node *n, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void err(ck *c, const oq_node *n, const char *fmt, ...)
{
    c->errors++;
    if (c->errors > MAX_ERRORS)
        return;
    char lbl[64];
    va_list ap;
    va_start(ap, fmt);
    oq_diag_vadd(c->d, OQ_SEV_ERROR, OQ_ERR_INVALID, NULL,
                 n ? oq_node_label(n, lbl, sizeof lbl) : NULL, n ? n->op_type : NULL, fmt, ap);
    va_end(ap);
}

static bool opset_imported(ck *c, const char *domain)
{
    if (c->fn) {
        bool dflt = oq_domain_is_default(domain);
        for (size_t i = 0; i < c->fn->n_opsets; i++) {
            const char *d = c->fn->opsets[i].domain;
            if (dflt ? oq_domain_is_default(d) : (d && strcmp(d, domain) == 0))
                return true;
        }
    }
    if (oq_model_opset(c->m, domain) > 0)
        return true;
    /* a call to a model-local function is fine when the function's domain is used */
    for (size_t i = 0; i < c->m->n_functions; i++) {
        const char *fd = c->m->functions[i]->domain;
        if (fd && domain && strcmp(fd, domain) == 0)
            return true;
    }
    return false;
}

static bool is_formal(ck *c, const oq_value *v)
{
    if (!c->fn)
        return false;
    for (size_t i = 0; i < c->fn->n_inputs; i++)
        if (c->fn->inputs[i] && strcmp(c->fn->inputs[i], v->name) == 0)
            return true;
    return false;
}

static void check_graph(ck *c, const oq_graph *g);

/* Which attribute types the payload fields present in `a` belong to (bit per type). */
static unsigned attr_payload_kinds(const oq_attr *a)
{
    unsigned k = 0;
    if (a->has_f) k |= 1u << OQ_ATTR_FLOAT;
    if (a->has_i) k |= 1u << OQ_ATTR_INT;
    if (a->has_s) k |= 1u << OQ_ATTR_STRING;
    if (a->t) k |= 1u << OQ_ATTR_TENSOR;
    if (a->g) k |= 1u << OQ_ATTR_GRAPH;
    if (a->n_floats) k |= 1u << OQ_ATTR_FLOATS;
    if (a->n_ints) k |= 1u << OQ_ATTR_INTS;
    if (a->n_strings) k |= 1u << OQ_ATTR_STRINGS;
    if (a->n_tensors) k |= 1u << OQ_ATTR_TENSORS;
    if (a->n_graphs) k |= 1u << OQ_ATTR_GRAPHS;
    if (a->sparse_tensor) k |= 1u << OQ_ATTR_SPARSE_TENSOR;
    if (a->n_sparse_tensors) k |= 1u << OQ_ATTR_SPARSE_TENSORS;
    if (a->tp) k |= 1u << OQ_ATTR_TYPE_PROTO;
    if (a->n_type_protos) k |= 1u << OQ_ATTR_TYPE_PROTOS;
    return k;
}

static int lowest_bit(unsigned k)
{
    for (int b = 0; b < 32; b++)
        if (k & (1u << b))
            return b;
    return 0;
}

/* Validate a tensor payload; a problem becomes one error line naming the node. */
static void check_tensor(ck *c, const oq_node *n, const oq_tensor *t, const char *where)
{
    if (!t)
        return;
    oq_diag tmp;
    oq_diag_init(&tmp);
    if (oq_tensor_validate(t, where, &tmp) != OQ_OK) {
        const oq_diag_entry *e = oq_diag_first_error(&tmp);
        if (n)
            err(c, n, "%s", e ? e->message : "invalid tensor");
        else if (c->errors++ < MAX_ERRORS)
            oq_diag_error(c->d, OQ_ERR_INVALID, "%s", e ? e->message : "invalid tensor");
    }
    oq_diag_free(&tmp);
}

static void check_sparse(ck *c, const oq_node *n, const oq_sparse_tensor *s, const char *where)
{
    if (!s)
        return;
    if (!s->values || !s->indices) {
        if (n)
            err(c, n, "%s: sparse tensor without %s", where, s->values ? "indices" : "values");
        else if (c->errors++ < MAX_ERRORS)
            oq_diag_error(c->d, OQ_ERR_INVALID, "%s: sparse tensor without %s", where,
                          s->values ? "indices" : "values");
        return;
    }
    check_tensor(c, n, s->values, where);
    check_tensor(c, n, s->indices, where);
}

static void check_subgraph(ck *c, const oq_node *n, const oq_attr *a, const oq_graph *sg)
{
    if (sg->parent != n->graph) {
        err(c, n, "subgraph of attribute \"%s\" is not scoped under the graph of its node",
            a->name ? a->name : "");
        return;
    }
    check_graph(c, sg);
}

static void check_attr(ck *c, const oq_node *n, const oq_attr *a)
{
    const char *an = a->name ? a->name : "";
    if (!a->name || !*a->name)
        err(c, n, "attribute without a name");
    if (a->ref_attr_name)
        return;
    int32_t t = a->type;
    if (a->has_type && (t < 1 || t > 14)) {
        err(c, n, "attribute \"%s\" has unknown type %d", an, (int)t);
        return;
    }
    unsigned kinds = attr_payload_kinds(a);
    if (a->has_type && (kinds & ~(1u << t))) {
        err(c, n, "attribute \"%s\" is declared %s but holds a %s value", an,
            oq_attr_type_name(t), oq_attr_type_name(lowest_bit(kinds & ~(1u << t))));
    } else if (!a->has_type && (kinds & (kinds - 1))) {
        err(c, n, "attribute \"%s\" holds values of more than one type (%s and %s)", an,
            oq_attr_type_name(lowest_bit(kinds)), oq_attr_type_name(lowest_bit(kinds & (kinds - 1))));
    } else if ((t == OQ_ATTR_TENSOR && !a->t) || (t == OQ_ATTR_GRAPH && !a->g) ||
               (t == OQ_ATTR_SPARSE_TENSOR && !a->sparse_tensor) ||
               (t == OQ_ATTR_TYPE_PROTO && !a->tp)) {
        err(c, n, "attribute \"%s\" of type %s has no value", an, oq_attr_type_name(t));
    }
    char where[160];
    snprintf(where, sizeof where, "attribute \"%.100s\" tensor", an);
    check_tensor(c, n, a->t, where);
    for (size_t i = 0; i < a->n_tensors; i++)
        check_tensor(c, n, a->tensors[i], where);
    check_sparse(c, n, a->sparse_tensor, where);
    for (size_t i = 0; i < a->n_sparse_tensors; i++)
        check_sparse(c, n, a->sparse_tensors[i], where);
    if (a->g)
        check_subgraph(c, n, a, a->g);
    for (size_t i = 0; i < a->n_graphs; i++)
        check_subgraph(c, n, a, a->graphs[i]);
}

/* Is a value of scope `s` visible from graph g (g itself or an enclosing graph)? */
static bool visible_from(const oq_graph *g, const oq_graph *s)
{
    for (; g; g = g->parent)
        if (g == s)
            return true;
    return false;
}

static void check_graph(ck *c, const oq_graph *g)
{
    for (size_t i = 0; i < g->n_inputs; i++)
        set_def(c, g->inputs[i]->value);
    for (size_t i = 0; i < g->n_initializers; i++) {
        oq_value *v = oq_graph_find_local(g, g->initializers[i]->name ? g->initializers[i]->name : "");
        if (v)
            set_def(c, v);
        check_tensor(c, NULL, g->initializers[i], "initializer");
    }
    for (size_t i = 0; i < g->n_sparse_initializers; i++) {
        const oq_sparse_tensor *s = g->sparse_initializers[i];
        oq_value *v = s->values && s->values->name ? oq_graph_find_local(g, s->values->name) : NULL;
        if (v)
            set_def(c, v);
        check_sparse(c, NULL, s, "sparse initializer");
    }
    for (const oq_node *n = g->first; n && c->errors <= MAX_ERRORS; n = n->next) {
        if (!n->op_type || !*n->op_type)
            err(c, n, "node has no op_type");
        else if (!opset_imported(c, n->domain))
            err(c, n, "domain \"%s\" is used but no opset is imported for it",
                oq_domain_is_default(n->domain) ? "ai.onnx" : n->domain);
        for (size_t k = 0; k < n->n_inputs; k++) {
            const oq_value *v = n->inputs[k];
            if (!v)
                continue;
            if (!visible_from(g, v->graph)) {
                char ol[64];
                const oq_node *own = v->graph ? v->graph->owner : NULL;
                if (own)
                    err(c, n, "input \"%s\" is a value of a subgraph of node \"%s\" (%s) and is not visible here",
                        v->name, oq_node_label(own, ol, sizeof ol), own->op_type ? own->op_type : "?");
                else
                    err(c, n, "input \"%s\" belongs to a graph that does not enclose this node", v->name);
                continue;
            }
            if (is_def(c, v) || is_formal(c, v))
                continue;
            if (v->kind == OQ_VALUE_NODE && v->producer && v->producer->graph == v->graph &&
                v->graph == g)
                err(c, n, "input \"%s\" is used before the node that produces it (graph is not in topological order)", v->name);
            else if (v->kind == OQ_VALUE_UNDEFINED)
                err(c, n, "input \"%s\" is not produced by any node, graph input or initializer", v->name);
            else if (v->graph != g && v->kind == OQ_VALUE_NODE)
                err(c, n, "input \"%s\" from an enclosing graph is produced after this subgraph's node", v->name);
        }
        for (size_t i = 0; i < n->n_attrs; i++)
            check_attr(c, n, n->attrs[i]);
        for (size_t k = 0; k < n->n_outputs; k++) {
            const oq_value *v = n->outputs[k];
            if (!v)
                continue;
            if (v->graph != g) {
                err(c, n, "output \"%s\" belongs to another graph scope", v->name);
                continue;
            }
            /* Like the ONNX checker: a subgraph may not redefine a name that is already
             * defined in an enclosing scope when the subgraph is reached (the owner node's
             * own outputs, and values defined later outside, are not in scope yet). */
            const oq_value *outer = g->parent ? oq_graph_find_value(g->parent, v->name) : NULL;
            if (outer && is_def(c, outer))
                err(c, n, "output \"%s\" redefines a value of an enclosing graph (names must be unique across nested scopes)", v->name);
            if (v->is_graph_input || v->initializer || v->sparse_initializer)
                err(c, n, "output \"%s\" is also a graph input or initializer", v->name);
            else if (v->producer != n || v->producer_index != k)
                err(c, n, "output \"%s\" is produced more than once", v->name);
            set_def(c, v);
        }
    }
    for (size_t i = 0; i < g->n_outputs; i++) {
        const oq_value *v = g->outputs[i]->value;
        if (v && !visible_from(g, v->graph)) {
            if (c->errors++ < MAX_ERRORS)
                oq_diag_error(c->d, OQ_ERR_INVALID, "graph output \"%s\" is a value of another graph scope and is not visible here", v->name);
            continue;
        }
        if (v && c->errors <= MAX_ERRORS && !is_def(c, v) && !is_formal(c, v)) {
            c->errors++;
            oq_diag_error(c->d, OQ_ERR_INVALID, "graph output \"%s\" is not produced by any node, graph input or initializer", v->name);
        }
    }
}

oq_status oq_model_check(const oq_model *m, oq_diag *d)
{
    ck c = {0};
    c.m = m;
    c.d = d;
    c.nbits = (size_t)m->next_id + 1;
    c.defined = calloc(c.nbits / 8 + 1, 1);
    if (!c.defined)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    if (m->graph && m->graph->first && oq_model_opset(m, "") == 0 && m->n_opsets == 0) {
        c.errors++;
        oq_diag_error(d, OQ_ERR_INVALID, "model imports no operator set (opset_import is empty)");
    }
    if (m->graph)
        check_graph(&c, m->graph);
    for (size_t i = 0; i < m->n_training_info; i++) {
        if (m->training_info[i]->initialization)
            check_graph(&c, m->training_info[i]->initialization);
        if (m->training_info[i]->algorithm)
            check_graph(&c, m->training_info[i]->algorithm);
    }
    for (size_t i = 0; i < m->n_functions; i++) {
        c.fn = m->functions[i];
        if (c.fn->body) {
            /* formal inputs are defined on entry (this keeps is_formal() off the hot path:
             * a linear scan per use would make a hostile function quadratic) */
            for (size_t k = 0; k < c.fn->n_inputs; k++) {
                oq_value *v = c.fn->inputs[k] ? oq_graph_find_local(c.fn->body, c.fn->inputs[k]) : NULL;
                if (v)
                    set_def(&c, v);
            }
            check_graph(&c, c.fn->body);
        }
        c.fn = NULL;
    }
    free(c.defined);
    if (c.errors > MAX_ERRORS) /* a note, so callers can count the errors they hold */
        oq_diag_add(d, OQ_SEV_NOTE, OQ_ERR_INVALID, NULL, NULL, NULL,
                    "checking stopped after %d errors; more not shown", MAX_ERRORS);
    return c.errors ? OQ_ERR_INVALID : OQ_OK;
}
