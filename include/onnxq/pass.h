/* onnxq — passes, pipelines and the plugin ABI.
 *
 * A pass is a plain struct (oq_pass): ABI version, name, one-line summary, a typed
 * option schema and a run function. Built-in passes live in passes/ and are listed
 * in one table (passes/registry.c). Plugins are shared objects that export
 *
 *     const uint32_t oq_plugin_abi_version = OQ_PASS_ABI_VERSION;
 *     int oq_plugin_init(const oq_host_api *api, oq_registry *reg, uint32_t abi_version);
 *
 * (OQ_PLUGIN_DECLARE() defines the first). A plugin never links against libonnxq:
 * everything it needs — IR queries and edits, diagnostics, allocation, option
 * lookup, statistics, registering passes — comes through the oq_host_api table,
 * which only ever grows at its end and carries its own size and version
 * (the SQLite loadable-extension rule). Before using a member added after ABI 1.0
 * a plugin checks OQ_HOST_HAS(api, member).
 *
 * ABI rules: OQ_PASS_ABI_MAJOR changes when an existing member or struct layout
 * changes (old plugins are refused); OQ_PASS_ABI_MINOR grows when members are
 * appended (old plugins keep working; a plugin built for a newer minor is refused,
 * since it may call members this host does not have).
 *
 * The second half of this header (the registry, pipelines, the pass manager) is the
 * host side, implemented in libonnxq; plugins do not call it.
 */
#ifndef ONNXQ_PASS_H
#define ONNXQ_PASS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnxq/ir.h"
#include "onnxq/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OQ_PASS_ABI_MAJOR 1
#define OQ_PASS_ABI_MINOR 0
#define OQ_PASS_ABI_MAKE(major, minor) (((uint32_t)(major) << 16) | (uint32_t)(minor))
#define OQ_PASS_ABI_VERSION OQ_PASS_ABI_MAKE(OQ_PASS_ABI_MAJOR, OQ_PASS_ABI_MINOR)
#define OQ_PASS_ABI_MAJOR_OF(v) ((uint32_t)(v) >> 16)
#define OQ_PASS_ABI_MINOR_OF(v) ((uint32_t)(v)&0xffffu)

/* ---------------------------------------------------------------- options -------- */

typedef enum oq_opt_type {
    OQ_OPT_INT = 0,     /* int64 */
    OQ_OPT_FLOAT = 1,   /* double */
    OQ_OPT_BOOL = 2,    /* 1/0, true/false, yes/no, on/off */
    OQ_OPT_STRING = 3
} oq_opt_type;

/* "int", "float", "bool" or "string" ("?" for a value outside the enum). */
const char *oq_opt_type_name(oq_opt_type t);

/* One entry of a pass's option schema. The default is written as pipeline text
 * ("17", "1e-5", "true", "Identity"); NULL means the option is required (a pipeline
 * that does not give it is refused when parsed). */
typedef struct oq_pass_option_def {
    const char *name;
    oq_opt_type type;
    const char *default_value;
    const char *help;
} oq_pass_option_def;

/* A resolved option value as the pass sees it. */
typedef struct oq_pass_option_value {
    const char *name;
    oq_opt_type type;
    bool is_set;        /* given in the pipeline, or has a default */
    bool explicit_set;  /* given in the pipeline */
    int64_t i;          /* OQ_OPT_INT, also OQ_OPT_BOOL (0/1) */
    double f;           /* OQ_OPT_FLOAT */
    const char *s;      /* OQ_OPT_STRING (also the canonical text of every type) */
} oq_pass_option_value;

/* Options handed to run(): one value per schema entry, in schema order. */
typedef struct oq_pass_options {
    uint32_t struct_size;
    size_t count;
    const oq_pass_option_value *values;
    void *pass_user;    /* oq_pass.user of the pass being run */
} oq_pass_options;

/* ---------------------------------------------------------------- results -------- */

#define OQ_PASS_MAX_STATS 16

typedef struct oq_pass_stat {
    const char *name;   /* static string, e.g. "nodes_removed" */
    int64_t value;
} oq_pass_stat;

typedef struct oq_pass_result {
    uint32_t struct_size;
    bool changed;       /* the pass modified the model */
    size_t n_stats;
    oq_pass_stat stats[OQ_PASS_MAX_STATS];
} oq_pass_result;

