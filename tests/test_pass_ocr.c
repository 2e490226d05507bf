/* Every pass on the PaddleOCR models (and upgrade-opset on small generated models) (det, opset 11; rec and cls, opset 9): the result
 * passes our checker and python-onnx's full checker (up to opset 17, the newest that
 * onnx 1.12 knows), and onnxruntime gives the same outputs before and after: bit for
 * bit for the structural passes and the opset upgrades to 13 and 17, within 1e-5
 * relative (plus 1e-6 absolute) where fold-batchnorm reassociates float math, and for
 * opset 21 (onnxruntime's AveragePool-19 kernel sums in another order than its
 * AveragePool-11 kernel; the node itself is unchanged by the upgrade); within 1e-4
 * relative for the graph preparation passes fold-linear and fuse-activations (see
 * the comment at their rows).
 * The preparation pipeline also has to find every HardSwish chain of the three models
 * (counted by hand in `onnxq dump`: det 24, rec 28, cls 18).
 * Skipped when the models or the tools are not installed. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "onnxq/onnxq.h"
#include "onnxq/pass.h"
#include "testutil.h"

#define ASSETS ONNXQ_CACHE_DIR "/ocr/package/assets"
#define ORT ONNXQ_CACHE_DIR "/node_modules/onnxruntime-node"

static const char *cmp_js =
    "const ort = require('" ORT "'); ort.env.logLevel = 'error';\n"
    "(async () => {\n"
    "  const [a, b, shp, tol] = process.argv.slice(2);\n"
    "  const dims = shp.split(',').map(Number); const n = dims.reduce((x, y) => x * y, 1);\n"
    "  const data = new Float32Array(n); let s = 12345;\n"
    "  for (let i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648; data[i] = s / 2147483648 - 0.5; }\n"
    "  const o = { graphOptimizationLevel: 'disabled', logSeverityLevel: 3, intraOpNumThreads: 1, interOpNumThreads: 1 };\n"
    "  const sa = await ort.InferenceSession.create(a, o), sb = await ort.InferenceSession.create(b, o);\n"
    "  const feeds = {}; feeds[sa.inputNames[0]] = new ort.Tensor('float32', data, dims);\n"
    "  const ra = await sa.run(feeds), rb = await sb.run(feeds); let bad = 0;\n"
    "  for (const k of sa.outputNames) {\n"
    "    const x = ra[k].data, y = rb[k].data; let diff = 0, worst = 0;\n"
    "    if (!y || x.length !== y.length) { console.log(k + ': missing or resized'); bad++; continue; }\n"
    "    for (let i = 0; i < x.length; i++) {\n"
    "      const d = Math.abs(Number(x[i]) - Number(y[i])); if (d !== 0) diff++;\n"
    "      const lim = Number(tol) * Math.abs(Number(x[i])) + (Number(tol) > 0 ? 1e-6 : 0);\n"
    "      if (d > lim) bad++; worst = Math.max(worst, d);\n"
    "    }\n"
    "    console.log(`${k}: ${x.length} values, ${diff} differ, max abs diff ${worst}`);\n"
    "  }\n"
    "  process.exit(bad ? 1 : 0);\n"
    "})().catch(e => { console.error(e.message); process.exit(3); });\n";

typedef struct model_case {
    const char *file;
    const char *shape;
} model_case;

static const model_case models[] = {
    {"ch_PP-OCRv4_det_infer.onnx", "1,3,64,64"},
    {"ch_PP-OCRv4_rec_infer.onnx", "1,3,48,64"},
    {"ch_ppocr_mobile_v2.0_cls_infer.onnx", "1,3,48,192"},
};

typedef struct pass_case {
    const char *pipeline;
    const char *tol;       /* "0": bit for bit */
    bool pycheck;
} pass_case;

/* the graph preparation pipeline docs/passes/fold-linear.md recommends */
#define PREP "constant-to-initializer,upgrade-opset{to=14},fold-batchnorm,fuse-activations," \
             "fold-linear,eliminate-dead"

