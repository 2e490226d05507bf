/* Read an ONNX file into the IR.
 *
 * bytes --(mmap)--> wire pre-scan --> protobuf-c unpack (memory from the model arena)
 *       --> IR that borrows strings, arrays and raw_data from the unpacked message.
 * Everything lives in the model's arena, so freeing the model frees it all. */
#include "io/io-impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ allocator */

static void *arena_pb_alloc(void *data, size_t size)
{
    return oq_arena_alloc_raw((oq_arena *)data, size);
}

static void arena_pb_free(void *data, void *ptr)
{
    (void)data;
    (void)ptr;
}

void oq_pb_allocator_init(ProtobufCAllocator *al, oq_arena *a)
{
    al->alloc = arena_pb_alloc;
    al->free = arena_pb_free;
    al->allocator_data = a;
}

/* ------------------------------------------------------------ io state */

static void io_release(oq_model *m);

static const oq_model_io_ops io_ops = {
    .map_external = oq_io_map_external,
    .release = io_release,
    .stream_tensor = oq_io_stream_tensor,
    .release_tensor = oq_io_release_tensor,
};

oq_io_state *oq_io_state_get(oq_model *m)
{
    if (!m->io) {
        oq_io_state *s = oq_arena_alloc(m->arena, sizeof(oq_io_state));
        if (!s)
            return NULL;
        s->base.ops = &io_ops;
        m->io = s;
    }
    return m->io;
}

static void io_release(oq_model *m)
{
    oq_io_state *s = m->io;
    if (!s)
        return;
    oq_io_stream_abort(m);
    for (oq_mapping *mp = s->maps; mp; mp = mp->next)
        if (mp->addr && mp->len)
            munmap(mp->addr, mp->len);
    s->maps = NULL;
}

/* ------------------------------------------------------------ conversion */

typedef struct rd {
    oq_model *m;
    oq_arena *a;
    oq_diag *d;
    oq_status st;
    const oq_raw_refs *refs;  /* raw_data payloads borrowed from the mapped file */
    size_t n_refs;
} rd;

static void conv_unknown(const ProtobufCMessage *pb, oq_unknown *u)
{
    u->count = pb->n_unknown_fields;
    if (!u->count)
        return;
    /* same layout is not guaranteed: copy field by field into arena-free storage borrowed
     * from the message (the unknown field array itself lives in the arena) */
    u->fields = (oq_unknown_field *)pb->unknown_fields;
    _Static_assert(sizeof(oq_unknown_field) == sizeof(ProtobufCMessageUnknownField) && sizeof(ProtobufCWireType) == sizeof(uint32_t),
                   "unknown field layout");
}

static void conv_kvs(size_t n, Onnx__StringStringEntryProto **in, oq_kvs *out, rd *r)
{
    out->count = n;
    if (!n)
        return;
    out->items = oq_arena_alloc(r->a, n * sizeof(oq_kv));
    if (!out->items) {
        r->st = OQ_ERR_NOMEM;
        out->count = 0;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        out->items[i].key = in[i]->key;
        out->items[i].value = in[i]->value;
        conv_unknown(&in[i]->base, &out->items[i].unk);
    }
}

static void conv_opsets(size_t n, Onnx__OperatorSetIdProto **in, oq_opset **out, size_t *nout,
                        rd *r)
{
    *nout = n;
    if (!n)
        return;
    *out = oq_arena_alloc(r->a, n * sizeof(oq_opset));
    if (!*out) {
        r->st = OQ_ERR_NOMEM;
        *nout = 0;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        (*out)[i].domain = in[i]->domain;
        (*out)[i].has_version = in[i]->has_version;
        (*out)[i].version = in[i]->version;
        conv_unknown(&in[i]->base, &(*out)[i].unk);
    }
}

static oq_shape *conv_shape(const Onnx__TensorShapeProto *s, rd *r)
{
    if (!s)
        return NULL;
    oq_shape *sh = oq_arena_alloc(r->a, sizeof(*sh));
    if (!sh)
        goto oom;
    sh->rank = s->n_dim;
    sh->dims = oq_arena_alloc(r->a, (s->n_dim ? s->n_dim : 1) * sizeof(oq_dim));
    if (!sh->dims)
        goto oom;
    for (size_t i = 0; i < s->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *pd = s->dim[i];
        oq_dim *dd = &sh->dims[i];
        dd->denotation = pd->denotation;
        if (pd->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            dd->kind = OQ_DIM_VALUE;
            dd->value = pd->dim_value;
        } else if (pd->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) {
            dd->kind = OQ_DIM_PARAM;
            dd->param = pd->dim_param;
        }
        conv_unknown(&pd->base, &dd->unk);
    }
    conv_unknown(&s->base, &sh->unk);
    return sh;
oom:
    r->st = OQ_ERR_NOMEM;
    return NULL;
}

