/* Write the IR as an ONNX file.
 *
 * The IR is turned into protobuf-c structs that point at the IR's own strings and
 * arrays (allocated from a scratch arena; no tensor data is copied), then packed
 * straight into the output file through a buffered sink. Output is atomic. */
#include "io/io-impl.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

oq_status oq_outfile_finish(oq_outfile *f, oq_diag *d);
oq_status oq_outfile_rename(oq_outfile *f, oq_diag *d);
bool oq_io_model_maps_file(oq_model *m, const char *path);
/* src/io/stream_out.c */
oq_status oq_io_data_names(const char *path, const oq_write_options *o, char **data_path, char *data_name,
                           size_t name_size, oq_diag *d);
oq_stream_sink *oq_io_stream_for(oq_model *m, const char *data_path, const char *data_name);
oq_outfile *oq_io_stream_file(oq_stream_sink *k, uint64_t *off);
void oq_io_stream_done(oq_model *m);

#define EXT_ALIGN 64

typedef struct wr {
    oq_arena *a;
    oq_diag *d;
    oq_status st;
    int ext_mode;           /* 0 keep, 1 move >= threshold, -1 inline */
    int64_t threshold;
    oq_outfile *data;       /* external data sink (NULL: none) */
    const char *data_name;  /* location written in the model */
    uint64_t data_off;
    oq_model *stream;       /* continuing the model's stream sink: its streamed tensors are in data */
} wr;

static void *walloc(wr *w, size_t n)
{
    void *p = oq_arena_alloc(w->a, n ? n : 1);
    if (!p)
        w->st = OQ_ERR_NOMEM;
    return p;
}

static void put_unknown(ProtobufCMessage *pb, const oq_unknown *u)
{
    pb->n_unknown_fields = (unsigned)u->count;
    pb->unknown_fields = (ProtobufCMessageUnknownField *)u->fields;
}

static void put_kvs(const oq_kvs *in, size_t *n, Onnx__StringStringEntryProto ***out, wr *w)
{
    *n = 0;
    *out = NULL;
    if (!in->count)
        return;
    Onnx__StringStringEntryProto *arr = walloc(w, in->count * sizeof(*arr));
    Onnx__StringStringEntryProto **ptrs = walloc(w, in->count * sizeof(*ptrs));
    if (!arr || !ptrs)
        return;
    for (size_t i = 0; i < in->count; i++) {
        onnx__string_string_entry_proto__init(&arr[i]);
        arr[i].key = in->items[i].key;
        arr[i].value = in->items[i].value;
        put_unknown(&arr[i].base, &in->items[i].unk);
        ptrs[i] = &arr[i];
    }
    *n = in->count;
    *out = ptrs;
}

static void put_opsets(const oq_opset *in, size_t count, size_t *n, Onnx__OperatorSetIdProto ***out,
                       wr *w)
{
    *n = 0;
    *out = NULL;
    if (!count)
        return;
    Onnx__OperatorSetIdProto *arr = walloc(w, count * sizeof(*arr));
    Onnx__OperatorSetIdProto **ptrs = walloc(w, count * sizeof(*ptrs));
    if (!arr || !ptrs)
        return;
    for (size_t i = 0; i < count; i++) {
        onnx__operator_set_id_proto__init(&arr[i]);
        arr[i].domain = in[i].domain;
        arr[i].has_version = in[i].has_version;
        arr[i].version = in[i].version;
        put_unknown(&arr[i].base, &in[i].unk);
        ptrs[i] = &arr[i];
    }
    *n = count;
    *out = ptrs;
}

static Onnx__TensorShapeProto *put_shape(const oq_shape *s, wr *w)
{
    if (!s)
        return NULL;
    Onnx__TensorShapeProto *p = walloc(w, sizeof(*p));
    if (!p)
        return NULL;
    onnx__tensor_shape_proto__init(p);
    put_unknown(&p->base, &s->unk);
    if (!s->rank)
        return p;
    Onnx__TensorShapeProto__Dimension *arr = walloc(w, s->rank * sizeof(*arr));
    p->dim = walloc(w, s->rank * sizeof(*p->dim));
    if (!arr || !p->dim)
        return p;
    p->n_dim = s->rank;
    for (size_t i = 0; i < s->rank; i++) {
        Onnx__TensorShapeProto__Dimension *d = &arr[i];
        onnx__tensor_shape_proto__dimension__init(d);
        d->denotation = s->dims[i].denotation;
        if (s->dims[i].kind == OQ_DIM_VALUE) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = s->dims[i].value;
        } else if (s->dims[i].kind == OQ_DIM_PARAM) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = s->dims[i].param;
        }
        put_unknown(&d->base, &s->dims[i].unk);
        p->dim[i] = d;
    }
    return p;
}