static const pass_case passes[] = {
    {"constant-to-initializer", "0", true},
    {"eliminate-dead", "0", true},
    {"eliminate-identity", "0", true},
    {"dedupe-initializers", "0", true},
    {"constant-to-initializer,dedupe-initializers", "0", true},
    {"fold-batchnorm", "1e-5", true},
    {"upgrade-opset{to=13}", "0", true},
    {"upgrade-opset{to=17}", "0", true},
    {"upgrade-opset{to=21}", "1e-5", false},
    {"constant-to-initializer,eliminate-identity,dedupe-initializers,fold-batchnorm,eliminate-dead,upgrade-opset{to=17}",
     "1e-5", true},
    /* 1e-4: rec's softmax moves by up to 1.04e-5 on this input when its 28 HardSwish
     * chains are fused; onnxruntime's own graph optimizations move it by up to 6.6e-6
     * (5.7e-5 relative) on real text crops — the float rounding level of this network */
    {"fuse-activations", "1e-4", true},
    {"constant-to-initializer,fold-linear", "1e-4", true},
    {PREP, "1e-4", true},
};

Test(ocr, every_pass_keeps_the_models_valid_and_equivalent, .timeout = 900)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", ASSETS, models[0].file);
    if (access(path, R_OK) != 0) {
        cr_log_warn("PaddleOCR models not found in %s: skipped", ASSETS);
        return;
    }
    bool have_py = tu_run("/usr/bin/python3 -c 'import onnx' 2>/dev/null", NULL) == 0;
    bool have_ort = access(ORT "/package.json", R_OK) == 0 && tu_run("node --version", NULL) == 0;
    char *dir = tu_tmpdir();
    char js[600];
    snprintf(js, sizeof js, "%s/cmp.js", dir);
    cr_assert_eq(tu_write_file(js, cmp_js, strlen(cmp_js)), 0);
    int compared = 0;
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        for (size_t pi = 0; pi < sizeof passes / sizeof passes[0]; pi++) {
            char in[512], out[600], cmd[2048];
            char *log = NULL;
            snprintf(in, sizeof in, "%s/%s", ASSETS, models[mi].file);
            snprintf(out, sizeof out, "%s/m%zu_p%zu.onnx", dir, mi, pi);
            snprintf(cmd, sizeof cmd, "%s opt '%s' -o '%s' --passes '%s' --verify-each", ONNXQ_EXE,
                     in, out, passes[pi].pipeline);
            int rc = tu_run(cmd, &log);
            cr_assert_eq(rc, 0, "%s on %s: %s", passes[pi].pipeline, models[mi].file, log);
            free(log);
            snprintf(cmd, sizeof cmd, "%s check '%s'", ONNXQ_EXE, out);
            rc = tu_run(cmd, &log);
            cr_assert_eq(rc, 0, "onnxq check after %s on %s: %s", passes[pi].pipeline, models[mi].file, log);
            free(log);
            if (have_py && passes[pi].pycheck) {
                snprintf(cmd, sizeof cmd,
                         "/usr/bin/python3 -c \"import onnx,sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)\" '%s'",
                         out);
                rc = tu_run(cmd, &log);
                cr_assert_eq(rc, 0, "python onnx checker after %s on %s: %s", passes[pi].pipeline,
                             models[mi].file, log);
                free(log);
            }
            if (have_ort) {
                snprintf(cmd, sizeof cmd, "node '%s' '%s' '%s' %s %s", js, in, out, models[mi].shape,
                         passes[pi].tol);
                rc = tu_run(cmd, &log);
                cr_assert_eq(rc, 0, "onnxruntime outputs differ after %s on %s (tolerance %s): %s",
                             passes[pi].pipeline, models[mi].file, passes[pi].tol, log);
                cr_log_info("%s | %s | %s", models[mi].file, passes[pi].pipeline, log);
                free(log);
                compared++;
            }
        }
    }
    if (!have_ort)
        cr_log_warn("onnxruntime-node not available: outputs not compared");
    snprintf(js, sizeof js, "rm -rf '%s'", dir);
    tu_run(js, NULL);
    free(dir);
}

