#ifndef ONNXQ_TESTUTIL_H
#define ONNXQ_TESTUTIL_H
#include "onnxq/onnxq.h"
/* Run a shell command, capturing stdout+stderr into *out (malloc'ed); returns exit code. */
int tu_run(const char *cmd, char **out);
/* A fresh empty temporary directory (malloc'ed path). */
char *tu_tmpdir(void);
/* Write a file; returns 0 on success. */
int tu_write_file(const char *path, const void *data, size_t len);
/* Read a whole file (malloc'ed), NULL on error. */
void *tu_read_file(const char *path, size_t *len);
#endif
