/* A plugin that claims ABI TEST_ABI_MAJOR.TEST_ABI_MINOR, built only to check that
 * the host refuses ABIs it does not speak (tests/plugin_abi.sh). When accepted it
 * registers "abi-test", a pass that does nothing. */
#include <onnxq/pass.h>

#ifndef TEST_ABI_MAJOR
#define TEST_ABI_MAJOR OQ_PASS_ABI_MAJOR
#endif
#ifndef TEST_ABI_MINOR
#define TEST_ABI_MINOR OQ_PASS_ABI_MINOR
#endif

OQ_PLUGIN_EXPORT extern const uint32_t oq_plugin_abi_version;
OQ_PLUGIN_EXPORT const uint32_t oq_plugin_abi_version = OQ_PASS_ABI_MAKE(TEST_ABI_MAJOR, TEST_ABI_MINOR);

static oq_status run(oq_model *m, const oq_pass_options *o, oq_pass_result *res, oq_diag *d)
{
    (void)m;
    (void)o;
    (void)res;
    (void)d;
    return OQ_OK;
}

static const oq_pass test_pass = {
    .abi_version = OQ_PASS_ABI_MAKE(TEST_ABI_MAJOR, TEST_ABI_MINOR),
    .struct_size = sizeof(oq_pass),
    .name = "abi-test",
    .summary = "does nothing (ABI test plugin)",
    .run = run,
};

int oq_plugin_init(const oq_host_api *api, oq_registry *reg, uint32_t abi_version)
{
    (void)abi_version;
    return api->register_pass(reg, &test_pass) == OQ_OK ? 0 : 1;
}
