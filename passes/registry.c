/* The pass registry: every built-in pass is listed once, in OQ_BUILTIN_PASSES below
 * (an X-macro, as LLVM's PassRegistry.def); plugins append to a registry at run time. */
#include "pass-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>

#include "ir/grow.h"

/* X(c_identifier) — the pass object is `oq_pass_<c_identifier>` in passes/<name>.c. */
#define OQ_BUILTIN_PASSES(X)        \
    X(constant_to_initializer)      \
    X(eliminate_dead)               \
    X(eliminate_identity)           \
    X(dedupe_initializers)          \
    X(fold_constants)               \
    X(fold_batchnorm)               \
    X(fold_pad)                     \
    X(fold_linear)                  \
    X(fuse_activations)             \
    X(fold_bias)                    \
    X(infer_shapes)                 \
    X(qdq_cleanup)                  \
    X(upgrade_opset)                \
    X(smooth_quant)                 \
    X(calibrate)                    \
    X(insert_qdq)                   \
    X(quantize_weights)             \
    X(quantize_embeddings)          \
    X(quantize_dynamic)             \
    X(quantize_gather)              \
    X(widen_float16)

#define OQ_X(id) extern const oq_pass oq_pass_##id;
OQ_BUILTIN_PASSES(OQ_X)
#undef OQ_X

static const oq_pass *const builtin_passes[] = {
#define OQ_X(id) &oq_pass_##id,
    OQ_BUILTIN_PASSES(OQ_X)
#undef OQ_X
};

enum {
#define OQ_X(id) OQ_BUILTIN_INDEX_##id,
    OQ_BUILTIN_PASSES(OQ_X)
#undef OQ_X
    OQ_BUILTIN_COUNT
};
_Static_assert(sizeof builtin_passes / sizeof builtin_passes[0] == OQ_BUILTIN_COUNT,
               "builtin pass table and list disagree");

typedef struct reg_entry {
    oq_pass pass;       /* our copy (plugins may have been built with a smaller struct) */
    int plugin;         /* index into plugins, or -1 for built-in */
} reg_entry;

typedef struct reg_plugin {
    char *path;
    void *handle;
} reg_plugin;

struct oq_registry {
    reg_entry *entries;
    size_t count, cap;
    reg_plugin *plugins;
    size_t n_plugins;
    int loading;        /* plugin currently in oq_plugin_init, or -1 */
    oq_diag *load_diag; /* diag of the plugin being loaded */
};

static bool valid_name(const char *s)
{
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '_' || *s == '.'))
            return false;
    return true;
}

static const char *origin_of(const oq_registry *reg, int plugin)
{
    return plugin < 0 ? "built-in" : reg->plugins[plugin].path;
}

