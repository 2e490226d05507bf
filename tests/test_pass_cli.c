/* onnxq opt / onnxq passes from the command line. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "test_pass_util.h"

static char *dir;
static char in_path[512], out_path[512];

/* x[1,2,2,2] -> Conv(W from a Constant) -> BN -> Identity -> y */
static void setup(void)
{
    dir = tu_tmpdir();
    cr_assert(dir);
    snprintf(in_path, sizeof in_path, "%s/in.onnx", dir);
    snprintf(out_path, sizeof out_path, "%s/out.onnx", dir);
    oq_model *m = tp_model(13);
    tp_input(m, "x", OQ_DTYPE_FLOAT, (int64_t[]){1, 2, 2, 2}, 4);
    oq_node *c = tp_node(m, "Constant", "w_const", "", "W");
    const float w[4] = {1, 2, 3, 4};
    oq_node_set_attr_tensor(c, "value", oq_tensor_new(m, "W", OQ_DTYPE_FLOAT, (int64_t[]){2, 2, 1, 1}, 4, w, 16));
    tp_node(m, "Conv", "conv", "x,W", "z");
    int64_t d2[1] = {2};
    tp_init_f(m, "s", d2, 1, (float[]){1, 2});
    tp_init_f(m, "b", d2, 1, (float[]){0, 1});
    tp_init_f(m, "mn", d2, 1, (float[]){0.5f, 0});
    tp_init_f(m, "v", d2, 1, (float[]){1, 4});
    tp_node(m, "BatchNormalization", "bn", "z,s,b,mn,v", "n");
    tp_node(m, "Identity", "id", "n", "y");
    tp_output(m, "y");
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_model_write(m, in_path, NULL, &d), OQ_OK);
    oq_diag_free(&d);
    oq_model_free(m);
}

static void teardown(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    tu_run(cmd, NULL);
    free(dir);
}

static int run(char **out, const char *fmt, ...)
{
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s %s", ONNXQ_EXE, args);
    return tu_run(cmd, out);
}

TestSuite(opt_cli, .init = setup, .fini = teardown);

Test(opt_cli, full_pipeline_with_stats_and_timing)
{
    char *out;
    int rc = run(&out, "opt %s -o %s --passes 'constant-to-initializer,fold-batchnorm,eliminate-identity,eliminate-dead' --stats --time-passes --verify-each",
                 in_path, out_path);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "; ---- statistics ----"), "%s", out);
    cr_assert(strstr(out, "    constants_converted            1\n"), "%s", out);
    cr_assert(strstr(out, "    folded                         1\n"), "%s", out);
    cr_assert(strstr(out, "eliminate-dead             unchanged") || strstr(out, "eliminate-dead             changed"), "%s", out);
    cr_assert(strstr(out, "; ---- pass timing (wall) ----"), "%s", out);
    cr_assert(strstr(out, "%  constant-to-initializer\n"), "%s", out);
    cr_assert(strstr(out, "100.0%  total\n"), "%s", out);
    free(out);
    oq_model *m = NULL;
    cr_assert_eq(oq_model_read(out_path, NULL, &m, NULL), OQ_OK);
    cr_assert_eq(m->graph->n_nodes, 1);
    cr_assert_str_eq(m->graph->first->op_type, "Conv");
    cr_assert_str_eq(m->graph->first->outputs[0]->name, "y");
    cr_assert_eq(m->graph->n_initializers, 2);
    oq_model_free(m);
}

Test(opt_cli, print_after_dumps_the_graph_after_that_pass)
{
    char *out;
    int rc = run(&out, "opt %s -o %s --passes 'fold-batchnorm,eliminate-identity' --print-after fold-batchnorm",
                 in_path, out_path);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "; ---- after pass #1 fold-batchnorm (changed) ----\n"), "%s", out);
    cr_assert(strstr(out, "  y = Identity<id>(n)\n"), "%s", out);
    cr_assert(strstr(out, "  n = Conv<conv>(x, W_bnfold, z_bnfold_bias)\n"), "%s", out);
    cr_assert(strstr(out, "  input  x: float32[1,2,2,2]\n"), "%s", out);
    cr_assert_null(strstr(out, "after pass #2"), "%s", out);
    free(out);
    rc = run(&out, "opt %s -o %s --passes 'fold-batchnorm,eliminate-identity' --print-after all", in_path, out_path);
    cr_assert_eq(rc, 0);
    cr_assert(strstr(out, "after pass #2 eliminate-identity (changed)"), "%s", out);
    cr_assert(strstr(out, "  y = Conv<conv>(x, W_bnfold, z_bnfold_bias)\n"), "%s", out);
    free(out);
    rc = run(&out, "opt %s -o %s --passes fold-batchnorm --print-after eliminate-dead", in_path, out_path);
    cr_assert_eq(rc, 2);
    cr_assert(strstr(out, "--print-after eliminate-dead: no such pass in the pipeline"), "%s", out);
    free(out);
}

