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

/* How much cli_print_diag shows: errors only (--quiet), errors and one line per kind of
 * note or warning with a count and the worst case (the default), or every entry
 * (--verbose). */
typedef enum cli_verbosity { CLI_QUIET = 0, CLI_NORMAL = 1, CLI_VERBOSE = 2 } cli_verbosity;
void cli_set_verbosity(cli_verbosity v);
cli_verbosity cli_get_verbosity(void);

/* Print the entries of d to stderr, one line each ("onnxq: " prefixed when no file),
 * as the verbosity says: errors always; notes and warnings of one kind
 * (oq_diag_same_kind) as one line, the entry of largest weight, with the count. */
void cli_print_diag(const oq_diag *d);
/* Exit code for a failed status: 2 for bad input/usage, 1 otherwise. */
int cli_exit_code(oq_status s);
/* Read a model, printing errors; returns NULL on failure. */
oq_model *cli_load_model(const char *path, oq_status *st);
/* The same, with the command's exit code for a failure in *rc. */
oq_model *cli_load_model_rc(const char *path, int *rc);
/* "onnxq CMD: message" on stderr. */
void cli_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
bool cli_is_help(const char *arg);
/* The value of a count option (OPT N, e.g. --threads): *out = atoi(text); below 1 prints
 * "onnxq CMD: OPT wants a positive count" and returns false. */
bool cli_positive_count(const char *cmd, const char *opt, const char *text, int *out);
/* A positional argument: fills the first empty one of *slots[0..n) (the command's
 * positional arguments, in order); when all are taken, prints "onnxq CMD: unexpected
 * argument "ARG"" and returns false. */
bool cli_positional(const char *cmd, const char *arg, const char **const slots[], size_t n);

/* Paths checked before any work (exit 2, one line naming the path):
 * cli_check_output: OUT will be written as a file. "-" is standard output when
 * allow_stdout (else refused); OUT must not be a folder, its folder must exist and be
 * writable, and OUT must not be one of inputs[0..n_inputs) (also through links).
 * what names the option in the message ("-o", "--json"). */
int cli_check_output(const char *cmd, const char *what, const char *path, bool allow_stdout,
                     const char *const *inputs, size_t n_inputs);
/* OUT is a folder to write files into: created (one level) when missing; its parent
 * must exist; refused when it is a file or not writable. */
int cli_check_output_dir(const char *cmd, const char *what, const char *dir);
/* DIR is a folder to read (sample data): exists and is a folder. */
int cli_check_input_dir(const char *cmd, const char *what, const char *dir);

/* A text output (--json, --html): "-" is standard output; a file is written
 * atomically when cli_output_close succeeds (temporary file, rename). */
typedef struct cli_output {
    const char *path;
    FILE *f;                  /* write here */
    char *buf;                /* memstream buffer for a file */
    size_t len;
} cli_output;
int cli_output_open(const char *cmd, cli_output *o, const char *path);
/* Returns CLI_OK, or CLI_FAIL after printing why the file could not be written. */
int cli_output_close(const char *cmd, cli_output *o);
/* True when path is "-" (standard output). */
bool cli_is_stdout(const char *path);

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