/* One small model per converted operator (opset 7/9), upgraded to 10, 11, 13, 18 and
 * 21: onnxruntime must give bit-identical outputs. */
static const char *gen_py =
    "import sys, onnx, numpy as np\n"
    "from onnx import helper, TensorProto, numpy_helper as nh\n"
    "F = TensorProto.FLOAT\n"
    "vi = helper.make_tensor_value_info\n"
    "out = sys.argv[1]\n"
    "def save(name, nodes, outputs, inits=(), opset=9):\n"
    "    g = helper.make_graph(nodes, name, [vi(\"x\", F, [1, 3, 4, 5])], [vi(o, F, None) if o != \"idx\" else vi(o, TensorProto.INT64, None) for o in outputs], initializer=list(inits))\n"
    "    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid(\"\", opset)]), f\"{out}/{name}.onnx\")\n"
    "N = helper.make_node\n"
    "save(\"clip_slice_reduce_softmax\", [N(\"Clip\", [\"x\"], [\"c\"], min=-0.25, max=0.25),\n"
    "     N(\"Slice\", [\"c\"], [\"s\"], axes=[3, 2], starts=[1, 0], ends=[4, 3]),\n"
    "     N(\"ReduceMean\", [\"s\"], [\"m\"], axes=[2, 3], keepdims=0), N(\"Softmax\", [\"m\"], [\"y\"], axis=1)], [\"y\"])\n"
    "for op in (\"Softmax\", \"LogSoftmax\", \"Hardmax\"):\n"
    "    save(op.lower() + \"_axis1\", [N(op, [\"x\"], [\"y\"], axis=1)], [\"y\"])\n"
    "    save(op.lower() + \"_default\", [N(op, [\"x\"], [\"y\"])], [\"y\"])\n"
    "sc = nh.from_array(np.array([1, 1, 2, 3], np.float32), \"sc\")\n"
    "save(\"upsample_nearest\", [N(\"Upsample\", [\"x\", \"sc\"], [\"y\"], mode=\"nearest\")], [\"y\"], [sc])\n"
    "save(\"upsample_linear\", [N(\"Upsample\", [\"x\", \"sc\"], [\"y\"], mode=\"linear\")], [\"y\"], [sc])\n"
    "save(\"upsample7_attr\", [N(\"Upsample\", [\"x\"], [\"y\"], mode=\"nearest\", scales=[1.0, 1.0, 3.0, 2.0])], [\"y\"], opset=7)\n"
    "save(\"pad_constant\", [N(\"Pad\", [\"x\"], [\"y\"], pads=[0, 0, 1, 2, 0, 0, 2, 1], value=1.5)], [\"y\"])\n"
    "save(\"pad_reflect\", [N(\"Pad\", [\"x\"], [\"y\"], pads=[0, 0, 1, 2, 0, 0, 2, 1], mode=\"reflect\")], [\"y\"])\n"
    "save(\"squeeze_unsqueeze\", [N(\"Unsqueeze\", [\"x\"], [\"u\"], axes=[0, 3]), N(\"Squeeze\", [\"u\"], [\"y\"], axes=[0])], [\"y\"])\n"
    "save(\"split_sizes\", [N(\"Split\", [\"x\"], [\"a\", \"b\"], axis=3, split=[2, 3])], [\"a\", \"b\"])\n"
    "save(\"split_equal\", [N(\"Split\", [\"x\"], [\"a\", \"b\", \"c\"], axis=1)], [\"a\", \"b\", \"c\"])\n"
    "save(\"topk\", [N(\"TopK\", [\"x\"], [\"y\", \"idx\"], axis=3, k=2)], [\"y\", \"idx\"])\n"
    "save(\"reducesum_max\", [N(\"ReduceSum\", [\"x\"], [\"s\"], axes=[1]), N(\"ReduceMax\", [\"s\"], [\"y\"], axes=[3], keepdims=0)], [\"y\"])\n"
    "bn = [nh.from_array(np.array(v, np.float32), n) for n, v in\n"
    "      ((\"s\", [1, 2, 0.5]), (\"b\", [0, 1, -1]), (\"m\", [0.1, 0, -0.2]), (\"v\", [1, 0.5, 2]))]\n"
    "save(\"batchnorm7\", [N(\"BatchNormalization\", [\"x\", \"s\", \"b\", \"m\", \"v\"], [\"y\"], spatial=1)], [\"y\"], bn, opset=7)\n"
    "save(\"dropout\", [N(\"Dropout\", [\"x\"], [\"y\"], ratio=0.3)], [\"y\"])\n";