static oq_type *conv_type(const Onnx__TypeProto *tp, rd *r)
{
    if (!tp)
        return NULL;
    oq_type *t = oq_arena_alloc(r->a, sizeof(*t));
    if (!t) {
        r->st = OQ_ERR_NOMEM;
        return NULL;
    }
    t->denotation = tp->denotation;
    conv_unknown(&tp->base, &t->unk);
    switch (tp->value_case) {
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
        t->kind = OQ_TYPE_TENSOR;
        t->has_elem_type = tp->tensor_type->has_elem_type;
        t->elem_type = tp->tensor_type->elem_type;
        t->shape = conv_shape(tp->tensor_type->shape, r);
        conv_unknown(&tp->tensor_type->base, &t->inner_unk);
        break;
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
        t->kind = OQ_TYPE_SPARSE_TENSOR;
        t->has_elem_type = tp->sparse_tensor_type->has_elem_type;
        t->elem_type = tp->sparse_tensor_type->elem_type;
        t->shape = conv_shape(tp->sparse_tensor_type->shape, r);
        conv_unknown(&tp->sparse_tensor_type->base, &t->inner_unk);
        break;
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
        t->kind = OQ_TYPE_SEQUENCE;
        t->elem = conv_type(tp->sequence_type->elem_type, r);
        conv_unknown(&tp->sequence_type->base, &t->inner_unk);
        break;
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
        t->kind = OQ_TYPE_OPTIONAL;
        t->elem = conv_type(tp->optional_type->elem_type, r);
        conv_unknown(&tp->optional_type->base, &t->inner_unk);
        break;
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
        t->kind = OQ_TYPE_MAP;
        t->has_key_type = tp->map_type->has_key_type;
        t->key_type = tp->map_type->key_type;
        t->elem = conv_type(tp->map_type->value_type, r);
        conv_unknown(&tp->map_type->base, &t->inner_unk);
        break;
    case ONNX__TYPE_PROTO__VALUE_OPAQUE_TYPE:
        t->kind = OQ_TYPE_OPAQUE;
        t->opaque_domain = tp->opaque_type->domain;
        t->opaque_name = tp->opaque_type->name;
        conv_unknown(&tp->opaque_type->base, &t->inner_unk);
        break;
    default:
        t->kind = OQ_TYPE_NONE;
        break;
    }
    return t;
}

static oq_tensor *conv_tensor(const Onnx__TensorProto *p, rd *r, const char *where)
{
    if (!p)
        return NULL;
    oq_tensor *t = oq_arena_alloc(r->a, sizeof(*t));
    if (!t) {
        r->st = OQ_ERR_NOMEM;
        return NULL;
    }
    t->model = r->m;
    t->name = p->name;
    t->doc_string = p->doc_string;
    t->has_dtype = p->has_data_type;
    t->dtype = p->data_type;
    t->rank = p->n_dims;
    t->dims = p->dims;
    t->has_raw = p->has_raw_data;
    t->raw.len = p->raw_data.len;
    t->raw.data = p->raw_data.data;
    t->n_float_data = p->n_float_data;
    t->float_data = p->float_data;
    t->n_int32_data = p->n_int32_data;
    t->int32_data = p->int32_data;
    t->n_int64_data = p->n_int64_data;
    t->int64_data = p->int64_data;
    t->n_double_data = p->n_double_data;
    t->double_data = p->double_data;
    t->n_uint64_data = p->n_uint64_data;
    t->uint64_data = p->uint64_data;
    t->n_string_data = p->n_string_data;
    _Static_assert(sizeof(oq_bytes) == sizeof(ProtobufCBinaryData), "bytes layout");
    t->string_data = (oq_bytes *)p->string_data;
    t->has_data_location = p->has_data_location;
    t->data_location = (int32_t)p->data_location;
    conv_kvs(p->n_external_data, p->external_data, &t->external_data, r);
    if (p->segment) {
        t->has_segment = true;
        t->has_seg_begin = p->segment->has_begin;
        t->seg_begin = p->segment->begin;
        t->has_seg_end = p->segment->has_end;
        t->seg_end = p->segment->end;
        conv_unknown(&p->segment->base, &t->seg_unk);
    }
    conv_kvs(p->n_metadata_props, p->metadata_props, &t->metadata, r);
    conv_unknown(&p->base, &t->unk);
    if (r->n_refs)
        oq_raw_restore(t, r->refs, r->n_refs);

    if (r->st == OQ_OK) {
        oq_status s = oq_tensor_validate(t, where, r->d);
        if (s == OQ_OK && oq_tensor_is_external(t))
            s = oq_io_map_external(r->m, t, r->d);
        if (s != OQ_OK)
            r->st = s;
    }
    return t;
}

