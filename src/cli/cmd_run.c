/* onnxq run MODEL ... (placeholder replaced below) */
#include "cli/cli.h"
int cmd_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return CLI_BAD;
}
