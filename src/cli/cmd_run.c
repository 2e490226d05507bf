/* onnxq run MODEL --input NAME=FILE ... : run a model with the executor (reference
 * arithmetic, or a deployment target's integer arithmetic with --target). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/report.h"
#include "cli/samples.h"
#include "onnxq/exec.h"
#include "onnxq/target.h"
#include "onnxq/tensor_io.h"

#define MAX_ARGS 256

typedef cli_kv kv_arg;

typedef struct run_opts {
    const char *model;
    kv_arg inputs[MAX_ARGS];
    size_t n_inputs;
    cli_data_opts data;
    const char *out_dir;
    const char *dump_dir;
    const char *json;
    bool npy, random, check_finite;
    int time_runs;
    bool profile;
    int threads;
    const char *target;
} run_opts;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: onnxq run MODEL [--input NAME=FILE]... [--output-dir DIR] [--npy]\n"
            "                 [--random [--seed S] [--dim NAME=N]... [--input-value NAME=V]...]\n"
            "                 [--time N [--profile]] [--threads N] [--target T]\n"
            "                 [--check-finite] [--dump-all DIR] [--json FILE|-]\n\n"
            "Run MODEL with the onnxq reference executor and print each output's shape,\n"
            "dtype, min, max and mean.\n\n"
            "  --input NAME=FILE  input tensor: ONNX TensorProto (.pb) or NumPy (.npy)\n"
            "  --output-dir DIR   write every output as DIR/<name>.pb (and .npy with --npy)\n"
            "  --random           random data for inputs not given with --input\n"
            "                     (floats uniform in [0,1), ints in [0,10), bools 0/1;\n"
            "                     docs/data.md)\n"
            "%s"
            "  --time N           run N times and print the median latency\n"
            "  --profile          with --time: the time spent per operator type over the runs\n"
            "  --threads N        worker threads (default: one per CPU)\n"
            "  --check-finite     stop at the first node producing NaN or Inf\n"
            "  --dump-all DIR     write every intermediate tensor as DIR/<name>.pb\n"
            "  --json FILE        outputs (shape, dtype, min, max, mean), time and memory as\n"
            "                     JSON ('-': standard output, instead of the text); docs/run.md\n"
            "  --target T         arithmetic of quantized (QDQ) groups: reference (default, the\n"
            "                     ONNX spec), avx2 / ort-x86 (onnxruntime on AVX2 without VNNI),\n"
            "                     ort-x86-vnni (exact integer), host (from this CPU); see\n"
            "                     docs/run.md\n",
            cli_data_options_help);
}

static int parse(int argc, char **argv, run_opts *o)
{
    memset(o, 0, sizeof *o);
    cli_data_opts_init(&o->data);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_next = i + 1 < argc;
        int r = cli_data_option("run", argc, argv, &i, &o->data);
        if (r < 0)
            return CLI_BAD;
        if (r > 0)
            continue;
        if (cli_is_help(a)) {
            usage(stdout);
            return -1;
        } else if (strcmp(a, "--input") == 0 && has_next) {
            if (o->n_inputs == MAX_ARGS || !cli_split_kv(argv[++i], &o->inputs[o->n_inputs++])) {
                cli_error("run", "--input wants NAME=FILE, got \"%s\"", argv[i]);
                return CLI_BAD;
            }
        } else if (strcmp(a, "--output-dir") == 0 && has_next) {
            o->out_dir = argv[++i];
        } else if (strcmp(a, "--json") == 0 && has_next) {
            o->json = argv[++i];
        } else if (strcmp(a, "--dump-all") == 0 && has_next) {
            o->dump_dir = argv[++i];
        } else if (strcmp(a, "--npy") == 0) {
            o->npy = true;
        } else if (strcmp(a, "--random") == 0) {
            o->random = true;
        } else if (strcmp(a, "--profile") == 0) {
            o->profile = true;
        } else if (strcmp(a, "--check-finite") == 0) {
            o->check_finite = true;
        } else if (strcmp(a, "--time") == 0 && has_next) {
            if (!cli_positive_count("run", a, argv[++i], &o->time_runs))
                return CLI_BAD;
        } else if (strcmp(a, "--target") == 0 && has_next) {
            o->target = argv[++i];
        } else if (strcmp(a, "--threads") == 0 && has_next) {
            if (!cli_positive_count("run", a, argv[++i], &o->threads))
                return CLI_BAD;
        } else if (a[0] == '-') {
            cli_error("run", "unknown or incomplete option %s (try --help)", a);
            return CLI_BAD;
        } else if (!o->model) {
            o->model = a;
        } else {
            cli_error("run", "more than one model given (%s)", a);
            return CLI_BAD;
        }
    }
    if (!o->model) {
        usage(stderr);
        return CLI_BAD;
    }
    if (o->profile && o->time_runs <= 0) {
        cli_error("run", "--profile times the runs of --time N: give --time too");
        return CLI_BAD;
    }
    return CLI_OK;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static bool stats(const oq_rt_tensor *t, double *mn, double *mx, double *mean, int64_t *nonfinite)
{
    int64_t n = oq_rt_tensor_numel(t);
    *mn = INFINITY;
    *mx = -INFINITY;
    *mean = 0;
    *nonfinite = 0;
    double sum = 0;
    int64_t finite = 0;
    for (int64_t i = 0; i < n; i++) {
        double v;
        switch (t->dtype) {
        case OQ_DTYPE_FLOAT: v = ((const float *)t->data)[i]; break;
        case OQ_DTYPE_DOUBLE: v = ((const double *)t->data)[i]; break;
        case OQ_DTYPE_FLOAT16: v = oq_half_to_float(((const uint16_t *)t->data)[i]); break;
        case OQ_DTYPE_BFLOAT16: v = oq_bfloat16_to_float(((const uint16_t *)t->data)[i]); break;
        case OQ_DTYPE_INT8: v = ((const int8_t *)t->data)[i]; break;
        case OQ_DTYPE_UINT8: case OQ_DTYPE_BOOL: v = ((const uint8_t *)t->data)[i]; break;
        case OQ_DTYPE_INT16: v = ((const int16_t *)t->data)[i]; break;
        case OQ_DTYPE_UINT16: v = ((const uint16_t *)t->data)[i]; break;
        case OQ_DTYPE_INT32: v = ((const int32_t *)t->data)[i]; break;
        case OQ_DTYPE_UINT32: v = ((const uint32_t *)t->data)[i]; break;
        case OQ_DTYPE_INT64: v = (double)((const int64_t *)t->data)[i]; break;
        case OQ_DTYPE_UINT64: v = (double)((const uint64_t *)t->data)[i]; break;
        default: return false;
        }
        if (!isfinite(v)) {
            (*nonfinite)++;
            continue;
        }
        *mn = v < *mn ? v : *mn;
        *mx = v > *mx ? v : *mx;
        sum += v;
        finite++;
    }
    *mean = finite ? sum / (double)finite : NAN;
    return true;
}

/* value range, for naming the inputs of a node that produced NaN/Inf */
typedef struct range {
    bool known;
    double mn, mx;
    int64_t nonfinite;
} range;

