/* onnxq opt IN -o OUT --passes PIPELINE [--verify-each] [--time-passes] [--print-before NAME]
 *                    [--print-after NAME] [--stats] [--plugin FILE.so]... */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/report.h"
#include "onnxq/pass.h"

static void help(FILE *f)
{
    fprintf(f,
            "usage: onnxq opt IN -o OUT --passes PIPELINE [--verify-each] [--time-passes]\n"
            "                 [--print-before NAME] [--print-after NAME] [--stats]\n"
            "                 [--plugin FILE.so]... [--max-iterations N] [--json FILE|-]\n\n"
            "Run a pipeline of passes on IN and write the result to OUT.\n"
            "PIPELINE is a comma-separated list of passes with options in braces:\n"
            "  fold-batchnorm,eliminate-identity,upgrade-opset{to=17}\n"
            "'onnxq passes' lists the passes and their options.\n\n"
            "  --verify-each       run the structural checker after every pass; stop at the\n"
            "                      first pass that leaves the model invalid and name it\n"
            "  --time-passes       print the wall time of every pass\n"
            "  --print-after NAME  print the graph after pass NAME ('all': after each pass)\n"
            "  --print-before NAME print the graph before pass NAME ('all': before each pass)\n"
            "  --stats             print the statistics every pass reports\n"
            "  --json FILE         passes, statistics and times as JSON (docs/opt.md);\n"
            "                      '-': standard output (then --stats/--time-passes text is not printed)\n"
            "  --plugin FILE.so    load passes from a plugin (repeatable); a name without '/'\n"
            "                      is searched in ONNXQ_PLUGIN_PATH (colon-separated dirs)\n"
            "  --max-iterations N  cap on reruns of iterative passes (default: per pass)\n"
            "The model is always checked once at the end; OUT is written only if it passes.\n");
}

/* ------------------------------------------------------------ compact graph printer */

static void print_type(FILE *f, const oq_type *t)
{
    if (!t) {
        fputs("?", f);
        return;
    }
    if (t->kind != OQ_TYPE_TENSOR) {
        fputs("(non-tensor)", f);
        return;
    }
    fputs(t->has_elem_type ? oq_dtype_name(t->elem_type) : "?", f);
    if (!t->shape)
        return;
    fputc('[', f);
    for (size_t i = 0; i < t->shape->rank; i++) {
        const oq_dim *d = &t->shape->dims[i];
        if (i)
            fputc(',', f);
        if (d->kind == OQ_DIM_VALUE)
            fprintf(f, "%lld", (long long)d->value);
        else if (d->kind == OQ_DIM_PARAM && d->param)
            fputs(d->param, f);
        else
            fputc('?', f);
    }
    fputc(']', f);
}

static void print_tensor_sig(FILE *f, const oq_tensor *t)
{
    fputs(oq_dtype_name(t->dtype), f);
    fputc('[', f);
    for (size_t i = 0; i < t->rank; i++)
        fprintf(f, "%s%lld", i ? "," : "", (long long)t->dims[i]);
    fputc(']', f);
}

static void print_attr(FILE *f, const oq_attr *a)
{
    fprintf(f, "%s=", a->name ? a->name : "?");
    switch (a->type) {
    case OQ_ATTR_INT: fprintf(f, "%lld", (long long)a->i); break;
    case OQ_ATTR_FLOAT: fprintf(f, "%g", (double)a->f); break;
    case OQ_ATTR_STRING: fprintf(f, "\"%.*s\"", (int)(a->s.len > 64 ? 64 : a->s.len), (const char *)a->s.data); break;
    case OQ_ATTR_INTS:
        fputc('[', f);
        for (size_t i = 0; i < a->n_ints && i < 16; i++)
            fprintf(f, "%s%lld", i ? "," : "", (long long)a->ints[i]);
        fputs(a->n_ints > 16 ? ",...]" : "]", f);
        break;
    case OQ_ATTR_FLOATS:
        fputc('[', f);
        for (size_t i = 0; i < a->n_floats && i < 16; i++)
            fprintf(f, "%s%g", i ? "," : "", (double)a->floats[i]);
        fputs(a->n_floats > 16 ? ",...]" : "]", f);
        break;
    case OQ_ATTR_TENSOR:
        if (a->t)
            print_tensor_sig(f, a->t);
        break;
    case OQ_ATTR_GRAPH: fputs("<graph>", f); break;
    default: fprintf(f, "<%s>", oq_attr_type_name(a->type)); break;
    }
}

