/* Executor services for graph passes: evaluate one node on constant inputs
 * (fold-constants) and report the compile-time dtypes and shapes of every value
 * (infer-shapes). Both reuse the kernels' prepare/infer/run hooks exactly as a plan
 * does, so a folded value is bit-identical to what the plan would have computed. */
#include "exec/plan-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

oq_status oq_exec_eval_node(const oq_model *model, const oq_node *node,
                            const oq_rt_tensor *const *in, size_t n_in, int64_t max_bytes,
                            oq_rt_tensor *out, size_t n_out, oq_diag *d)
{
    return oq_exec_eval_node_arith(model, node, in, n_in, max_bytes, out, n_out, d,
                                   OQ_ARITH_REFERENCE);
}

oq_status oq_exec_eval_node_arith(const oq_model *model, const oq_node *node,
                                  const oq_rt_tensor *const *in, size_t n_in, int64_t max_bytes,
                                  oq_rt_tensor *out, size_t n_out, oq_diag *d, oq_arith arith)
{
    char lb[64];
    const char *file = model ? model->path : NULL;
    const char *label = node ? oq_node_label(node, lb, sizeof lb) : NULL;
    oq_kctx k;
    const oq_rt_tensor **inp = NULL;
    oq_rt_tensor *tmp = NULL;
    oq_status st = OQ_OK;
    memset(&k, 0, sizeof k);
    for (size_t o = 0; o < n_out; o++)
        memset(&out[o], 0, sizeof out[o]);
    if (!node || n_out != node->n_outputs || n_in != node->n_inputs)
        return oq_diag_error(d, OQ_ERR_USAGE, "oq_exec_eval_node: input/output counts do not "
                             "match the node");
    {
        oq_graph *subs[1];
        if (oq_node_subgraphs(node, subs, 1) > 0)
            return oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_UNSUPPORTED, file, label, node->op_type,
                               "nodes with subgraphs cannot be evaluated on their own");
    }
    inp = calloc(n_in + OQ_K_IN_PAD, sizeof(*inp));
    tmp = calloc(n_out + 1, sizeof(*tmp));
    if (!inp || !tmp) {
        st = OQ_ERR_NOMEM;
        goto done;
    }
    for (size_t i = 0; i < n_in; i++) {
        inp[i] = in[i];
        if (in[i] && (in[i]->rank > OQ_RT_MAX_RANK || (!in[i]->data && oq_rt_tensor_numel(in[i])))) {
            st = oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_USAGE, file, label, node->op_type,
                             "input %zu has no data", i);
            goto done;
        }
    }
    k.node = node;
    k.ort = oq_k_ort_hints(arith, node);
    k.opset = oq_node_opset(node);
    k.diag = d;
    k.file = file;
    k.pool = oq_pool_new(1);
    if (!k.pool) {
        st = OQ_ERR_NOMEM;
        goto done;
    }
    oq_kernel_miss why;
    const oq_kernel *kr = oq_kernel_find(&k, node->domain, node->op_type, k.opset, inp, n_in, &why);
    if (!kr) {
        st = oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_UNSUPPORTED, file, label, node->op_type,
                         "no kernel for %s at opset %lld with these input dtypes", node->op_type,
                         (long long)k.opset);
        goto done;
    }
    k.kernel = kr;
    for (int i = 0; i < kr->min_inputs; i++)
        if ((size_t)i >= n_in || !inp[i]) {
            st = oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_INVALID, file, label, node->op_type,
                             "required input %d is missing", i);
            goto done;
        }
    /* same sequence as a plan: prepare and infer at compile time, infer and run */
    k.compile_time = true;
    if (kr->prepare && (st = kr->prepare(&k, inp, n_in)) != OQ_OK)
        goto done;
    if ((st = kr->infer(&k, inp, n_in, tmp, n_out)) != OQ_OK)
        goto done;
    for (size_t o = 0; o < n_out; o++) {
        int32_t dt = tmp[o].dtype;
        memset(&tmp[o], 0, sizeof tmp[o]);
        tmp[o].dtype = dt;
    }
    k.compile_time = false;
    k.deferred = false;
    if ((st = kr->infer(&k, inp, n_in, tmp, n_out)) != OQ_OK)
        goto done;
    for (size_t o = 0; o < n_out; o++) {
        if (tmp[o].dtype == OQ_DTYPE_UNDEFINED)
            tmp[o].dtype = OQ_DTYPE_UINT8; /* omitted output the kernel did not type */
        int64_t nb = oq_plan_tensor_bytes(&tmp[o]);
        if (nb < 0) {
            st = oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_INTERNAL, file, label, node->op_type,
                             "output %zu has no valid shape", o);
            goto done;
        }
        if (max_bytes >= 0 && nb > max_bytes && node->outputs[o]) {
            char b[160];
            st = oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_UNSUPPORTED, file, label, node->op_type,
                             "output %zu would be %s (%lld bytes), over the cap of %lld bytes",
                             o, oq_rt_tensor_describe(&tmp[o], b, sizeof b), (long long)nb,
                             (long long)max_bytes);
            goto done;
        }
        if ((st = oq_rt_tensor_alloc(&out[o], tmp[o].dtype, tmp[o].dims, tmp[o].rank)) != OQ_OK) {
            st = oq_diag_add(d, OQ_SEV_ERROR, st, file, label, node->op_type,
                             "cannot allocate output %zu", o);
            goto done;
        }
    }
    st = kr->run(&k, inp, n_in, out, n_out);