/* Add delta to the named statistic (created on first use). Header-only so that
 * plugins can use it without linking. Silently ignores names past the cap. */
static inline void oq_pass_stat_add(oq_pass_result *r, const char *name, int64_t delta)
{
    size_t i;
    for (i = 0; i < r->n_stats; i++) {
        const char *a = r->stats[i].name, *b = name;
        while (*a && *a == *b) {
            a++;
            b++;
        }
        if (*a == *b) {
            r->stats[i].value += delta;
            return;
        }
    }
    if (r->n_stats < OQ_PASS_MAX_STATS) {
        r->stats[r->n_stats].name = name;
        r->stats[r->n_stats].value = delta;
        r->n_stats++;
    }
}

/* ---------------------------------------------------------------- passes --------- */

typedef oq_status (*oq_pass_run_fn)(oq_model *m, const oq_pass_options *opts,
                                    oq_pass_result *res, oq_diag *d);

typedef struct oq_pass {
    uint32_t abi_version;             /* OQ_PASS_ABI_VERSION the pass was compiled with */
    uint32_t struct_size;             /* sizeof(oq_pass) it was compiled with */
    const char *name;                 /* lower-case-dashed, unique */
    const char *summary;              /* one line */
    const oq_pass_option_def *options;
    size_t n_options;
    oq_pass_run_fn run;
    bool iterative;                   /* rerun while it changes the model ... */
    int max_iterations;               /* ... at most this many times (0: 16) */
    void *user;                       /* handed to run() as opts->pass_user */
    void *reserved[4];                /* zero; room for later members */
} oq_pass;

/* ---------------------------------------------------------------- host table ----- */

typedef struct oq_registry oq_registry;

/* Everything a plugin may call. Members are only ever appended; never reorder.
 * A plugin checks OQ_HOST_HAS(api, member) before using a member newer than the
 * ABI minor it requires. */
typedef struct oq_host_api {
    uint32_t size;            /* sizeof(oq_host_api) of the host */
    uint32_t abi_version;     /* OQ_PASS_ABI_VERSION of the host */
    const char *host_version; /* "0.1.0" */

    /* registering */
    oq_status (*register_pass)(oq_registry *reg, const oq_pass *pass);

    /* diagnostics */
    oq_status (*diag_add)(oq_diag *d, oq_severity sev, oq_status code, const char *file,
                          const char *node, const char *op, const char *fmt, ...);

    /* allocation (model arena) */
    void *(*model_alloc)(oq_model *m, size_t size);
    char *(*model_strdup)(oq_model *m, const char *s);

    /* options */
    int64_t (*opt_int)(const oq_pass_options *o, const char *name, int64_t dflt);
    double (*opt_float)(const oq_pass_options *o, const char *name, double dflt);
    bool (*opt_bool)(const oq_pass_options *o, const char *name, bool dflt);
    const char *(*opt_string)(const oq_pass_options *o, const char *name, const char *dflt);

    /* queries */
    int64_t (*model_opset)(const oq_model *m, const char *domain);
    bool (*domain_is_default)(const char *domain);
    oq_value *(*graph_find_value)(const oq_graph *g, const char *name);
    oq_attr *(*node_attr)(const oq_node *n, const char *name);
    int64_t (*node_attr_int)(const oq_node *n, const char *name, int64_t dflt);
    float (*node_attr_float)(const oq_node *n, const char *name, float dflt);
    const char *(*node_attr_string)(const oq_node *n, const char *name, const char *dflt);
    int64_t (*node_attr_ints)(const oq_node *n, const char *name, const int64_t **vals);
    const char *(*node_label)(const oq_node *n, char *buf, size_t size);
    oq_tensor *(*value_const_tensor)(const oq_value *v);
    bool (*value_is_graph_output)(const oq_value *v);
    const void *(*tensor_data)(oq_tensor *t, oq_diag *d);
    int64_t (*tensor_numel)(const oq_tensor *t);
    const char *(*dtype_name)(int32_t dtype);

    /* editing */
    oq_value *(*graph_new_value)(oq_graph *g, const char *name);
    char *(*graph_unique_name)(oq_graph *g, const char *base);
    oq_node *(*node_new)(oq_graph *g, const char *op_type, const char *domain,
                         const char *name, oq_value *const *inputs, size_t n_inputs,
                         oq_value *const *outputs, size_t n_outputs);
    void (*graph_append)(oq_graph *g, oq_node *n);
    void (*graph_insert_before)(oq_graph *g, oq_node *pos, oq_node *n);
    void (*graph_insert_after)(oq_graph *g, oq_node *pos, oq_node *n);
    void (*node_remove)(oq_node *n);
    oq_status (*node_set_input)(oq_node *n, size_t index, oq_value *v);
    oq_status (*node_set_output)(oq_node *n, size_t index, oq_value *v);
    void (*value_replace_all_uses)(oq_value *from, oq_value *to);
    void (*graph_replace_output)(oq_graph *g, oq_value *from, oq_value *to);
    oq_status (*value_rename)(oq_value *v, const char *name);
    oq_attr *(*node_set_attr_int)(oq_node *n, const char *name, int64_t v);
    oq_attr *(*node_set_attr_float)(oq_node *n, const char *name, float v);
    oq_attr *(*node_set_attr_string)(oq_node *n, const char *name, const char *v);
    oq_attr *(*node_set_attr_ints)(oq_node *n, const char *name, const int64_t *v,
                                   size_t count);
    bool (*node_remove_attr)(oq_node *n, const char *name);
    oq_value *(*graph_add_initializer)(oq_graph *g, const char *name, int32_t dtype,
                                       const int64_t *dims, size_t rank, const void *data,
                                       int64_t nbytes);
    void (*graph_remove_initializer)(oq_graph *g, oq_value *v);
    void (*model_set_opset)(oq_model *m, const char *domain, int64_t version);
    oq_status (*graph_toposort)(oq_graph *g, oq_diag *d);

    /* --- ABI 1.0 ends here; append new members below this line only. --- */
} oq_host_api;

