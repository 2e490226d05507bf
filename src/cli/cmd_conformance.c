/* onnxq conformance DIR...: run ONNX backend test cases (model.onnx +
 * test_data_set_N/{input,output}_M.pb) and compare as the ONNX runner does. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/report.h"
#include "onnxq/calib.h"
#include "onnxq/exec.h"
#include "onnxq/tensor_io.h"

typedef struct conf_opts {
    int threads;
    bool quiet;          /* print only failures and the summary */
    double rtol, atol;
} conf_opts;

typedef struct conf_count {
    size_t pass, fail, unsupported;
    uint64_t total;           /* cases found (for progress) */
    bool text;                /* one line per case on stdout (not with --json -) */
    bool progress;
    oq_calib_progress_state ps;
    json_writer *json;        /* --json: the "cases" array */
} conf_count;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted entries of dir (names only) that start with prefix. */
static char **list_dir(const char *dir, const char *prefix, size_t *count)
{
    DIR *dh = opendir(dir);
    *count = 0;
    if (!dh)
        return NULL;
    size_t cap = 16, n = 0;
    char **v = malloc(cap * sizeof(char *));
    struct dirent *e;
    while (v && (e = readdir(dh))) {
        if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        if (n == cap) {
            char **nv = realloc(v, (cap *= 2) * sizeof(char *));
            if (!nv)
                break;
            v = nv;
        }
        v[n++] = strdup(e->d_name);
    }
    closedir(dh);
    if (v)
        qsort(v, n, sizeof(char *), cmp_str);
    *count = n;
    return v;
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* out = a "/" b; false when it does not fit */
static bool join(char *out, size_t size, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la + lb + 2 > size) {
        out[0] = 0; /* too long: an empty path, which then fails to open */
        return false;
    }
    memcpy(out, a, la);
    out[la] = '/';
    memcpy(out + la + 1, b, lb + 1);
    return true;
}

static bool is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static bool is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* input_0.pb < input_1.pb < ... < input_10.pb: sort by the number */
static int cmp_numbered(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    const char *ux = strchr(x, '_'), *uy = strchr(y, '_');
    long nx = ux ? strtol(ux + 1, NULL, 10) : 0, ny = uy ? strtol(uy + 1, NULL, 10) : 0;
    return nx < ny ? -1 : nx > ny;
}

static bool first_diag(const oq_diag *d, char *buf, size_t size)
{
    const oq_diag_entry *e = oq_diag_first_error(d);
    if (!e)
        return false;
    oq_diag_format(e, buf, size);
    return true;
}

/* Compare; on mismatch write a description into why. */
static bool compare(const oq_rt_tensor *got, const oq_rt_tensor *exp, const conf_opts *o,
                    char *why, size_t size)
{
    char a[128], b[128];
    bool same_shape = got->rank == exp->rank;
    for (size_t i = 0; same_shape && i < got->rank; i++)
        same_shape = got->dims[i] == exp->dims[i];
    if (got->dtype != exp->dtype || !same_shape) {
        snprintf(why, size, "got %s, expected %s", oq_rt_tensor_describe(got, a, sizeof a),
                 oq_rt_tensor_describe(exp, b, sizeof b));
        return false;
    }
    int64_t n = oq_rt_tensor_numel(got);
    if (!oq_dtype_is_float(got->dtype)) {
        if (got->nbytes && memcmp(got->data, exp->data, (size_t)got->nbytes) != 0) {
            size_t es = (size_t)oq_dtype_bits(got->dtype) / 8;
            for (int64_t i = 0; es && i < n; i++)
                if (memcmp((char *)got->data + i * (int64_t)es, (char *)exp->data + i * (int64_t)es,
                           es) != 0) {
                    long long gv = 0, ev = 0;
                    memcpy(&gv, (char *)got->data + i * (int64_t)es, es < 8 ? es : 8);
                    memcpy(&ev, (char *)exp->data + i * (int64_t)es, es < 8 ? es : 8);
                    snprintf(why, size, "element %lld: got %lld, expected %lld (exact)",
                             (long long)i, gv, ev);
                    return false;
                }
            snprintf(why, size, "data differs");
            return false;
        }
        return true;
    }
    int64_t worst = -1;
    double worst_excess = 0, wg = 0, we = 0;
    for (int64_t i = 0; i < n; i++) {
        double g, e;
        switch (got->dtype) {
        case OQ_DTYPE_FLOAT: g = ((float *)got->data)[i]; e = ((float *)exp->data)[i]; break;
        case OQ_DTYPE_DOUBLE: g = ((double *)got->data)[i]; e = ((double *)exp->data)[i]; break;
        case OQ_DTYPE_FLOAT16:
            g = oq_half_to_float(((uint16_t *)got->data)[i]);
            e = oq_half_to_float(((uint16_t *)exp->data)[i]);
            break;
        case OQ_DTYPE_BFLOAT16:
            g = oq_bfloat16_to_float(((uint16_t *)got->data)[i]);
            e = oq_bfloat16_to_float(((uint16_t *)exp->data)[i]);
            break;
        default:
            if (memcmp((char *)got->data, (char *)exp->data, (size_t)got->nbytes) != 0) {
                snprintf(why, size, "data differs");
                return false;
            }
            return true;
        }
        double excess;
        if (isnan(e) || isnan(g))
            excess = (isnan(e) && isnan(g)) ? 0 : INFINITY;
        else if (isinf(e) || isinf(g))
            excess = g == e ? 0 : INFINITY;
        else
            excess = fabs(g - e) - (o->atol + o->rtol * fabs(e));
        if (excess > 0 && (worst < 0 || excess > worst_excess)) {
            worst = i;
            worst_excess = excess;
            wg = g;
            we = e;
        }
    }
    if (worst >= 0) {
        snprintf(why, size, "worst element %lld: got %.9g, expected %.9g (|diff| %.3g)",
                 (long long)worst, wg, we, fabs(wg - we));
        return false;
    }
    return true;
}

