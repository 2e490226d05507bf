/* onnxq dump MODEL — placeholder until the dump command lands. */
#include "cli/cli.h"

int cmd_dump(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_error("dump", "not implemented yet");
    return CLI_FAIL;
}
