/* Sample data for run, verify and quantize: the shared options (image, generated data)
 * and the CLI side of the library's sample sources (oq_calib_source). docs/data.md */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/samples.h"

bool cli_split_kv(const char *s, cli_kv *kv)
{
    const char *eq = strchr(s, '=');
    if (!eq || eq == s)
        return false;
    size_t n = (size_t)(eq - s);
    char *name = malloc(n + 1);
    if (!name)
        return false;
    memcpy(name, s, n);
    name[n] = 0;
    kv->name = name;
    kv->value = eq + 1;
    return true;
}

/* ------------------------------------------------------------ data options -- */

const char cli_data_options_help[] =
    "  --dim NAME=N       size of the symbolic dimension NAME for generated data\n"
    "  --input-value NAME=V  fill input NAME with V instead of random data (e.g. sr=16000)\n"
    "  --seed S           seed for random data (default 1)\n";

void cli_data_opts_init(cli_data_opts *o)
{
    memset(o, 0, sizeof *o);
    o->seed = 1;
}

void cli_data_opts_free(cli_data_opts *o)
{
    for (size_t k = 0; k < o->n_dims; k++)
        free((char *)o->dims[k].name);
    for (size_t k = 0; k < o->n_values; k++)
        free((char *)o->values[k].name);
    o->n_dims = o->n_values = 0;
}

int cli_data_option(const char *cmd, int argc, char **argv, int *i, cli_data_opts *o)
{
    const char *a = argv[*i];
    bool dim = strcmp(a, "--dim") == 0, val = strcmp(a, "--input-value") == 0;
    bool seed = strcmp(a, "--seed") == 0;
    if (!dim && !val && !seed)
        return 0;
    if (*i + 1 >= argc) {
        cli_error(cmd, "%s wants a value", a);
        return -1;
    }
    const char *v = argv[++*i];
    char *end;
    errno = 0;
    if (seed) {
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || *end || end == v || v[0] == '-') {
            cli_error(cmd, "--seed wants a non-negative integer, got \"%s\"", v);
            return -1;
        }
        o->seed = x;
        return 1;
    }
    cli_kv *kv = dim ? &o->dims[o->n_dims] : &o->values[o->n_values];
    size_t *n = dim ? &o->n_dims : &o->n_values;
    if (*n == CLI_MAX_KV || !cli_split_kv(v, kv)) {
        cli_error(cmd, "%s wants NAME=%s, got \"%s\"", a, dim ? "N" : "VALUE", v);
        return -1;
    }
    (*n)++;
    errno = 0;
    if (dim) {
        long long x = strtoll(kv->value, &end, 10);
        if (errno || *end || end == kv->value || x < 0) {
            cli_error(cmd, "--dim %s: bad size \"%s\"", kv->name, kv->value);
            return -1;
        }
    } else {
        (void)strtod(kv->value, &end);
        if (errno || *end || end == kv->value) {
            cli_error(cmd, "--input-value %s: \"%s\" is not a number", kv->name, kv->value);
            return -1;
        }
    }
    return 1;
}

oq_status cli_data_apply(const cli_data_opts *o, oq_calib_source *src, oq_diag *d)
{
    oq_status st = OQ_OK;
    for (size_t k = 0; k < o->n_dims && st == OQ_OK; k++)
        st = oq_calib_source_set_dim(src, o->dims[k].name, strtoll(o->dims[k].value, NULL, 10), d);
    for (size_t k = 0; k < o->n_values && st == OQ_OK; k++)
        st = oq_calib_source_set_value(src, o->values[k].name, strtod(o->values[k].value, NULL), d);
    return st;
}

char *cli_kv_join(const cli_kv *kv, size_t n)
{
    size_t len = 1;
    for (size_t k = 0; k < n; k++)
        len += strlen(kv[k].name) + strlen(kv[k].value) + 2;
    char *s = malloc(len), *p = s;
    if (!s)
        return NULL;
    *p = 0;
    for (size_t k = 0; k < n; k++)
        p += sprintf(p, "%s%s=%s", k ? "," : "", kv[k].name, kv[k].value);
    return s;
}

/* ------------------------------------------------------------ image options -- */

const char cli_image_options_help[] =
    "  --size HxW         image tensor size (default: the model input's fixed H, W)\n"
    "  --mean a,b,c       per-channel mean subtracted after dividing by --scale\n"
    "  --std a,b,c        per-channel std divided by (default 1,1,1)\n"
    "  --scale S          pixels are divided by S first (default 255)\n"
    "  --bgr              channel order B,G,R    --grey  one channel\n"
    "  --layout L         nchw (default) or nhwc\n";