oq_status oq_registry_add(oq_registry *reg, const oq_pass *pass, oq_diag *d)
{
    const char *from = origin_of(reg, reg->loading);
    if (!pass)
        return oq_diag_error(d, OQ_ERR_USAGE, "%s: register_pass given NULL", from);
    uint32_t abi = pass->abi_version;
    if (OQ_PASS_ABI_MAJOR_OF(abi) != OQ_PASS_ABI_MAJOR || OQ_PASS_ABI_MINOR_OF(abi) > OQ_PASS_ABI_MINOR)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED,
                             "%s: pass \"%s\" built for ABI %u.%u, this onnxq speaks %u.%u", from,
                             valid_name(pass->name) ? pass->name : "?",
                             (unsigned)OQ_PASS_ABI_MAJOR_OF(abi), (unsigned)OQ_PASS_ABI_MINOR_OF(abi),
                             (unsigned)OQ_PASS_ABI_MAJOR, (unsigned)OQ_PASS_ABI_MINOR);
    size_t sz = pass->struct_size;
    if (sz < offsetof(oq_pass, reserved) || sz > sizeof(oq_pass))
        sz = sz < offsetof(oq_pass, reserved) ? 0 : sizeof(oq_pass);
    if (sz == 0)
        return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "%s: pass struct_size %u is too small",
                             from, (unsigned)pass->struct_size);
    if (!valid_name(pass->name))
        return oq_diag_error(d, OQ_ERR_USAGE,
                             "%s: pass name \"%s\" is not valid (letters, digits, '-', '_', '.')",
                             from, pass->name ? pass->name : "");
    if (!pass->run)
        return oq_diag_error(d, OQ_ERR_USAGE, "%s: pass \"%s\" has no run function", from,
                             pass->name);
    if (oq_registry_find(reg, pass->name))
        return oq_diag_error(d, OQ_ERR_USAGE, "%s: a pass named \"%s\" is already registered",
                             from, pass->name);
    for (size_t i = 0; i < pass->n_options; i++) {
        const oq_pass_option_def *o = &pass->options[i];
        if (!valid_name(o->name) || o->type > OQ_OPT_STRING)
            return oq_diag_error(d, OQ_ERR_USAGE, "%s: pass \"%s\": option %zu is malformed",
                                 from, pass->name, i);
        oq_pass_option_value tmp = {0}; /* a required option has no default to parse */
        if (o->default_value &&
            oq_option_parse_value(o, o->default_value, strlen(o->default_value), &tmp) != OQ_OK)
            return oq_diag_error(d, OQ_ERR_USAGE,
                                 "%s: pass \"%s\": default \"%s\" of option \"%s\" is not a valid %s",
                                 from, pass->name, o->default_value, o->name,
                                 oq_opt_type_name(o->type));
        oq_option_value_free(&tmp);
    }
    reg_entry *ne = oq_grow(reg->entries, reg->count, &reg->cap, sizeof(*ne), 16);
    if (!ne)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    reg->entries = ne;
    reg_entry *e = &reg->entries[reg->count++];
    memset(e, 0, sizeof(*e));
    memcpy(&e->pass, pass, sz);
    e->pass.struct_size = sizeof(oq_pass);
    e->plugin = reg->loading;
    return OQ_OK;
}

oq_status oq_registry_new(oq_registry **out, oq_diag *d)
{
    *out = NULL;
    oq_registry *reg = calloc(1, sizeof(*reg));
    if (!reg)
        return oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
    reg->loading = -1;
    for (size_t i = 0; i < OQ_BUILTIN_COUNT; i++) {
        oq_status s = oq_registry_add(reg, builtin_passes[i], d);
        if (s != OQ_OK) {
            oq_registry_free(reg);
            return s;
        }
    }
    *out = reg;
    return OQ_OK;
}

void oq_registry_free(oq_registry *reg)
{
    if (!reg)
        return;
    for (size_t i = 0; i < reg->n_plugins; i++) {
        if (reg->plugins[i].handle)
            dlclose(reg->plugins[i].handle);
        free(reg->plugins[i].path);
    }
    free(reg->plugins);
    free(reg->entries);
    free(reg);
}

const oq_pass *oq_registry_find(const oq_registry *reg, const char *name)
{
    for (size_t i = 0; i < reg->count; i++)
        if (strcmp(reg->entries[i].pass.name, name) == 0)
            return &reg->entries[i].pass;
    return NULL;
}

size_t oq_registry_count(const oq_registry *reg)
{
    return reg->count;
}

const oq_pass *oq_registry_at(const oq_registry *reg, size_t i)
{
    return i < reg->count ? &reg->entries[i].pass : NULL;
}

const char *oq_registry_origin(const oq_registry *reg, size_t i)
{
    if (i >= reg->count || reg->entries[i].plugin < 0)
        return NULL;
    return reg->plugins[reg->entries[i].plugin].path;
}

/* ------------------------------------------------------------ plugins */

static oq_status host_register_pass(oq_registry *reg, const oq_pass *pass)
{
    return oq_registry_add(reg, pass, reg->load_diag);
}