Test(upgrade_ort, converted_operators_give_identical_outputs, .timeout = 900)
{
    bool have_py = tu_run("/usr/bin/python3 -c 'import onnx, numpy' 2>/dev/null", NULL) == 0;
    bool have_ort = access(ORT "/package.json", R_OK) == 0 && tu_run("node --version", NULL) == 0;
    if (!have_py || !have_ort) {
        cr_log_warn("python3-onnx or onnxruntime-node missing: skipped");
        return;
    }
    char *dir = tu_tmpdir();
    char path[600], cmd[2400];
    snprintf(path, sizeof path, "%s/gen.py", dir);
    cr_assert_eq(tu_write_file(path, gen_py, strlen(gen_py)), 0);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s'", path, dir);
    char *log = NULL;
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);
    snprintf(path, sizeof path, "%s/cmp.js", dir);
    cr_assert_eq(tu_write_file(path, cmp_js, strlen(cmp_js)), 0);
    snprintf(cmd, sizeof cmd, "ls '%s' | grep '[.]onnx$'", dir);
    char *list = NULL;
    cr_assert_eq(tu_run(cmd, &list), 0);
    int cases = 0;
    static const int targets[] = {10, 11, 13, 18, 21};
    for (char *save = NULL, *name = strtok_r(list, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
        for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
            snprintf(cmd, sizeof cmd, "%s opt '%s/%s' -o '%s/up.onnx' --passes 'upgrade-opset{to=%d}' --verify-each",
                     ONNXQ_EXE, dir, name, dir, targets[t]);
            int rc = tu_run(cmd, &log);
            cr_assert_eq(rc, 0, "%s to %d: %s", name, targets[t], log);
            free(log);
            snprintf(cmd, sizeof cmd, "node '%s/cmp.js' '%s/%s' '%s/up.onnx' 1,3,4,5 0", dir, dir, name, dir);
            rc = tu_run(cmd, &log);
            cr_assert_eq(rc, 0, "%s upgraded to %d: onnxruntime outputs differ: %s", name, targets[t], log);
            free(log);
            cases++;
        }
    }
    cr_assert_geq(cases, 80);
    cr_log_info("%d model/opset pairs identical under onnxruntime", cases);
    free(list);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    tu_run(cmd, NULL);
    free(dir);
}

static size_t count_op(const oq_model *m, const char *op)
{
    size_t k = 0;
    for (oq_node *n = m->graph->first; n; n = n->next)
        if (strcmp(n->op_type, op) == 0)
            k++;
    return k;
}

static int64_t stat_of(const oq_pass_result *r, const char *pass, const char *name)
{
    (void)pass;
    for (size_t i = 0; i < r->n_stats; i++)
        if (strcmp(r->stats[i].name, name) == 0)
            return r->stats[i].value;
    return 0;
}

/* HardSwish chains: PaddleOCR writes each as Add(3) Clip(0, 6) Mul Div(6) after a
 * Conv whose output goes through a scalar Mul and Add (PP-LCNetV3's learnable affine
 * block), followed by another scalar Mul and Add before the next Conv. */