/* A sparse tensor: values is 1-D [NNZ]; indices is INT64 [NNZ] (linear) or [NNZ, rank]
 * (coordinates); every index lies inside dims. */
static oq_status check_sparse(oq_sparse_tensor *s, rd *r, const char *where)
{
    const char *nm = s->values && s->values->name ? s->values->name : "";
    oq_diag *d = r->d;
    for (size_t i = 0; i < s->rank; i++)
        if (s->dims[i] < 0)
            return oq_diag_error(d, OQ_ERR_INVALID, "%s \"%s\": dimension %zu is negative (%lld)",
                                 where, nm, i, (long long)s->dims[i]);
    int64_t dense = oq_dims_numel(s->dims, s->rank);
    if (dense < 0)
        return oq_diag_error(d, OQ_ERR_INVALID, "%s \"%s\": element count overflows int64",
                             where, nm);
    if (!s->values)
        return oq_diag_error(d, OQ_ERR_INVALID, "%s: sparse tensor has no values", where);
    if (s->values->rank != 1)
        return oq_diag_error(d, OQ_ERR_INVALID, "%s \"%s\": values must be 1-D, not %zu-D",
                             where, nm, s->values->rank);
    int64_t nnz = s->values->dims[0];
    if (nnz > dense)
        return oq_diag_error(d, OQ_ERR_INVALID, "%s \"%s\": %lld values for %lld elements",
                             where, nm, (long long)nnz, (long long)dense);
    if (!s->indices) {
        if (nnz == 0)
            return OQ_OK;
        return oq_diag_error(d, OQ_ERR_INVALID, "%s \"%s\": sparse tensor has no indices",
                             where, nm);
    }
    const oq_tensor *ix = s->indices;
    if (ix->dtype != OQ_DTYPE_INT64)
        return oq_diag_error(d, OQ_ERR_INVALID, "%s \"%s\": indices must be int64, not %s",
                             where, nm, oq_dtype_name(ix->dtype));
    bool linear = ix->rank == 1;
    if (!(linear && ix->dims[0] == nnz) &&
        !(ix->rank == 2 && ix->dims[0] == nnz && (uint64_t)ix->dims[1] == s->rank)) {
        char shape[128] = "[";
        for (size_t i = 0; i < ix->rank && strlen(shape) < sizeof shape - 32; i++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld",
                     i ? ", " : "", (long long)ix->dims[i]);
        strcat(shape, ix->rank > 0 && strlen(shape) >= sizeof shape - 32 ? ", ...]" : "]");
        return oq_diag_error(d, OQ_ERR_INVALID,
                             "%s \"%s\": indices have shape %s, expected [%lld] or [%lld, %zu]",
                             where, nm, shape, (long long)nnz, (long long)nnz, s->rank);
    }
    if (nnz == 0)
        return OQ_OK;
    const uint8_t *data = oq_tensor_data(s->indices, d);
    if (!data)
        return OQ_ERR_INVALID;
    int64_t per = linear ? 1 : (int64_t)s->rank;
    for (int64_t k = 0; k < nnz; k++)
        for (int64_t j = 0; j < per; j++) {
            int64_t v;
            memcpy(&v, data + (size_t)(k * per + j) * sizeof v, sizeof v);
            int64_t lim = linear ? dense : s->dims[j];
            if (v < 0 || v >= lim)
                return oq_diag_error(d, OQ_ERR_INVALID,
                                     "%s \"%s\": index %lld of value %lld is outside [0, %lld)",
                                     where, nm, (long long)v, (long long)k, (long long)lim);
        }
    return OQ_OK;
}

static oq_sparse_tensor *conv_sparse(const Onnx__SparseTensorProto *p, rd *r, const char *where)
{
    if (!p)
        return NULL;
    oq_sparse_tensor *s = oq_arena_alloc(r->a, sizeof(*s));
    if (!s) {
        r->st = OQ_ERR_NOMEM;
        return NULL;
    }
    char iwhere[300];
    snprintf(iwhere, sizeof iwhere, "%s indices", where);
    s->values = conv_tensor(p->values, r, where);
    s->indices = conv_tensor(p->indices, r, iwhere);
    s->rank = p->n_dims;
    s->dims = p->dims;
    conv_unknown(&p->base, &s->unk);
    if (r->st == OQ_OK)
        r->st = check_sparse(s, r, where);
    return s;
}

