/* onnxq check MODEL [--json FILE|-]: load (which runs the structural checker) and report. */
#include <string.h>

#include "cli/cli.h"
#include "cli/report.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: onnxq check MODEL [--json FILE|-]\n\nLoad MODEL and run the structural checker "
               "(SSA, definition before use, scopes, opset imports, attribute and tensor "
               "payloads). Prints \"MODEL: ok\", or one line with the first problem\n"
               "(and how many more there are).\n\n"
               "  --json FILE   the result and every problem as JSON ('-': standard output);\n"
               "                docs/check.md\n\n"
               "Exit: 0 ok, 2 the model is invalid or unreadable.\n");
}

static const char *sev_name(oq_severity s)
{
    return s == OQ_SEV_ERROR ? "error" : s == OQ_SEV_WARNING ? "warning" : "note";
}

/* schema version 1 (docs/check.md) */
static int write_json(const char *json, const char *path, const oq_model *m, oq_status st,
                      const oq_diag *d)
{
    cli_report rep;
    if (cli_report_open(&rep, "check", json, 2) != CLI_OK)
        return CLI_FAIL;
    json_writer *w = &rep.w;
    json_kv_string(w, "file", path);
    json_kv_bool(w, "ok", st == OQ_OK);
    json_kv_string(w, "status", oq_status_name(st));
    if (m && m->graph)
        json_kv_int(w, "nodes", (int64_t)m->graph->n_nodes);
    json_key(w, "problems");
    json_begin_array(w);
    for (size_t i = 0; i < d->count; i++) {
        const oq_diag_entry *e = &d->entries[i];
        json_begin_object(w);
        json_kv_string(w, "severity", sev_name(e->severity));
        json_kv_string(w, "node", e->node);
        json_kv_string(w, "op", e->op);
        json_kv_string(w, "message", e->message);
        json_end_object(w);
    }
    json_end_array(w);
    return cli_report_close(&rep);
}

int cmd_check(int argc, char **argv)
{
    const char *path = NULL, *json = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return CLI_OK;
        } else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
            json = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("check", "unknown or incomplete option %s", argv[i]);
            return CLI_BAD;
        } else if (!path) {
            path = argv[i];
        } else {
            usage(stderr);
            return CLI_BAD;
        }
    }
    if (!path) {
        usage(stderr);
        return CLI_BAD;
    }
    const char *inputs[1] = {path};
    if (json && cli_check_output("check", "--json", json, true, inputs, 1) != CLI_OK)
        return CLI_BAD;
    oq_status st;
    if (!json) {
        oq_model *m = cli_load_model(path, &st);
        if (!m)
            return cli_exit_code(st);
        printf("%s: ok (%zu nodes)\n", path, m->graph->n_nodes);
        oq_model_free(m);
        return CLI_OK;
    }
    oq_diag d;
    oq_diag_init(&d);
    oq_model *m = NULL;
    st = oq_model_read(path, NULL, &m, &d);
    cli_print_diag(&d);
    int rc = write_json(json, path, m, st, &d);
    oq_diag_free(&d);
    oq_model_free(m);
    if (rc != CLI_OK)
        return rc;
    return st == OQ_OK ? CLI_OK : (st == OQ_ERR_IO ? CLI_BAD : cli_exit_code(st));
}
