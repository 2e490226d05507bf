/* onnxq — the in-memory representation of an ONNX model.
 *
 * One oq_model owns everything below it through an arena: freeing the model frees all.
 * Passes allocate new nodes, values, tensors and strings from the model
 * (oq_model_alloc / oq_model_strdup / the builders below), never with bare malloc.
 *
 * Two layers live in these structs:
 *  - the semantic layer passes use: graphs, nodes with oq_value inputs/outputs, use-def
 *    lists, tensors with dtype/dims/data, attributes;
 *  - the wire mirror: every other field of the ONNX schema (presence flags, the typed
 *    data field a tensor came in, doc strings, metadata, unknown fields), kept so that
 *    a model read and written again compares equal to the input. Passes may ignore it.
 *
 * Strings: NULL means "absent on the wire", "" means "present and empty".
 * Sizes and element counts are int64_t / size_t everywhere.
 */
#ifndef ONNXQ_IR_H
#define ONNXQ_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnxq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- data types ---- */

/* The ONNX TensorProto.DataType values. X(name, onnx_value, bits_per_element, c_name) */
#define OQ_DTYPE_LIST(X)                   \
    X(UNDEFINED, 0, 0, "undefined")        \
    X(FLOAT, 1, 32, "float32")             \
    X(UINT8, 2, 8, "uint8")                \
    X(INT8, 3, 8, "int8")                  \
    X(UINT16, 4, 16, "uint16")             \
    X(INT16, 5, 16, "int16")               \
    X(INT32, 6, 32, "int32")               \
    X(INT64, 7, 64, "int64")               \
    X(STRING, 8, 0, "string")              \
    X(BOOL, 9, 8, "bool")                  \
    X(FLOAT16, 10, 16, "float16")          \
    X(DOUBLE, 11, 64, "float64")           \
    X(UINT32, 12, 32, "uint32")            \
    X(UINT64, 13, 64, "uint64")            \
    X(COMPLEX64, 14, 64, "complex64")      \
    X(COMPLEX128, 15, 128, "complex128")   \
    X(BFLOAT16, 16, 16, "bfloat16")        \
    X(FLOAT8E4M3FN, 17, 8, "float8e4m3fn") \
    X(FLOAT8E4M3FNUZ, 18, 8, "float8e4m3fnuz") \
    X(FLOAT8E5M2, 19, 8, "float8e5m2")     \
    X(FLOAT8E5M2FNUZ, 20, 8, "float8e5m2fnuz") \
    X(UINT4, 21, 4, "uint4")               \
    X(INT4, 22, 4, "int4")

typedef enum oq_dtype {
#define OQ_X(n, v, b, s) OQ_DTYPE_##n = v,
    OQ_DTYPE_LIST(OQ_X)
#undef OQ_X
    OQ_DTYPE_COUNT
} oq_dtype;

/* "float32", "int8", ...; "dtype(N)" style names are not returned: unknown gives "?". */
const char *oq_dtype_name(int32_t dtype);
/* Parse "float32"/"float"/"int8"...; returns OQ_DTYPE_UNDEFINED when unknown. */
oq_dtype oq_dtype_from_name(const char *name);
bool oq_dtype_valid(int32_t dtype);
/* Bits per element (4 for int4/uint4, 0 for string/undefined). */
int oq_dtype_bits(int32_t dtype);
/* Bytes needed to store n elements densely (4-bit types packed two per byte, rounded
 * up). Returns -1 on overflow or for string/undefined. */
int64_t oq_dtype_nbytes(int32_t dtype, int64_t n);
bool oq_dtype_is_float(int32_t dtype);   /* float, double, float16, bfloat16, float8* */
bool oq_dtype_is_integer(int32_t dtype); /* signed or unsigned ints incl. 4-bit */
bool oq_dtype_is_signed(int32_t dtype);

/* Element count of dims; -1 if a dim is negative or the product overflows int64. */
int64_t oq_dims_numel(const int64_t *dims, size_t rank);

