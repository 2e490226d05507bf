/* A plugin that claims ABI TEST_ABI_MAJOR.TEST_ABI_MINOR, built only to check that
 * the host refuses ABIs it does not speak (tests/plugin_abi.sh). When accepted it
 * registers "abi-test", a pass that does nothing — or, with break=true, adds a node
 * reading a value nothing produces, so that --verify-each has something to catch. */
#include <onnxq/pass.h>

#ifndef TEST_ABI_MAJOR
#define TEST_ABI_MAJOR OQ_PASS_ABI_MAJOR
#endif
#ifndef TEST_ABI_MINOR
#define TEST_ABI_MINOR OQ_PASS_ABI_MINOR
#endif

OQ_PLUGIN_EXPORT extern const uint32_t oq_plugin_abi_version;
OQ_PLUGIN_EXPORT const uint32_t oq_plugin_abi_version = OQ_PASS_ABI_MAKE(TEST_ABI_MAJOR, TEST_ABI_MINOR);

static const oq_host_api *host;

static const oq_pass_option_def options[] = {
    {"break", OQ_OPT_BOOL, "false", "leave the model invalid (for --verify-each tests)"},
};

static oq_status run(oq_model *m, const oq_pass_options *o, oq_pass_result *res, oq_diag *d)
{
    (void)d;
    if (!host->opt_bool(o, "break", false) || !m->graph)
        return OQ_OK;
    oq_value *ghost = host->graph_new_value(m->graph, host->graph_unique_name(m->graph, "ghost"));
    oq_value *out = host->graph_new_value(m->graph, NULL);
    oq_node *n = ghost && out ? host->node_new(m->graph, "Relu", NULL, "broken", &ghost, 1, &out, 1) : NULL;
    if (!n)
        return OQ_ERR_NOMEM;
    host->graph_append(m->graph, n);
    res->changed = true;
    return OQ_OK;
}

static const oq_pass test_pass = {
    .abi_version = OQ_PASS_ABI_MAKE(TEST_ABI_MAJOR, TEST_ABI_MINOR),
    .struct_size = sizeof(oq_pass),
    .name = "abi-test",
    .summary = "does nothing (ABI test plugin)",
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .run = run,
};

int oq_plugin_init(const oq_host_api *api, oq_registry *reg, uint32_t abi_version)
{
    (void)abi_version;
    host = api;
    return api->register_pass(reg, &test_pass) == OQ_OK ? 0 : 1;
}