Test(ocr, preparation_finds_every_hardswish_chain, .timeout = 300)
{
    static const struct {
        const char *file;
        size_t hardswish, conv;
    } want[] = {
        {"ch_PP-OCRv4_det_infer.onnx", 24, 62},
        {"ch_PP-OCRv4_rec_infer.onnx", 28, 38},
        {"ch_ppocr_mobile_v2.0_cls_infer.onnx", 18, 53},
    };
    char path[512];
    snprintf(path, sizeof path, "%s/%s", ASSETS, want[0].file);
    if (access(path, R_OK) != 0) {
        cr_log_warn("PaddleOCR models not found in %s: skipped", ASSETS);
        return;
    }
    oq_registry *reg = NULL;
    oq_diag d;
    oq_diag_init(&d);
    cr_assert_eq(oq_registry_new(&reg, &d), OQ_OK);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        for (int upgrade = 0; upgrade < 2; upgrade++) {
            snprintf(path, sizeof path, "%s/%s", ASSETS, want[i].file);
            oq_model *m = NULL;
            cr_assert_eq(oq_model_read(path, NULL, &m, &d), OQ_OK, "%s", path);
            size_t clips = count_op(m, "Clip"), hsig = count_op(m, "HardSigmoid");
            oq_pass_result r;
            const char *pipe = upgrade ? PREP
                                       : "constant-to-initializer,fold-batchnorm,fuse-activations,"
                                         "fold-linear,eliminate-dead";
            cr_assert_eq(oq_pass_run_simple(reg, pipe, m, &r, &d), OQ_OK, "%s", want[i].file);
            if (upgrade) {
                cr_assert_eq(count_op(m, "HardSwish"), want[i].hardswish, "%s: %zu HardSwish",
                             want[i].file, count_op(m, "HardSwish"));
                cr_assert_eq(count_op(m, "HardSigmoid"), hsig, "%s", want[i].file);
            } else {
                /* opset 9 / 11: x * HardSigmoid(x) instead */
                cr_assert_eq(count_op(m, "HardSwish"), 0);
                cr_assert_eq(count_op(m, "HardSigmoid"), hsig + want[i].hardswish, "%s",
                             want[i].file);
            }
            cr_assert_eq(clips, want[i].hardswish, "%s: one Clip per chain before", want[i].file);
            cr_assert_eq(count_op(m, "Clip"), 0, "%s: no Clip left", want[i].file);
            cr_assert_eq(count_op(m, "Conv"), want[i].conv, "%s", want[i].file);
            /* every Conv output feeds something else than a foldable constant Mul/Add */
            for (oq_node *n = m->graph->first; n; n = n->next) {
                if (strcmp(n->op_type, "Conv") != 0 || n->outputs[0]->n_uses != 1)
                    continue;
                oq_node *u = n->outputs[0]->uses[0].node;
                bool lin = strcmp(u->op_type, "Mul") == 0 || strcmp(u->op_type, "Add") == 0;
                bool k = lin && (oq_value_const_tensor(u->inputs[0]) || oq_value_const_tensor(u->inputs[1]));
                cr_assert(!k, "%s: Conv %s still followed by a constant %s", want[i].file, n->name,
                          u->op_type);
            }
            cr_log_info("%s%s: %lld HardSwish chains, %lld constant Mul/Add/Sub/Div folded into "
                        "the node that produces their input, %lld into the Conv they feed",
                        want[i].file, upgrade ? " (opset 14)" : " (as x * HardSigmoid(x))",
                        (long long)(upgrade ? stat_of(&r, "fuse-activations", "hardswish")
                                            : stat_of(&r, "fuse-activations", "hardswish_as_mul")),
                        (long long)stat_of(&r, "fold-linear", "folded_after"),
                        (long long)stat_of(&r, "fold-linear", "folded_before"));
            oq_model_free(m);
        }
    }
    oq_registry_free(reg);
    oq_diag_free(&d);
}
