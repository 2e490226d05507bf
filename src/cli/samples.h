/* Input data for the commands that run a model on samples (run, verify, quantize):
 * tensor files, sample folders, images and random data. src/cli/samples.c */
#ifndef ONNXQ_CLI_SAMPLES_H
#define ONNXQ_CLI_SAMPLES_H
#include <stdbool.h>
#include <stdint.h>

#include "onnxq/exec.h"
#include "onnxq/image.h"

/* NAME=VALUE command-line argument; name is malloc'ed (free it), value borrowed. */
typedef struct cli_kv {
    const char *name;
    const char *value;
} cli_kv;

bool cli_split_kv(const char *s, cli_kv *kv);

/* xorshift64* as used by --random. */
uint64_t cli_rng_next(uint64_t *s);
uint64_t cli_rng_seed(uint64_t seed);

/* Random data for plan input i: floats uniform in [0,1), ints in [0,10), bools 0/1.
 * Symbolic dims are taken from dims[] (NAME=N). Errors are printed as "onnxq CMD: ...". */
oq_status cli_random_input(const char *cmd, const oq_plan *p, size_t i, const cli_kv *dims,
                           size_t n_dims, uint64_t *rng, oq_rt_tensor *t);

typedef enum cli_sample_kind {
    CLI_SAMPLES_DIR = 0,    /* one folder per sample: <input name>.npy|.pb or input_N.pb */
    CLI_SAMPLES_IMAGES = 1, /* PNG / JPEG files, one per sample, single-input models */
    CLI_SAMPLES_RANDOM = 2
} cli_sample_kind;

typedef struct cli_samples {
    cli_sample_kind kind;
    char **paths;            /* sample folders or image files (sorted) */
    size_t n_paths;
    size_t count;            /* samples */
    oq_image_opts img;       /* CLI_SAMPLES_IMAGES; height/width 0: from the model */
    const cli_kv *dims;      /* CLI_SAMPLES_RANDOM */
    size_t n_dims;
    uint64_t rng;
} cli_samples;

/* Image options shared by the commands that read images: --size HxW, --mean a,b,c,
 * --std a,b,c, --bgr, --layout nchw|nhwc, --scale S, --grey. Returns 1 when argv[*i]
 * was one of them (and *i advanced past its value), 0 when not, -1 on a bad value
 * (printed). */
int cli_image_option(const char *cmd, int argc, char **argv, int *i, oq_image_opts *o);
extern const char cli_image_options_help[];

/* Open a source. dir: sub-folders of DIR in name order (DIR itself when it has none).
 * Errors are printed. */
oq_status cli_samples_open_dir(const char *cmd, cli_samples *s, const char *dir);
oq_status cli_samples_open_images(const char *cmd, cli_samples *s, const char *dir,
                                  const oq_image_opts *o);
void cli_samples_open_random(cli_samples *s, size_t count, uint64_t seed, const cli_kv *dims,
                             size_t n_dims);
/* Fill in[0 .. n_inputs(p)) for sample k (owned tensors; release them). Printed
 * errors name the file. */
oq_status cli_samples_load(const char *cmd, cli_samples *s, size_t k, const oq_plan *p,
                           oq_rt_tensor *in);
/* A short name for sample k (folder, image file, "random #k"). */
const char *cli_samples_name(const cli_samples *s, size_t k, char *buf, size_t size);
void cli_samples_free(cli_samples *s);
#endif
