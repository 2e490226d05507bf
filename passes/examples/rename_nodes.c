/* Example onnxq plugin: rename-nodes{pattern=...,only-unnamed=...}
 *
 * Gives every node of the model (subgraphs included) a name built from a pattern:
 *   %o  the op type          %i  the node's index in its graph
 *   %n  the old name ("" if none)   %%  a percent sign
 * e.g. rename-nodes{pattern=%o_%i} names the first Conv "Conv_0".
 *
 * It uses only <onnxq/pass.h> and the host function table: it is built without
 * linking against libonnxq (see docs/plugins.md).
 */
#include <onnxq/pass.h>

#include <stdio.h>
#include <string.h>

OQ_PLUGIN_DECLARE();

static const oq_host_api *host;

static const oq_pass_option_def options[] = {
    {"pattern", OQ_OPT_STRING, "%o_%i",
     "new name: %o op type, %i index in its graph, %n old name, %% percent sign"},
    {"only-unnamed", OQ_OPT_BOOL, "false", "rename only nodes that have no name"},
};

/* Expand the pattern into buf; returns 0, or -1 if it does not fit. */
static int expand(const char *pat, const oq_node *n, size_t index, char *buf, size_t size)
{
    size_t len = 0;
    for (const char *p = pat; *p; p++) {
        char tmp[32];
        const char *piece = tmp;
        if (*p == '%' && p[1]) {
            p++;
            switch (*p) {
            case 'o': piece = n->op_type ? n->op_type : "?"; break;
            case 'n': piece = n->name ? n->name : ""; break;
            case 'i': snprintf(tmp, sizeof tmp, "%zu", index); break;
            case '%': snprintf(tmp, sizeof tmp, "%%"); break;
            default: snprintf(tmp, sizeof tmp, "%%%c", *p); break;
            }
        } else {
            tmp[0] = *p;
            tmp[1] = 0;
        }
        size_t pl = strlen(piece);
        if (len + pl + 1 > size)
            return -1;
        memcpy(buf + len, piece, pl);
        len += pl;
    }
    buf[len] = 0;
    return 0;
}

static oq_status rename_graph(oq_graph *g, const char *pat, int only_unnamed, oq_pass_result *res,
                              oq_diag *d)
{
    size_t index = 0;
    for (oq_node *n = g->first; n; n = n->next, index++) {
        for (size_t a = 0; a < n->n_attrs; a++) {
            oq_attr *at = n->attrs[a];
            if (at->g) {
                oq_status s = rename_graph(at->g, pat, only_unnamed, res, d);
                if (s != OQ_OK)
                    return s;
            }
            for (size_t k = 0; k < at->n_graphs; k++) {
                oq_status s = rename_graph(at->graphs[k], pat, only_unnamed, res, d);
                if (s != OQ_OK)
                    return s;
            }
        }
        if (only_unnamed && n->name && *n->name)
            continue;
        char buf[512];
        if (expand(pat, n, index, buf, sizeof buf) != 0)
            return host->diag_add(d, OQ_SEV_ERROR, OQ_ERR_USAGE, NULL, n->name, n->op_type,
                                  "rename-nodes: the expanded name is longer than %zu bytes",
                                  sizeof buf - 1);
        if (n->name && strcmp(n->name, buf) == 0)
            continue;
        char *name = host->model_strdup(g->model, buf);
        if (!name)
            return host->diag_add(d, OQ_SEV_ERROR, OQ_ERR_NOMEM, NULL, NULL, NULL, "out of memory");
        n->name = name;
        oq_pass_stat_add(res, "nodes_renamed", 1);
        res->changed = true;
    }
    return OQ_OK;
}

static oq_status run(oq_model *m, const oq_pass_options *o, oq_pass_result *res, oq_diag *d)
{
    const char *pat = host->opt_string(o, "pattern", "%o_%i");
    if (!*pat)
        return host->diag_add(d, OQ_SEV_ERROR, OQ_ERR_USAGE, NULL, NULL, NULL,
                              "rename-nodes: pattern must not be empty");
    if (!m->graph)
        return OQ_OK;
    return rename_graph(m->graph, pat, host->opt_bool(o, "only-unnamed", false), res, d);
}

static const oq_pass rename_nodes = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "rename-nodes",
    .summary = "name every node after a pattern (example plugin)",
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .run = run,
};

int oq_plugin_init(const oq_host_api *api, oq_registry *reg, uint32_t abi_version)
{
    /* the host has already checked our ABI; a plugin can still be stricter */
    if (OQ_PASS_ABI_MAJOR_OF(abi_version) != OQ_PASS_ABI_MAJOR)
        return 1;
    if (!OQ_HOST_HAS(api, opt_bool))
        return 2;
    host = api;
    return api->register_pass(reg, &rename_nodes) == OQ_OK ? 0 : 3;
}