typedef enum { R_PASS, R_FAIL, R_UNSUP } result;

static result run_case(const char *dir, const conf_opts *o, char *why, size_t size)
{
    char path[4096];
    oq_diag d;
    oq_diag_init(&d);
    oq_model *m = NULL;
    oq_plan *plan = NULL;
    result r = R_FAIL;
    char **sets = NULL;
    size_t n_sets = 0;
    join(path, sizeof path, dir, "model.onnx");
    oq_status st = oq_model_read(path, NULL, &m, &d);
    if (st != OQ_OK) {
        if (!first_diag(&d, why, size))
            snprintf(why, size, "cannot load: %s", oq_status_name(st));
        r = st == OQ_ERR_UNSUPPORTED ? R_UNSUP : R_FAIL;
        goto done;
    }
    oq_plan_options po = oq_plan_options_default();
    po.threads = o->threads;
    st = oq_plan_compile(m, &po, &plan, &d);
    if (st != OQ_OK) {
        if (!first_diag(&d, why, size))
            snprintf(why, size, "compile: %s", oq_status_name(st));
        r = st == OQ_ERR_UNSUPPORTED ? R_UNSUP : R_FAIL;
        goto done;
    }
    sets = list_dir(dir, "test_data_set_", &n_sets);
    if (!n_sets) {
        snprintf(why, size, "no test_data_set_* folder");
        goto done;
    }
    r = R_PASS;
    for (size_t s = 0; s < n_sets && r == R_PASS; s++) {
        char sd[4096];
        join(sd, sizeof sd, dir, sets[s]);
        size_t n_in = 0, n_out = 0;
        char **ins = list_dir(sd, "input_", &n_in);
        char **outs = list_dir(sd, "output_", &n_out);
        if (ins)
            qsort(ins, n_in, sizeof(char *), cmp_numbered);
        if (outs)
            qsort(outs, n_out, sizeof(char *), cmp_numbered);
        oq_rt_tensor *in = calloc(n_in + 1, sizeof(oq_rt_tensor));
        oq_rt_tensor *exp = calloc(n_out + 1, sizeof(oq_rt_tensor));
        oq_rt_tensor *got = calloc(n_out + 1, sizeof(oq_rt_tensor));
        if (!in || !exp || !got) {
            snprintf(why, size, "out of memory");
            r = R_FAIL;
        }
        for (size_t i = 0; r == R_PASS && i < n_in; i++) {
            join(path, sizeof path, sd, ins[i]);
            if (oq_tensor_file_read(path, &in[i], NULL, &d) != OQ_OK) {
                if (!first_diag(&d, why, size))
                    snprintf(why, size, "cannot read %.900s", path);
                r = R_UNSUP;
            }
        }
        for (size_t i = 0; r == R_PASS && i < n_out; i++) {
            join(path, sizeof path, sd, outs[i]);
            if (oq_tensor_file_read(path, &exp[i], NULL, &d) != OQ_OK) {
                if (!first_diag(&d, why, size))
                    snprintf(why, size, "cannot read %.900s", path);
                r = R_UNSUP;
            }
        }
        /* NumPy has no bfloat16: the ONNX test data stores bfloat16 tensors as uint16
           bit patterns. Reinterpret them when the model wants bfloat16. */
        for (size_t i = 0; r == R_PASS && i < n_in && i < oq_plan_n_inputs(plan); i++)
            if (in[i].dtype == OQ_DTYPE_UINT16 &&
                oq_plan_input_info(plan, i, NULL, NULL, NULL) == OQ_DTYPE_BFLOAT16)
                in[i].dtype = OQ_DTYPE_BFLOAT16;
        if (r == R_PASS && n_out > oq_plan_n_outputs(plan)) {
            snprintf(why, size, "%zu expected outputs, the model has %zu", n_out,
                     oq_plan_n_outputs(plan));
            r = R_FAIL;
        }
        if (r == R_PASS) {
            st = oq_plan_run(plan, in, n_in, got, n_out, &d);
            if (st != OQ_OK) {
                if (!first_diag(&d, why, size))
                    snprintf(why, size, "run: %s", oq_status_name(st));
                r = st == OQ_ERR_UNSUPPORTED ? R_UNSUP : R_FAIL;
            }
        }
        for (size_t i = 0; r == R_PASS && i < n_out; i++) {
            char w[512];
            if (exp[i].dtype == OQ_DTYPE_UINT16 && got[i].dtype == OQ_DTYPE_BFLOAT16)
                exp[i].dtype = OQ_DTYPE_BFLOAT16;
            if (!compare(&got[i], &exp[i], o, w, sizeof w)) {
                snprintf(why, size, "%s output %zu \"%s\": %s", sets[s], i,
                         oq_plan_output_name(plan, i), w);
                r = R_FAIL;
            }
        }
        for (size_t i = 0; i < n_in; i++)
            oq_rt_tensor_release(&in[i]);
        for (size_t i = 0; i < n_out; i++) {
            oq_rt_tensor_release(&exp[i]);
            oq_rt_tensor_release(&got[i]);
        }
        free(in);
        free(exp);
        free(got);
        free_list(ins, n_in);
        free_list(outs, n_out);
    }
done:
    free_list(sets, n_sets);
    oq_plan_free(plan);
    oq_model_free(m);
    oq_diag_free(&d);
    return r;
}