int cli_image_option(const char *cmd, int argc, char **argv, int *i, oq_image_opts *o)
{
    const char *a = argv[*i];
    const char *next = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (strcmp(a, "--bgr") == 0) {
        o->bgr = true;
        return 1;
    }
    if (strcmp(a, "--grey") == 0 || strcmp(a, "--gray") == 0) {
        o->channels = 1;
        return 1;
    }
    bool takes = strcmp(a, "--size") == 0 || strcmp(a, "--mean") == 0 ||
                 strcmp(a, "--std") == 0 || strcmp(a, "--scale") == 0 ||
                 strcmp(a, "--layout") == 0;
    if (!takes)
        return 0;
    if (!next) {
        cli_error(cmd, "%s wants a value", a);
        return -1;
    }
    (*i)++;
    if (strcmp(a, "--size") == 0) {
        long long h, w;
        char x, extra;
        if (sscanf(next, "%lld%c%lld%c", &h, &x, &w, &extra) != 3 || (x != 'x' && x != 'X') ||
            h <= 0 || w <= 0 || h > 65536 || w > 65536) {
            cli_error(cmd, "--size wants HxW (e.g. 224x224), got \"%s\"", next);
            return -1;
        }
        o->height = h;
        o->width = w;
    } else if (strcmp(a, "--mean") == 0 || strcmp(a, "--std") == 0) {
        float *dst = a[2] == 'm' ? o->mean : o->std;
        if (!oq_image_parse_triple(next, dst)) {
            cli_error(cmd, "%s wants three numbers a,b,c, got \"%s\"", a, next);
            return -1;
        }
        if (a[2] == 's' && (dst[0] == 0 || dst[1] == 0 || dst[2] == 0)) {
            cli_error(cmd, "--std must not contain 0");
            return -1;
        }
    } else if (strcmp(a, "--scale") == 0) {
        char *end;
        double v = strtod(next, &end);
        if (*end || !(v > 0)) {
            cli_error(cmd, "--scale wants a positive number, got \"%s\"", next);
            return -1;
        }
        o->scale = (float)v;
    } else {
        if (strcmp(next, "nchw") == 0)
            o->layout = OQ_LAYOUT_NCHW;
        else if (strcmp(next, "nhwc") == 0)
            o->layout = OQ_LAYOUT_NHWC;
        else {
            cli_error(cmd, "--layout wants nchw or nhwc, got \"%s\"", next);
            return -1;
        }
    }
    return 1;
}

/* ------------------------------------------------------------ sources ------- */

/* print d (the source's errors) and map a missing path to bad input */
static oq_status opened(cli_samples *s, oq_status st, oq_diag *d)
{
    if (st == OQ_OK)
        s->count = oq_calib_source_count(s->src);
    cli_print_diag(d);
    oq_diag_free(d);
    if (st != OQ_OK) {
        cli_samples_free(s);
        return st == OQ_ERR_NOMEM ? st : OQ_ERR_USAGE;
    }
    return OQ_OK;
}

oq_status cli_samples_open_dir(const char *cmd, cli_samples *s, const char *dir,
                               const cli_data_opts *o)
{
    (void)cmd;
    memset(s, 0, sizeof *s);
    oq_diag d;
    oq_diag_init(&d);
    oq_status st = oq_calib_source_dir(dir, &s->src, &d);
    if (st == OQ_OK)
        st = cli_data_apply(o, s->src, &d);
    return opened(s, st, &d);
}

oq_status cli_samples_open_images(const char *cmd, cli_samples *s, const char *dir,
                                  const oq_image_opts *img, const cli_data_opts *o)
{
    (void)cmd;
    memset(s, 0, sizeof *s);
    oq_diag d;
    oq_diag_init(&d);
    oq_status st = oq_calib_source_images(dir, img, &s->src, &d);
    if (st == OQ_OK)
        st = cli_data_apply(o, s->src, &d);
    return opened(s, st, &d);
}

oq_status cli_samples_open_random(const char *cmd, cli_samples *s, uint64_t count,
                                  const cli_data_opts *o, bool require_dims)
{
    (void)cmd;
    memset(s, 0, sizeof *s);
    oq_diag d;
    oq_diag_init(&d);
    oq_status st = oq_calib_source_random(count, o->seed, 0, 0, &s->src, &d);
    if (st == OQ_OK) {
        oq_calib_source_require_dims(s->src, require_dims);
        st = cli_data_apply(o, s->src, &d);
    }
    return opened(s, st, &d);
}

oq_status cli_samples_load(cli_samples *s, uint64_t k, const oq_plan *p, oq_rt_tensor *in,
                           char *name, size_t name_size, oq_diag *d)
{
    size_t n = oq_plan_n_inputs(p);
    memset(in, 0, n * sizeof *in);
    size_t before = d->count;
    oq_status st = oq_calib_source_sample(s->src, p, k, in, n, name, name_size, d);
    if (st != OQ_OK) {
        for (size_t i = 0; i < n; i++)
            oq_rt_tensor_release(&in[i]);
        if (d->count == before)
            oq_diag_error(d, st, "sample %s: %s", name, oq_status_name(st));
    }
    return st == OQ_OK || st == OQ_ERR_NOMEM ? st : OQ_ERR_USAGE;
}

void cli_samples_free(cli_samples *s)
{
    oq_calib_source_free(s->src);
    s->src = NULL;
    s->count = 0;
}