static void print_graph(FILE *f, const oq_graph *g, int indent)
{
    fprintf(f, "%*sgraph \"%s\": %zu nodes, %zu initializers\n", indent, "", g->name ? g->name : "",
            g->n_nodes, g->n_initializers);
    for (size_t i = 0; i < g->n_inputs; i++) {
        fprintf(f, "%*s  input  %s: ", indent, "", g->inputs[i]->value->name);
        print_type(f, g->inputs[i]->type ? g->inputs[i]->type : g->inputs[i]->value->type);
        fputc('\n', f);
    }
    for (size_t i = 0; i < g->n_initializers; i++) {
        fprintf(f, "%*s  init   %s: ", indent, "", g->initializers[i]->name ? g->initializers[i]->name : "");
        print_tensor_sig(f, g->initializers[i]);
        fputc('\n', f);
    }
    for (const oq_node *n = g->first; n; n = n->next) {
        fprintf(f, "%*s  ", indent, "");
        for (size_t i = 0; i < n->n_outputs; i++)
            fprintf(f, "%s%s", i ? ", " : "", n->outputs[i] ? n->outputs[i]->name : "\"\"");
        fprintf(f, " = %s%s%s", oq_domain_is_default(n->domain) ? "" : n->domain,
                oq_domain_is_default(n->domain) ? "" : "::", n->op_type ? n->op_type : "?");
        if (n->name && *n->name)
            fprintf(f, "<%s>", n->name);
        fputc('(', f);
        for (size_t i = 0; i < n->n_inputs; i++)
            fprintf(f, "%s%s", i ? ", " : "", n->inputs[i] ? n->inputs[i]->name : "\"\"");
        fputc(')', f);
        if (n->n_attrs) {
            fputs(" {", f);
            for (size_t i = 0; i < n->n_attrs; i++) {
                if (i)
                    fputs(", ", f);
                print_attr(f, n->attrs[i]);
            }
            fputc('}', f);
        }
        fputc('\n', f);
        for (size_t i = 0; i < n->n_attrs; i++) {
            if (n->attrs[i]->g)
                print_graph(f, n->attrs[i]->g, indent + 4);
            for (size_t k = 0; k < n->attrs[i]->n_graphs; k++)
                print_graph(f, n->attrs[i]->graphs[k], indent + 4);
        }
    }
    for (size_t i = 0; i < g->n_outputs; i++) {
        fprintf(f, "%*s  output %s: ", indent, "", g->outputs[i]->value ? g->outputs[i]->value->name : "?");
        print_type(f, g->outputs[i]->type);
        fputc('\n', f);
    }
}

/* ------------------------------------------------------------ instrumentation */

typedef struct opt_ctx {
    const char *print_before;
    const char *print_after;
    bool stats, time;
    size_t n;
    double *secs;
    int *iters;
    oq_pass_result *results;
    char **labels;
    size_t ran;
    cli_pass_log log;         /* --json */
} opt_ctx;

static bool name_matches(const char *want, const char *name)
{
    return want && (strcmp(want, "all") == 0 || strcmp(want, name) == 0);
}

static void before_pass(const oq_pass_event *ev, oq_model *m, void *user)
{
    opt_ctx *c = user;
    if (name_matches(c->print_before, ev->pass->name)) {
        printf("; ---- before pass #%zu %s ----\n", ev->index + 1, ev->pass->name);
        if (m->graph)
            print_graph(stdout, m->graph, 0);
    }
}