static Onnx__TypeProto *put_type(const oq_type *t, wr *w)
{
    if (!t)
        return NULL;
    Onnx__TypeProto *p = walloc(w, sizeof(*p));
    if (!p)
        return NULL;
    onnx__type_proto__init(p);
    p->denotation = t->denotation;
    put_unknown(&p->base, &t->unk);
    switch (t->kind) {
    case OQ_TYPE_TENSOR:
    case OQ_TYPE_SPARSE_TENSOR: {
        /* Tensor and SparseTensor have the same layout */
        Onnx__TypeProto__Tensor *x = walloc(w, sizeof(*x));
        if (!x)
            return p;
        if (t->kind == OQ_TYPE_TENSOR) {
            onnx__type_proto__tensor__init(x);
            p->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
            p->tensor_type = x;
        } else {
            onnx__type_proto__sparse_tensor__init((Onnx__TypeProto__SparseTensor *)x);
            p->value_case = ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE;
            p->sparse_tensor_type = (Onnx__TypeProto__SparseTensor *)x;
        }
        x->has_elem_type = t->has_elem_type;
        x->elem_type = t->elem_type;
        x->shape = put_shape(t->shape, w);
        put_unknown(&x->base, &t->inner_unk);
        break;
    }
    case OQ_TYPE_SEQUENCE: {
        Onnx__TypeProto__Sequence *x = walloc(w, sizeof(*x));
        if (!x)
            return p;
        onnx__type_proto__sequence__init(x);
        x->elem_type = put_type(t->elem, w);
        put_unknown(&x->base, &t->inner_unk);
        p->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
        p->sequence_type = x;
        break;
    }
    case OQ_TYPE_OPTIONAL: {
        Onnx__TypeProto__Optional *x = walloc(w, sizeof(*x));
        if (!x)
            return p;
        onnx__type_proto__optional__init(x);
        x->elem_type = put_type(t->elem, w);
        put_unknown(&x->base, &t->inner_unk);
        p->value_case = ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE;
        p->optional_type = x;
        break;
    }
    case OQ_TYPE_MAP: {
        Onnx__TypeProto__Map *x = walloc(w, sizeof(*x));
        if (!x)
            return p;
        onnx__type_proto__map__init(x);
        x->has_key_type = t->has_key_type;
        x->key_type = t->key_type;
        x->value_type = put_type(t->elem, w);
        put_unknown(&x->base, &t->inner_unk);
        p->value_case = ONNX__TYPE_PROTO__VALUE_MAP_TYPE;
        p->map_type = x;
        break;
    }
    case OQ_TYPE_OPAQUE: {
        Onnx__TypeProto__Opaque *x = walloc(w, sizeof(*x));
        if (!x)
            return p;
        onnx__type_proto__opaque__init(x);
        x->domain = t->opaque_domain;
        x->name = t->opaque_name;
        put_unknown(&x->base, &t->inner_unk);
        p->value_case = ONNX__TYPE_PROTO__VALUE_OPAQUE_TYPE;
        p->opaque_type = x;
        break;
    }
    default:
        break;
    }
    return p;
}

static char *i64str(wr *w, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    return oq_arena_strdup(w->a, buf);
}

/* Should this tensor's data go to the external file? */
static bool goes_external(const oq_tensor *t, bool is_init, wr *w)
{
    if (!w->data || w->ext_mode < 0 || t->dtype == OQ_DTYPE_STRING)
        return false;
    if (oq_tensor_is_external(t))
        return true;
    if (w->ext_mode == 1 && is_init) {
        int64_t nb = oq_dtype_nbytes(t->dtype, oq_tensor_numel(t));
        return nb >= w->threshold && nb > 0;
    }
    return false;
}

