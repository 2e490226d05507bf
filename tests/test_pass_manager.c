/* Pass registry, pipeline strings (parse errors, canonical printing, round trip),
 * the pass manager (iterative passes, statistics, verify-each) and the host table. */
#include "test_pass_util.h"

/* ---- a pass with one option of every type, for the parser */
static oq_status noop_run(oq_model *m, const oq_pass_options *o, oq_pass_result *r, oq_diag *d)
{
    return OQ_OK;
}

static const oq_pass_option_def all_opts[] = {
    {"i", OQ_OPT_INT, "3", "an int"},
    {"f", OQ_OPT_FLOAT, "0.5", "a float"},
    {"b", OQ_OPT_BOOL, "false", "a bool"},
    {"s", OQ_OPT_STRING, "x", "a string"},
};

static const oq_pass typed_pass = {
    .abi_version = OQ_PASS_ABI_VERSION,
    .struct_size = sizeof(oq_pass),
    .name = "typed",
    .summary = "test",
    .options = all_opts,
    .n_options = 4,
    .run = noop_run,
};

static oq_registry *reg_with_typed(void)
{
    oq_registry *reg = NULL;
    cr_assert_eq(oq_registry_new(&reg, NULL), OQ_OK);
    cr_assert_eq(oq_registry_add(reg, &typed_pass, NULL), OQ_OK);
    return reg;
}

Test(registry, has_every_builtin_pass)
{
    oq_registry *reg = NULL;
    cr_assert_eq(oq_registry_new(&reg, NULL), OQ_OK);
    const char *names[] = {"constant-to-initializer", "eliminate-dead", "eliminate-identity",
                           "dedupe-initializers", "fold-constants", "fold-batchnorm", "fold-pad",
                           "fold-linear", "fuse-activations", "fold-bias",
                           "infer-shapes", "qdq-cleanup", "upgrade-opset", "smooth-quant", "calibrate",
                           "insert-qdq", "quantize-weights", "quantize-embeddings", "quantize-dynamic",
                           "quantize-gather", "widen-float16"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const oq_pass *p = oq_registry_find(reg, names[i]);
        cr_assert(p, "missing %s", names[i]);
        cr_assert(p->summary && *p->summary);
        cr_assert_null(oq_registry_origin(reg, i));
    }
    cr_assert_eq(oq_registry_count(reg), sizeof names / sizeof names[0]);
    cr_assert_null(oq_registry_find(reg, "no-such-pass"));
    oq_registry_free(reg);
}

Test(registry, refuses_duplicates_bad_defaults_and_other_abis)
{
    oq_registry *plain = NULL;
    cr_assert_eq(oq_registry_new(&plain, NULL), OQ_OK);
    size_t builtin = oq_registry_count(plain);
    oq_registry_free(plain);
    oq_registry *reg = reg_with_typed();
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_neq(oq_registry_add(reg, &typed_pass, &d), OQ_OK);
    cr_assert(strstr(d.entries[0].message, "already registered"));

    oq_pass bad = typed_pass;
    bad.name = "typed2";
    oq_pass_option_def bad_opt[] = {{"n", OQ_OPT_INT, "seven", "x"}};
    bad.options = bad_opt;
    bad.n_options = 1;
    cr_assert_neq(oq_registry_add(reg, &bad, &d), OQ_OK);
    cr_assert(strstr(d.entries[1].message, "default \"seven\" of option \"n\" is not a valid int"),
              "%s", d.entries[1].message);

    oq_pass future = typed_pass;
    future.name = "future";
    future.abi_version = OQ_PASS_ABI_MAKE(OQ_PASS_ABI_MAJOR + 1, 0);
    cr_assert_eq(oq_registry_add(reg, &future, &d), OQ_ERR_UNSUPPORTED);
    char want[128];
    snprintf(want, sizeof want, "built for ABI %d.0, this onnxq speaks %d.%d", OQ_PASS_ABI_MAJOR + 1,
             OQ_PASS_ABI_MAJOR, OQ_PASS_ABI_MINOR);
    cr_assert(strstr(d.entries[2].message, want), "%s", d.entries[2].message);

    oq_pass badname = typed_pass;
    badname.name = "has space";
    cr_assert_neq(oq_registry_add(reg, &badname, &d), OQ_OK);
    cr_assert_eq(oq_registry_count(reg), builtin + 1);
    oq_diag_free(&d);
    oq_registry_free(reg);
}

/* ---- canonical printing and round trip */

static char *canon(oq_registry *reg, const char *text)
{
    oq_pipeline *p = NULL;
    oq_diag d;
    oq_diag_init(&d);
    oq_status s = oq_pipeline_parse(reg, text, &p, NULL, &d);
    tp_print_diag(&d);
    cr_assert_eq(s, OQ_OK, "parse of %s", text);
    char *out = oq_pipeline_to_string(p);
    cr_assert(out);
    oq_pipeline_free(p);
    oq_diag_free(&d);
    return out;
}