/* float16 / bfloat16 conversions (round to nearest even). */
float oq_half_to_float(uint16_t h);
uint16_t oq_float_to_half(float f);
/* The same over n values (F16C instructions where the CPU has them; the same results). */
void oq_half_to_float_n(const uint16_t *h, float *f, int64_t n);
void oq_float_to_half_n(const float *f, uint16_t *h, int64_t n);
float oq_bfloat16_to_float(uint16_t b);
uint16_t oq_float_to_bfloat16(float f);

/* ---------------------------------------------------------------- small records -- */

/* Fields the schema we compiled does not know, kept byte for byte and written back. */
typedef struct oq_unknown_field {
    uint32_t tag;       /* field number */
    uint32_t wire_type; /* protobuf wire type (same layout as protobuf-c's) */
    size_t len;
    uint8_t *data;
} oq_unknown_field;

typedef struct oq_unknown {
    size_t count;
    oq_unknown_field *fields;
} oq_unknown;

typedef struct oq_bytes {
    size_t len;
    uint8_t *data;
} oq_bytes;

/* StringStringEntryProto: metadata_props, external_data, bindings. */
typedef struct oq_kv {
    char *key;
    char *value;
    oq_unknown unk;
} oq_kv;

typedef struct oq_kvs {
    size_t count;
    oq_kv *items;
} oq_kvs;

/* OperatorSetIdProto. domain NULL and "" both mean the default ONNX domain. */
typedef struct oq_opset {
    char *domain;
    bool has_version;
    int64_t version;
    oq_unknown unk;
} oq_opset;

/* ---------------------------------------------------------------- types ---------- */

typedef enum oq_dim_kind { OQ_DIM_UNSET = 0, OQ_DIM_VALUE = 1, OQ_DIM_PARAM = 2 } oq_dim_kind;

typedef struct oq_dim {
    oq_dim_kind kind;
    int64_t value;     /* OQ_DIM_VALUE */
    char *param;       /* OQ_DIM_PARAM: symbolic name */
    char *denotation;
    oq_unknown unk;
} oq_dim;

typedef struct oq_shape {
    size_t rank;
    oq_dim *dims;
    oq_unknown unk;
} oq_shape;

typedef enum oq_type_kind {
    OQ_TYPE_NONE = 0,
    OQ_TYPE_TENSOR = 1,
    OQ_TYPE_SEQUENCE = 4,
    OQ_TYPE_MAP = 5,
    OQ_TYPE_OPAQUE = 7,
    OQ_TYPE_SPARSE_TENSOR = 8,
    OQ_TYPE_OPTIONAL = 9
} oq_type_kind;

/* TypeProto. Types are immutable once built and may be shared between values. */
typedef struct oq_type oq_type;
struct oq_type {
    oq_type_kind kind;
    char *denotation;
    /* tensor / sparse tensor */
    bool has_elem_type;
    int32_t elem_type;
    oq_shape *shape;           /* NULL: shape unknown (not even the rank) */
    /* sequence / optional element, map value */
    oq_type *elem;
    /* map key */
    bool has_key_type;
    int32_t key_type;
    /* opaque */
    char *opaque_domain, *opaque_name;
    oq_unknown unk;            /* of the TypeProto */
    oq_unknown inner_unk;      /* of the Tensor/Sequence/Map/... submessage */
};

/* ---------------------------------------------------------------- tensors -------- */

/* External data reference (ONNX external_data key/values, parsed). */
typedef struct oq_external {
    char *location;   /* relative to the model's directory */
    int64_t offset;
    int64_t length;   /* -1 when not given */
    char *checksum;
} oq_external;

/* TensorProto. The data is in exactly one of the wire fields (raw, float_data, ...),
 * as it came; oq_tensor_data() gives a dense native-layout view, decoding lazily. */
