/* Input data for the commands that run a model on samples (run, verify, quantize):
 * option parsing and printing around the library's sample sources (oq_calib_source,
 * include/onnxq/calib.h), so every command reads the same folder layouts and generates
 * the same random data (docs/data.md). src/cli/samples.c */
#ifndef ONNXQ_CLI_SAMPLES_H
#define ONNXQ_CLI_SAMPLES_H
#include <stdbool.h>
#include <stdint.h>

#include "onnxq/calib.h"
#include "onnxq/exec.h"
#include "onnxq/image.h"

/* NAME=VALUE command-line argument; name is malloc'ed (free it), value borrowed. */
typedef struct cli_kv {
    const char *name;
    const char *value;
} cli_kv;

bool cli_split_kv(const char *s, cli_kv *kv);

/* Options for generated data, shared by run, verify and quantize: --dim NAME=N (size
 * of a symbolic dimension), --input-value NAME=V (input NAME filled with V instead of
 * random data, e.g. sr=16000), --seed S. */
#define CLI_MAX_KV 256
typedef struct cli_data_opts {
    cli_kv dims[CLI_MAX_KV];
    size_t n_dims;
    cli_kv values[CLI_MAX_KV];
    size_t n_values;
    uint64_t seed; /* default 1 */
} cli_data_opts;

void cli_data_opts_init(cli_data_opts *o);
void cli_data_opts_free(cli_data_opts *o);
/* Returns 1 when argv[*i] was one of the options above (and *i advanced past its value),
 * 0 when not, -1 on a bad value (printed). */
int cli_data_option(const char *cmd, int argc, char **argv, int *i, cli_data_opts *o);
extern const char cli_data_options_help[];
/* Apply --dim / --input-value to a source (errors in d). */
oq_status cli_data_apply(const cli_data_opts *o, oq_calib_source *src, oq_diag *d);
/* "NAME=V,NAME=V" (malloc'ed; "" when n is 0), for a config or a pass option. */
char *cli_kv_join(const cli_kv *kv, size_t n);

/* Image options shared by the commands that read images: --size HxW, --mean a,b,c,
 * --std a,b,c, --bgr, --layout nchw|nhwc, --scale S, --grey. Returns 1 when argv[*i]
 * was one of them (and *i advanced past its value), 0 when not, -1 on a bad value
 * (printed). */
int cli_image_option(const char *cmd, int argc, char **argv, int *i, oq_image_opts *o);
extern const char cli_image_options_help[];

typedef struct cli_samples {
    oq_calib_source *src;
    uint64_t count;
} cli_samples;

/* Open a source (errors printed; OQ_ERR_USAGE for bad paths or values). img
 * height/width 0: from the model input. require_dims: a symbolic dimension without
 * --dim is an error (run, verify) instead of 1 (calibration). */
oq_status cli_samples_open_dir(const char *cmd, cli_samples *s, const char *dir,
                               const cli_data_opts *o);
oq_status cli_samples_open_images(const char *cmd, cli_samples *s, const char *dir,
                                  const oq_image_opts *img, const cli_data_opts *o);
oq_status cli_samples_open_random(const char *cmd, cli_samples *s, uint64_t count,
                                  const cli_data_opts *o, bool require_dims);
/* Fill in[0 .. n_inputs(p)) with sample k (owned tensors; release them) and its name.
 * Errors go to d (one line naming the file and the problem); OQ_ERR_USAGE for bad data. */
oq_status cli_samples_load(cli_samples *s, uint64_t k, const oq_plan *p, oq_rt_tensor *in,
                           char *name, size_t name_size, oq_diag *d);
void cli_samples_free(cli_samples *s);
#endif