done:
    if (st != OQ_OK)
        for (size_t o = 0; o < n_out; o++)
            oq_rt_tensor_release(&out[o]);
    if (k.kernel && k.kernel->release && k.state)
        k.kernel->release(k.state);
    free(k.scratch);
    free(k.wide);
    if (k.pool)
        oq_pool_free(k.pool);
    free(inp);
    free(tmp);
    return st;
}

/* ---- tolerant inference: node by node, skipping what has no kernel ----------------- */

typedef struct known {
    bool set;
    oq_rt_tensor t;            /* dtype, rank (OQ_RT_UNKNOWN_RANK), dims; data for constants */
    bool is_const;
} known;

static bool from_const(oq_rt_tensor *rt, oq_tensor *t)
{
    if (!t || !t->has_dtype || t->dtype == OQ_DTYPE_STRING || t->rank > OQ_RT_MAX_RANK)
        return false;
    const void *data = oq_tensor_data(t, NULL);
    if (!data && oq_tensor_numel(t) != 0)
        return false;
    return oq_rt_tensor_borrow(rt, t->dtype, t->dims, t->rank, (void *)data) == OQ_OK;
}

/* Infer node n's outputs at compile time into out[] (dtype 0 when it cannot). */
static void infer_node(const oq_model *model, oq_pool *pool, oq_node *n, known *tab,
                       uint32_t n_tab, oq_rt_tensor *out, const oq_rt_tensor **in)
{
    oq_diag quiet;
    oq_kctx k;
    oq_graph *subs[1];
    oq_diag_init(&quiet);
    memset(&k, 0, sizeof k);
    for (size_t o = 0; o < n->n_outputs; o++)
        memset(&out[o], 0, sizeof out[o]);
    if (oq_node_subgraphs(n, subs, 1) > 0)
        goto done;
    for (size_t i = 0; i < n->n_inputs + OQ_K_IN_PAD; i++)
        in[i] = NULL;
    for (size_t i = 0; i < n->n_inputs; i++) {
        const oq_value *v = n->inputs[i];
        if (!v || !v->name || !*v->name)
            continue;
        if (v->id >= n_tab || !tab[v->id].set || tab[v->id].t.dtype == OQ_DTYPE_UNDEFINED)
            goto done;
        in[i] = &tab[v->id].t;
    }
    k.node = n;
    k.opset = oq_node_opset(n);
    k.pool = pool;
    k.diag = &quiet;
    k.file = model->path;
    oq_kernel_miss why;
    const oq_kernel *kr = oq_kernel_find(&k, n->domain, n->op_type, k.opset, in, n->n_inputs, &why);
    if (!kr)
        goto done;
    k.kernel = kr;
    for (int i = 0; i < kr->min_inputs; i++)
        if ((size_t)i >= n->n_inputs || !in[i])
            goto done;
    k.compile_time = true;
    if (kr->prepare && kr->prepare(&k, in, n->n_inputs) != OQ_OK)
        goto done;
    if (kr->infer(&k, in, n->n_inputs, out, n->n_outputs) != OQ_OK)
        for (size_t o = 0; o < n->n_outputs; o++)
            memset(&out[o], 0, sizeof out[o]);
done:
    for (size_t o = 0; o < n->n_outputs; o++)
        out[o].data = NULL;
    if (k.kernel && k.kernel->release && k.state)
        k.kernel->release(k.state);
    free(k.scratch);
    free(k.wide);
    oq_diag_free(&quiet);
}