static Onnx__TensorProto *put_tensor(oq_tensor *t, bool is_init, wr *w)
{
    if (!t)
        return NULL;
    Onnx__TensorProto *p = walloc(w, sizeof(*p));
    if (!p)
        return NULL;
    onnx__tensor_proto__init(p);
    p->name = t->name;
    p->doc_string = t->doc_string;
    p->has_data_type = t->has_dtype;
    p->data_type = t->dtype;
    p->n_dims = t->rank;
    p->dims = t->dims;
    put_kvs(&t->metadata, &p->n_metadata_props, &p->metadata_props, w);
    put_unknown(&p->base, &t->unk);
    if (t->has_segment) {
        Onnx__TensorProto__Segment *s = walloc(w, sizeof(*s));
        if (s) {
            onnx__tensor_proto__segment__init(s);
            s->has_begin = t->has_seg_begin;
            s->begin = t->seg_begin;
            s->has_end = t->has_seg_end;
            s->end = t->seg_end;
            put_unknown(&s->base, &t->seg_unk);
            p->segment = s;
        }
    }
    /* already in the data file being written (oq_model_stream_begin): the reference as it is */
    bool streamed = w->stream && oq_io_stream_has(w->stream, t);
    if (!streamed && goes_external(t, is_init, w)) {
        const void *data = oq_tensor_data(t, w->d);
        if (!data) {
            w->st = OQ_ERR_INVALID;
            return p;
        }
        int64_t nb = oq_dtype_nbytes(t->dtype, oq_tensor_numel(t));
        static const uint8_t zeros[EXT_ALIGN];
        uint64_t pad = (EXT_ALIGN - w->data_off % EXT_ALIGN) % EXT_ALIGN;
        oq_outfile_write(w->data, zeros, (size_t)pad);
        w->data_off += pad;
        uint64_t off = w->data_off;
        oq_outfile_write(w->data, data, (size_t)nb);
        w->data_off += (uint64_t)nb;
        if (t->model && t->model->io)
            oq_io_release_tensor(t->model, t); /* the pages of a mapped input: not needed again */
        oq_kvs kv;
        kv.count = 3;
        kv.items = walloc(w, 3 * sizeof(oq_kv));
        if (!kv.items)
            return p;
        kv.items[0].key = "location";
        kv.items[0].value = (char *)w->data_name;
        kv.items[1].key = "offset";
        kv.items[1].value = i64str(w, (int64_t)off);
        kv.items[2].key = "length";
        kv.items[2].value = i64str(w, nb);
        put_kvs(&kv, &p->n_external_data, &p->external_data, w);
        p->has_data_location = true;
        p->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
        return p;
    }
    if (!streamed && oq_tensor_is_external(t)) {
        /* forced inline */
        const void *data = oq_tensor_data(t, w->d);
        if (!data) {
            w->st = OQ_ERR_INVALID;
            return p;
        }
        p->has_raw_data = true;
        p->raw_data.data = (uint8_t *)data;
        p->raw_data.len = (size_t)t->view_nbytes;
        return p;
    }
    p->has_raw_data = t->has_raw;
    p->raw_data.len = t->raw.len;
    p->raw_data.data = t->raw.data;
    p->n_float_data = t->n_float_data;
    p->float_data = t->float_data;
    p->n_int32_data = t->n_int32_data;
    p->int32_data = t->int32_data;
    p->n_int64_data = t->n_int64_data;
    p->int64_data = t->int64_data;
    p->n_double_data = t->n_double_data;
    p->double_data = t->double_data;
    p->n_uint64_data = t->n_uint64_data;
    p->uint64_data = t->uint64_data;
    p->n_string_data = t->n_string_data;
    p->string_data = (ProtobufCBinaryData *)t->string_data;
    p->has_data_location = t->has_data_location;
    p->data_location = (Onnx__TensorProto__DataLocation)t->data_location;
    put_kvs(&t->external_data, &p->n_external_data, &p->external_data, w);
    return p;
}

static Onnx__SparseTensorProto *put_sparse(oq_sparse_tensor *s, wr *w)
{
    if (!s)
        return NULL;
    Onnx__SparseTensorProto *p = walloc(w, sizeof(*p));
    if (!p)
        return NULL;
    onnx__sparse_tensor_proto__init(p);
    p->values = put_tensor(s->values, false, w);
    p->indices = put_tensor(s->indices, false, w);
    p->n_dims = s->rank;
    p->dims = s->dims;
    put_unknown(&p->base, &s->unk);
    return p;
}

static Onnx__GraphProto *put_graph(const oq_graph *g, wr *w);