static int file_exists(const char *p)
{
    FILE *f = fopen(p, "rb");
    if (!f)
        return 0;
    fclose(f);
    return 1;
}

/* Resolve a bare name through ONNXQ_PLUGIN_PATH; malloc'ed result or NULL. */
static char *search_plugin_path(const char *name)
{
    const char *env = getenv("ONNXQ_PLUGIN_PATH");
    if (!env || !*env)
        return NULL;
    size_t nl = strlen(name);
    const char *p = env;
    while (*p) {
        const char *end = strchr(p, ':');
        size_t dl = end ? (size_t)(end - p) : strlen(p);
        if (dl) {
            const char *suffixes[] = {"", ".so"};
            for (int k = 0; k < 2; k++) {
                size_t len = dl + 1 + nl + strlen(suffixes[k]) + 1;
                char *full = malloc(len);
                if (!full)
                    return NULL;
                snprintf(full, len, "%.*s/%s%s", (int)dl, p, name, suffixes[k]);
                if (file_exists(full))
                    return full;
                free(full);
            }
        }
        if (!end)
            break;
        p = end + 1;
    }
    return NULL;
}

oq_status oq_registry_load_plugin(oq_registry *reg, const char *path, oq_diag *d)
{
    char *resolved = NULL;
    void *h = NULL;
    oq_status st = OQ_OK;
    size_t first_new = reg->count;
    if (!strchr(path, '/'))
        resolved = search_plugin_path(path);
    if (!resolved && !strchr(path, '/') && !file_exists(path)) {
        const char *env = getenv("ONNXQ_PLUGIN_PATH");
        st = oq_diag_error(d, OQ_ERR_USAGE, "plugin %s: not found (ONNXQ_PLUGIN_PATH=%s)", path,
                           env ? env : "");
        goto fail;
    }
    if (!resolved) {
        /* a bare name found in the current directory still needs a path for dlopen */
        size_t len = strlen(path) + 3;
        resolved = malloc(len);
        if (!resolved) {
            st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
            goto fail;
        }
        snprintf(resolved, len, "%s%s", strchr(path, '/') ? "" : "./", path);
    }
    dlerror();
    h = dlopen(resolved, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        st = oq_diag_error(d, OQ_ERR_USAGE, "plugin %s: cannot load: %s", path, e ? e : "?");
        goto fail;
    }
    void *sym = dlsym(h, OQ_PLUGIN_ABI_SYMBOL);
    if (!sym) {
        st = oq_diag_error(d, OQ_ERR_UNSUPPORTED,
                           "plugin %s: no %s symbol (not an onnxq plugin, or built without "
                           "OQ_PLUGIN_DECLARE())", path, OQ_PLUGIN_ABI_SYMBOL);
        goto fail;
    }
    uint32_t abi = *(const uint32_t *)sym;
    if (OQ_PASS_ABI_MAJOR_OF(abi) != OQ_PASS_ABI_MAJOR || OQ_PASS_ABI_MINOR_OF(abi) > OQ_PASS_ABI_MINOR) {
        st = oq_diag_error(d, OQ_ERR_UNSUPPORTED, "plugin %s: built for ABI %u.%u, this onnxq speaks %u.%u",
                           path, (unsigned)OQ_PASS_ABI_MAJOR_OF(abi),
                           (unsigned)OQ_PASS_ABI_MINOR_OF(abi), (unsigned)OQ_PASS_ABI_MAJOR,
                           (unsigned)OQ_PASS_ABI_MINOR);
        goto fail;
    }
    void *fsym = dlsym(h, OQ_PLUGIN_INIT_SYMBOL);
    if (!fsym) {
        st = oq_diag_error(d, OQ_ERR_UNSUPPORTED, "plugin %s: does not export %s", path,
                           OQ_PLUGIN_INIT_SYMBOL);
        goto fail;
    }
    oq_plugin_init_fn init;
    memcpy(&init, &fsym, sizeof init); /* POSIX: object pointer to function pointer */
    reg_plugin *np = realloc(reg->plugins, (reg->n_plugins + 1) * sizeof(*np));
    if (!np) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto fail;
    }
    reg->plugins = np;
    np[reg->n_plugins].path = malloc(strlen(path) + 1);
    if (!np[reg->n_plugins].path) {
        st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory");
        goto fail;
    }
    strcpy(np[reg->n_plugins].path, path);
    np[reg->n_plugins].handle = h;
    reg->loading = (int)reg->n_plugins;
    reg->n_plugins++;
    reg->load_diag = d;
    size_t errs_before = d ? d->errors : 0;
    int rc = init(oq_host_api_get(), reg, OQ_PASS_ABI_VERSION);
    reg->loading = -1;
    reg->load_diag = NULL;
    if (rc != 0 || (d && d->errors > errs_before)) {
        st = rc != 0 ? oq_diag_error(d, OQ_ERR_UNSUPPORTED, "plugin %s: oq_plugin_init failed (returned %d)", path, rc)
                     : OQ_ERR_UNSUPPORTED;
        reg->count = first_new; /* forget what it registered */
        reg->n_plugins--;
        free(reg->plugins[reg->n_plugins].path);
        goto fail;
    }
    free(resolved);
    return OQ_OK;
