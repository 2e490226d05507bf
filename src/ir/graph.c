#include "ir/ir-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ value table */

struct oq_value_table {
    oq_arena *arena;
    size_t cap, count, tombs;
    oq_value **slots;
};

#define TOMB ((oq_value *)(uintptr_t)1)

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

oq_value_table *oq_vt_new(oq_arena *a)
{
    oq_value_table *t = oq_arena_alloc(a, sizeof(*t));
    if (!t)
        return NULL;
    t->arena = a;
    t->cap = 16;
    t->slots = oq_arena_alloc(a, t->cap * sizeof(oq_value *));
    return t->slots ? t : NULL;
}

oq_value *oq_vt_get(const oq_value_table *t, const char *name)
{
    if (!t || !name)
        return NULL;
    size_t mask = t->cap - 1;
    for (size_t i = (size_t)hash_str(name) & mask;; i = (i + 1) & mask) {
        oq_value *v = t->slots[i];
        if (!v)
            return NULL;
        if (v != TOMB && strcmp(v->name, name) == 0)
            return v;
    }
}

static int vt_insert(oq_value **slots, size_t cap, oq_value *v)
{
    size_t mask = cap - 1;
    for (size_t i = (size_t)hash_str(v->name) & mask;; i = (i + 1) & mask) {
        if (!slots[i] || slots[i] == TOMB) {
            slots[i] = v;
            return 0;
        }
        if (strcmp(slots[i]->name, v->name) == 0) {
            slots[i] = v;
            return 1;
        }
    }
}

int oq_vt_put(oq_value_table *t, oq_value *v)
{
    if ((t->count + t->tombs + 1) * 10 >= t->cap * 7) {
        size_t nc = t->cap * 2;
        oq_value **ns = oq_arena_alloc(t->arena, nc * sizeof(oq_value *));
        if (!ns)
            return -1;
        for (size_t i = 0; i < t->cap; i++)
            if (t->slots[i] && t->slots[i] != TOMB)
                vt_insert(ns, nc, t->slots[i]);
        t->slots = ns;
        t->cap = nc;
        t->tombs = 0;
    }
    if (vt_insert(t->slots, t->cap, v) == 0)
        t->count++;
    return 0;
}

void oq_vt_del(oq_value_table *t, const char *name)
{
    size_t mask = t->cap - 1;
    for (size_t i = (size_t)hash_str(name) & mask;; i = (i + 1) & mask) {
        oq_value *v = t->slots[i];
        if (!v)
            return;
        if (v != TOMB && strcmp(v->name, name) == 0) {
            t->slots[i] = TOMB;
            t->count--;
            t->tombs++;
            return;
        }
    }
}

size_t oq_vt_capacity(const oq_value_table *t)
{
    return t ? t->cap : 0;
}

oq_value *oq_vt_slot(const oq_value_table *t, size_t i)
{
    oq_value *v = t->slots[i];
    return v == TOMB ? NULL : v;
}

/* ------------------------------------------------------------ arrays */

int oq_push_ptr(oq_arena *a, void ***arr, size_t *count, void *item)
{
    size_t n = *count;
    /* capacity is the next power of two >= n (arrays grow by doubling) */
    if (n == 0 || (n & (n - 1)) == 0) {
        size_t nc = n ? n * 2 : 4;
        void **na = oq_arena_grow(a, *arr, n * sizeof(void *), nc * sizeof(void *));
        if (!na)
            return -1;
        *arr = na;
    }
    (*arr)[n] = item;
    *count = n + 1;
    return 0;
}

/* ------------------------------------------------------------ model */

void *oq_model_alloc(oq_model *m, size_t size)
{
    return oq_arena_alloc(m->arena, size);
}

char *oq_model_strdup(oq_model *m, const char *s)
{
    return oq_arena_strdup(m->arena, s);
}

void *oq_model_memdup(oq_model *m, const void *p, size_t n)
{
    return oq_arena_memdup(m->arena, p, n);
}