static Onnx__AttributeProto *put_attr(const oq_attr *a, wr *w)
{
    Onnx__AttributeProto *p = walloc(w, sizeof(*p));
    if (!p)
        return NULL;
    onnx__attribute_proto__init(p);
    p->name = a->name;
    p->ref_attr_name = a->ref_attr_name;
    p->doc_string = a->doc_string;
    p->has_type = a->has_type;
    p->type = (Onnx__AttributeProto__AttributeType)a->type;
    p->has_f = a->has_f;
    p->f = a->f;
    p->has_i = a->has_i;
    p->i = a->i;
    p->has_s = a->has_s;
    p->s.len = a->s.len;
    p->s.data = a->s.data;
    p->t = put_tensor(a->t, false, w);
    p->g = a->g ? put_graph(a->g, w) : NULL;
    p->sparse_tensor = put_sparse(a->sparse_tensor, w);
    p->tp = put_type(a->tp, w);
    p->n_floats = a->n_floats;
    p->floats = a->floats;
    p->n_ints = a->n_ints;
    p->ints = a->ints;
    p->n_strings = a->n_strings;
    p->strings = (ProtobufCBinaryData *)a->strings;
    if (a->n_tensors && (p->tensors = walloc(w, a->n_tensors * sizeof(*p->tensors)))) {
        p->n_tensors = a->n_tensors;
        for (size_t i = 0; i < a->n_tensors; i++)
            p->tensors[i] = put_tensor(a->tensors[i], false, w);
    }
    if (a->n_graphs && (p->graphs = walloc(w, a->n_graphs * sizeof(*p->graphs)))) {
        p->n_graphs = a->n_graphs;
        for (size_t i = 0; i < a->n_graphs; i++)
            p->graphs[i] = put_graph(a->graphs[i], w);
    }
    if (a->n_sparse_tensors &&
        (p->sparse_tensors = walloc(w, a->n_sparse_tensors * sizeof(*p->sparse_tensors)))) {
        p->n_sparse_tensors = a->n_sparse_tensors;
        for (size_t i = 0; i < a->n_sparse_tensors; i++)
            p->sparse_tensors[i] = put_sparse(a->sparse_tensors[i], w);
    }
    if (a->n_type_protos && (p->type_protos = walloc(w, a->n_type_protos * sizeof(*p->type_protos)))) {
        p->n_type_protos = a->n_type_protos;
        for (size_t i = 0; i < a->n_type_protos; i++)
            p->type_protos[i] = put_type(a->type_protos[i], w);
    }
    put_unknown(&p->base, &a->unk);
    return p;
}

static Onnx__ValueInfoProto **put_vinfos(oq_vinfo *const *v, size_t n, wr *w)
{
    if (!n)
        return NULL;
    Onnx__ValueInfoProto *arr = walloc(w, n * sizeof(*arr));
    Onnx__ValueInfoProto **ptrs = walloc(w, n * sizeof(*ptrs));
    if (!arr || !ptrs)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        onnx__value_info_proto__init(&arr[i]);
        arr[i].name = v[i]->value ? v[i]->value->name : NULL;
        arr[i].type = put_type(v[i]->type, w);
        arr[i].doc_string = v[i]->doc_string;
        put_kvs(&v[i]->metadata, &arr[i].n_metadata_props, &arr[i].metadata_props, w);
        put_unknown(&arr[i].base, &v[i]->unk);
        ptrs[i] = &arr[i];
    }
    return ptrs;
}

static Onnx__NodeProto **put_nodes(const oq_graph *g, size_t *count, wr *w)
{
    *count = 0;
    if (!g->n_nodes)
        return NULL;
    Onnx__NodeProto *arr = walloc(w, g->n_nodes * sizeof(*arr));
    Onnx__NodeProto **ptrs = walloc(w, g->n_nodes * sizeof(*ptrs));
    if (!arr || !ptrs)
        return NULL;
    size_t i = 0;
    for (const oq_node *n = g->first; n && i < g->n_nodes; n = n->next, i++) {
        Onnx__NodeProto *p = &arr[i];
        onnx__node_proto__init(p);
        p->name = n->name;
        p->op_type = n->op_type;
        p->domain = n->domain;
        p->overload = n->overload;
        p->doc_string = n->doc_string;
        put_kvs(&n->metadata, &p->n_metadata_props, &p->metadata_props, w);
        put_unknown(&p->base, &n->unk);
        if (n->n_inputs && (p->input = walloc(w, n->n_inputs * sizeof(char *)))) {
            p->n_input = n->n_inputs;
            for (size_t k = 0; k < n->n_inputs; k++)
                p->input[k] = n->inputs[k] ? n->inputs[k]->name : "";
        }
        if (n->n_outputs && (p->output = walloc(w, n->n_outputs * sizeof(char *)))) {
            p->n_output = n->n_outputs;
            for (size_t k = 0; k < n->n_outputs; k++)
                p->output[k] = n->outputs[k] ? n->outputs[k]->name : "";
        }
        if (n->n_attrs && (p->attribute = walloc(w, n->n_attrs * sizeof(*p->attribute)))) {
            p->n_attribute = n->n_attrs;
            for (size_t k = 0; k < n->n_attrs; k++)
                p->attribute[k] = put_attr(n->attrs[k], w);
        }
        ptrs[i] = p;
    }
    *count = i;
    return ptrs;
}