typedef struct oq_tensor {
    char *name;
    char *doc_string;
    bool has_dtype;
    int32_t dtype;
    size_t rank;
    int64_t *dims;

    /* wire data fields */
    bool has_raw;
    oq_bytes raw;                 /* may point into a memory-mapped file */
    size_t n_float_data;  float *float_data;
    size_t n_int32_data;  int32_t *int32_data;
    size_t n_int64_data;  int64_t *int64_data;
    size_t n_double_data; double *double_data;
    size_t n_uint64_data; uint64_t *uint64_data;
    size_t n_string_data; oq_bytes *string_data;

    /* external data: data_location == 1 (EXTERNAL) */
    bool has_data_location;
    int32_t data_location;
    oq_kvs external_data;         /* exactly as on the wire */
    /* segment (rarely used) */
    bool has_segment;
    bool has_seg_begin, has_seg_end;
    int64_t seg_begin, seg_end;
    oq_unknown seg_unk;

    oq_kvs metadata;
    oq_unknown unk;

    /* Not on the wire: dense native-layout view (little-endian, 4-bit packed two per
     * byte, bool one byte, strings as oq_bytes). Filled by oq_tensor_data(). */
    void *view;
    int64_t view_nbytes;
    bool view_borrowed;           /* view points into raw/external memory */
    struct oq_model *model;       /* owner (for lazy decoding and external data) */
} oq_tensor;

int64_t oq_tensor_numel(const oq_tensor *t);        /* -1 on bad dims */
/* Dense data (see `view` above) or NULL with a diag error (bad size, bad field, I/O). */
const void *oq_tensor_data(oq_tensor *t, oq_diag *d);
/* Replace the data of t with a dense buffer of the right size (copied into the model
 * arena); the tensor is then stored as raw_data, any external reference is dropped. */
struct oq_model;
oq_status oq_tensor_set_data(struct oq_model *m, oq_tensor *t, int32_t dtype,
                             const int64_t *dims, size_t rank, const void *data,
                             int64_t nbytes);
/* Check the tensor's wire payload against dtype and dims (no decode). */
oq_status oq_tensor_validate(const oq_tensor *t, const char *where, oq_diag *d);
bool oq_tensor_is_external(const oq_tensor *t);
/* Give back the memory t's data occupies in a mapped file (external data, or raw_data of a
 * model read from a file): its pages are read again from the file on the next use.
 * Nothing changes for data the model holds in memory. Streaming passes call it on each
 * weight they are done with; oq_graph_remove_initializer and oq_model_write do too. */
void oq_tensor_release(oq_tensor *t);

typedef struct oq_sparse_tensor {
    oq_tensor *values;
    oq_tensor *indices;
    size_t rank;
    int64_t *dims;
    oq_unknown unk;
} oq_sparse_tensor;

/* ---------------------------------------------------------------- attributes ----- */

typedef enum oq_attr_type {
    OQ_ATTR_UNDEFINED = 0,
    OQ_ATTR_FLOAT = 1,
    OQ_ATTR_INT = 2,
    OQ_ATTR_STRING = 3,
    OQ_ATTR_TENSOR = 4,
    OQ_ATTR_GRAPH = 5,
    OQ_ATTR_FLOATS = 6,
    OQ_ATTR_INTS = 7,
    OQ_ATTR_STRINGS = 8,
    OQ_ATTR_TENSORS = 9,
    OQ_ATTR_GRAPHS = 10,
    OQ_ATTR_SPARSE_TENSOR = 11,
    OQ_ATTR_SPARSE_TENSORS = 12,
    OQ_ATTR_TYPE_PROTO = 13,
    OQ_ATTR_TYPE_PROTOS = 14
} oq_attr_type;

const char *oq_attr_type_name(int32_t type);

typedef struct oq_graph oq_graph;