/* cases under dir (folders holding model.onnx), counted before running for progress */
static uint64_t count_cases(const char *dir, int depth)
{
    char path[4096];
    join(path, sizeof path, dir, "model.onnx");
    if (is_file(path))
        return 1;
    if (depth > 32)
        return 0;
    uint64_t n = 0;
    size_t ns = 0;
    char **subs = list_dir(dir, "", &ns);
    for (size_t i = 0; i < ns; i++) {
        join(path, sizeof path, dir, subs[i]);
        if (is_dir(path))
            n += count_cases(path, depth + 1);
    }
    free_list(subs, ns);
    return n;
}

static void visit(const char *dir, const conf_opts *o, conf_count *c)
{
    char path[4096];
    join(path, sizeof path, dir, "model.onnx");
    if (is_file(path)) {
        char why[1024] = "";
        result r = run_case(dir, o, why, sizeof why);
        /* name: parent/case */
        const char *slash = strrchr(dir, '/');
        const char *name = dir;
        if (slash) {
            const char *p = slash;
            while (p > dir && p[-1] != '/')
                p--;
            name = p;
        }
        bool show = c->text && (r == R_FAIL || !o->quiet);
        if (show && c->progress)
            oq_calib_progress_clear(&c->ps);
        if (r == R_PASS) {
            c->pass++;
            if (show)
                printf("pass        %s\n", name);
        } else if (r == R_FAIL) {
            c->fail++;
            if (show)
                printf("fail        %s: %s\n", name, why);
        } else {
            c->unsupported++;
            if (show)
                printf("unsupported %s: %s\n", name, why);
        }
        fflush(stdout);
        if (c->json) {
            json_begin_object(c->json);
            json_kv_string(c->json, "name", name);
            json_kv_string(c->json, "result", r == R_PASS ? "pass" : r == R_FAIL ? "fail" : "unsupported");
            json_kv_string(c->json, "reason", r == R_PASS ? NULL : why);
            json_end_object(c->json);
        }
        if (c->progress)
            oq_calib_progress_stderr(c->pass + c->fail + c->unsupported, c->total, name, &c->ps);
        return;
    }
    size_t n = 0;
    char **subs = list_dir(dir, "", &n);
    for (size_t i = 0; i < n; i++) {
        join(path, sizeof path, dir, subs[i]);
        if (is_dir(path))
            visit(path, o, c);
    }
    free_list(subs, n);
}