static Onnx__GraphProto *put_graph(const oq_graph *g, wr *w)
{
    Onnx__GraphProto *p = walloc(w, sizeof(*p));
    if (!p)
        return NULL;
    onnx__graph_proto__init(p);
    p->name = g->name;
    p->doc_string = g->doc_string;
    put_kvs(&g->metadata, &p->n_metadata_props, &p->metadata_props, w);
    put_unknown(&p->base, &g->unk);
    p->node = put_nodes(g, &p->n_node, w);
    if (g->n_initializers && (p->initializer = walloc(w, g->n_initializers * sizeof(*p->initializer)))) {
        p->n_initializer = g->n_initializers;
        for (size_t i = 0; i < g->n_initializers; i++)
            p->initializer[i] = put_tensor(g->initializers[i], true, w);
    }
    if (g->n_sparse_initializers &&
        (p->sparse_initializer = walloc(w, g->n_sparse_initializers * sizeof(*p->sparse_initializer)))) {
        p->n_sparse_initializer = g->n_sparse_initializers;
        for (size_t i = 0; i < g->n_sparse_initializers; i++)
            p->sparse_initializer[i] = put_sparse(g->sparse_initializers[i], w);
    }
    p->n_input = g->n_inputs;
    p->input = put_vinfos(g->inputs, g->n_inputs, w);
    p->n_output = g->n_outputs;
    p->output = put_vinfos(g->outputs, g->n_outputs, w);
    p->n_value_info = g->n_value_info;
    p->value_info = put_vinfos(g->value_info, g->n_value_info, w);
    if (g->n_qannot) {
        Onnx__TensorAnnotation *arr = walloc(w, g->n_qannot * sizeof(*arr));
        p->quantization_annotation = walloc(w, g->n_qannot * sizeof(*p->quantization_annotation));
        if (arr && p->quantization_annotation) {
            p->n_quantization_annotation = g->n_qannot;
            for (size_t i = 0; i < g->n_qannot; i++) {
                onnx__tensor_annotation__init(&arr[i]);
                arr[i].tensor_name = g->qannot[i].tensor_name;
                put_kvs(&g->qannot[i].quant_parameter_tensor_names,
                        &arr[i].n_quant_parameter_tensor_names, &arr[i].quant_parameter_tensor_names, w);
                put_unknown(&arr[i].base, &g->qannot[i].unk);
                p->quantization_annotation[i] = &arr[i];
            }
        }
    }
    return p;
}

static Onnx__FunctionProto *put_function(const oq_function *f, wr *w)
{
    Onnx__FunctionProto *p = walloc(w, sizeof(*p));
    if (!p)
        return NULL;
    onnx__function_proto__init(p);
    p->name = f->name;
    p->domain = f->domain;
    p->overload = f->overload;
    p->doc_string = f->doc_string;
    p->n_input = f->n_inputs;
    p->input = f->inputs;
    p->n_output = f->n_outputs;
    p->output = f->outputs;
    p->n_attribute = f->n_attr_names;
    p->attribute = f->attr_names;
    put_opsets(f->opsets, f->n_opsets, &p->n_opset_import, &p->opset_import, w);
    put_kvs(&f->metadata, &p->n_metadata_props, &p->metadata_props, w);
    put_unknown(&p->base, &f->unk);
    if (f->body) {
        p->node = put_nodes(f->body, &p->n_node, w);
        p->n_value_info = f->body->n_value_info;
        p->value_info = put_vinfos(f->body->value_info, f->body->n_value_info, w);
    }
    if (f->n_attr_protos && (p->attribute_proto = walloc(w, f->n_attr_protos * sizeof(*p->attribute_proto)))) {
        p->n_attribute_proto = f->n_attr_protos;
        for (size_t i = 0; i < f->n_attr_protos; i++)
            p->attribute_proto[i] = put_attr(f->attr_protos[i], w);
    }
    return p;
}