Test(opt_cli, bad_pipelines_and_usage_exit_2_with_a_caret)
{
    char *out;
    int rc = run(&out, "opt %s -o %s --passes 'fold-batchnorm,upgrade-opset{to=x17}'", in_path, out_path);
    cr_assert_eq(rc, 2);
    cr_assert(strstr(out, "onnxq: pipeline, column 33: option \"to\" of pass \"upgrade-opset\" needs an int, got \"x17\"\n"
                          "  fold-batchnorm,upgrade-opset{to=x17}\n"
                          "                                  ^\n"), "%s", out);
    free(out);
    FILE *f = fopen(out_path, "rb");
    cr_assert_null(f, "no output on a bad pipeline");
    rc = run(&out, "opt %s --passes eliminate-dead", in_path);
    cr_assert_eq(rc, 2);
    cr_assert(strstr(out, "missing -o OUT"), "%s", out);
    free(out);
    rc = run(&out, "opt %s -o %s", in_path, out_path);
    cr_assert_eq(rc, 2);
    cr_assert(strstr(out, "missing --passes PIPELINE"), "%s", out);
    free(out);
    rc = run(&out, "opt %s/missing.onnx -o %s --passes eliminate-dead", dir, out_path);
    cr_assert_eq(rc, 2, "%s", out);
    free(out);
    /* a refused upgrade is bad input: exit 2, nothing written */
    rc = run(&out, "opt %s -o %s --passes 'upgrade-opset{to=9}'", in_path, out_path);
    cr_assert_eq(rc, 2);
    cr_assert(strstr(out, "downgrading to 9 is not supported"), "%s", out);
    free(out);
    f = fopen(out_path, "rb");
    cr_assert_null(f);
}

Test(opt_cli, passes_lists_every_pass)
{
    char *out;
    cr_assert_eq(run(&out, "passes"), 0);
    const char *names[] = {"constant-to-initializer", "eliminate-dead", "eliminate-identity",
                           "dedupe-initializers", "fold-constants", "fold-batchnorm", "fold-bias",
                           "infer-shapes", "qdq-cleanup",
                           "upgrade-opset"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char line[64];
        snprintf(line, sizeof line, "%s ", names[i]);
        cr_assert(strstr(out, line), "%s missing from:\n%s", names[i], out);
    }
    cr_assert(strstr(out, "    to=int                 target opset of the default domain (7..21) (required)\n"), "%s", out);
    cr_assert(strstr(out, "[iterative]"), "%s", out);
    /* the JSON listing has exactly the passes of the text listing (one unindented line each) */
    int n_text = 0;
    for (const char *l = out; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
        if (*l != ' ' && *l != '\n')
            n_text++;
    cr_assert_geq(n_text, 10, "%s", out);
    free(out);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s passes --json | /usr/bin/python3 -c 'import json,sys; p=json.load(sys.stdin); "
             "assert len(p)==%d, p; d={x[\"name\"]:x for x in p}; "
             "assert d[\"eliminate-dead\"][\"options\"][0]=={\"name\":\"keep-initializers\",\"type\":\"bool\",\"default\":\"false\",\"help\":\"do not remove unused initializers\"}; "
             "assert d[\"eliminate-dead\"][\"iterative\"] is True; print(\"ok\")'",
             ONNXQ_EXE, n_text);
    cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
    cr_assert_str_eq(out, "ok\n");
    free(out);
}

/* `onnxq run --output-dir DIR` creates DIR (one level) and writes each output there; a
 * folder whose parent is missing is a one-line error naming it, exit 2. */
Test(opt_cli, run_creates_its_output_folder)
{
    char *out;
    int rc = run(&out, "run %s --random --output-dir %s/newdir", in_path, dir);
    cr_assert_eq(rc, 0, "%s", out);
    free(out);
    char p[600];
    snprintf(p, sizeof p, "%s/newdir/y.pb", dir);
    FILE *f = fopen(p, "rb");
    cr_assert(f != NULL, "%s not written", p);
    fclose(f);
    rc = run(&out, "run %s --random --output-dir %s/missing/newdir", in_path, dir);
    cr_assert_eq(rc, 2, "%s", out);
    cr_assert(strstr(out, "cannot create") && strstr(out, "missing/newdir"), "%s", out);
    free(out);
}