#define OQ_HOST_HAS(api, member) \
    ((api)->size >= offsetof(oq_host_api, member) + sizeof((api)->member))

/* Plugin entry point (exported by the plugin). abi_version is the host's; return 0 on
 * success, nonzero to refuse loading (after reporting why through api->diag_add is
 * not possible here, so print nothing and return a nonzero code). */
typedef int (*oq_plugin_init_fn)(const oq_host_api *api, oq_registry *reg,
                                 uint32_t abi_version);
#define OQ_PLUGIN_INIT_SYMBOL "oq_plugin_init"
#define OQ_PLUGIN_ABI_SYMBOL "oq_plugin_abi_version"

#if defined(_WIN32)
#define OQ_PLUGIN_EXPORT __declspec(dllexport)
#elif defined(__GNUC__)
#define OQ_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define OQ_PLUGIN_EXPORT
#endif

/* The entry point every plugin defines (declared here so plugins get a prototype). */
OQ_PLUGIN_EXPORT int oq_plugin_init(const oq_host_api *api, oq_registry *reg,
                                    uint32_t abi_version);

/* In exactly one file of a plugin: records the ABI it was compiled against. */
#define OQ_PLUGIN_DECLARE() \
    OQ_PLUGIN_EXPORT extern const uint32_t oq_plugin_abi_version; \
    OQ_PLUGIN_EXPORT const uint32_t oq_plugin_abi_version = OQ_PASS_ABI_VERSION

/* =========================================================== host side (libonnxq) ==
 * Not for plugins. */

/* The host's own table (filled once, static storage). */
const oq_host_api *oq_host_api_get(void);

/* The widen-float16 pass on m in place (passes/widen_float16.c): a float16 model then
 * computes in float32 inside, its float16 inputs and outputs kept. *changed: whether it
 * held any float16. onnxq run and verify call it when the executor has no float16 kernel
 * for one of a model's nodes. */
oq_status oq_model_widen_float16(oq_model *m, bool *changed, oq_diag *d);

/* A registry holding the built-in passes, plus whatever plugins add. */
oq_status oq_registry_new(oq_registry **out, oq_diag *d);
void oq_registry_free(oq_registry *reg);
oq_status oq_registry_add(oq_registry *reg, const oq_pass *pass, oq_diag *d);
const oq_pass *oq_registry_find(const oq_registry *reg, const char *name);
size_t oq_registry_count(const oq_registry *reg);
const oq_pass *oq_registry_at(const oq_registry *reg, size_t i);
/* Plugin file a pass came from, or NULL for a built-in pass. */
const char *oq_registry_origin(const oq_registry *reg, size_t i);