/* observer state for --check-finite and --dump-all */
typedef struct watch {
    const run_opts *o;
    const char *bad_node;     /* first node with NaN/Inf */
    char bad_msg[2048];
    bool dump_failed;
    oq_diag *d;
    range *ranges;            /* by value id (--check-finite) */
    size_t n_ranges;
    const oq_plan *plan;
    const oq_rt_tensor *inputs;
} watch;

static bool stats(const oq_rt_tensor *t, double *mn, double *mx, double *mean, int64_t *nonfinite);

/* range of a node input: produced earlier, a graph input, or a constant */
static range input_range(watch *w, const oq_value *v)
{
    range r = {false, 0, 0, 0};
    double mean;
    if (!v)
        return r;
    if (v->id < w->n_ranges && w->ranges[v->id].known)
        return w->ranges[v->id];
    for (size_t i = 0; i < oq_plan_n_inputs(w->plan); i++)
        if (strcmp(oq_plan_input_name(w->plan, i), v->name) == 0)
            r.known = stats(&w->inputs[i], &r.mn, &r.mx, &mean, &r.nonfinite);
    oq_tensor *c = oq_value_const_tensor(v);
    if (!r.known && c && c->rank <= OQ_RT_MAX_RANK) {
        const void *data = oq_tensor_data(c, NULL);
        oq_rt_tensor t;
        if (data && oq_rt_tensor_borrow(&t, c->dtype, c->dims, c->rank, (void *)data) == OQ_OK)
            r.known = stats(&t, &r.mn, &r.mx, &mean, &r.nonfinite);
    }
    return r;
}

