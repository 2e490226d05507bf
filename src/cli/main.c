/* onnxq: one program, one subcommand per job. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const cli_cmd commands[] = {
    {"dump", "inspect a model: I/O, opsets, ops, shapes, initializers (text, JSON, Graphviz)", cmd_dump},
    {"convert", "read and write a model (no pass); move tensors to external data", cmd_convert},
    {"check", "run the structural checker on a model", cmd_check},
    {"run", "run a model on input tensors (.pb/.npy) or random data", cmd_run},
    {"conformance", "run ONNX backend test cases and compare the outputs", cmd_conformance},
    {"opt", "run a pipeline of passes on a model (onnxq passes lists them)", cmd_opt},
    {"quantize", "static post-training quantization to a QDQ model (calibrate, insert QDQ)", cmd_quantize},
    {"verify", "compare a quantized model with its float model: per output and per layer", cmd_verify},
    {"passes", "list the passes (built-in and from plugins) with their options", cmd_passes},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: onnxq COMMAND [ARGS...]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'onnxq COMMAND --help' describes a command. onnxq %s\n", ONNXQ_VERSION_STRING);
}

/* Ctrl-C (or a kill) during a write: remove the temporary files, then end as the signal
 * would have (outputs are renamed into place only when complete). */
static void on_signal(int sig)
{
    oq_remove_temp_files();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_signals(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN)
            continue; /* ignored (nohup, a background job): stays ignored */
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

int main(int argc, char **argv)
{
    install_signals();
    if (argc < 2) {
        usage(stderr);
        return CLI_BAD;
    }
    if (cli_is_help(argv[1])) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("onnxq %s\n", ONNXQ_VERSION_STRING);
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "onnxq: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return CLI_BAD;
}