static void after_pass(const oq_pass_event *ev, oq_model *m, void *user)
{
    opt_ctx *c = user;
    if (ev->index < c->n) {
        c->secs[ev->index] = ev->seconds;
        c->iters[ev->index] = ev->iterations;
        c->results[ev->index] = *ev->result;
        c->ran = ev->index + 1;
    }
    cli_pass_log_after_pass(ev, m, &c->log);
    if (ev->status == OQ_OK && name_matches(c->print_after, ev->pass->name)) {
        printf("; ---- after pass #%zu %s (%s) ----\n", ev->index + 1, ev->pass->name,
               ev->result->changed ? "changed" : "unchanged");
        if (m->graph)
            print_graph(stdout, m->graph, 0);
    }
}

static int parse_count(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 1)
        return -1;
    *out = v;
    return 0;
}

static void print_caret(const char *pipeline, size_t pos)
{
    fprintf(stderr, "  %s\n  %*s^\n", pipeline, (int)pos, "");
}

/* --json: one object, schema version 1 (docs/opt.md) */
static int write_json(const char *path, const char *in, const char *out, const char *pipeline,
                      const cli_pass_log *log, oq_status st)
{
    cli_report rep;
    if (cli_report_open(&rep, "opt", path, 2) != CLI_OK)
        return CLI_FAIL;
    json_kv_string(&rep.w, "input", in);
    json_kv_string(&rep.w, "output", st == OQ_OK ? out : NULL);
    json_kv_string(&rep.w, "pipeline", pipeline);
    json_kv_string(&rep.w, "status", oq_status_name(st));
    cli_report_passes(&rep.w, log);
    return cli_report_close(&rep);
}