static oq_graph *conv_graph(const Onnx__GraphProto *p, oq_graph *parent, oq_node *owner, rd *r,
                            bool function_body);

static oq_attr *conv_attr(const Onnx__AttributeProto *p, oq_graph *g, oq_node *owner, rd *r)
{
    oq_attr *a = oq_arena_alloc(r->a, sizeof(*a));
    if (!a) {
        r->st = OQ_ERR_NOMEM;
        return NULL;
    }
    char where[256];
    if (owner)
        snprintf(where, sizeof where, "node \"%.64s\" attribute \"%.64s\": tensor",
                 owner->name && *owner->name ? owner->name : (owner->op_type ? owner->op_type : ""),
                 p->name ? p->name : "");
    else
        snprintf(where, sizeof where, "function attribute \"%.64s\": tensor",
                 p->name ? p->name : "");
    a->name = p->name;
    a->ref_attr_name = p->ref_attr_name;
    a->doc_string = p->doc_string;
    a->has_type = p->has_type;
    a->type = (int32_t)p->type;
    a->has_f = p->has_f;
    a->f = p->f;
    a->has_i = p->has_i;
    a->i = p->i;
    a->has_s = p->has_s;
    a->s.len = p->s.len;
    /* NUL-terminated (oq_node_attr_string hands the bytes out as a C string: no copy at
     * run time, when kernels read their attributes from several threads) */
    a->s.data = p->s.data ? (uint8_t *)oq_arena_strndup(r->a, (const char *)p->s.data, p->s.len) : NULL;
    if (p->s.data && !a->s.data)
        r->st = OQ_ERR_NOMEM;
    a->t = conv_tensor(p->t, r, where);
    a->g = p->g ? conv_graph(p->g, g, owner, r, false) : NULL;
    a->sparse_tensor = conv_sparse(p->sparse_tensor, r, where);
    a->tp = conv_type(p->tp, r);
    a->n_floats = p->n_floats;
    a->floats = p->floats;
    a->n_ints = p->n_ints;
    a->ints = p->ints;
    a->n_strings = p->n_strings;
    a->strings = (oq_bytes *)p->strings;
    if (p->n_tensors) {
        a->tensors = oq_arena_alloc(r->a, p->n_tensors * sizeof(oq_tensor *));
        if (!a->tensors)
            goto oom;
        a->n_tensors = p->n_tensors;
        for (size_t i = 0; i < p->n_tensors; i++)
            a->tensors[i] = conv_tensor(p->tensors[i], r, where);
    }
    if (p->n_graphs) {
        a->graphs = oq_arena_alloc(r->a, p->n_graphs * sizeof(oq_graph *));
        if (!a->graphs)
            goto oom;
        a->n_graphs = p->n_graphs;
        for (size_t i = 0; i < p->n_graphs; i++)
            a->graphs[i] = conv_graph(p->graphs[i], g, owner, r, false);
    }
    if (p->n_sparse_tensors) {
        a->sparse_tensors = oq_arena_alloc(r->a, p->n_sparse_tensors * sizeof(oq_sparse_tensor *));
        if (!a->sparse_tensors)
            goto oom;
        a->n_sparse_tensors = p->n_sparse_tensors;
        for (size_t i = 0; i < p->n_sparse_tensors; i++)
            a->sparse_tensors[i] = conv_sparse(p->sparse_tensors[i], r, where);
    }
    if (p->n_type_protos) {
        a->type_protos = oq_arena_alloc(r->a, p->n_type_protos * sizeof(oq_type *));
        if (!a->type_protos)
            goto oom;
        a->n_type_protos = p->n_type_protos;
        for (size_t i = 0; i < p->n_type_protos; i++)
            a->type_protos[i] = conv_type(p->type_protos[i], r);
    }
    conv_unknown(&p->base, &a->unk);
    return a;
oom:
    r->st = OQ_ERR_NOMEM;
    return a;
}

static oq_vinfo *conv_vinfo(const Onnx__ValueInfoProto *p, oq_value *v, rd *r)
{
    oq_vinfo *vi = oq_arena_alloc(r->a, sizeof(*vi));
    if (!vi) {
        r->st = OQ_ERR_NOMEM;
        return NULL;
    }
    vi->value = v;
    vi->type = conv_type(p->type, r);
    vi->doc_string = p->doc_string;
    conv_kvs(p->n_metadata_props, p->metadata_props, &vi->metadata, r);
    conv_unknown(&p->base, &vi->unk);
    if (v && !v->type)
        v->type = vi->type;
    return vi;
}