oq_graph *oq_graph_new_in(oq_model *m, oq_graph *parent, oq_node *owner)
{
    oq_graph *g = oq_arena_alloc(m->arena, sizeof(*g));
    if (!g)
        return NULL;
    g->model = m;
    g->parent = parent;
    g->owner = owner;
    g->values = oq_vt_new(m->arena);
    return g->values ? g : NULL;
}

oq_model *oq_model_new(void)
{
    oq_arena *a = oq_arena_new();
    if (!a)
        return NULL;
    oq_model *m = oq_arena_alloc(a, sizeof(*m));
    if (!m) {
        oq_arena_free(a);
        return NULL;
    }
    m->arena = a;
    m->graph = oq_graph_new_in(m, NULL, NULL);
    m->dir = oq_arena_strdup(a, ".");
    if (!m->graph) {
        oq_arena_free(a);
        return NULL;
    }
    return m;
}

void oq_model_free(oq_model *m)
{
    if (!m)
        return;
    const oq_model_io *io = m->io;
    if (io && io->ops && io->ops->release)
        io->ops->release(m);
    oq_arena_free(m->arena);
}

bool oq_domain_is_default(const char *domain)
{
    return !domain || !*domain || strcmp(domain, "ai.onnx") == 0;
}

int64_t oq_model_opset(const oq_model *m, const char *domain)
{
    bool dflt = oq_domain_is_default(domain);
    for (size_t i = 0; i < m->n_opsets; i++) {
        const oq_opset *o = &m->opsets[i];
        if (dflt ? oq_domain_is_default(o->domain) : (o->domain && strcmp(o->domain, domain) == 0))
            return o->version;
    }
    return 0;
}

void oq_model_set_opset(oq_model *m, const char *domain, int64_t version)
{
    bool dflt = oq_domain_is_default(domain);
    for (size_t i = 0; i < m->n_opsets; i++) {
        oq_opset *o = &m->opsets[i];
        if (dflt ? oq_domain_is_default(o->domain) : (o->domain && strcmp(o->domain, domain) == 0)) {
            o->version = version;
            o->has_version = true;
            return;
        }
    }
    oq_opset *no = oq_arena_grow(m->arena, m->opsets, m->n_opsets * sizeof(oq_opset),
                                 (m->n_opsets + 1) * sizeof(oq_opset));
    if (!no)
        return;
    m->opsets = no;
    oq_opset *o = &m->opsets[m->n_opsets++];
    memset(o, 0, sizeof(*o));
    o->domain = oq_arena_strdup(m->arena, domain ? domain : "");
    o->version = version;
    o->has_version = true;
}

const char *oq_model_get_metadata(const oq_model *m, const char *key)
{
    for (size_t i = 0; i < m->metadata.count; i++)
        if (m->metadata.items[i].key && strcmp(m->metadata.items[i].key, key) == 0)
            return m->metadata.items[i].value ? m->metadata.items[i].value : "";
    return NULL;
}

void oq_model_set_metadata(oq_model *m, const char *key, const char *value)
{
    for (size_t i = 0; i < m->metadata.count; i++) {
        if (m->metadata.items[i].key && strcmp(m->metadata.items[i].key, key) == 0) {
            m->metadata.items[i].value = oq_arena_strdup(m->arena, value);
            return;
        }
    }
    oq_kv *ni = oq_arena_grow(m->arena, m->metadata.items, m->metadata.count * sizeof(oq_kv),
                              (m->metadata.count + 1) * sizeof(oq_kv));
    if (!ni)
        return;
    m->metadata.items = ni;
    oq_kv *kv = &ni[m->metadata.count++];
    memset(kv, 0, sizeof(*kv));
    kv->key = oq_arena_strdup(m->arena, key);
    kv->value = oq_arena_strdup(m->arena, value);
}

/* ------------------------------------------------------------ values */

oq_value *oq_graph_find_local(const oq_graph *g, const char *name)
{
    return oq_vt_get(g->values, name);
}

oq_value *oq_graph_find_value(const oq_graph *g, const char *name)
{
    for (; g; g = g->parent) {
        oq_value *v = oq_vt_get(g->values, name);
        if (v)
            return v;
    }
    return NULL;
}