static bool safe_file_name(const char *name, char *buf, size_t size)
{
    size_t j = 0;
    for (size_t i = 0; name[i] && j + 1 < size; i++)
        buf[j++] = (name[i] == '/' || name[i] == '\\') ? '_' : name[i];
    buf[j] = 0;
    return j > 0 && strcmp(buf, ".") != 0 && strcmp(buf, "..") != 0;
}

static void on_tensor(const oq_node *node, size_t idx, const oq_rt_tensor *t, void *user)
{
    watch *w = user;
    const char *vname = node->outputs[idx] ? node->outputs[idx]->name : "";
    if (w->o->dump_dir && !w->dump_failed) {
        char fn[512], path[4096];
        if (safe_file_name(vname, fn, sizeof fn)) {
            int n = snprintf(path, sizeof path, "%s/%s.pb", w->o->dump_dir, fn);
            if (n > 0 && (size_t)n < sizeof path &&
                oq_tensor_file_write_pb(path, t, vname, w->d) != OQ_OK)
                w->dump_failed = true;
        }
    }
    if (w->o->check_finite && !w->bad_node) {
        range r = {false, 0, 0, 0};
        double mean;
        r.known = stats(t, &r.mn, &r.mx, &mean, &r.nonfinite);
        oq_value *v = node->outputs[idx];
        if (v && v->id < w->n_ranges)
            w->ranges[v->id] = r;
        if (r.known && r.nonfinite > 0 && oq_dtype_is_float(t->dtype)) {
            char lb[64];
            w->bad_node = oq_node_label(node, lb, sizeof lb);
            size_t len = (size_t)snprintf(w->bad_msg, sizeof w->bad_msg,
                                          "node \"%s\" (%s) produced %lld NaN/Inf values in "
                                          "\"%s\"; inputs:", w->bad_node, node->op_type,
                                          (long long)r.nonfinite, vname);
            for (size_t i = 0; i < node->n_inputs && len < sizeof w->bad_msg; i++) {
                const oq_value *in = node->inputs[i];
                range ir = input_range(w, in);
                if (!in)
                    continue;
                if (ir.known)
                    len += (size_t)snprintf(w->bad_msg + len, sizeof w->bad_msg - len,
                                            " %s [%g, %g]%s", in->name, ir.mn, ir.mx,
                                            ir.nonfinite ? " (with NaN/Inf)" : "");
                else
                    len += (size_t)snprintf(w->bad_msg + len, sizeof w->bad_msg - len,
                                            " %s (range unknown)", in->name);
            }
            w->bad_node = node->name ? node->name : "";
        }
    }
}