/* Value for a name written on the wire. A missing name (NULL) gets "" — a value with
 * an empty name is how "no name" round-trips for graph inputs/outputs. */
static oq_value *local_value(oq_graph *g, const char *name, rd *r)
{
    const char *nm = name ? name : "";
    oq_value *v = oq_graph_find_local(g, nm);
    if (!v) {
        v = oq_graph_new_value(g, nm);
        if (!v)
            r->st = OQ_ERR_NOMEM;
    }
    return v;
}

/* Arrays that oq_push_ptr() may grow later (graph inputs/outputs/value_info,
 * initializers, node attributes) must have the capacity it assumes: the next power
 * of two >= n. */
static size_t push_cap(size_t n)
{
    size_t c = 1;
    while (c < n)
        c *= 2;
    return c;
}

static oq_vinfo **alloc_vinfos(size_t n, rd *r)
{
    if (!n)
        return NULL;
    oq_vinfo **p = oq_arena_alloc(r->a, push_cap(n) * sizeof(oq_vinfo *));
    if (!p)
        r->st = OQ_ERR_NOMEM;
    return p;
}

static oq_graph *conv_graph(const Onnx__GraphProto *p, oq_graph *parent, oq_node *owner, rd *r,
                            bool function_body)
{
    oq_graph *g = oq_graph_new_in(r->m, parent, owner);
    if (!g) {
        r->st = OQ_ERR_NOMEM;
        return NULL;
    }
    g->is_function_body = function_body;
    g->name = p->name;
    g->doc_string = p->doc_string;
    conv_kvs(p->n_metadata_props, p->metadata_props, &g->metadata, r);
    conv_unknown(&p->base, &g->unk);

    /* 1. definitions: inputs, initializers, sparse initializers, node outputs */
    g->inputs = alloc_vinfos(p->n_input, r);
    for (size_t i = 0; i < p->n_input && r->st == OQ_OK; i++) {
        oq_value *v = local_value(g, p->input[i]->name, r);
        if (!v)
            break;
        v->is_graph_input = true;
        if (v->kind == OQ_VALUE_UNDEFINED)
            v->kind = OQ_VALUE_INPUT;
        g->inputs[g->n_inputs++] = conv_vinfo(p->input[i], v, r);
    }
    if (p->n_initializer) {
        g->initializers = oq_arena_alloc(r->a, push_cap(p->n_initializer) * sizeof(oq_tensor *));
        if (!g->initializers)
            r->st = OQ_ERR_NOMEM;
    }
    for (size_t i = 0; i < p->n_initializer && r->st == OQ_OK; i++) {
        oq_tensor *t = conv_tensor(p->initializer[i], r, "initializer");
        if (!t)
            break;
        g->initializers[g->n_initializers++] = t;
        oq_value *v = local_value(g, t->name, r);
        if (!v)
            break;
        if (!v->initializer)
            v->initializer = t;
        if (v->kind == OQ_VALUE_UNDEFINED)
            v->kind = OQ_VALUE_INITIALIZER;
    }
    if (p->n_sparse_initializer) {
        g->sparse_initializers =
            oq_arena_alloc(r->a, p->n_sparse_initializer * sizeof(oq_sparse_tensor *));
        if (!g->sparse_initializers)
            r->st = OQ_ERR_NOMEM;
    }
    for (size_t i = 0; i < p->n_sparse_initializer && r->st == OQ_OK; i++) {
        oq_sparse_tensor *s = conv_sparse(p->sparse_initializer[i], r, "sparse initializer");
        if (!s)
            break;
        g->sparse_initializers[g->n_sparse_initializers++] = s;
        const char *nm = s->values && s->values->name ? s->values->name : "";
        oq_value *v = local_value(g, nm, r);
        if (!v)
            break;
        v->sparse_initializer = s;
        if (v->kind == OQ_VALUE_UNDEFINED)
            v->kind = OQ_VALUE_INITIALIZER;
    }

    oq_node **nodes = NULL;
    if (p->n_node) {
        nodes = oq_arena_alloc(r->a, p->n_node * sizeof(oq_node *));
        if (!nodes)
            r->st = OQ_ERR_NOMEM;
    }
    for (size_t i = 0; i < p->n_node && r->st == OQ_OK; i++) {
        const Onnx__NodeProto *pn = p->node[i];
        oq_node *n = oq_arena_alloc(r->a, sizeof(*n));
        if (!n) {
            r->st = OQ_ERR_NOMEM;
            break;
        }
        nodes[i] = n;
        n->graph = g;
        n->id = r->m->next_id++;
        n->name = pn->name;
        n->op_type = pn->op_type;
        n->domain = pn->domain;
        n->overload = pn->overload;
        n->doc_string = pn->doc_string;
        conv_kvs(pn->n_metadata_props, pn->metadata_props, &n->metadata, r);
        conv_unknown(&pn->base, &n->unk);
        n->n_outputs = pn->n_output;
        n->outputs = oq_arena_alloc(r->a, (pn->n_output ? pn->n_output : 1) * sizeof(oq_value *));
        n->n_inputs = pn->n_input;
        n->inputs = oq_arena_alloc(r->a, (pn->n_input ? pn->n_input : 1) * sizeof(oq_value *));
        if (!n->outputs || !n->inputs) {
            r->st = OQ_ERR_NOMEM;
            break;
        }
        for (size_t k = 0; k < pn->n_output; k++) {
            if (!pn->output[k] || !*pn->output[k])
                continue;
            oq_value *v = local_value(g, pn->output[k], r);
            if (!v)
                break;
            n->outputs[k] = v;
            if (!v->producer && v->kind != OQ_VALUE_INPUT && v->kind != OQ_VALUE_INITIALIZER) {
                v->kind = OQ_VALUE_NODE;
                v->producer = n;
                v->producer_index = k;
            }
        }
        /* list */
        n->prev = g->last;
        if (g->last)
            g->last->next = n;
        else
            g->first = n;
        g->last = n;
        n->attached = true;
        g->n_nodes++;
    }

    /* 2. uses and subgraphs */
    for (size_t i = 0; i < p->n_node && r->st == OQ_OK; i++) {
        const Onnx__NodeProto *pn = p->node[i];
        oq_node *n = nodes[i];
        for (size_t k = 0; k < pn->n_input; k++) {
            if (!pn->input[k] || !*pn->input[k])
                continue;
            oq_value *v = oq_graph_resolve(g, pn->input[k]);
            if (!v) {
                r->st = OQ_ERR_NOMEM;
                break;
            }
            n->inputs[k] = v;
            if (oq_value_add_use(v, n, k) != 0)
                r->st = OQ_ERR_NOMEM;
        }
        if (pn->n_attribute) {
            n->attrs = oq_arena_alloc(r->a, push_cap(pn->n_attribute) * sizeof(oq_attr *));
            if (!n->attrs) {
                r->st = OQ_ERR_NOMEM;
                break;
            }
            n->n_attrs = pn->n_attribute;
            for (size_t k = 0; k < pn->n_attribute && r->st == OQ_OK; k++)
                n->attrs[k] = conv_attr(pn->attribute[k], g, n, r);
        }
    }

    g->outputs = alloc_vinfos(p->n_output, r);
    for (size_t i = 0; i < p->n_output && r->st == OQ_OK; i++) {
        const char *nm = p->output[i]->name ? p->output[i]->name : "";
        oq_value *v = oq_graph_resolve(g, nm);
        if (!v) {
            r->st = OQ_ERR_NOMEM;
            break;
        }
        g->outputs[g->n_outputs++] = conv_vinfo(p->output[i], v, r);
    }
    g->value_info = alloc_vinfos(p->n_value_info, r);
    for (size_t i = 0; i < p->n_value_info && r->st == OQ_OK; i++) {
        const char *nm = p->value_info[i]->name ? p->value_info[i]->name : "";
        oq_value *v = oq_graph_resolve(g, nm);
        if (!v) {
            r->st = OQ_ERR_NOMEM;
            break;
        }
        g->value_info[g->n_value_info++] = conv_vinfo(p->value_info[i], v, r);
    }
    if (p->n_quantization_annotation) {
        g->qannot = oq_arena_alloc(r->a, p->n_quantization_annotation * sizeof(oq_tensor_annotation));
        if (!g->qannot)
            r->st = OQ_ERR_NOMEM;
        else
            g->n_qannot = p->n_quantization_annotation;
        for (size_t i = 0; i < g->n_qannot; i++) {
            const Onnx__TensorAnnotation *qa = p->quantization_annotation[i];
            g->qannot[i].tensor_name = qa->tensor_name;
            conv_kvs(qa->n_quant_parameter_tensor_names, qa->quant_parameter_tensor_names,
                     &g->qannot[i].quant_parameter_tensor_names, r);
            conv_unknown(&qa->base, &g->qannot[i].unk);
        }
    }
    /* types for initializer-only values */
    for (size_t i = 0; i < g->n_initializers && r->st == OQ_OK; i++) {
        oq_tensor *t = g->initializers[i];
        oq_value *v = oq_graph_find_local(g, t->name ? t->name : "");
        if (v && !v->type)
            v->type = oq_type_tensor(r->m, t->dtype, t->dims, NULL, t->rank);
    }
    return g;
}