static oq_value *value_create(oq_graph *g, const char *name)
{
    oq_model *m = g->model;
    oq_value *v = oq_arena_alloc(m->arena, sizeof(*v));
    if (!v)
        return NULL;
    v->name = oq_arena_strdup(m->arena, name);
    v->graph = g;
    v->id = m->next_id++;
    if (!v->name || oq_vt_put(g->values, v) != 0)
        return NULL;
    return v;
}

char *oq_graph_unique_name(oq_graph *g, const char *base)
{
    if (!base || !*base)
        base = "v";
    if (!oq_graph_find_value(g, base))
        return oq_arena_strdup(g->model->arena, base);
    char buf[512];
    for (uint64_t i = 1;; i++) {
        snprintf(buf, sizeof buf, "%.480s_%llu", base, (unsigned long long)i);
        if (!oq_graph_find_value(g, buf))
            return oq_arena_strdup(g->model->arena, buf);
    }
}

oq_value *oq_graph_new_value(oq_graph *g, const char *name)
{
    if (name && oq_graph_find_local(g, name))
        return NULL;
    if (!name) {
        char *n = oq_graph_unique_name(g, "t");
        return n ? value_create(g, n) : NULL;
    }
    return value_create(g, name);
}

oq_value *oq_graph_resolve(oq_graph *g, const char *name)
{
    oq_value *v = oq_graph_find_value(g, name);
    return v ? v : value_create(g, name);
}

oq_status oq_value_rename(oq_value *v, const char *name)
{
    if (oq_graph_find_local(v->graph, name))
        return OQ_ERR_USAGE;
    oq_vt_del(v->graph->values, v->name);
    v->name = oq_arena_strdup(v->graph->model->arena, name);
    if (oq_vt_put(v->graph->values, v) != 0)
        return OQ_ERR_NOMEM;
    return OQ_OK;
}

int oq_value_add_use(oq_value *v, oq_node *n, size_t index)
{
    if (v->n_uses == v->cap_uses) {
        size_t nc = v->cap_uses ? v->cap_uses * 2 : 4;
        oq_use *nu = oq_arena_grow(n->graph->model->arena, v->uses, v->n_uses * sizeof(oq_use),
                                   nc * sizeof(oq_use));
        if (!nu)
            return -1;
        v->uses = nu;
        v->cap_uses = nc;
    }
    v->uses[v->n_uses].node = n;
    v->uses[v->n_uses].index = index;
    v->n_uses++;
    return 0;
}

void oq_value_remove_use(oq_value *v, oq_node *n, size_t index)
{
    for (size_t i = 0; i < v->n_uses; i++) {
        if (v->uses[i].node == n && v->uses[i].index == index) {
            memmove(&v->uses[i], &v->uses[i + 1], (v->n_uses - i - 1) * sizeof(oq_use));
            v->n_uses--;
            return;
        }
    }
}

bool oq_value_is_graph_output(const oq_value *v)
{
    const oq_graph *g = v->graph;
    for (size_t i = 0; i < g->n_outputs; i++)
        if (g->outputs[i]->value == v)
            return true;
    return false;
}

oq_tensor *oq_value_const_tensor(const oq_value *v)
{
    if (!v)
        return NULL;
    if (v->kind == OQ_VALUE_INITIALIZER)
        return v->initializer;
    if (v->kind == OQ_VALUE_NODE && v->producer && v->producer->op_type &&
        strcmp(v->producer->op_type, "Constant") == 0 && oq_domain_is_default(v->producer->domain)) {
        oq_attr *a = oq_node_attr(v->producer, "value");
        if (a && a->t)
            return a->t;
    }
    return NULL;
}

void oq_value_replace_all_uses(oq_value *from, oq_value *to)
{
    if (from == to)
        return;
    while (from->n_uses) {
        oq_use u = from->uses[from->n_uses - 1];
        from->n_uses--;
        u.node->inputs[u.index] = to;
        if (to)
            oq_value_add_use(to, u.node, u.index);
    }
}

void oq_graph_replace_output(oq_graph *g, oq_value *from, oq_value *to)
{
    for (size_t i = 0; i < g->n_outputs; i++)
        if (g->outputs[i]->value == from)
            g->outputs[i]->value = to;
}