Test(pipeline, prints_canonical_text_and_round_trips)
{
    oq_registry *reg = reg_with_typed();
    static const char *cases[][2] = {
        {"fold-batchnorm,eliminate-identity,upgrade-opset{to=17}",
         "fold-batchnorm,eliminate-identity,upgrade-opset{to=17}"},
        {"  fold-batchnorm ,\teliminate-identity , upgrade-opset{ to = 17 }  ",
         "fold-batchnorm,eliminate-identity,upgrade-opset{to=17}"},
        {"eliminate-dead{keep-initializers=1}", "eliminate-dead{keep-initializers=true}"},
        {"eliminate-dead{keep-initializers=off}", "eliminate-dead{keep-initializers=false}"},
        {"upgrade-opset{to=+013}", "upgrade-opset{to=13}"},
        /* options print in schema order, only those given, values normalized */
        {"typed{s=\"a,b\" f=0.1,i=-3,b=yes}", "typed{i=-3,f=0.1,b=true,s=\"a,b\"}"},
        {"typed{f=1e3}", "typed{f=1000}"},
        {"typed{f=0.30000000000000004}", "typed{f=0.30000000000000004}"},
        {"typed{s=\"q\\\"uote\\\\\"}", "typed{s=\"q\\\"uote\\\\\"}"},
        {"typed{s=\"plain\"}", "typed{s=plain}"},
        {"typed{s=\"\"}", "typed{s=\"\"}"},
        {"typed{s=a/b.c:d}", "typed{s=a/b.c:d}"},
        {"typed{}", "typed"},
        {"typed,typed{i=1}", "typed,typed{i=1}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *c = canon(reg, cases[i][0]);
        cr_expect_str_eq(c, cases[i][1], "canonical form of %s", cases[i][0]);
        char *again = canon(reg, c);
        cr_expect_str_eq(again, c, "round trip of %s", c);
        free(c);
        free(again);
    }
    oq_registry_free(reg);
}

Test(pipeline, parsed_values_and_defaults)
{
    oq_registry *reg = reg_with_typed();
    oq_pipeline *p = NULL;
    cr_assert_eq(oq_pipeline_parse(reg, "typed{f=2.25,s=\"x y\"},typed", &p, NULL, NULL), OQ_OK);
    cr_assert_eq(oq_pipeline_length(p), 2);
    const oq_pass_options *o = oq_pipeline_options(p, 0);
    cr_assert_eq(oq_pass_opt_int(o, "i", -1), 3); /* default */
    cr_assert_eq(oq_pass_opt_float(o, "f", -1), 2.25);
    cr_assert_eq(oq_pass_opt_bool(o, "b", true), false);
    cr_assert_str_eq(oq_pass_opt_string(o, "s", NULL), "x y");
    cr_assert(oq_pass_option_find(o, "f")->explicit_set);
    cr_assert(!oq_pass_option_find(o, "i")->explicit_set);
    cr_assert_eq(oq_pass_opt_float(oq_pipeline_options(p, 1), "f", -1), 0.5);
    cr_assert_eq(oq_pass_opt_int(o, "nope", 42), 42);
    oq_pipeline_free(p);
    oq_registry_free(reg);
}

Test(pipeline, errors_point_at_the_offending_character)
{
    oq_registry *reg = reg_with_typed();
    static const struct {
        const char *text;
        size_t pos;
        const char *msg;
    } cases[] = {
        {"", 0, "empty pipeline"},
        {"fold-batchnorm,elim-dead", 15, "unknown pass \"elim-dead\""},
        {"fold-batchnorm,,x", 15, "expected a pass name"},
        {"fold-batchnorm,", 15, "expected a pass name after ','"},
        {"upgrade-opset{to=abc}", 17, "needs an int, got \"abc\""},
        {"upgrade-opset{to=1.5}", 17, "needs an int"},
        {"upgrade-opset{too=3}", 14, "has no option \"too\" (options: to)"},
        {"upgrade-opset{to=3,to=4}", 19, "given twice"},
        {"upgrade-opset{to 3}", 17, "expected '='"},
        {"upgrade-opset{to=}", 17, "expected a value"},
        {"upgrade-opset{to=17", 19, "missing '}'"},
        {"upgrade-opset", 0, "needs option \"to\""},
        {"typed typed", 6, "expected ',' or the end"},
        {"typed{b=maybe}", 8, "needs a bool"},
        {"typed{f=nan}", 8, "needs a float"},
        {"typed{s=\"open}", 8, "unterminated"},
        {"typed{s=\"a\\n\"}", 10, "unknown escape"},
        {"typed{i=1=2}", 9, "unexpected '='"},
        {"$", 0, "expected a pass name, got '$'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        oq_pipeline *p = NULL;
        size_t pos = 9999;
        oq_diag d;
        oq_diag_init(&d);
        cr_expect_eq(oq_pipeline_parse(reg, cases[i].text, &p, &pos, &d), OQ_ERR_USAGE, "%s",
                     cases[i].text);
        cr_expect_null(p);
        cr_expect_eq(pos, cases[i].pos, "\"%s\": error at %zu, expected %zu", cases[i].text, pos,
                     cases[i].pos);
        cr_assert_eq(d.errors, 1);
        cr_expect(strstr(d.entries[0].message, cases[i].msg), "\"%s\": message \"%s\"",
                  cases[i].text, d.entries[0].message);
        char col[32];
        snprintf(col, sizeof col, "column %zu:", cases[i].pos + 1);
        cr_expect(strstr(d.entries[0].message, col), "%s", d.entries[0].message);
        oq_diag_free(&d);
    }
    oq_registry_free(reg);
}

/* ---- the manager */

typedef struct counter {
    int runs;
    int change_until;   /* report "changed" for the first N runs */
} counter;

static oq_status counting_run(oq_model *m, const oq_pass_options *o, oq_pass_result *r, oq_diag *d)
{
    counter *c = o->pass_user;
    c->runs++;
    r->changed = c->runs <= c->change_until;
    oq_pass_stat_add(r, "runs", 1);
    if (r->changed)
        oq_pass_stat_add(r, "changes", 2);
    return OQ_OK;
}

Test(manager, iterative_pass_reruns_to_a_fixed_point_with_a_cap)
{
    counter c = {0, 3};
    oq_pass p = {OQ_PASS_ABI_VERSION, sizeof(oq_pass), "count", "counts", NULL, 0,
                 counting_run, true, 10, &c, {0}};
    oq_registry *reg = NULL;
    cr_assert_eq(oq_registry_new(&reg, NULL), OQ_OK);
    cr_assert_eq(oq_registry_add(reg, &p, NULL), OQ_OK);
    oq_model *m = tp_model(13);
    oq_pass_result r;
    cr_assert_eq(oq_pass_run_simple(reg, "count", m, &r, NULL), OQ_OK);
    cr_assert_eq(c.runs, 4); /* 3 changing runs + the one that finds nothing */
    cr_assert(r.changed);
    cr_assert_eq(tp_stat(&r, "runs"), 4);
    cr_assert_eq(tp_stat(&r, "changes"), 6);

    /* never converges: stops at the pass's cap ... */
    c.runs = 0;
    c.change_until = 1000;
    cr_assert_eq(oq_pass_run_simple(reg, "count", m, &r, NULL), OQ_OK);
    cr_assert_eq(c.runs, 10);
    /* ... or at the run's override */
    c.runs = 0;
    oq_pipeline *pl = NULL;
    cr_assert_eq(oq_pipeline_parse(reg, "count", &pl, NULL, NULL), OQ_OK);
    oq_pipeline_run_options ro = {0};
    ro.max_iterations = 3;
    cr_assert_eq(oq_pipeline_run(pl, m, &ro, NULL), OQ_OK);
    cr_assert_eq(c.runs, 3);
    oq_pipeline_free(pl);
    oq_model_free(m);
    oq_registry_free(reg);
}

/* A pass that breaks the model: a node reading a value nothing produces. */
static oq_status breaking_run(oq_model *m, const oq_pass_options *o, oq_pass_result *r, oq_diag *d)
{
    oq_value *ghost = oq_graph_new_value(m->graph, "ghost");
    oq_value *out = oq_graph_new_value(m->graph, NULL);
    oq_node *n = oq_node_new(m->graph, "Relu", NULL, "broken", &ghost, 1, &out, 1);
    oq_graph_append(m->graph, n);
    r->changed = true;
    return OQ_OK;
}

typedef struct seen {
    int events;
    oq_status last;
    char names[8][32];
} seen;

static void record(const oq_pass_event *ev, oq_model *m, void *user)
{
    seen *s = user;
    if (s->events < 8)
        snprintf(s->names[s->events], 32, "%s", ev->pass->name);
    s->events++;
    s->last = ev->status;
    cr_assert(ev->seconds >= 0);
}

Test(manager, verify_each_stops_at_the_pass_that_breaks_the_model)
{
    oq_pass p = {OQ_PASS_ABI_VERSION, sizeof(oq_pass), "breaker", "breaks", NULL, 0,
                 breaking_run, false, 0, NULL, {0}};
    oq_registry *reg = NULL;
    cr_assert_eq(oq_registry_new(&reg, NULL), OQ_OK);
    cr_assert_eq(oq_registry_add(reg, &p, NULL), OQ_OK);
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){2}, 1);
    tp_node(m, "Relu", "r", "x", "y");
    tp_output(m, "y");
    oq_pipeline *pl = NULL;
    cr_assert_eq(oq_pipeline_parse(reg, "eliminate-dead,breaker,eliminate-identity", &pl, NULL, NULL), OQ_OK);
    seen s = {0};
    oq_pipeline_run_options ro = {0};
    ro.verify_each = true;
    ro.after_pass = record;
    ro.user = &s;
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_pipeline_run(pl, m, &ro, &d), OQ_ERR_INVALID);
    cr_assert_eq(s.events, 2, "the pass after the breaking one must not run");
    cr_assert_str_eq(s.names[1], "breaker");
    cr_assert_eq(s.last, OQ_ERR_INVALID);
    cr_assert(strstr(d.entries[0].message, "pass \"breaker\" (#2 in the pipeline) broke the model"),
              "%s", d.entries[0].message);
    cr_assert(strstr(d.entries[1].message, "ghost"), "%s", d.entries[1].message);
    oq_diag_free(&d);

    /* without verify-each the manager does not notice */
    oq_model_free(m);
    m = tp_model(13);
    oq_diag_init(&d);
    ro.verify_each = false;
    s.events = 0;
    cr_assert_eq(oq_pipeline_run(pl, m, &ro, &d), OQ_OK);
    cr_assert_eq(s.events, 3);
    oq_diag_free(&d);
    oq_pipeline_free(pl);
    oq_model_free(m);
    oq_registry_free(reg);
}