/* Load a plugin: `path` containing a '/' is opened as is; a bare name is searched in
 * ONNXQ_PLUGIN_PATH (colon-separated directories) and then given to dlopen. Refuses a
 * plugin built for another major ABI or a newer minor one. */
oq_status oq_registry_load_plugin(oq_registry *reg, const char *path, oq_diag *d);

/* Option value lookup (the functions behind opt_* in the host table). */
const oq_pass_option_value *oq_pass_option_find(const oq_pass_options *o, const char *name);
int64_t oq_pass_opt_int(const oq_pass_options *o, const char *name, int64_t dflt);
double oq_pass_opt_float(const oq_pass_options *o, const char *name, double dflt);
bool oq_pass_opt_bool(const oq_pass_options *o, const char *name, bool dflt);
const char *oq_pass_opt_string(const oq_pass_options *o, const char *name, const char *dflt);

/* ---------------------------------------------------------------- pipelines ------ */

typedef struct oq_pipeline oq_pipeline;

/* Parse `text` ("a,b{x=1,y=foo},c"). Unknown passes, unknown options, values of
 * the wrong type and syntax errors fail with OQ_ERR_USAGE and a diag entry; *err_pos
 * (if not NULL) receives the byte offset of the offending character. Inside braces,
 * options are separated by ',' or spaces; a value may be double-quoted ("a,b" with
 * \" and \\ escapes). */
oq_status oq_pipeline_parse(const oq_registry *reg, const char *text, oq_pipeline **out,
                            size_t *err_pos, oq_diag *d);
void oq_pipeline_free(oq_pipeline *p);
/* Canonical text: passes joined by ','; explicitly given options in schema order, as
 * name{k=v,...}; ints in decimal, floats in the shortest form that reads back exactly,
 * bools as true/false, strings quoted only when they need to be. Malloc'ed. */
char *oq_pipeline_to_string(const oq_pipeline *p);
size_t oq_pipeline_length(const oq_pipeline *p);
const oq_pass *oq_pipeline_pass(const oq_pipeline *p, size_t i);
const oq_pass_options *oq_pipeline_options(const oq_pipeline *p, size_t i);

/* ---------------------------------------------------------------- pass manager --- */

typedef struct oq_pass_event {
    size_t index;                 /* position in the pipeline */
    const oq_pass *pass;
    const oq_pass_options *options;
    const oq_pass_result *result; /* accumulated over iterations */
    int iterations;               /* runs of an iterative pass (1 otherwise) */
    double seconds;               /* wall time of all its runs */
    oq_status status;
} oq_pass_event;

typedef struct oq_pipeline_run_options {
    bool verify_each;             /* run oq_model_check after each pass; stop on failure */
    int max_iterations;           /* override of the iterative cap (0: pass's own) */
    /* Called before every pass runs (ev->result is empty, status OQ_OK). */
    void (*before_pass)(const oq_pass_event *ev, oq_model *m, void *user);
    /* Called after every pass (also a failing one, before returning). */
    void (*after_pass)(const oq_pass_event *ev, oq_model *m, void *user);
    void *user;
} oq_pipeline_run_options;

/* Run each pass in order. On failure the diag names the pass ("pass \"x\": ...");
 * with verify_each, a pass that leaves the model invalid is named as the one that
 * broke it and the run stops there (OQ_ERR_INVALID). */
oq_status oq_pipeline_run(const oq_pipeline *p, oq_model *m, const oq_pipeline_run_options *ro,
                          oq_diag *d);

/* Run one pass by itself with its default options (convenience for tests/tools). */
oq_status oq_pass_run_simple(const oq_registry *reg, const char *pipeline, oq_model *m,
                             oq_pass_result *res, oq_diag *d);

/* What onnxq quantize runs before quantizing that changes weights
 * (constant-to-initializer, fold-batchnorm), with the built-in passes: for
 * oq_verify_options.prepare_reference (user is unused). */
oq_status oq_pass_prepare_float_reference(oq_model *m, void *user, oq_diag *d);

#ifdef __cplusplus
}
#endif
#endif