static oq_function *conv_function(const Onnx__FunctionProto *p, rd *r)
{
    oq_function *f = oq_arena_alloc(r->a, sizeof(*f));
    if (!f) {
        r->st = OQ_ERR_NOMEM;
        return NULL;
    }
    f->name = p->name;
    f->domain = p->domain;
    f->overload = p->overload;
    f->doc_string = p->doc_string;
    f->n_inputs = p->n_input;
    f->inputs = p->input;
    f->n_outputs = p->n_output;
    f->outputs = p->output;
    f->n_attr_names = p->n_attribute;
    f->attr_names = p->attribute;
    conv_opsets(p->n_opset_import, p->opset_import, &f->opsets, &f->n_opsets, r);
    conv_kvs(p->n_metadata_props, p->metadata_props, &f->metadata, r);
    conv_unknown(&p->base, &f->unk);
    /* body: a graph holding the nodes and value_info */
    Onnx__GraphProto body = ONNX__GRAPH_PROTO__INIT;
    body.n_node = p->n_node;
    body.node = p->node;
    body.n_value_info = p->n_value_info;
    body.value_info = p->value_info;
    f->body = conv_graph(&body, NULL, NULL, r, true);
    if (p->n_attribute_proto) {
        f->attr_protos = oq_arena_alloc(r->a, p->n_attribute_proto * sizeof(oq_attr *));
        if (!f->attr_protos) {
            r->st = OQ_ERR_NOMEM;
            return f;
        }
        f->n_attr_protos = p->n_attribute_proto;
        for (size_t i = 0; i < p->n_attribute_proto; i++)
            f->attr_protos[i] = conv_attr(p->attribute_proto[i], f->body, NULL, r);
    }
    return f;
}