typedef struct oq_attr {
    char *name;
    char *ref_attr_name;
    char *doc_string;
    bool has_type;
    int32_t type;                /* oq_attr_type */
    bool has_f, has_i, has_s;
    float f;
    int64_t i;
    oq_bytes s;                   /* STRING: a NUL follows the bytes (s.data[s.len]); set it with oq_node_set_attr_string */
    oq_tensor *t;
    oq_graph *g;
    oq_sparse_tensor *sparse_tensor;
    oq_type *tp;
    size_t n_floats;   float *floats;
    size_t n_ints;     int64_t *ints;
    size_t n_strings;  oq_bytes *strings;
    size_t n_tensors;  oq_tensor **tensors;
    size_t n_graphs;   oq_graph **graphs;
    size_t n_sparse_tensors; oq_sparse_tensor **sparse_tensors;
    size_t n_type_protos; oq_type **type_protos;
    oq_unknown unk;
} oq_attr;

/* ---------------------------------------------------------------- values, nodes -- */

typedef struct oq_node oq_node;
typedef struct oq_value oq_value;
typedef struct oq_model oq_model;

typedef struct oq_use {
    oq_node *node;
    size_t index;        /* input slot */
} oq_use;

/* A named edge. Exactly one producer: a node output, a graph input, an initializer
 * (a value may be both a graph input and an initializer: a default for the input),
 * or nothing (OQ_VALUE_UNDEFINED: dangling, or a function formal parameter). */
typedef enum oq_value_kind {
    OQ_VALUE_UNDEFINED = 0,
    OQ_VALUE_NODE = 1,
    OQ_VALUE_INPUT = 2,
    OQ_VALUE_INITIALIZER = 3
} oq_value_kind;

struct oq_value {
    char *name;
    oq_graph *graph;          /* the scope that defines it */
    oq_value_kind kind;
    bool is_graph_input;      /* listed in graph inputs (also true for INPUT kind) */
    oq_node *producer;        /* OQ_VALUE_NODE */
    size_t producer_index;
    oq_tensor *initializer;   /* when it has one (INITIALIZER kind, or input default) */
    oq_sparse_tensor *sparse_initializer;
    oq_type *type;            /* best known type, may be NULL */
    size_t n_uses, cap_uses;
    oq_use *uses;
    uint32_t id;              /* unique in the model, dense-ish; for side tables */
    void *priv;               /* scratch for a pass or the executor */
};

struct oq_node {
    char *name;
    char *op_type;
    char *domain;             /* NULL or "" = default ONNX domain */
    char *overload;
    char *doc_string;
    size_t n_inputs;
    oq_value **inputs;        /* NULL entry = omitted optional input ("") */
    size_t n_outputs;
    oq_value **outputs;       /* NULL entry = omitted optional output ("") */
    size_t n_attrs;
    oq_attr **attrs;
    oq_kvs metadata;
    oq_unknown unk;

    oq_graph *graph;
    oq_node *prev, *next;     /* intrusive list in graph order */
    bool attached;            /* in the graph's node list (uses registered) */
    uint32_t id;
    void *priv;
};

/* ValueInfoProto: one entry of a graph's input, output or value_info list. */
typedef struct oq_vinfo {
    oq_value *value;
    oq_type *type;            /* as written (NULL: absent) */
    char *doc_string;
    oq_kvs metadata;
    oq_unknown unk;
} oq_vinfo;

typedef struct oq_tensor_annotation {
    char *tensor_name;
    oq_kvs quant_parameter_tensor_names;
    oq_unknown unk;
} oq_tensor_annotation;

typedef struct oq_value_table oq_value_table; /* private hash table */

struct oq_graph {
    oq_model *model;
    oq_graph *parent;         /* enclosing scope for subgraphs and function bodies */
    oq_node *owner;           /* node whose attribute holds this graph, or NULL */
    char *name;
    char *doc_string;
    oq_node *first, *last;
    size_t n_nodes;
    size_t n_inputs, n_outputs, n_value_info;
    oq_vinfo **inputs, **outputs, **value_info;
    size_t n_initializers;
    oq_tensor **initializers;         /* in file order */
    size_t n_sparse_initializers;
    oq_sparse_tensor **sparse_initializers;
    size_t n_qannot;
    oq_tensor_annotation *qannot;
    oq_kvs metadata;
    oq_unknown unk;
    oq_value_table *values;   /* names defined or referenced in this scope */
    bool is_function_body;
};

