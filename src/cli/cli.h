/* Shared helpers for the onnxq commands. */
#ifndef ONNXQ_CLI_H
#define ONNXQ_CLI_H
#include <stdbool.h>
#include <stdio.h>

#include "onnxq/onnxq.h"

/* Exit codes: 0 ok, 1 the job failed, 2 bad usage or bad input. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_BAD = 2 };

typedef struct cli_cmd {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} cli_cmd;

/* Print every entry of d to stderr, one line each ("onnxq: " prefixed when no file). */
void cli_print_diag(const oq_diag *d);
/* Exit code for a failed status: 2 for bad input/usage, 1 otherwise. */
int cli_exit_code(oq_status s);
/* Read a model, printing errors; returns NULL on failure. */
oq_model *cli_load_model(const char *path, oq_status *st);
/* "onnxq CMD: message" on stderr. */
void cli_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
bool cli_is_help(const char *arg);

/* Commands (src/cli/cmd_*.c). */
int cmd_convert(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_conformance(int argc, char **argv);
int cmd_opt(int argc, char **argv);
int cmd_passes(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_verify(int argc, char **argv);

/* A pass registry with the built-in passes and the given plugins loaded (errors
 * printed; *rc is the exit code on failure). src/cli/cmd_passes.c */
struct oq_registry;
struct oq_registry *cli_registry(const char *cmd, char **plugins, size_t n_plugins, int *rc);
#endif
