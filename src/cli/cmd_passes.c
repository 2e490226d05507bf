/* onnxq passes [--json] [--plugin FILE]... : list every pass with summary and options. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "io/json_writer.h"
#include "onnxq/pass.h"

oq_registry *cli_registry(const char *cmd, char **plugins, size_t n_plugins, int *rc)
{
    oq_diag d;
    oq_diag_init(&d);
    oq_registry *reg = NULL;
    oq_status st = oq_registry_new(&reg, &d);
    for (size_t i = 0; st == OQ_OK && i < n_plugins; i++)
        st = oq_registry_load_plugin(reg, plugins[i], &d);
    cli_print_diag(&d);
    oq_diag_free(&d);
    if (st != OQ_OK) {
        oq_registry_free(reg);
        *rc = st == OQ_ERR_NOMEM || st == OQ_ERR_INTERNAL ? CLI_FAIL : CLI_BAD;
        return NULL;
    }
    *rc = CLI_OK;
    (void)cmd;
    return reg;
}

static void help(FILE *f)
{
    fprintf(f, "usage: onnxq passes [--json] [--plugin FILE.so]...\n\n"
               "List every pass (built-in, and those of the given plugins) with its summary\n"
               "and options. A plugin name without '/' is searched in ONNXQ_PLUGIN_PATH\n"
               "(colon-separated directories).\n");
}

int cmd_passes(int argc, char **argv)
{
    bool json = false;
    char **plugins = calloc((size_t)argc, sizeof(char *));
    size_t np = 0;
    int rc = CLI_OK;
    oq_registry *reg = NULL;
    if (!plugins)
        return CLI_FAIL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            help(stdout);
            goto done;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = true;
            if (i + 1 < argc && cli_is_stdout(argv[i + 1]))
                i++; /* --json - : standard output, as for every command */
        } else if (strcmp(argv[i], "--plugin") == 0 && i + 1 < argc) {
            plugins[np++] = argv[++i];
        } else {
            cli_error("passes", "unexpected argument \"%s\"", argv[i]);
            help(stderr);
            rc = CLI_BAD;
            goto done;
        }
    }
    reg = cli_registry("passes", plugins, np, &rc);
    if (!reg)
        goto done;
    size_t n = oq_registry_count(reg);
    json_writer w; /* one pass a line */
    if (json) {
        json_init(&w, stdout, 2);
        json_begin_array(&w);
    }
    for (size_t i = 0; i < n; i++) {
        const oq_pass *p = oq_registry_at(reg, i);
        const char *origin = oq_registry_origin(reg, i);
        if (json) {
            json_begin_object_inline(&w);
            json_kv_string(&w, "name", p->name);
            json_kv_string(&w, "summary", p->summary ? p->summary : "");
            json_kv_string(&w, "origin", origin ? origin : "built-in");
            json_kv_bool(&w, "iterative", p->iterative);
            json_key(&w, "options");
            json_begin_array(&w);
            for (size_t k = 0; k < p->n_options; k++) {
                const oq_pass_option_def *o = &p->options[k];
                json_begin_object(&w);
                json_kv_string(&w, "name", o->name);
                json_kv_string(&w, "type", oq_opt_type_name(o->type));
                json_kv_string(&w, "default", o->default_value); /* NULL: null */
                json_kv_string(&w, "help", o->help ? o->help : "");
                json_end_object(&w);
            }
            json_end_array(&w);
            json_end_object(&w);
        } else {
            printf("%-26s %s%s", p->name, p->summary ? p->summary : "",
                   p->iterative ? " [iterative]" : "");
            if (origin)
                printf("  (plugin %s)", origin);
            printf("\n");
            for (size_t k = 0; k < p->n_options; k++) {
                const oq_pass_option_def *o = &p->options[k];
                char left[128];
                snprintf(left, sizeof left, "%s=%s", o->name, oq_opt_type_name(o->type));
                char dflt[96];
                if (o->default_value)
                    snprintf(dflt, sizeof dflt, " (default %s)", o->default_value);
                else
                    snprintf(dflt, sizeof dflt, " (required)");
                printf("    %-22s %s%s\n", left, o->help ? o->help : "", dflt);
            }
        }
    }
    if (json) {
        json_end_array(&w);
        if (json_finish(&w) != 0) {
            cli_error("passes", "cannot write the output");
            rc = CLI_FAIL;
        }
    }
done:
    oq_registry_free(reg);
    free(plugins);
    return rc;
}