typedef struct oq_training_info {
    oq_graph *initialization;
    oq_graph *algorithm;
    oq_kvs initialization_binding;
    oq_kvs update_binding;
    oq_unknown unk;
} oq_training_info;

typedef struct oq_function {
    char *name;
    char *domain;
    char *overload;
    char *doc_string;
    size_t n_inputs;  char **inputs;
    size_t n_outputs; char **outputs;
    size_t n_attr_names; char **attr_names;
    size_t n_attr_protos; oq_attr **attr_protos;
    size_t n_opsets;  oq_opset *opsets;
    oq_graph *body;           /* nodes and value_info; inputs/outputs by name above */
    oq_kvs metadata;
    oq_unknown unk;
} oq_function;

typedef struct oq_arena oq_arena;

struct oq_model {
    oq_arena *arena;
    bool has_ir_version;
    int64_t ir_version;
    size_t n_opsets;
    oq_opset *opsets;
    char *producer_name, *producer_version, *domain, *doc_string;
    bool has_model_version;
    int64_t model_version;
    oq_graph *graph;          /* NULL if the file has none */
    oq_kvs metadata;
    size_t n_training_info;
    oq_training_info **training_info;
    size_t n_functions;
    oq_function **functions;
    oq_unknown unk;

    char *path;               /* file it was read from, or NULL */
    char *dir;                /* directory for external data ("." if none) */
    void *io;                 /* private to src/io (mappings data is borrowed from); starts
                               * with the callbacks the IR uses for external data */
    uint32_t next_id;
};

/* ---------------------------------------------------------------- lifetime ------- */

oq_model *oq_model_new(void);                 /* empty model with an empty main graph */
void oq_model_free(oq_model *m);
void *oq_model_alloc(oq_model *m, size_t size);      /* zeroed, 16-byte aligned; NULL on OOM */
char *oq_model_strdup(oq_model *m, const char *s);   /* NULL stays NULL */
void *oq_model_memdup(oq_model *m, const void *p, size_t n);

/* ---------------------------------------------------------------- reading/writing */

typedef struct oq_read_options {
    bool load_external;       /* map external data now (default true); else on demand */
    bool skip_check;          /* do not run oq_model_check after loading */
} oq_read_options;

/* Read a model file. On failure returns NULL-model and a status, with a one-line
 * diagnostic naming the file and what is wrong. */
oq_status oq_model_read(const char *path, const oq_read_options *opts, oq_model **out,
                        oq_diag *d);
oq_status oq_model_read_buffer(const void *data, size_t len, const char *name,
                               const oq_read_options *opts, oq_model **out, oq_diag *d);

typedef struct oq_write_options {
    int external_data;        /* 0 = keep as loaded (external stays external),
                                 1 = move tensors >= size_threshold to external,
                                 -1 = everything inline (refused if > 2 GiB) */
    int64_t size_threshold;   /* bytes; default 1024 */
    const char *external_name;/* data file name; default "<output file name>.data" */
} oq_write_options;

/* Write atomically: temp file in the target directory, fsync, rename. Refuses to
 * write over the model's own input file (also through links). Models whose protobuf
 * would exceed 2 GiB are written with external data automatically. */
oq_status oq_model_write(oq_model *m, const char *path, const oq_write_options *opts,
                         oq_diag *d);
/* Streaming output, for models bigger than memory: from now on every initializer of at
 * least opts->size_threshold bytes (default 1024) that oq_graph_add_initializer adds is
 * written at once to the external data file that oq_model_write(m, path, opts) produces
 * (a temporary file beside path until then) and the model keeps only its reference
 * (oq_tensor_data reads it back). oq_model_write(m, path, opts) then appends every other
 * tensor of at least the threshold to that file and renames both files into place;
 * writing the model elsewhere copies the streamed data; freeing the model without writing
 * it removes the temporary file. The checks of oq_model_write (never over the input model
 * or a data file it reads) are made here. */
