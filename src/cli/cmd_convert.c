/* onnxq convert IN OUT [--external-data [--size-threshold N]] [--inline] */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static void help(FILE *f)
{
    fprintf(f,
            "usage: onnxq convert IN OUT [--external-data] [--size-threshold BYTES] [--inline]\n"
            "                            [--data-name NAME]\n\n"
            "Read IN and write it to OUT unchanged (no pass runs). Output is written\n"
            "atomically; IN is never modified.\n\n"
            "  --external-data       store initializers of at least --size-threshold bytes\n"
            "                        (default 1024) in OUT.data beside OUT\n"
            "  --inline              store all tensor data inside OUT (fails over 2 GiB)\n"
            "  --data-name NAME      file name for external data (default: OUT's name + .data)\n"
            "Tensors that were external in IN stay external (in a fresh data file) unless\n"
            "--inline is given. Models over 2 GiB get external data automatically.\n");
}

int cmd_convert(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    oq_write_options wo = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            help(stdout);
            return CLI_OK;
        } else if (strcmp(a, "--external-data") == 0) {
            wo.external_data = 1;
        } else if (strcmp(a, "--inline") == 0) {
            wo.external_data = -1;
        } else if (strcmp(a, "--size-threshold") == 0 && i + 1 < argc) {
            char *end;
            errno = 0;
            long long v = strtoll(argv[++i], &end, 10);
            if (errno || *end || v < 0) {
                cli_error("convert", "--size-threshold needs a non-negative integer, got \"%s\"", argv[i]);
                return CLI_BAD;
            }
            wo.size_threshold = v ? v : 1;
        } else if (strcmp(a, "--data-name") == 0 && i + 1 < argc) {
            wo.external_name = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            cli_error("convert", "unknown option \"%s\"", a);
            return CLI_BAD;
        } else if (!cli_positional("convert", a, (const char **const[]){&in, &out}, 2)) {
            return CLI_BAD;
        }
    }
    if (!in || !out) {
        help(stderr);
        return CLI_BAD;
    }
    const char *inputs[1] = {in};
    if (cli_check_output("convert", "OUT", out, false, inputs, 1) != CLI_OK)
        return CLI_BAD;
    oq_status st;
    oq_model *m = cli_load_model(in, &st);
    if (!m)
        return cli_exit_code(st);
    oq_diag d;
    oq_diag_init(&d);
    st = oq_model_write(m, out, &wo, &d);
    cli_print_diag(&d);
    oq_diag_free(&d);
    oq_model_free(m);
    return st == OQ_OK ? CLI_OK : (st == OQ_ERR_USAGE ? CLI_BAD : CLI_FAIL);
}