/* ------------------------------------------------------------ nodes */

oq_node *oq_node_new(oq_graph *g, const char *op_type, const char *domain, const char *name,
                     oq_value *const *inputs, size_t n_inputs, oq_value *const *outputs,
                     size_t n_outputs)
{
    oq_model *m = g->model;
    oq_node *n = oq_arena_alloc(m->arena, sizeof(*n));
    if (!n)
        return NULL;
    n->graph = g;
    n->id = m->next_id++;
    n->op_type = oq_arena_strdup(m->arena, op_type);
    n->domain = domain ? oq_arena_strdup(m->arena, domain) : NULL;
    n->name = name ? oq_arena_strdup(m->arena, name) : NULL;
    n->n_inputs = n_inputs;
    n->inputs = oq_arena_alloc(m->arena, (n_inputs ? n_inputs : 1) * sizeof(oq_value *));
    n->n_outputs = n_outputs;
    n->outputs = oq_arena_alloc(m->arena, (n_outputs ? n_outputs : 1) * sizeof(oq_value *));
    if (!n->inputs || !n->outputs)
        return NULL;
    for (size_t i = 0; i < n_inputs; i++)
        n->inputs[i] = inputs ? inputs[i] : NULL;
    for (size_t i = 0; i < n_outputs; i++)
        n->outputs[i] = outputs ? outputs[i] : NULL;
    return n;
}

static void node_attach(oq_graph *g, oq_node *n)
{
    n->graph = g;
    n->attached = true;
    g->n_nodes++;
    for (size_t i = 0; i < n->n_inputs; i++)
        if (n->inputs[i])
            oq_value_add_use(n->inputs[i], n, i);
    for (size_t i = 0; i < n->n_outputs; i++) {
        oq_value *v = n->outputs[i];
        /* claim only a value nobody defines: a graph input, initializer or another
         * node's output keeps its definition (the checker reports the conflict) */
        if (v && (v->kind == OQ_VALUE_UNDEFINED || (v->kind == OQ_VALUE_NODE && !v->producer))) {
            v->kind = OQ_VALUE_NODE;
            v->producer = n;
            v->producer_index = i;
        }
    }
}

void oq_graph_append(oq_graph *g, oq_node *n)
{
    n->prev = g->last;
    n->next = NULL;
    if (g->last)
        g->last->next = n;
    else
        g->first = n;
    g->last = n;
    node_attach(g, n);
}

void oq_graph_insert_before(oq_graph *g, oq_node *pos, oq_node *n)
{
    if (!pos) {
        oq_graph_append(g, n);
        return;
    }
    n->next = pos;
    n->prev = pos->prev;
    if (pos->prev)
        pos->prev->next = n;
    else
        g->first = n;
    pos->prev = n;
    node_attach(g, n);
}

void oq_graph_insert_after(oq_graph *g, oq_node *pos, oq_node *n)
{
    if (!pos || !pos->next) {
        oq_graph_append(g, n);
        return;
    }
    oq_graph_insert_before(g, pos->next, n);
}

void oq_node_remove(oq_node *n)
{
    if (!n->attached)
        return;
    oq_graph *g = n->graph;
    for (size_t i = 0; i < n->n_inputs; i++)
        if (n->inputs[i])
            oq_value_remove_use(n->inputs[i], n, i);
    for (size_t i = 0; i < n->n_outputs; i++) {
        oq_value *v = n->outputs[i];
        if (v && v->producer == n) {
            v->producer = NULL;
            v->kind = v->initializer ? OQ_VALUE_INITIALIZER
                      : v->is_graph_input ? OQ_VALUE_INPUT
                                          : OQ_VALUE_UNDEFINED;
        }
    }
    if (n->prev)
        n->prev->next = n->next;
    else
        g->first = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        g->last = n->prev;
    n->prev = n->next = NULL;
    n->attached = false;
    g->n_nodes--;
}

