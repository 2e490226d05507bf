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

static void check_attr(ck *c, const oq_node *n, const oq_attr *a)
{
    if (!a->name || !*a->name)
        err(c, n, "attribute without a name");
    if (a->ref_attr_name)
        return;
    int32_t t = a->type;
    if (a->has_type && (t < 1 || t > 14))
        err(c, n, "attribute \"%s\" has unknown type %d", a->name ? a->name : "", (int)t);
    if ((t == OQ_ATTR_TENSOR && !a->t) || (t == OQ_ATTR_GRAPH && !a->g) ||
        (t == OQ_ATTR_SPARSE_TENSOR && !a->sparse_tensor) || (t == OQ_ATTR_TYPE_PROTO && !a->tp))
        err(c, n, "attribute \"%s\" of type %s has no value", a->name ? a->name : "",
            oq_attr_type_name(t));
    if (a->g)
        check_graph(c, a->g);
    for (size_t i = 0; i < a->n_graphs; i++)
        check_graph(c, a->graphs[i]);
}

static void check_graph(ck *c, const oq_graph *g)
{
    for (size_t i = 0; i < g->n_inputs; i++)
        set_def(c, g->inputs[i]->value);
    for (size_t i = 0; i < g->n_initializers; i++) {
        oq_value *v = oq_graph_find_local(g, g->initializers[i]->name ? g->initializers[i]->name : "");
        if (v)
            set_def(c, v);
    }
    for (size_t i = 0; i < g->n_sparse_initializers; i++) {
        const oq_sparse_tensor *s = g->sparse_initializers[i];
        oq_value *v = s->values && s->values->name ? oq_graph_find_local(g, s->values->name) : NULL;
        if (v)
            set_def(c, v);
    }
    for (const oq_node *n = g->first; n && c->errors <= MAX_ERRORS; n = n->next) {
        if (!n->op_type || !*n->op_type)
            err(c, n, "node has no op_type");
        else if (!opset_imported(c, n->domain))
            err(c, n, "domain \"%s\" is used but no opset is imported for it",
                oq_domain_is_default(n->domain) ? "ai.onnx" : n->domain);
        for (size_t k = 0; k < n->n_inputs; k++) {
            const oq_value *v = n->inputs[k];
            if (!v || is_def(c, v) || is_formal(c, v))
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
            if (v->producer != n || v->producer_index != k) {
                if (v->is_graph_input || v->initializer)
                    err(c, n, "output \"%s\" is also a graph input or initializer", v->name);
                else
                    err(c, n, "output \"%s\" is produced more than once", v->name);
            }
            set_def(c, v);
        }
    }
    for (size_t i = 0; i < g->n_outputs; i++) {
        const oq_value *v = g->outputs[i]->value;
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
