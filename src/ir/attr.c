#include "ir/ir-impl.h"

#include <string.h>

const char *oq_attr_type_name(int32_t type)
{
    switch (type) {
    case OQ_ATTR_FLOAT: return "float";
    case OQ_ATTR_INT: return "int";
    case OQ_ATTR_STRING: return "string";
    case OQ_ATTR_TENSOR: return "tensor";
    case OQ_ATTR_GRAPH: return "graph";
    case OQ_ATTR_FLOATS: return "floats";
    case OQ_ATTR_INTS: return "ints";
    case OQ_ATTR_STRINGS: return "strings";
    case OQ_ATTR_TENSORS: return "tensors";
    case OQ_ATTR_GRAPHS: return "graphs";
    case OQ_ATTR_SPARSE_TENSOR: return "sparse_tensor";
    case OQ_ATTR_SPARSE_TENSORS: return "sparse_tensors";
    case OQ_ATTR_TYPE_PROTO: return "type_proto";
    case OQ_ATTR_TYPE_PROTOS: return "type_protos";
    default: return "undefined";
    }
}

oq_attr *oq_node_attr(const oq_node *n, const char *name)
{
    for (size_t i = 0; i < n->n_attrs; i++)
        if (n->attrs[i]->name && strcmp(n->attrs[i]->name, name) == 0)
            return n->attrs[i];
    return NULL;
}

int64_t oq_node_attr_int(const oq_node *n, const char *name, int64_t dflt)
{
    oq_attr *a = oq_node_attr(n, name);
    return a && (a->type == OQ_ATTR_INT || a->has_i) ? a->i : dflt;
}

float oq_node_attr_float(const oq_node *n, const char *name, float dflt)
{
    oq_attr *a = oq_node_attr(n, name);
    return a && (a->type == OQ_ATTR_FLOAT || a->has_f) ? a->f : dflt;
}

const char *oq_node_attr_string(const oq_node *n, const char *name, const char *dflt)
{
    oq_attr *a = oq_node_attr(n, name);
    if (!a || !(a->type == OQ_ATTR_STRING || a->has_s))
        return dflt;
    /* every string attribute's bytes end with a NUL (the reader and oq_node_set_attr_string
     * store them so): returned as they are, nothing allocated (kernels call this while the
     * model runs, from several threads) */
    return a->s.data ? (const char *)a->s.data : dflt;
}

int64_t oq_node_attr_ints(const oq_node *n, const char *name, const int64_t **vals)
{
    oq_attr *a = oq_node_attr(n, name);
    if (!a || a->type != OQ_ATTR_INTS) {
        if (vals)
            *vals = NULL;
        return -1;
    }
    if (vals)
        *vals = a->ints;
    return (int64_t)a->n_ints;
}

bool oq_node_remove_attr(oq_node *n, const char *name)
{
    for (size_t i = 0; i < n->n_attrs; i++) {
        if (n->attrs[i]->name && strcmp(n->attrs[i]->name, name) == 0) {
            memmove(&n->attrs[i], &n->attrs[i + 1], (n->n_attrs - i - 1) * sizeof(oq_attr *));
            n->n_attrs--;
            return true;
        }
    }
    return false;
}

static oq_attr *attr_slot(oq_node *n, const char *name, int32_t type)
{
    oq_arena *a = n->graph->model->arena;
    oq_attr *at = oq_arena_alloc(a, sizeof(*at));
    if (!at)
        return NULL;
    at->name = oq_arena_strdup(a, name);
    at->has_type = true;
    at->type = type;
    for (size_t i = 0; i < n->n_attrs; i++) {
        if (n->attrs[i]->name && strcmp(n->attrs[i]->name, name) == 0) {
            n->attrs[i] = at;
            return at;
        }
    }
    if (OQ_PUSH(a, &n->attrs, &n->n_attrs, at) != 0)
        return NULL;
    return at;
}

oq_attr *oq_node_set_attr_int(oq_node *n, const char *name, int64_t v)
{
    oq_attr *a = attr_slot(n, name, OQ_ATTR_INT);
    if (a) {
        a->has_i = true;
        a->i = v;
    }
    return a;
}

oq_attr *oq_node_set_attr_float(oq_node *n, const char *name, float v)
{
    oq_attr *a = attr_slot(n, name, OQ_ATTR_FLOAT);
    if (a) {
        a->has_f = true;
        a->f = v;
    }
    return a;
}

oq_attr *oq_node_set_attr_string(oq_node *n, const char *name, const char *v)
{
    oq_attr *a = attr_slot(n, name, OQ_ATTR_STRING);
    if (a) {
        a->has_s = true;
        a->s.len = strlen(v);
        a->s.data = (uint8_t *)oq_arena_strdup(n->graph->model->arena, v);
    }
    return a;
}

oq_attr *oq_node_set_attr_ints(oq_node *n, const char *name, const int64_t *v, size_t count)
{
    oq_attr *a = attr_slot(n, name, OQ_ATTR_INTS);
    if (a) {
        a->n_ints = count;
        a->ints = oq_arena_memdup(n->graph->model->arena, v, count * sizeof(int64_t));
    }
    return a;
}

oq_attr *oq_node_set_attr_floats(oq_node *n, const char *name, const float *v, size_t count)
{
    oq_attr *a = attr_slot(n, name, OQ_ATTR_FLOATS);
    if (a) {
        a->n_floats = count;
        a->floats = oq_arena_memdup(n->graph->model->arena, v, count * sizeof(float));
    }
    return a;
}

oq_attr *oq_node_set_attr_tensor(oq_node *n, const char *name, oq_tensor *t)
{
    oq_attr *a = attr_slot(n, name, OQ_ATTR_TENSOR);
    if (a)
        a->t = t;
    return a;
}