oq_status oq_node_set_input(oq_node *n, size_t index, oq_value *v)
{
    if (index >= n->n_inputs) {
        oq_value **ni = oq_arena_grow(n->graph->model->arena, n->inputs,
                                      n->n_inputs * sizeof(oq_value *),
                                      (index + 1) * sizeof(oq_value *));
        if (!ni)
            return OQ_ERR_NOMEM;
        n->inputs = ni;
        n->n_inputs = index + 1;
    }
    oq_value *old = n->inputs[index];
    if (old && n->attached)
        oq_value_remove_use(old, n, index);
    n->inputs[index] = v;
    if (v && n->attached && oq_value_add_use(v, n, index) != 0)
        return OQ_ERR_NOMEM;
    return OQ_OK;
}

oq_status oq_node_add_input(oq_node *n, oq_value *v)
{
    return oq_node_set_input(n, n->n_inputs, v);
}

oq_status oq_node_set_output(oq_node *n, size_t index, oq_value *v)
{
    if (index >= n->n_outputs) {
        oq_value **no = oq_arena_grow(n->graph->model->arena, n->outputs,
                                      n->n_outputs * sizeof(oq_value *),
                                      (index + 1) * sizeof(oq_value *));
        if (!no)
            return OQ_ERR_NOMEM;
        n->outputs = no;
        n->n_outputs = index + 1;
    }
    oq_value *old = n->outputs[index];
    if (old && n->attached && old->producer == n) {
        old->producer = NULL;
        old->kind = OQ_VALUE_UNDEFINED;
    }
    n->outputs[index] = v;
    if (v && n->attached &&
        (v->kind == OQ_VALUE_UNDEFINED || (v->kind == OQ_VALUE_NODE && !v->producer))) {
        v->kind = OQ_VALUE_NODE;
        v->producer = n;
        v->producer_index = index;
    }
    return OQ_OK;
}

size_t oq_graph_node_index(const oq_graph *g, const oq_node *n)
{
    size_t i = 0;
    for (const oq_node *p = g->first; p; p = p->next, i++)
        if (p == n)
            return i;
    return (size_t)-1;
}

const char *oq_node_label(const oq_node *n, char *buf, size_t size)
{
    if (n->name && *n->name)
        return n->name;
    snprintf(buf, size, "#%zu (%s)", oq_graph_node_index(n->graph, n), n->op_type ? n->op_type : "?");
    return buf;
}

int64_t oq_node_opset(const oq_node *n)
{
    return oq_model_opset(n->graph->model, n->domain);
}

size_t oq_node_subgraphs(const oq_node *n, oq_graph **out, size_t max)
{
    size_t k = 0;
    for (size_t i = 0; i < n->n_attrs; i++) {
        oq_attr *a = n->attrs[i];
        if (a->g) {
            if (k < max)
                out[k] = a->g;
            k++;
        }
        for (size_t j = 0; j < a->n_graphs; j++) {
            if (k < max)
                out[k] = a->graphs[j];
            k++;
        }
    }
    return k;
}

/* ------------------------------------------------------------ initializers, io */

oq_status oq_graph_set_initializer(oq_graph *g, oq_value *v, oq_tensor *t)
{
    t->name = v->name;
    if (!v->initializer) {
        if (OQ_PUSH(g->model->arena, &g->initializers, &g->n_initializers, t) != 0)
            return OQ_ERR_NOMEM;
    } else {
        for (size_t i = 0; i < g->n_initializers; i++)
            if (g->initializers[i] == v->initializer)
                g->initializers[i] = t;
    }
    v->initializer = t;
    if (v->kind == OQ_VALUE_UNDEFINED)
        v->kind = OQ_VALUE_INITIALIZER;
    if (!v->type) {
        v->type = oq_type_tensor(g->model, t->dtype, t->dims, NULL, t->rank);
    }
    return OQ_OK;
}

oq_value *oq_graph_add_initializer(oq_graph *g, const char *name, int32_t dtype,
                                   const int64_t *dims, size_t rank, const void *data,
                                   int64_t nbytes)
{
    char *n = oq_graph_unique_name(g, name);
    oq_value *v = n ? oq_graph_new_value(g, n) : NULL;
    if (!v)
        return NULL;
    oq_tensor *t = NULL;
    const oq_model_io *io = g->model->io;
    if (io && io->ops && io->ops->stream_tensor && io->hold <= 0) { /* oq_model_stream_begin: straight to the output */
        oq_diag q;
        oq_diag_init(&q);
        oq_status s = io->ops->stream_tensor(g->model, n, dtype, dims, rank, data, nbytes, &t, &q);
        oq_diag_free(&q);
        if (s != OQ_OK)
            return NULL;
    }
    if (!t)
        t = oq_tensor_new(g->model, n, dtype, dims, rank, data, nbytes);
    if (!t || oq_graph_set_initializer(g, v, t) != OQ_OK)
        return NULL;
    return v;
}