static oq_status failing_run(oq_model *m, const oq_pass_options *o, oq_pass_result *r, oq_diag *d)
{
    return oq_diag_error(d, OQ_ERR_UNSUPPORTED, "cannot do it");
}

Test(manager, failing_pass_is_named)
{
    oq_pass p = {OQ_PASS_ABI_VERSION, sizeof(oq_pass), "fails", "fails", NULL, 0, failing_run,
                 false, 0, NULL, {0}};
    oq_registry *reg = NULL;
    cr_assert_eq(oq_registry_new(&reg, NULL), OQ_OK);
    cr_assert_eq(oq_registry_add(reg, &p, NULL), OQ_OK);
    oq_model *m = tp_model(13);
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_pass_run_simple(reg, "eliminate-dead,fails", m, NULL, &d), OQ_ERR_UNSUPPORTED);
    cr_assert_eq(d.errors, 2);
    cr_assert_str_eq(d.entries[0].message, "cannot do it");
    cr_assert(strstr(d.entries[1].message, "pass \"fails\" (#2 in the pipeline) failed"));
    oq_diag_free(&d);
    oq_model_free(m);
    oq_registry_free(reg);
}

Test(host_api, table_is_versioned_and_complete)
{
    const oq_host_api *api = oq_host_api_get();
    cr_assert_eq(api->size, sizeof(oq_host_api));
    cr_assert_eq(api->abi_version, OQ_PASS_ABI_VERSION);
    cr_assert(OQ_HOST_HAS(api, register_pass));
    cr_assert(OQ_HOST_HAS(api, model_set_opset));
    /* every slot is filled */
    size_t first = offsetof(oq_host_api, register_pass);
    for (size_t off = first; off + sizeof(void (*)(void)) <= sizeof(oq_host_api);
         off += sizeof(void (*)(void))) {
        void (*fp)(void);
        memcpy(&fp, (const char *)api + off, sizeof fp);
        cr_assert(fp != NULL, "host table slot at offset %zu is empty", off);
    }
    /* a smaller (older) table does not "have" later members */
    oq_host_api old = *api;
    old.size = (uint32_t)offsetof(oq_host_api, opt_int);
    cr_assert(OQ_HOST_HAS(&old, model_strdup));
    cr_assert(!OQ_HOST_HAS(&old, opt_int));
}

Test(stats, stat_add_accumulates_and_caps)
{
    oq_pass_result r = {0};
    oq_pass_stat_add(&r, "a", 1);
    oq_pass_stat_add(&r, "b", 5);
    oq_pass_stat_add(&r, "a", 2);
    cr_assert_eq(r.n_stats, 2);
    cr_assert_eq(tp_stat(&r, "a"), 3);
    static const char *names[] = {"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8",
                                  "s9", "s10", "s11", "s12", "s13", "s14", "s15", "s16"};
    for (int i = 0; i < 17; i++)
        oq_pass_stat_add(&r, names[i], 1);
    cr_assert_eq(r.n_stats, OQ_PASS_MAX_STATS);
}