/* --json: schema version 1 (docs/run.md) */
static int write_json(const run_opts *o, const oq_plan *plan, const oq_rt_tensor *out, size_t n_out,
                      const double *times, int runs)
{
    cli_report rep;
    if (cli_report_open(&rep, "run", o->json, 2) != CLI_OK)
        return CLI_FAIL;
    json_writer *w = &rep.w;
    json_kv_string(w, "model", o->model);
    json_kv_int(w, "threads", oq_plan_threads(plan));
    json_key(w, "outputs");
    json_begin_array(w);
    for (size_t i = 0; i < n_out; i++) {
        double mn, mx, mean;
        int64_t nf = 0;
        json_begin_object(w);
        json_kv_string(w, "name", oq_plan_output_name(plan, i));
        json_kv_string(w, "dtype", oq_dtype_name(out[i].dtype));
        json_key(w, "shape");
        json_begin_array_inline(w);
        for (size_t j = 0; j < out[i].rank && out[i].rank <= OQ_RT_MAX_RANK; j++)
            json_int(w, out[i].dims[j]);
        json_end_array(w);
        if (oq_rt_tensor_numel(&out[i]) > 0 && stats(&out[i], &mn, &mx, &mean, &nf)) {
            json_kv_double(w, "min", mn);
            json_kv_double(w, "max", mx);
            json_kv_double(w, "mean", mean);
        }
        json_kv_int(w, "nonfinite", nf);
        json_end_object(w);
    }
    json_end_array(w);
    if (o->time_runs > 0) {
        double med = runs % 2 ? times[runs / 2] : 0.5 * (times[runs / 2 - 1] + times[runs / 2]);
        json_key(w, "time_ms");
        json_begin_object(w);
        json_kv_int(w, "runs", runs);
        json_kv_double(w, "median", med);
        json_kv_double(w, "min", times[0]);
        json_kv_double(w, "max", times[runs - 1]);
        json_end_object(w);
    }
    json_key(w, "memory");
    json_begin_object(w);
    json_kv_int(w, "peak_bytes", oq_plan_peak_bytes(plan));
    json_kv_int(w, "total_bytes", oq_plan_total_bytes(plan));
    json_end_object(w);
    return cli_report_close(&rep);
}