oq_status oq_model_stream_begin(oq_model *m, const char *path, const oq_write_options *opts, oq_diag *d);
/* Between oq_model_stream_hold(m, true) and (m, false) (nested: counted), new initializers
 * stay in the model instead of going to the stream: for a pass's temporary tensors (AWQ's
 * scaled float weights, quantized and dropped), which would otherwise leave their bytes
 * in the output's data file. Without a stream it does nothing. */
void oq_model_stream_hold(oq_model *m, bool hold);
/* Remove the temporary files of every output being written (models and their data
 * files, before their rename into place). Async-signal-safe: a program's SIGINT/SIGTERM
 * handler calls it, so that an interrupted run leaves no file behind (the outputs are
 * only ever renamed into place complete). */
void oq_remove_temp_files(void);
/* Serialize to memory (inline data only). *out is malloc'ed; caller frees. */
oq_status oq_model_write_buffer(oq_model *m, uint8_t **out, size_t *len, oq_diag *d);

/* ---------------------------------------------------------------- queries -------- */

/* Opset version imported for a domain ("" / "ai.onnx" = default), or 0 if none. */
int64_t oq_model_opset(const oq_model *m, const char *domain);
bool oq_domain_is_default(const char *domain);

/* Look a name up in g and its enclosing scopes. */
oq_value *oq_graph_find_value(const oq_graph *g, const char *name);
/* Look a name up in g only. */
oq_value *oq_graph_find_local(const oq_graph *g, const char *name);
oq_attr *oq_node_attr(const oq_node *n, const char *name);
int64_t oq_node_attr_int(const oq_node *n, const char *name, int64_t dflt);
float oq_node_attr_float(const oq_node *n, const char *name, float dflt);
/* String attribute as a NUL-terminated string (its bytes, which the reader and
 * oq_node_set_attr_string store with a NUL after them; nothing is allocated, so kernels
 * may call it while a model runs on several threads), or dflt. */
const char *oq_node_attr_string(const oq_node *n, const char *name, const char *dflt);
/* Ints attribute: returns count (or -1 when absent) and sets *vals. */
int64_t oq_node_attr_ints(const oq_node *n, const char *name, const int64_t **vals);
/* Opset of the node's domain in its model. */
int64_t oq_node_opset(const oq_node *n);
/* Name for messages: node name, or "#<index> (<op>)" if it has none. */
const char *oq_node_label(const oq_node *n, char *buf, size_t size);
/* Constant tensor behind a value (initializer, or Constant node output), or NULL. */
oq_tensor *oq_value_const_tensor(const oq_value *v);

/* Iterate nodes: for (oq_node *n = g->first; n; n = n->next) */
size_t oq_graph_node_index(const oq_graph *g, const oq_node *n); /* O(n) */

/* Every subgraph of a node (graph and graphs attributes), in attribute order. */
size_t oq_node_subgraphs(const oq_node *n, oq_graph **out, size_t max);

/* ---------------------------------------------------------------- editing -------- */

/* Create a value in g (name must be new in g; NULL name gives a fresh unique one). */
oq_value *oq_graph_new_value(oq_graph *g, const char *name);
/* A name not used in g or any enclosing scope, based on `base`. */
char *oq_graph_unique_name(oq_graph *g, const char *base);

/* Create a node (not yet in the graph). inputs/outputs may contain NULL. */
oq_node *oq_node_new(oq_graph *g, const char *op_type, const char *domain,
                     const char *name, oq_value *const *inputs, size_t n_inputs,
                     oq_value *const *outputs, size_t n_outputs);
/* Insert into the node list (keeps use-def; outputs get this node as producer). */
void oq_graph_append(oq_graph *g, oq_node *n);
void oq_graph_insert_before(oq_graph *g, oq_node *pos, oq_node *n);
void oq_graph_insert_after(oq_graph *g, oq_node *pos, oq_node *n);
/* Remove from the graph, dropping its uses; its outputs become undefined. */
void oq_node_remove(oq_node *n);