int cmd_conformance(int argc, char **argv)
{
    conf_opts o = {1, false, 1e-3, 1e-7};
    int first = 0;
    const char *json = NULL;
    bool no_progress = false;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            printf("usage: onnxq conformance [--threads N] [--quiet] [--no-progress] [--json FILE|-] DIR...\n\n"
                   "Run every ONNX backend test case under DIR (folders holding model.onnx and\n"
                   "test_data_set_*/input_*.pb, output_*.pb). Prints one line per case:\n"
                   "pass, fail (with the worst element) or unsupported (with the reason), then\n"
                   "\"N passed, N failed, N unsupported\". Floats: |got-expected| <= 1e-7 +\n"
                   "1e-3*|expected|; integers and bools exact; shapes and dtypes exact.\n"
                   "Progress (cases done, rate, time left) goes to stderr unless --no-progress.\n"
                   "--json FILE: every case and the counts as JSON ('-': standard output,\n"
                   "instead of the lines); docs/conformance.md.\n"
                   "Exit code 0 when nothing failed, 1 otherwise, 2 bad usage.\n");
            return CLI_OK;
        }
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            o.threads = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--quiet") == 0) {
            o.quiet = true;
            cli_set_verbosity(CLI_QUIET);
        } else if (strcmp(argv[i], "--no-progress") == 0) {
            no_progress = true;
        } else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
            json = argv[++i];
        } else if (argv[i][0] == '-') {
            cli_error("conformance", "unknown option %s", argv[i]);
            return CLI_BAD;
        } else if (!first) {
            first = i;
        }
    }
    if (!first) {
        cli_error("conformance", "no test folder given (try --help)");
        return CLI_BAD;
    }
    if (json && cli_check_output("conformance", "--json", json, true, NULL, 0) != CLI_OK)
        return CLI_BAD;
    /* the folders (options and their values skipped), counted first for the progress */
    const char **dirs = calloc((size_t)argc, sizeof *dirs);
    size_t n_dirs = 0;
    if (!dirs)
        return CLI_FAIL;
    conf_count c;
    memset(&c, 0, sizeof c);
    for (int i = first; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 || strcmp(argv[i], "--json") == 0) {
            i++;
            continue;
        }
        if (argv[i][0] == '-')
            continue;
        if (!is_dir(argv[i])) {
            cli_error("conformance", "%s is not a folder", argv[i]);
            free(dirs);
            return CLI_BAD;
        }
        dirs[n_dirs++] = argv[i];
        c.total += count_cases(argv[i], 0);
    }
    c.text = !cli_is_stdout(json);
    c.ps.what = "conformance";
    c.progress = !no_progress;
    cli_report rep;
    if (json) {
        if (cli_report_open(&rep, "conformance", json, 1) != CLI_OK) {
            free(dirs);
            return CLI_FAIL;
        }
        json_kv_double(&rep.w, "rtol", o.rtol);
        json_kv_double(&rep.w, "atol", o.atol);
        json_key(&rep.w, "cases");
        json_begin_array(&rep.w);
        c.json = &rep.w;
    }
    if (c.progress)
        oq_calib_progress_stderr(0, c.total, "", &c.ps);
    for (size_t k = 0; k < n_dirs; k++)
        visit(dirs[k], &o, &c);
    free(dirs);
    if (c.text)
        printf("%zu passed, %zu failed, %zu unsupported\n", c.pass, c.fail, c.unsupported);
    if (json) {
        json_end_array(&rep.w);
        json_key(&rep.w, "passed");
        json_uint(&rep.w, c.pass);
        json_key(&rep.w, "failed");
        json_uint(&rep.w, c.fail);
        json_key(&rep.w, "unsupported");
        json_uint(&rep.w, c.unsupported);
        if (cli_report_close(&rep) != CLI_OK)
            return CLI_FAIL;
    }
    return c.fail ? CLI_FAIL : CLI_OK;
}