int cmd_opt(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *pipeline = NULL;
    opt_ctx c = {0};
    bool verify_each = false;
    const char *json = NULL;
    long max_iter = 0;
    int rc = CLI_OK;
    char **plugins = calloc((size_t)argc, sizeof(char *));
    size_t np = 0;
    oq_registry *reg = NULL;
    oq_pipeline *pl = NULL;
    oq_model *m = NULL;
    oq_diag d;
    oq_diag_init(&d);
    if (!plugins)
        return CLI_FAIL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_arg = i + 1 < argc;
        if (cli_is_help(a)) {
            help(stdout);
            goto done;
        } else if (strcmp(a, "-o") == 0 && has_arg) {
            out = argv[++i];
        } else if (strcmp(a, "--passes") == 0 && has_arg) {
            pipeline = argv[++i];
        } else if (strcmp(a, "--json") == 0 && has_arg) {
            json = argv[++i];
        } else if (strcmp(a, "--plugin") == 0 && has_arg) {
            plugins[np++] = argv[++i];
        } else if (strcmp(a, "--print-after") == 0 && has_arg) {
            c.print_after = argv[++i];
        } else if (strcmp(a, "--print-before") == 0 && has_arg) {
            c.print_before = argv[++i];
        } else if (strcmp(a, "--max-iterations") == 0 && has_arg) {
            if (parse_count(argv[++i], &max_iter) != 0) {
                cli_error("opt", "--max-iterations needs a positive integer, got \"%s\"", argv[i]);
                rc = CLI_BAD;
                goto done;
            }
        } else if (strcmp(a, "--verify-each") == 0) {
            verify_each = true;
        } else if (strcmp(a, "--time-passes") == 0) {
            c.time = true;
        } else if (strcmp(a, "--stats") == 0) {
            c.stats = true;
        } else if (a[0] == '-' && a[1]) {
            cli_error("opt", "unknown option \"%s\" (or missing its value)", a);
            rc = CLI_BAD;
            goto done;
        } else if (!cli_positional("opt", a, (const char **const[]){&in}, 1)) {
            rc = CLI_BAD;
            goto done;
        }
    }
    if (!in || !out || !pipeline) {
        cli_error("opt", "%s", !in ? "missing input model" : !out ? "missing -o OUT" : "missing --passes PIPELINE");
        help(stderr);
        rc = CLI_BAD;
        goto done;
    }
    {
        const char *inputs[1] = {in};
        if (cli_check_output("opt", "-o", out, false, inputs, 1) != CLI_OK ||
            (json && cli_check_output("opt", "--json", json, true, inputs, 1) != CLI_OK)) {
            rc = CLI_BAD;
            goto done;
        }
        if (cli_is_stdout(json)) /* the JSON is the whole of standard output */
            c.stats = c.time = false;
    }
    reg = cli_registry("opt", plugins, np, &rc);
    if (!reg)
        goto done;
    size_t err_pos = 0;
    if (oq_pipeline_parse(reg, pipeline, &pl, &err_pos, &d) != OQ_OK) {
        cli_print_diag(&d);
        print_caret(pipeline, err_pos);
        rc = CLI_BAD;
        goto done;
    }
    c.n = oq_pipeline_length(pl);
    for (int k = 0; k < 2; k++) {
        const char *want = k ? c.print_after : c.print_before;
        if (!want || strcmp(want, "all") == 0)
            continue;
        bool found = false;
        for (size_t i = 0; i < c.n; i++)
            found = found || strcmp(oq_pipeline_pass(pl, i)->name, want) == 0;
        if (!found) {
            cli_error("opt", "%s %s: no such pass in the pipeline", k ? "--print-after" : "--print-before", want);
            rc = CLI_BAD;
            goto done;
        }
    }
    c.secs = calloc(c.n, sizeof(double));
    c.iters = calloc(c.n, sizeof(int));
    c.results = calloc(c.n, sizeof(oq_pass_result));
    if (!c.secs || !c.iters || !c.results) {
        rc = CLI_FAIL;
        goto done;
    }
    if (!(m = cli_load_model_rc(in, &rc)))
        goto done;
    d.file = in;
    oq_pipeline_run_options ro = {0};
    ro.verify_each = verify_each;
    ro.max_iterations = (int)max_iter;
    ro.before_pass = before_pass;
    ro.after_pass = after_pass;
    ro.user = &c;
    oq_status st = oq_pipeline_run(pl, m, &ro, &d);
    if (st == OQ_OK) {
        oq_diag cd;
        oq_diag_init(&cd);
        if (oq_model_check(m, &cd) != OQ_OK) {
            oq_diag_add(&d, OQ_SEV_ERROR, OQ_ERR_INVALID, NULL, NULL, NULL,
                        "the pipeline left an invalid model (--verify-each names the pass):");
            oq_diag_append(&d, &cd);
            st = OQ_ERR_INTERNAL;
        }
        oq_diag_free(&cd);
    }
    if (c.stats) {
        printf("; ---- statistics ----\n");
        for (size_t i = 0; i < c.ran; i++) {
            const oq_pass_result *r = &c.results[i];
            printf("%-26s %s", oq_pipeline_pass(pl, i)->name, r->changed ? "changed" : "unchanged");
            if (c.iters[i] > 1)
                printf(" (%d iterations)", c.iters[i]);
            printf("\n");
            for (size_t k = 0; k < r->n_stats; k++)
                printf("    %-30s %lld\n", r->stats[k].name, (long long)r->stats[k].value);
        }
    }
    if (c.time) {
        double total = 0;
        for (size_t i = 0; i < c.ran; i++)
            total += c.secs[i];
        printf("; ---- pass timing (wall) ----\n");
        printf("  %10s %7s  %s\n", "seconds", "%", "pass");
        for (size_t i = 0; i < c.ran; i++)
            printf("  %10.6f %6.1f%%  %s\n", c.secs[i], total > 0 ? 100.0 * c.secs[i] / total : 0.0,
                   oq_pipeline_pass(pl, i)->name);
        printf("  %10.6f %6.1f%%  total\n", total, 100.0);
    }
    if (st == OQ_OK) {
        oq_write_options wo = {0};
        st = oq_model_write(m, out, &wo, &d);
        if (st != OQ_OK)
            rc = st == OQ_ERR_USAGE ? CLI_BAD : CLI_FAIL;
    } else {
        rc = st == OQ_ERR_USAGE || st == OQ_ERR_UNSUPPORTED ? CLI_BAD : CLI_FAIL;
    }
    cli_print_diag(&d);
    if (json && write_json(json, in, out, pipeline, &c.log, st) != CLI_OK && rc == CLI_OK)
        rc = CLI_FAIL;
done:
    oq_diag_free(&d);
    oq_model_free(m);
    oq_pipeline_free(pl);
    oq_registry_free(reg);
    free(plugins);
    free(c.secs);
    free(c.iters);
    free(c.results);
    return rc;
}