static Onnx__ModelProto *put_model(const oq_model *m, wr *w)
{
    Onnx__ModelProto *p = walloc(w, sizeof(*p));
    if (!p)
        return NULL;
    onnx__model_proto__init(p);
    p->has_ir_version = m->has_ir_version;
    p->ir_version = m->ir_version;
    put_opsets(m->opsets, m->n_opsets, &p->n_opset_import, &p->opset_import, w);
    p->producer_name = m->producer_name;
    p->producer_version = m->producer_version;
    p->domain = m->domain;
    p->has_model_version = m->has_model_version;
    p->model_version = m->model_version;
    p->doc_string = m->doc_string;
    put_kvs(&m->metadata, &p->n_metadata_props, &p->metadata_props, w);
    put_unknown(&p->base, &m->unk);
    p->graph = m->graph ? put_graph(m->graph, w) : NULL;
    if (m->n_training_info && (p->training_info = walloc(w, m->n_training_info * sizeof(*p->training_info)))) {
        Onnx__TrainingInfoProto *arr = walloc(w, m->n_training_info * sizeof(*arr));
        if (arr) {
            p->n_training_info = m->n_training_info;
            for (size_t i = 0; i < m->n_training_info; i++) {
                const oq_training_info *ti = m->training_info[i];
                onnx__training_info_proto__init(&arr[i]);
                arr[i].initialization = ti->initialization ? put_graph(ti->initialization, w) : NULL;
                arr[i].algorithm = ti->algorithm ? put_graph(ti->algorithm, w) : NULL;
                put_kvs(&ti->initialization_binding, &arr[i].n_initialization_binding,
                        &arr[i].initialization_binding, w);
                put_kvs(&ti->update_binding, &arr[i].n_update_binding, &arr[i].update_binding, w);
                put_unknown(&arr[i].base, &ti->unk);
                p->training_info[i] = &arr[i];
            }
        }
    }
    if (m->n_functions && (p->functions = walloc(w, m->n_functions * sizeof(*p->functions)))) {
        p->n_functions = m->n_functions;
        for (size_t i = 0; i < m->n_functions; i++)
            p->functions[i] = put_function(m->functions[i], w);
    }
    return p;
}

/* ------------------------------------------------------------ sinks */

typedef struct file_sink {
    ProtobufCBuffer base;
    oq_outfile *f;
} file_sink;

static void file_sink_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
    file_sink *s = (file_sink *)b;
    oq_outfile_write(s->f, data, len);
}

static bool model_has_external(const oq_graph *g)
{
    if (!g)
        return false;
    for (size_t i = 0; i < g->n_initializers; i++)
        if (oq_tensor_is_external(g->initializers[i]))
            return true;
    for (const oq_node *n = g->first; n; n = n->next) {
        for (size_t k = 0; k < n->n_attrs; k++) {
            oq_attr *a = n->attrs[k];
            if (a->t && oq_tensor_is_external(a->t))
                return true;
            if (a->g && model_has_external(a->g))
                return true;
            for (size_t j = 0; j < a->n_graphs; j++)
                if (model_has_external(a->graphs[j]))
                    return true;
            for (size_t j = 0; j < a->n_tensors; j++)
                if (oq_tensor_is_external(a->tensors[j]))
                    return true;
        }
    }
    return false;
}

oq_status oq_model_write_buffer(oq_model *m, uint8_t **out, size_t *len, oq_diag *d)
{
    *out = NULL;
    *len = 0;
    wr w = {0};
    w.a = oq_arena_new();
    w.d = d;
    w.ext_mode = -1;
    if (!w.a)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    Onnx__ModelProto *p = put_model(m, &w);
    oq_status st = w.st;
    if (!st && p) {
        size_t n = protobuf_c_message_get_packed_size(&p->base);
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf)
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory (%zu bytes)", n);
        else {
            protobuf_c_message_pack(&p->base, buf);
            *out = buf;
            *len = n;
        }
    } else if (!st) {
        st = OQ_ERR_NOMEM;
    }
    oq_arena_free(w.a);
    return st;
}