int cmd_run(int argc, char **argv)
{
    run_opts o;
    int rc = parse(argc, argv, &o);
    if (rc != CLI_OK) {
        for (size_t k = 0; k < o.n_inputs; k++)
            free((char *)o.inputs[k].name);
        cli_data_opts_free(&o.data);
        return rc < 0 ? CLI_OK : rc;
    }
    oq_status st;
    oq_diag d;
    oq_diag_init(&d);
    oq_model *m = NULL;
    oq_plan *plan = NULL;
    oq_rt_tensor *in = NULL, *out = NULL;
    size_t n_in = 0, n_out = 0;
    double *times = NULL;
    watch w;
    memset(&w, 0, sizeof w);
    cli_samples gen; /* --random */
    memset(&gen, 0, sizeof gen);
    w.o = &o;
    w.d = &d;
    const char *models[1] = {o.model};
    if (o.json && cli_check_output("run", "--json", o.json, true, models, 1) != CLI_OK) {
        rc = CLI_BAD;
        goto done;
    }
    bool text = !cli_is_stdout(o.json); /* --json - : the JSON is the whole of stdout */
    rc = CLI_FAIL;
    m = cli_load_model(o.model, &st);
    if (!m) {
        rc = cli_exit_code(st);
        goto done;
    }
    oq_plan_options po = oq_plan_options_default();
    po.threads = o.threads;
    if (o.target) {
        const oq_target *t = oq_target_find(o.target);
        if (!t) {
            cli_error("run", "unknown target \"%s\" (known: %s)", o.target, oq_target_names());
            rc = CLI_BAD;
            goto done;
        }
        if (strcmp(o.target, "host") == 0)
            fprintf(stderr, "run: target host is %s (%s): %s arithmetic\n", t->name,
                    oq_target_host_reason(), oq_arith_name(t->arith));
        po.arith = t->arith;
    }
    if (o.check_finite || o.dump_dir) {
        po.on_tensor = on_tensor;
        po.user = &w;
    }
    /* --dump-all and --output-dir create their folder (one level), as a user expects */
    if ((o.dump_dir && cli_check_output_dir("run", "--dump-all", o.dump_dir) != CLI_OK) ||
        (o.out_dir && cli_check_output_dir("run", "--output-dir", o.out_dir) != CLI_OK)) {
        rc = CLI_BAD;
        goto done;
    }
    st = oq_plan_compile(m, &po, &plan, &d);
    if (st == OQ_ERR_UNSUPPORTED) { /* no float16 kernel for a node: in float32 inside */
        bool changed = false;
        oq_diag w16;
        oq_diag_init(&w16);
        if (oq_model_widen_float16(m, &changed, &w16) == OQ_OK && changed) {
            oq_diag_clear(&d);
            fprintf(stderr, "run: float16 model computed in float32 inside (its inputs and outputs stay float16)\n");
            st = oq_plan_compile(m, &po, &plan, &d);
        }
        oq_diag_free(&w16);
    }
    if (st != OQ_OK) {
        cli_print_diag(&d);
        rc = cli_exit_code(st);
        goto done;
    }
    if (o.check_finite) {
        w.n_ranges = m->next_id;
        w.ranges = calloc(w.n_ranges + 1, sizeof(range));
        if (!w.ranges)
            goto done;
    }
    w.plan = plan;
    n_in = oq_plan_n_inputs(plan);
    n_out = oq_plan_n_outputs(plan);
    in = calloc(n_in + 1, sizeof *in);
    out = calloc(n_out + 1, sizeof *out);
    if (!in || !out)
        goto done;
    for (size_t k = 0; k < o.n_inputs; k++) {
        bool known = false;
        for (size_t i = 0; i < n_in; i++)
            known |= strcmp(oq_plan_input_name(plan, i), o.inputs[k].name) == 0;
        if (!known) {
            cli_error("run", "the model has no input \"%s\"", o.inputs[k].name);
            rc = CLI_BAD;
            goto done;
        }
    }
    w.inputs = in;
    if (o.random && cli_samples_open_random("run", &gen, 1, &o.data, true) != OQ_OK) {
        rc = CLI_BAD;
        goto done;
    }
    for (size_t i = 0; i < n_in; i++) {
        const char *name = oq_plan_input_name(plan, i);
        const char *file = NULL;
        for (size_t k = 0; k < o.n_inputs; k++)
            if (strcmp(o.inputs[k].name, name) == 0)
                file = o.inputs[k].value;
        if (file) {
            st = oq_tensor_file_read(file, &in[i], NULL, &d);
            if (st != OQ_OK) {
                cli_print_diag(&d);
                rc = CLI_BAD;
                goto done;
            }
        } else if (o.random) {
            st = oq_calib_source_generate(gen.src, plan, 0, i, &in[i], &d);
            if (st != OQ_OK) {
                cli_print_diag(&d);
                rc = cli_exit_code(st);
                goto done;
            }
        } else {
            cli_error("run", "no data for input \"%s\" (give --input %s=FILE or --random)",
                      name, name);
            rc = CLI_BAD;
            goto done;
        }
    }
    cli_samples_free(&gen);
    int runs = o.time_runs > 0 ? o.time_runs : 1;
    times = calloc((size_t)runs, sizeof(double));
    if (!times)
        goto done;
    for (int r = 0; r < runs; r++) {
        for (size_t i = 0; i < n_out; i++)
            oq_rt_tensor_release(&out[i]);
        if (o.profile && r == (runs > 1 ? 1 : 0) && oq_plan_set_profile(plan, true) != OQ_OK)
            goto done; /* the first run (buffers, packing) is left out when there are more */
        double t0 = now_ms();
        st = oq_plan_run(plan, in, n_in, out, n_out, &d);
        times[r] = now_ms() - t0;
        if (st != OQ_OK) {
            cli_print_diag(&d);
            rc = cli_exit_code(st) == CLI_BAD ? CLI_BAD : CLI_FAIL;
            goto done;
        }
        if (w.bad_node) {
            fprintf(stderr, "onnxq run: %s\n", w.bad_msg);
            rc = CLI_FAIL;
            goto done;
        }
        if (w.dump_failed) {
            cli_print_diag(&d);
            goto done;
        }
    }
    for (size_t i = 0; i < n_out; i++) {
        char desc[256];
        double mn, mx, mean;
        int64_t nf;
        const char *name = oq_plan_output_name(plan, i);
        if (text) {
            printf("%s: %s", name, oq_rt_tensor_describe(&out[i], desc, sizeof desc));
            if (oq_rt_tensor_numel(&out[i]) > 0 && stats(&out[i], &mn, &mx, &mean, &nf)) {
                printf(" min=%.6g max=%.6g mean=%.6g", mn, mx, mean);
                if (nf)
                    printf(" nonfinite=%lld", (long long)nf);
            }
            printf("\n");
        }
        if (o.out_dir) {
            char fn[512], path[4096];
            if (!safe_file_name(name, fn, sizeof fn)) {
                cli_error("run", "output \"%s\" has no usable file name", name);
                goto done;
            }
            snprintf(path, sizeof path, "%s/%s.pb", o.out_dir, fn);
            if (oq_tensor_file_write_pb(path, &out[i], name, &d) != OQ_OK) {
                cli_print_diag(&d);
                goto done;
            }
            if (o.npy) {
                snprintf(path, sizeof path, "%s/%s.npy", o.out_dir, fn);
                if (oq_tensor_file_write_npy(path, &out[i], &d) != OQ_OK) {
                    cli_print_diag(&d);
                    goto done;
                }
            }
        }
    }
    qsort(times, (size_t)runs, sizeof(double), cmp_double);
    if (o.json && write_json(&o, plan, out, n_out, times, runs) != CLI_OK)
        goto done;
    if (o.time_runs > 0 && text) {
        double med = runs % 2 ? times[runs / 2] : 0.5 * (times[runs / 2 - 1] + times[runs / 2]);
        printf("time: median %.3f ms over %d runs (min %.3f, max %.3f), %d threads\n", med, runs,
               times[0], times[runs - 1], oq_plan_threads(plan));
    }
    if (o.profile && text) {
        int64_t pruns = 0;
        size_t np = oq_plan_profile(plan, NULL, 0, &pruns);
        oq_profile_entry *pe = calloc(np + 1, sizeof *pe);
        if (!pe)
            goto done;
        oq_plan_profile(plan, pe, np, NULL);
        double total = 0; /* over every operator type, the ones not printed too */
        for (size_t i = 0; i < np; i++)
            total += pe[i].ms;
        printf("profile: %lld runs, time per run by operator (kernels; integer QDQ groups by their kernel):\n",
               (long long)pruns);
        for (size_t i = 0; i < np && i < 24; i++)
            printf("  %-28s %5lld  %9.3f ms  %5.1f %%\n", pe[i].op_type, (long long)pe[i].nodes,
                   pruns ? pe[i].ms / (double)pruns : 0.0, total > 0 ? 100 * pe[i].ms / total : 0.0);
        if (np > 24)
            printf("  (%zu more operator types)\n", np - 24);
        free(pe);
    }
    if (text)
        printf("intermediate memory: %lld bytes with buffer reuse, %lld without\n",
               (long long)oq_plan_peak_bytes(plan), (long long)oq_plan_total_bytes(plan));
    rc = CLI_OK;
done:
    for (size_t i = 0; in && i < n_in; i++)
        oq_rt_tensor_release(&in[i]);
    for (size_t i = 0; out && i < n_out; i++)
        oq_rt_tensor_release(&out[i]);
    free(in);
    free(out);
    free(times);
    free(w.ranges);
    for (size_t k = 0; k < o.n_inputs; k++)
        free((char *)o.inputs[k].name);
    cli_data_opts_free(&o.data);
    cli_samples_free(&gen);
    oq_plan_free(plan);
    oq_model_free(m);
    oq_diag_free(&d);
    return rc;
}