oq_status oq_node_set_input(oq_node *n, size_t index, oq_value *v); /* grows if needed */
oq_status oq_node_add_input(oq_node *n, oq_value *v);
oq_status oq_node_set_output(oq_node *n, size_t index, oq_value *v);
/* Every node input that uses `from` now uses `to` (in subgraphs too). Graph outputs
 * are not touched: the model's interface keeps its names; use
 * oq_graph_replace_output() for that. */
void oq_value_replace_all_uses(oq_value *from, oq_value *to);
/* Replace every graph output entry that names `from` by `to` (keeps its vinfo). */
void oq_graph_replace_output(oq_graph *g, oq_value *from, oq_value *to);
/* Rename a value (must be unused in its scope). */
oq_status oq_value_rename(oq_value *v, const char *name);

/* Attributes (replace an existing one of the same name). */
oq_attr *oq_node_set_attr_int(oq_node *n, const char *name, int64_t v);
oq_attr *oq_node_set_attr_float(oq_node *n, const char *name, float v);
oq_attr *oq_node_set_attr_string(oq_node *n, const char *name, const char *v);
oq_attr *oq_node_set_attr_ints(oq_node *n, const char *name, const int64_t *v, size_t count);
oq_attr *oq_node_set_attr_floats(oq_node *n, const char *name, const float *v, size_t count);
oq_attr *oq_node_set_attr_tensor(oq_node *n, const char *name, oq_tensor *t);
bool oq_node_remove_attr(oq_node *n, const char *name);

/* A new tensor (data copied) owned by the model. */
oq_tensor *oq_tensor_new(oq_model *m, const char *name, int32_t dtype, const int64_t *dims,
                         size_t rank, const void *data, int64_t nbytes);
/* Make v an initializer holding t (t->name is set to v->name). */
oq_status oq_graph_set_initializer(oq_graph *g, oq_value *v, oq_tensor *t);
/* Convenience: new value + initializer. */
oq_value *oq_graph_add_initializer(oq_graph *g, const char *name, int32_t dtype,
                                   const int64_t *dims, size_t rank, const void *data,
                                   int64_t nbytes);
void oq_graph_remove_initializer(oq_graph *g, oq_value *v);

/* Graph inputs/outputs. */
oq_vinfo *oq_graph_add_input(oq_graph *g, oq_value *v, oq_type *type);
oq_vinfo *oq_graph_add_output(oq_graph *g, oq_value *v, oq_type *type);
oq_vinfo *oq_graph_add_value_info(oq_graph *g, oq_value *v, oq_type *type);
bool oq_value_is_graph_output(const oq_value *v);

/* Types. dims entries < 0 are unknown dims; names may give symbolic names (or NULL). */
oq_type *oq_type_tensor(oq_model *m, int32_t elem_type, const int64_t *dims,
                        const char *const *names, size_t rank);

/* Set opset import for a domain (adds or updates). */
void oq_model_set_opset(oq_model *m, const char *domain, int64_t version);
/* Set or add a model metadata_props entry. */
void oq_model_set_metadata(oq_model *m, const char *key, const char *value);
/* The value of a metadata_props entry ("" when it has none), NULL when there is no such key. */
const char *oq_model_get_metadata(const oq_model *m, const char *key);

/* ---------------------------------------------------------------- checking ------- */

/* Structural checks: SSA (each value produced once), every input produced before use
 * in list order, names resolved through scopes, opset imported for each domain used,
 * attribute types consistent with their payload, tensors valid. Errors go to d. */
oq_status oq_model_check(const oq_model *m, oq_diag *d);

/* Topological sort of g's node list in place (stable: keeps order when already valid).
 * Returns OQ_ERR_INVALID with a diag naming a node on a cycle. */
oq_status oq_graph_toposort(oq_graph *g, oq_diag *d);

#ifdef __cplusplus
}
#endif
#endif