oq_status oq_model_write(oq_model *m, const char *path, const oq_write_options *opts, oq_diag *d)
{
    oq_write_options o = {0};
    if (opts)
        o = *opts;
    if (o.size_threshold <= 0)
        o.size_threshold = 1024;
    if (m->path && oq_same_file(m->path, path))
        return oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_USAGE, path, NULL, NULL,
                           "refusing to overwrite the input model; write to another file");

    oq_status st = OQ_OK;
    oq_outfile mf, df;
    oq_outfile *dfp = NULL;   /* the data file: df, or the stream sink's */
    oq_stream_sink *sink = NULL;
    bool mf_open = false;
    char *data_path = NULL;
    char data_name[1024];
    wr w = {0};
    w.a = oq_arena_new();
    w.d = d;
    w.threshold = o.size_threshold;
    if (!w.a)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    if ((st = oq_io_data_names(path, &o, &data_path, data_name, sizeof data_name, d)))
        goto out;
    /* oq_model_stream_begin(m, path): its data file is continued, everything that goes
     * external goes there (mode 1), and both files are renamed into place together */
    sink = m->io ? oq_io_stream_for(m, data_path, data_name) : NULL;

    for (int attempt = 0; attempt < 2; attempt++) {
        int mode = sink ? 1 : attempt == 0 ? o.external_data : 1;
        bool need_data = (mode == 1) || (mode == 0 && model_has_external(m->graph));
        w.ext_mode = mode;
        w.data = NULL;
        w.data_off = 0;
        w.st = OQ_OK;
        w.stream = sink ? m : NULL;
        if (sink) {
            dfp = oq_io_stream_file(sink, &w.data_off);
            w.data = dfp;
            w.data_name = data_name;
        } else if (need_data) {
            if ((m->path && oq_same_file(m->path, data_path)) || oq_io_model_maps_file(m, data_path)) {
                st = oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_USAGE, data_path, NULL, NULL,
                                 "refusing to overwrite a file the input model reads; choose another output name");
                goto out;
            }
            if ((st = oq_outfile_open(&df, data_path, d)))
                goto out;
            dfp = &df;
            w.data = dfp;
            w.data_name = data_name;
        }
        Onnx__ModelProto *p = put_model(m, &w);
        if (w.st || !p) {
            st = w.st ? w.st : OQ_ERR_NOMEM;
            if (st == OQ_ERR_NOMEM)
                oq_diag_error(d, st, "out of memory while serializing");
            goto out;
        }
        size_t n = protobuf_c_message_get_packed_size(&p->base);
        if (n > (size_t)INT32_MAX && mode != 1) {
            if (mode == -1) {
                st = oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_UNSUPPORTED, path, NULL, NULL,
                                 "model is %zu bytes, over the 2 GiB protobuf limit; use external data", n);
                goto out;
            }
            if (dfp) {
                oq_outfile_abort(dfp);
                dfp = NULL;
            }
            continue; /* retry with external data */
        }
        if (n > (size_t)INT32_MAX) {
            st = oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_UNSUPPORTED, path, NULL, NULL,
                             "model structure alone is %zu bytes, over the 2 GiB protobuf limit", n);
            goto out;
        }
        if ((st = oq_outfile_open(&mf, path, d)))
            goto out;
        mf_open = true;
        file_sink fsink = {{file_sink_append}, &mf};
        protobuf_c_message_pack_to_buffer(&p->base, &fsink.base);
        if (dfp) {
            oq_outfile *f = dfp;
            dfp = NULL; /* finish aborts it on failure */
            if ((st = oq_outfile_finish(f, d)))
                goto out;
            dfp = f;
        }
        if ((st = oq_outfile_finish(&mf, d))) {
            mf_open = false;
            goto out;
        }
        if (dfp) {
            oq_outfile *f = dfp;
            dfp = NULL;
            if ((st = oq_outfile_rename(f, d)))
                goto out;
        }
        mf_open = false;
        st = oq_outfile_rename(&mf, d);
        goto out;
    }
out:
    if (mf_open)
        oq_outfile_abort(&mf);
    if (dfp)
        oq_outfile_abort(dfp);
    if (sink)
        oq_io_stream_done(m); /* written, or failed and removed: the sink is spent either way */
    free(data_path);
    oq_arena_free(w.a);
    return st;
}