static oq_status infer_tolerant(oq_model *model, oq_shape_observer fn, void *user, oq_diag *d)
{
    oq_graph *g = model->graph;
    uint32_t n_tab = model->next_id;
    size_t max_io = 1;
    known *tab = calloc((size_t)n_tab + 1, sizeof(*tab));
    oq_pool *pool = oq_pool_new(1);
    oq_rt_tensor *out = NULL;
    const oq_rt_tensor **in = NULL;
    oq_status st = OQ_OK;
    for (oq_node *n = g->first; n; n = n->next) {
        if (n->n_inputs > max_io)
            max_io = n->n_inputs;
        if (n->n_outputs > max_io)
            max_io = n->n_outputs;
    }
    out = calloc(max_io + 1, sizeof(*out));
    in = calloc(max_io + OQ_K_IN_PAD + 1, sizeof(*in));
    if (!tab || !pool || !out || !in) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < g->n_initializers; i++) {
        oq_tensor *t = g->initializers[i];
        oq_value *v = t->name ? oq_graph_find_local(g, t->name) : NULL;
        if (v && v->id < n_tab && from_const(&tab[v->id].t, t))
            tab[v->id].set = tab[v->id].is_const = true;
    }
    for (size_t i = 0; i < g->n_inputs; i++) {
        oq_value *v = g->inputs[i]->value;
        if (!v || v->id >= n_tab || tab[v->id].set)
            continue;
        oq_plan_tensor_from_type(&tab[v->id].t, g->inputs[i]->type ? g->inputs[i]->type : v->type);
        tab[v->id].set = true;
    }
    for (oq_node *n = g->first; n; n = n->next) {
        if (strcmp(n->op_type, "Constant") == 0 && oq_domain_is_default(n->domain)) {
            oq_value *v = n->n_outputs ? n->outputs[0] : NULL;
            if (v && v->id < n_tab && from_const(&tab[v->id].t, oq_value_const_tensor(v)))
                tab[v->id].set = tab[v->id].is_const = true;
            continue;
        }
        infer_node(model, pool, n, tab, n_tab, out, in);
        for (size_t o = 0; o < n->n_outputs; o++) {
            oq_value *v = n->outputs[o];
            if (!v || v->id >= n_tab || out[o].dtype == OQ_DTYPE_UNDEFINED)
                continue;
            tab[v->id].t = out[o];
            tab[v->id].set = true;
        }
    }
    for (size_t i = 0; i < g->n_initializers; i++) {
        oq_value *v = g->initializers[i]->name ? oq_graph_find_local(g, g->initializers[i]->name) : NULL;
        if (v && v->id < n_tab && tab[v->id].set && tab[v->id].is_const) {
            const oq_rt_tensor *t = &tab[v->id].t;
            fn(v, t->dtype, t->rank, t->dims, t->data, user);
            tab[v->id].set = false; /* reported */
        }
    }
    for (size_t i = 0; i < g->n_inputs; i++) {
        oq_value *v = g->inputs[i]->value;
        if (v && v->id < n_tab && tab[v->id].set) {
            const oq_rt_tensor *t = &tab[v->id].t;
            fn(v, t->dtype, t->rank == OQ_RT_UNKNOWN_RANK ? OQ_EXEC_UNKNOWN_RANK : t->rank,
               t->dims, NULL, user);
            tab[v->id].set = false;
        }
    }
    for (oq_node *n = g->first; n; n = n->next)
        for (size_t o = 0; o < n->n_outputs; o++) {
            oq_value *v = n->outputs[o];
            if (!v || !v->name || !*v->name || v->id >= n_tab || !tab[v->id].set)
                continue;
            const oq_rt_tensor *t = &tab[v->id].t;
            fn(v, t->dtype, t->rank == OQ_RT_UNKNOWN_RANK ? OQ_EXEC_UNKNOWN_RANK : t->rank,
               t->dims, tab[v->id].is_const ? t->data : NULL, user);
            tab[v->id].set = false;
        }
done:
    free(tab);
    free(out);
    free(in);
    if (pool)
        oq_pool_free(pool);
    return st;
}

oq_status oq_exec_infer_shapes(oq_model *model, oq_shape_observer fn, void *user, bool *complete,
                               oq_diag *d)
{
    oq_plan *p = NULL;
    oq_plan_options o = oq_plan_options_default();
    o.threads = 1;
    o.no_fold = true; /* shapes only: report folded values as node outputs, as before */
    oq_diag quiet;
    oq_diag_init(&quiet);
    oq_status st = oq_plan_compile(model, &o, &p, &quiet);
    oq_diag_free(&quiet);
    if (complete)
        *complete = st == OQ_OK;
    if (st != OQ_OK) /* some node has no kernel: infer node by node around it */
        return infer_tolerant(model, fn, user, d);
    for (size_t i = 0; i < p->n_slots; i++) {
        const slot *s = &p->slots[i];
        const oq_rt_tensor *c = &s->compiled;
        if (!s->value || s->kind == SLOT_OUTER)
            continue;
        fn(s->value, c->dtype, c->rank == OQ_RT_UNKNOWN_RANK ? OQ_EXEC_UNKNOWN_RANK : c->rank,
           c->dims, s->kind == SLOT_CONST ? c->data : NULL, user);
    }
    oq_plan_free(p);
    return OQ_OK;
}