static void conv_model(const Onnx__ModelProto *p, rd *r)
{
    oq_model *m = r->m;
    m->has_ir_version = p->has_ir_version;
    m->ir_version = p->ir_version;
    conv_opsets(p->n_opset_import, p->opset_import, &m->opsets, &m->n_opsets, r);
    m->producer_name = p->producer_name;
    m->producer_version = p->producer_version;
    m->domain = p->domain;
    m->has_model_version = p->has_model_version;
    m->model_version = p->model_version;
    m->doc_string = p->doc_string;
    conv_kvs(p->n_metadata_props, p->metadata_props, &m->metadata, r);
    conv_unknown(&p->base, &m->unk);
    m->graph = p->graph ? conv_graph(p->graph, NULL, NULL, r, false) : NULL;
    if (p->n_training_info && r->st == OQ_OK) {
        m->training_info = oq_arena_alloc(r->a, p->n_training_info * sizeof(oq_training_info *));
        if (!m->training_info) {
            r->st = OQ_ERR_NOMEM;
            return;
        }
        for (size_t i = 0; i < p->n_training_info && r->st == OQ_OK; i++) {
            const Onnx__TrainingInfoProto *pt = p->training_info[i];
            oq_training_info *ti = oq_arena_alloc(r->a, sizeof(*ti));
            if (!ti) {
                r->st = OQ_ERR_NOMEM;
                return;
            }
            m->training_info[m->n_training_info++] = ti;
            ti->initialization = pt->initialization ? conv_graph(pt->initialization, m->graph, NULL, r, false) : NULL;
            ti->algorithm = pt->algorithm ? conv_graph(pt->algorithm, m->graph, NULL, r, false) : NULL;
            conv_kvs(pt->n_initialization_binding, pt->initialization_binding, &ti->initialization_binding, r);
            conv_kvs(pt->n_update_binding, pt->update_binding, &ti->update_binding, r);
            conv_unknown(&pt->base, &ti->unk);
        }
    }
    if (p->n_functions && r->st == OQ_OK) {
        m->functions = oq_arena_alloc(r->a, p->n_functions * sizeof(oq_function *));
        if (!m->functions) {
            r->st = OQ_ERR_NOMEM;
            return;
        }
        for (size_t i = 0; i < p->n_functions && r->st == OQ_OK; i++)
            m->functions[m->n_functions++] = conv_function(p->functions[i], r);
    }
}