void oq_graph_remove_initializer(oq_graph *g, oq_value *v)
{
    if (!v->initializer)
        return;
    for (size_t i = 0; i < g->n_initializers; i++) {
        if (g->initializers[i] == v->initializer) {
            memmove(&g->initializers[i], &g->initializers[i + 1],
                    (g->n_initializers - i - 1) * sizeof(oq_tensor *));
            g->n_initializers--;
            break;
        }
    }
    oq_tensor_release(v->initializer); /* its pages in a mapped input, if any, are not needed now */
    v->initializer = NULL;
    if (v->kind == OQ_VALUE_INITIALIZER)
        v->kind = v->is_graph_input ? OQ_VALUE_INPUT : OQ_VALUE_UNDEFINED;
}

static oq_vinfo *vinfo_new(oq_graph *g, oq_value *v, oq_type *type)
{
    oq_vinfo *vi = oq_arena_alloc(g->model->arena, sizeof(*vi));
    if (!vi)
        return NULL;
    vi->value = v;
    vi->type = type;
    if (type && !v->type)
        v->type = type;
    return vi;
}

oq_vinfo *oq_graph_add_input(oq_graph *g, oq_value *v, oq_type *type)
{
    oq_vinfo *vi = vinfo_new(g, v, type);
    if (!vi || OQ_PUSH(g->model->arena, &g->inputs, &g->n_inputs, vi) != 0)
        return NULL;
    v->is_graph_input = true;
    if (v->kind == OQ_VALUE_UNDEFINED || v->kind == OQ_VALUE_INITIALIZER)
        v->kind = OQ_VALUE_INPUT;
    return vi;
}

oq_vinfo *oq_graph_add_output(oq_graph *g, oq_value *v, oq_type *type)
{
    oq_vinfo *vi = vinfo_new(g, v, type);
    if (!vi || OQ_PUSH(g->model->arena, &g->outputs, &g->n_outputs, vi) != 0)
        return NULL;
    return vi;
}

oq_vinfo *oq_graph_add_value_info(oq_graph *g, oq_value *v, oq_type *type)
{
    oq_vinfo *vi = vinfo_new(g, v, type);
    if (!vi || OQ_PUSH(g->model->arena, &g->value_info, &g->n_value_info, vi) != 0)
        return NULL;
    return vi;
}

oq_type *oq_type_tensor(oq_model *m, int32_t elem_type, const int64_t *dims,
                        const char *const *names, size_t rank)
{
    oq_type *t = oq_arena_alloc(m->arena, sizeof(*t));
    if (!t)
        return NULL;
    t->kind = OQ_TYPE_TENSOR;
    t->has_elem_type = true;
    t->elem_type = elem_type;
    t->shape = oq_arena_alloc(m->arena, sizeof(oq_shape));
    if (!t->shape)
        return NULL;
    t->shape->rank = rank;
    t->shape->dims = oq_arena_alloc(m->arena, (rank ? rank : 1) * sizeof(oq_dim));
    if (!t->shape->dims)
        return NULL;
    for (size_t i = 0; i < rank; i++) {
        oq_dim *d = &t->shape->dims[i];
        if (names && names[i]) {
            d->kind = OQ_DIM_PARAM;
            d->param = oq_arena_strdup(m->arena, names[i]);
        } else if (dims && dims[i] >= 0) {
            d->kind = OQ_DIM_VALUE;
            d->value = dims[i];
        }
    }
    return t;
}

void oq_model_stream_hold(oq_model *m, bool hold)
{
    oq_model_io *io = m->io;
    if (io)
        io->hold += hold ? 1 : -1;
}
