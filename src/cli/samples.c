/* Input data for run / verify: tensor files, sample folders, images, random data. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/samples.h"
#include "onnxq/tensor_io.h"

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

uint64_t cli_rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

uint64_t cli_rng_seed(uint64_t seed)
{
    return seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL;
}

oq_status cli_random_input(const char *cmd, const oq_plan *p, size_t i, const cli_kv *kdims,
                           size_t n_dims, uint64_t *rng, oq_rt_tensor *t)
{
    size_t rank;
    int64_t dims[OQ_RT_MAX_RANK];
    bool has_shape;
    int32_t dt = oq_plan_input_info(p, i, &rank, dims, &has_shape);
    const char *name = oq_plan_input_name(p, i);
    if (!has_shape) {
        cli_error(cmd, "input \"%s\" has no declared shape; give it with --input", name);
        return OQ_ERR_USAGE;
    }
    for (size_t j = 0; j < rank; j++) {
        if (dims[j] >= 0)
            continue;
        const char *sym = oq_plan_input_dim_name(p, i, j);
        bool found = false;
        for (size_t k = 0; sym && k < n_dims; k++)
            if (strcmp(kdims[k].name, sym) == 0) {
                char *end;
                errno = 0;
                long long v = strtoll(kdims[k].value, &end, 10);
                if (errno || *end || v < 0) {
                    cli_error(cmd, "--dim %s: bad size \"%s\"", sym, kdims[k].value);
                    return OQ_ERR_USAGE;
                }
                dims[j] = v;
                found = true;
            }
        if (!found) {
            cli_error(cmd, "input \"%s\" dim %zu is symbolic (%s); give --dim %s=N", name, j,
                      sym ? sym : "unnamed", sym ? sym : "NAME");
            return OQ_ERR_USAGE;
        }
    }
    oq_status st = oq_rt_tensor_alloc(t, dt, dims, rank);
    if (st != OQ_OK) {
        cli_error(cmd, "input \"%s\": cannot allocate %s tensor", name, oq_dtype_name(dt));
        return st;
    }
    int64_t n = oq_rt_tensor_numel(t);
    for (int64_t k = 0; k < n; k++) {
        uint64_t r = cli_rng_next(rng);
        double u = (double)(r >> 11) / 9007199254740992.0;
        switch (dt) {
        case OQ_DTYPE_FLOAT: ((float *)t->data)[k] = (float)u; break;
        case OQ_DTYPE_DOUBLE: ((double *)t->data)[k] = u; break;
        case OQ_DTYPE_FLOAT16: ((uint16_t *)t->data)[k] = oq_float_to_half((float)u); break;
        case OQ_DTYPE_BOOL: ((uint8_t *)t->data)[k] = (uint8_t)(r >> 63); break;
        case OQ_DTYPE_INT8: case OQ_DTYPE_UINT8: ((uint8_t *)t->data)[k] = (uint8_t)(r % 10); break;
        case OQ_DTYPE_INT16: case OQ_DTYPE_UINT16: ((uint16_t *)t->data)[k] = (uint16_t)(r % 10); break;
        case OQ_DTYPE_INT32: case OQ_DTYPE_UINT32: ((uint32_t *)t->data)[k] = (uint32_t)(r % 10); break;
        case OQ_DTYPE_INT64: case OQ_DTYPE_UINT64: ((uint64_t *)t->data)[k] = r % 10; break;
        default:
            oq_rt_tensor_release(t);
            cli_error(cmd, "input \"%s\": no random data for %s", name, oq_dtype_name(dt));
            return OQ_ERR_UNSUPPORTED;
        }
    }
    return OQ_OK;
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

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

oq_status cli_samples_open_dir(const char *cmd, cli_samples *s, const char *dir)
{
    memset(s, 0, sizeof *s);
    s->kind = CLI_SAMPLES_DIR;
    DIR *dp = opendir(dir);
    if (!dp) {
        cli_error(cmd, "cannot open data folder %s: %s", dir, strerror(errno));
        return OQ_ERR_USAGE;
    }
    size_t cap = 0;
    struct dirent *e;
    oq_status st = OQ_OK;
    while ((e = readdir(dp)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char *p = join(dir, e->d_name);
        struct stat sb;
        if (!p) {
            st = OQ_ERR_NOMEM;
            break;
        }
        if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            free(p);
            continue;
        }
        if (s->n_paths == cap) {
            size_t nc = cap ? cap * 2 : 16;
            char **np = realloc(s->paths, nc * sizeof *np);
            if (!np) {
                free(p);
                st = OQ_ERR_NOMEM;
                break;
            }
            s->paths = np;
            cap = nc;
        }
        s->paths[s->n_paths++] = p;
    }
    closedir(dp);
    if (st != OQ_OK) {
        cli_error(cmd, "out of memory listing %s", dir);
        cli_samples_free(s);
        return st;
    }
    if (s->n_paths == 0) {
        s->paths = malloc(sizeof *s->paths);
        if (!s->paths || !(s->paths[0] = strdup(dir))) {
            cli_samples_free(s);
            return OQ_ERR_NOMEM;
        }
        s->n_paths = 1;
    }
    qsort(s->paths, s->n_paths, sizeof *s->paths, cmp_str);
    s->count = s->n_paths;
    return OQ_OK;
}

oq_status cli_samples_open_images(const char *cmd, cli_samples *s, const char *dir,
                                  const oq_image_opts *o)
{
    memset(s, 0, sizeof *s);
    s->kind = CLI_SAMPLES_IMAGES;
    s->img = *o;
    oq_diag d;
    oq_diag_init(&d);
    oq_status st = oq_image_dir_list(dir, &s->paths, &s->n_paths, &d);
    if (st != OQ_OK) {
        cli_print_diag(&d);
        (void)cmd;
    }
    oq_diag_free(&d);
    s->count = s->n_paths;
    return st == OQ_ERR_IO ? OQ_ERR_USAGE : st;
}

void cli_samples_open_random(cli_samples *s, size_t count, uint64_t seed, const cli_kv *dims,
                             size_t n_dims)
{
    memset(s, 0, sizeof *s);
    s->kind = CLI_SAMPLES_RANDOM;
    s->count = count;
    s->dims = dims;
    s->n_dims = n_dims;
    s->rng = cli_rng_seed(seed);
}

static bool file_exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static oq_status load_dir_sample(const char *cmd, const char *dir, const oq_plan *p,
                                 oq_rt_tensor *in)
{
    size_t n = oq_plan_n_inputs(p);
    oq_diag d;
    oq_diag_init(&d);
    oq_status st = OQ_OK;
    for (size_t i = 0; i < n && st == OQ_OK; i++) {
        const char *name = oq_plan_input_name(p, i);
        char fn[512], path[4096];
        size_t j = 0;
        for (size_t c = 0; name[c] && j + 1 < sizeof fn; c++)
            fn[j++] = (name[c] == '/' || name[c] == '\\') ? '_' : name[c];
        fn[j] = 0;
        static const char *const fmts[] = {"%s/%s.npy", "%s/%s.pb"};
        bool found = false;
        for (size_t f = 0; f < 2 && !found; f++) {
            snprintf(path, sizeof path, fmts[f], dir, fn);
            found = file_exists(path);
        }
        if (!found) {
            snprintf(path, sizeof path, "%s/input_%zu.pb", dir, i);
            found = file_exists(path);
        }
        if (!found) {
            cli_error(cmd, "%s: no data for input \"%s\" (%s.npy, %s.pb or input_%zu.pb)", dir,
                      name, fn, fn, i);
            st = OQ_ERR_USAGE;
            break;
        }
        st = oq_tensor_file_read(path, &in[i], NULL, &d);
        if (st != OQ_OK) {
            cli_print_diag(&d);
            st = OQ_ERR_USAGE;
        }
    }
    oq_diag_free(&d);
    return st;
}

static oq_status load_image_sample(const char *cmd, cli_samples *s, const char *path,
                                   const oq_plan *p, oq_rt_tensor *in)
{
    if (oq_plan_n_inputs(p) != 1) {
        cli_error(cmd, "images need a model with one input; this one has %zu",
                  oq_plan_n_inputs(p));
        return OQ_ERR_USAGE;
    }
    oq_image_opts o = s->img;
    size_t rank;
    int64_t dims[OQ_RT_MAX_RANK];
    bool has_shape;
    int32_t dt = oq_plan_input_info(p, 0, &rank, dims, &has_shape);
    if (dt != OQ_DTYPE_FLOAT) {
        cli_error(cmd, "input \"%s\" is %s; images give float32", oq_plan_input_name(p, 0),
                  oq_dtype_name(dt));
        return OQ_ERR_USAGE;
    }
    if (o.height <= 0 || o.width <= 0) {
        int hi = o.layout == OQ_LAYOUT_NCHW ? 2 : 1;
        if (!has_shape || rank != 4 || dims[hi] <= 0 || dims[hi + 1] <= 0) {
            cli_error(cmd, "input \"%s\" has no fixed height and width; give --size HxW",
                      oq_plan_input_name(p, 0));
            return OQ_ERR_USAGE;
        }
        o.height = dims[hi];
        o.width = dims[hi + 1];
    }
    int64_t td[4] = {1, o.channels, o.height, o.width};
    if (o.layout == OQ_LAYOUT_NHWC) {
        td[1] = o.height;
        td[2] = o.width;
        td[3] = o.channels;
    }
    oq_status st = oq_rt_tensor_alloc(in, OQ_DTYPE_FLOAT, td, 4);
    if (st != OQ_OK) {
        cli_error(cmd, "out of memory for image %s", path);
        return st;
    }
    oq_diag d;
    oq_diag_init(&d);
    st = oq_image_load(path, &o, in->data, &d);
    if (st != OQ_OK) {
        cli_print_diag(&d);
        oq_rt_tensor_release(in);
        st = OQ_ERR_USAGE;
    }
    oq_diag_free(&d);
    return st;
}

oq_status cli_samples_load(const char *cmd, cli_samples *s, size_t k, const oq_plan *p,
                           oq_rt_tensor *in)
{
    size_t n = oq_plan_n_inputs(p);
    oq_status st = OQ_OK;
    memset(in, 0, n * sizeof *in);
    switch (s->kind) {
    case CLI_SAMPLES_DIR: st = load_dir_sample(cmd, s->paths[k], p, in); break;
    case CLI_SAMPLES_IMAGES: st = load_image_sample(cmd, s, s->paths[k], p, in); break;
    case CLI_SAMPLES_RANDOM:
        for (size_t i = 0; i < n && st == OQ_OK; i++)
            st = cli_random_input(cmd, p, i, s->dims, s->n_dims, &s->rng, &in[i]);
        break;
    }
    if (st != OQ_OK)
        for (size_t i = 0; i < n; i++)
            oq_rt_tensor_release(&in[i]);
    return st;
}

const char *cli_samples_name(const cli_samples *s, size_t k, char *buf, size_t size)
{
    if (s->kind == CLI_SAMPLES_RANDOM || k >= s->n_paths)
        snprintf(buf, size, "random #%zu", k);
    else
        snprintf(buf, size, "%s", s->paths[k]);
    return buf;
}

void cli_samples_free(cli_samples *s)
{
    if (s->kind == CLI_SAMPLES_IMAGES && s->paths) {
        oq_image_dir_free(s->paths, s->n_paths);
    } else {
        for (size_t i = 0; i < s->n_paths; i++)
            free(s->paths[i]);
        free(s->paths);
    }
    s->paths = NULL;
    s->n_paths = 0;
}