/* ------------------------------------------------------------ entry points */

/* borrow: large raw_data may point into `data`, which then must outlive the model
 * (*borrowed tells whether it does). */
static oq_status read_bytes(const void *data, size_t len, const char *name, const char *dir,
                            const oq_read_options *opts, oq_model **out, oq_diag *d,
                            bool borrow, bool *borrowed)
{
    *out = NULL;
    *borrowed = false;
    uint8_t *skel = NULL;
    size_t skel_len = 0;
    oq_raw_refs *refs = NULL;
    size_t n_refs = 0;
    const char *saved_file = d ? d->file : NULL;
    if (d && name)
        d->file = name;
    oq_status st = OQ_OK;
    oq_model *m = NULL;
    if (len == 0) {
        st = oq_diag_error(d, OQ_ERR_PARSE, "empty file: not an ONNX model");
        goto done;
    }
    st = oq_wire_scan(data, len, &onnx__model_proto__descriptor, d);
    if (st)
        goto done;
    m = oq_model_new();
    /* install the callbacks through which the IR maps external data on demand */
    if (!m || !oq_io_state_get(m)) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    m->path = oq_arena_strdup(m->arena, name);
    m->dir = oq_arena_strdup(m->arena, dir ? dir : ".");
    if (borrow && oq_raw_skeleton(data, len, &skel, &skel_len, &refs, &n_refs) < 0) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    ProtobufCAllocator al;
    oq_pb_allocator_init(&al, m->arena);
    Onnx__ModelProto *pb = skel ? onnx__model_proto__unpack(&al, skel_len, skel)
                                : onnx__model_proto__unpack(&al, len, data);
    free(skel); /* protobuf-c copied what it keeps */
    skel = NULL;
    if (!pb) {
        st = oq_diag_error(d, OQ_ERR_PARSE, "not a valid ONNX ModelProto (protobuf decoding failed)");
        goto done;
    }
    rd r = {m, m->arena, d, OQ_OK, refs, n_refs};
    conv_model(pb, &r);
    st = r.st;
    if (st == OQ_ERR_NOMEM)
        oq_diag_error(d, st, "out of memory while reading the model");
    if (st)
        goto done;
    if (!m->graph) {
        st = oq_diag_error(d, OQ_ERR_INVALID, "model has no graph");
        goto done;
    }
    if (!(opts && opts->skip_check)) {
        st = oq_model_check(m, d);
        if (st)
            goto done;
    }
    *out = m;
    *borrowed = n_refs > 0;
    m = NULL;
done:
    free(skel);
    free(refs);
    oq_model_free(m);
    if (d)
        d->file = saved_file;
    return st;
}

oq_status oq_model_read_buffer(const void *data, size_t len, const char *name,
                               const oq_read_options *opts, oq_model **out, oq_diag *d)
{
    bool borrowed;
    return read_bytes(data, len, name ? name : "<buffer>", ".", opts, out, d, false, &borrowed);
}

oq_status oq_model_read(const char *path, const oq_read_options *opts, oq_model **out, oq_diag *d)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (fd < 0)
        return oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_IO, path, NULL, NULL, "cannot open: %s",
                           strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_IO, path, NULL, NULL, "not a regular file");
    }
    size_t len = (size_t)st.st_size;
    void *map = NULL;
    if (len) {
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            close(fd);
            return oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_IO, path, NULL, NULL, "cannot map: %s",
                               strerror(errno));
        }
        madvise(map, len, MADV_SEQUENTIAL);
    }
    close(fd);
    char *dir = strdup(path);
    if (!dir) {
        if (map)
            munmap(map, len);
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    }
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[slash == dir ? 1 : 0] = 0;
    bool borrowed = false;
    oq_status s = read_bytes(map ? map : "", len, path, slash ? dir : ".", opts, out, d, true,
                             &borrowed);
    free(dir);
    if (s == OQ_OK && borrowed) {
        /* large raw_data points into the mapping: the model keeps it */
        oq_io_state *io = oq_io_state_get(*out);
        oq_mapping *mp = io ? oq_model_alloc(*out, sizeof(*mp)) : NULL;
        if (mp)
            mp->path = oq_model_strdup(*out, path);
        if (!mp || !mp->path) {
            munmap(map, len);
            oq_model_free(*out);
            *out = NULL;
            return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        }
        mp->addr = map;
        mp->len = len;
        mp->next = io->maps;
        io->maps = mp;
    } else if (map) {
        munmap(map, len);
    }
    return s;
}
