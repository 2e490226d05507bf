/* eliminate-dead: remove nodes none of whose outputs is used (by a node, a subgraph
 * or a graph output), initializers nothing reads, and value_info of values that no
 * longer exist. Graph inputs are the model's interface and are kept. */
#include "pass-impl.h"

#include <string.h>

typedef struct ctx {
    oq_pass_result *res;
    bool keep_initializers;
} ctx;

static bool node_dead(const oq_node *n)
{
    for (size_t i = 0; i < n->n_outputs; i++)
        if (n->outputs[i] && oq_pass_value_refs(n->outputs[i]) > 0)
            return false;
    return true;
}

static oq_status run_graph(oq_graph *g, void *vc)
{
    ctx *c = vc;
    /* reverse order: a chain of dead nodes goes in one sweep */
    for (oq_node *n = g->last; n;) {
        oq_node *prev = n->prev;
        if (node_dead(n)) {
            oq_pass_remove_node(n);
            oq_pass_stat_add(c->res, "nodes_removed", 1);
            c->res->changed = true;
        }
        n = prev;
    }
    if (!c->keep_initializers) {
        for (size_t i = g->n_initializers; i-- > 0;) {
            oq_tensor *t = g->initializers[i];
            oq_value *v = t->name ? oq_graph_find_local(g, t->name) : NULL;
            if (!v || v->is_graph_input || oq_pass_value_refs(v) > 0 || v->initializer != t)
                continue;
            oq_graph_remove_initializer(g, v);
            oq_pass_stat_add(c->res, "initializers_removed", 1);
            c->res->changed = true;
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < g->n_value_info; i++) {
        oq_value *v = g->value_info[i]->value;
        if (v && v->kind == OQ_VALUE_UNDEFINED && v->n_uses == 0 && !oq_value_is_graph_output(v)) {
            oq_pass_stat_add(c->res, "value_info_removed", 1);
            c->res->changed = true;
            continue;
        }
        g->value_info[k++] = g->value_info[i];
    }
    g->n_value_info = k;
    return OQ_OK;
}

static oq_status run(oq_model *m, const oq_pass_options *o, oq_pass_result *res, oq_diag *d)
{
    ctx c = {res, oq_pass_opt_bool(o, "keep-initializers", false)};
    return oq_pass_for_each_graph(m, run_graph, &c);
}

static const oq_pass_option_def options[] = {
    {"keep-initializers", OQ_OPT_BOOL, "false", "do not remove unused initializers"},
};

const oq_pass oq_pass_eliminate_dead = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "eliminate-dead",
    .summary = "remove nodes whose outputs nothing uses, and unused initializers",
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .run = run,
    /* removing a subgraph's node can make a node of the enclosing graph dead */
    .iterative = true,
    .max_iterations = 8,
};