fail:
    if (h)
        dlclose(h);
    free(resolved);
    return st;
}

/* ------------------------------------------------------------ host table */

static const oq_host_api host_api = {
    .size = sizeof(oq_host_api),
    .abi_version = OQ_PASS_ABI_VERSION,
    .host_version = ONNXQ_VERSION_STRING,
    .register_pass = host_register_pass,
    .diag_add = oq_diag_add,
    .model_alloc = oq_model_alloc,
    .model_strdup = oq_model_strdup,
    .opt_int = oq_pass_opt_int,
    .opt_float = oq_pass_opt_float,
    .opt_bool = oq_pass_opt_bool,
    .opt_string = oq_pass_opt_string,
    .model_opset = oq_model_opset,
    .domain_is_default = oq_domain_is_default,
    .graph_find_value = oq_graph_find_value,
    .node_attr = oq_node_attr,
    .node_attr_int = oq_node_attr_int,
    .node_attr_float = oq_node_attr_float,
    .node_attr_string = oq_node_attr_string,
    .node_attr_ints = oq_node_attr_ints,
    .node_label = oq_node_label,
    .value_const_tensor = oq_value_const_tensor,
    .value_is_graph_output = oq_value_is_graph_output,
    .tensor_data = oq_tensor_data,
    .tensor_numel = oq_tensor_numel,
    .dtype_name = oq_dtype_name,
    .graph_new_value = oq_graph_new_value,
    .graph_unique_name = oq_graph_unique_name,
    .node_new = oq_node_new,
    .graph_append = oq_graph_append,
    .graph_insert_before = oq_graph_insert_before,
    .graph_insert_after = oq_graph_insert_after,
    .node_remove = oq_node_remove,
    .node_set_input = oq_node_set_input,
    .node_set_output = oq_node_set_output,
    .value_replace_all_uses = oq_value_replace_all_uses,
    .graph_replace_output = oq_graph_replace_output,
    .value_rename = oq_value_rename,
    .node_set_attr_int = oq_node_set_attr_int,
    .node_set_attr_float = oq_node_set_attr_float,
    .node_set_attr_string = oq_node_set_attr_string,
    .node_set_attr_ints = oq_node_set_attr_ints,
    .node_remove_attr = oq_node_remove_attr,
    .graph_add_initializer = oq_graph_add_initializer,
    .graph_remove_initializer = oq_graph_remove_initializer,
    .model_set_opset = oq_model_set_opset,
    .graph_toposort = oq_graph_toposort,
};

const oq_host_api *oq_host_api_get(void)
{
    return &host_api;
}
