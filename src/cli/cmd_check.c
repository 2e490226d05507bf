/* onnxq check MODEL: load (which runs the structural checker) and report. */
#include <string.h>

#include "cli/cli.h"

int cmd_check(int argc, char **argv)
{
    if (argc != 2 || cli_is_help(argv[1])) {
        fprintf(argc == 2 ? stdout : stderr,
                "usage: onnxq check MODEL\n\nLoad MODEL and run the structural checker "
                "(SSA, definition before use, scopes, opset imports, attribute and tensor "
                "payloads). Prints \"MODEL: ok\", or one line with the first problem\n"
                "(and how many more there are).\n");
        return argc == 2 ? CLI_OK : CLI_BAD;
    }
    oq_status st;
    oq_model *m = cli_load_model(argv[1], &st);
    if (!m)
        return cli_exit_code(st);
    printf("%s: ok (%zu nodes)\n", argv[1], m->graph->n_nodes);
    oq_model_free(m);
    return CLI_OK;
}
