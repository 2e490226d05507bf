/* The passes on the ONNX backend test models (/usr/share/libonnx-testdata): each
 * pipeline below runs in-process on every model it accepts, the result must pass the
 * checker, and onnxruntime must give the same outputs as for the original model on
 * the test's own inputs (test_data_set_0): bit for bit, except where fold-batchnorm
 * reassociates float math, and for opset 21 where onnxruntime's AveragePool-19
 * kernel rounds differently from its AveragePool-11 kernel (within 1e-5 relative;
 * the node itself is not rewritten). Skipped when python3-onnx, onnxruntime-node or
 * the data are missing. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "onnxq/onnxq.h"
#include "onnxq/pass.h"
#include "testutil.h"

#define DATA "/usr/share/libonnx-testdata/data"
#define ORT ONNXQ_CACHE_DIR "/node_modules/onnxruntime-node"

static const char *prep_py =
    "# prep.py LIST OUTDIR: for each model dir in LIST (one per line), write OUTDIR/<i>.json\n"
    "# with the model path and test_data_set_0 inputs as flat lists, and OUTDIR/index.txt\n"
    "# with \"<i> <dir>\" lines.\n"
    "import sys, os, json, glob, onnx, numpy as np\n"
    "from onnx import numpy_helper\n"
    "lst, out = sys.argv[1], sys.argv[2]\n"
    "index = open(os.path.join(out, \"index.txt\"), \"w\")\n"
    "ok = {np.float32: \"float32\", np.float64: \"float64\", np.int64: \"int64\", np.int32: \"int32\",\n"
    "      np.int8: \"int8\", np.uint8: \"uint8\", np.int16: \"int16\", np.uint16: \"uint16\", np.bool_: \"bool\"}\n"
    "for i, d in enumerate(open(lst).read().split()):\n"
    "    try:\n"
    "        m = onnx.load(os.path.join(d, \"model.onnx\"), load_external_data=False)\n"
    "    except Exception:\n"
    "        continue\n"
    "    inits = {t.name for t in m.graph.initializer}\n"
    "    names = [v.name for v in m.graph.input if v.name not in inits]\n"
    "    pbs = sorted(glob.glob(os.path.join(d, \"test_data_set_0\", \"input_*.pb\")),\n"
    "                 key=lambda p: int(p.rsplit(\"_\", 1)[1].split(\".\")[0]))\n"
    "    if len(pbs) != len(names):\n"
    "        continue\n"
    "    feeds, good = [], True\n"
    "    for name, pb in zip(names, pbs):\n"
    "        t = onnx.TensorProto()\n"
    "        try:\n"
    "            t.ParseFromString(open(pb, \"rb\").read())\n"
    "            a = numpy_helper.to_array(t)\n"
    "        except Exception:\n"
    "            good = False\n"
    "            break\n"
    "        ty = ok.get(a.dtype.type)\n"
    "        if ty is None:\n"
    "            good = False\n"
    "            break\n"
    "        vals = a.reshape(-1).tolist()\n"
    "        if ty == \"int64\":\n"
    "            vals = [str(v) for v in vals]\n"
    "        if ty in (\"float32\", \"float64\"):\n"
    "            vals = [v if np.isfinite(v) else str(v) for v in vals]\n"
    "        feeds.append({\"name\": name, \"type\": ty, \"dims\": list(a.shape), \"data\": vals})\n"
    "    if good:\n"
    "        json.dump({\"dir\": d, \"feeds\": feeds}, open(os.path.join(out, \"%d.json\" % i), \"w\"))\n"
    "        index.write(\"%d %s\\n\" % (i, d))\n"
    "index.close()\n";

static const char *equiv_js =
    "// equiv.js CASEDIR SUFFIX:TOL...: for every CASEDIR/*.json, run <dir>/model.onnx and\n"
    "// each rewritten copy CASEDIR/<i>.<suffix>.onnx with onnxruntime on the same inputs.\n"
    "// TOL 0: outputs must be bit-identical; otherwise |a-b| <= TOL*|a| + TOL/10 and the\n"
    "// cases that are not bit-identical are listed. Originals onnxruntime cannot run are\n"
    "// skipped.\n"
    "const ort = require(process.env.ORT_PATH); ort.env.logLevel = 'fatal';\n"
    "const fs = require('fs'), path = require('path');\n"
    "const arr = { float32: Float32Array, float64: Float64Array, int32: Int32Array, int8: Int8Array,\n"
    "              uint8: Uint8Array, int16: Int16Array, uint16: Uint16Array, bool: Uint8Array };\n"
    "function num(v) { return typeof v === 'string' ? (v === 'nan' ? NaN : v === 'inf' ? Infinity : v === '-inf' ? -Infinity : Number(v)) : v; }\n"
    "function tensor(f) {\n"
    "  let data;\n"
    "  if (f.type === 'int64') data = BigInt64Array.from(f.data.map(BigInt));\n"
    "  else data = arr[f.type].from(f.data.map(num));\n"
    "  return new ort.Tensor(f.type, data, f.dims);\n"
    "}\n"
    "// 0: identical, 1: within tol, 2: different\n"
    "function compare(a, b, tol) {\n"
    "  if (!a || !b || a.length !== b.length) return 2;\n"
    "  let r = 0;\n"
    "  for (let i = 0; i < a.length; i++) {\n"
    "    const x = a[i], y = b[i];\n"
    "    if (x === y) continue;\n"
    "    if (typeof x === 'number' && Number.isNaN(x) && Number.isNaN(y)) continue;\n"
    "    if (typeof x === 'number' && tol > 0 && Math.abs(x - y) <= tol * Math.abs(x) + tol / 10) { r = 1; continue; }\n"
    "    return 2;\n"
    "  }\n"
    "  return r;\n"
    "}\n"
    "(async () => {\n"
    "  const [dir, ...suffixes] = process.argv.slice(2);\n"
    "  const opts = { graphOptimizationLevel: 'disabled', logSeverityLevel: 4, intraOpNumThreads: 1, interOpNumThreads: 1 };\n"
    "  let compared = 0, skipped = 0, failed = 0, near = 0;\n"
    "  const files = fs.readdirSync(dir).filter(f => /^\\d+\\.json$/.test(f));\n"
    "  for (const f of files) {\n"
    "    const c = JSON.parse(fs.readFileSync(path.join(dir, f)));\n"
    "    const feeds = {};\n"
    "    for (const x of c.feeds) feeds[x.name] = tensor(x);\n"
    "    let ref;\n"
    "    try {\n"
    "      const s = await ort.InferenceSession.create(path.join(c.dir, 'model.onnx'), opts);\n"
    "      ref = await s.run(feeds);\n"
    "    } catch (e) { skipped++; continue; }\n"
    "    for (const st of suffixes) {\n"
    "      const [suf, tols] = st.split(':'); const tol = Number(tols || 0);\n"
    "      const up = path.join(dir, f.replace('.json', '.' + suf + '.onnx'));\n"
    "      if (!fs.existsSync(up)) continue;\n"
    "      try {\n"
    "        const s = await ort.InferenceSession.create(up, opts);\n"
    "        const got = await s.run(feeds);\n"
    "        for (const k of Object.keys(ref)) {\n"
    "          const r = compare(ref[k].data, got[k] && got[k].data, tol);\n"
    "          if (r === 2) { failed++; console.log(`DIFF ${c.dir} -> ${suf}: output ${k}`); }\n"
    "          if (r === 1) { near++; console.log(`near ${c.dir} -> ${suf}: output ${k} within ${tol}`); }\n"
    "        }\n"
    "        compared++;\n"
    "      } catch (e) { failed++; console.log(`FAIL ${c.dir} -> ${suf}: ${e.message.split('\\n')[0]}`); }\n"
    "    }\n"
    "  }\n"
    "  console.log(`compared ${compared}, identical ${compared - near - failed}, within tolerance ${near}, failed ${failed}, skipped ${skipped} (onnxruntime cannot run the original)`);\n"
    "  process.exit(failed ? 1 : 0);\n"
    "})().catch(e => { console.error(e); process.exit(3); });\n";

typedef struct variant {
    const char *suffix;
    const char *pipeline;
    const char *tol;
} variant;

static const variant variants[] = {
    {"struct", "constant-to-initializer,eliminate-identity,dedupe-initializers,eliminate-dead", "0"},
    {"fold", "fold-batchnorm", "1e-5"},
    {"to13", "upgrade-opset{to=13}", "0"},
    {"to17", "upgrade-opset{to=17}", "0"},
    {"to21", "upgrade-opset{to=21}", "1e-5"},
};

Test(backend, passes_keep_backend_models_equivalent, .timeout = 1200)
{
    if (access(DATA "/node", R_OK) != 0 || access(ORT "/package.json", R_OK) != 0 ||
        tu_run("/usr/bin/python3 -c 'import onnx, numpy' && node --version", NULL) != 0) {
        cr_log_warn("backend data, python3-onnx or onnxruntime-node missing: skipped");
        return;
    }
    char *dir = tu_tmpdir();
    char path[700], cmd[3000];
    snprintf(path, sizeof path, "%s/prep.py", dir);
    cr_assert_eq(tu_write_file(path, prep_py, strlen(prep_py)), 0);
    snprintf(path, sizeof path, "%s/equiv.js", dir);
    cr_assert_eq(tu_write_file(path, equiv_js, strlen(equiv_js)), 0);
    snprintf(cmd, sizeof cmd,
             "ls -d " DATA "/node/*/ " DATA "/simple/*/ " DATA "/pytorch-converted/*/ " DATA
             "/pytorch-operator/*/ > '%s/list.txt' && /usr/bin/python3 '%s/prep.py' '%s/list.txt' '%s'",
             dir, dir, dir, dir);
    char *log = NULL;
    cr_assert_eq(tu_run(cmd, &log), 0, "%s", log);
    free(log);

    struct timespec t0, t1, t2;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    oq_registry *reg = NULL;
    cr_assert_eq(oq_registry_new(&reg, NULL), OQ_OK);
    snprintf(path, sizeof path, "%s/index.txt", dir);
    FILE *idx = fopen(path, "r");
    cr_assert(idx);
    char line[800];
    int models = 0, written = 0, unchanged = 0, refused = 0, unreadable = 0;
    while (fgets(line, sizeof line, idx)) {
        int i;
        char mdir[700];
        if (sscanf(line, "%d %699s", &i, mdir) != 2)
            continue;
        models++;
        char mpath[800];
        snprintf(mpath, sizeof mpath, "%smodel.onnx", mdir);
        for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
            oq_model *m = NULL;
            oq_diag d;
            oq_diag_init(&d);
            if (oq_model_read(mpath, NULL, &m, &d) != OQ_OK) {
                unreadable++;
                oq_diag_free(&d);
                break;
            }
            oq_pass_result res;
            oq_status st = oq_pass_run_simple(reg, variants[v].pipeline, m, &res, &d);
            char msg[512] = "";
            if (d.errors)
                oq_diag_format(oq_diag_first_error(&d), msg, sizeof msg);
            cr_assert(st == OQ_OK || st == OQ_ERR_UNSUPPORTED, "%s on %s: %s", variants[v].pipeline,
                      mpath, msg);
            if (st == OQ_OK && res.changed) {
                /* unchanged models need no comparison */
                cr_assert_eq(oq_model_check(m, &d), OQ_OK, "%s on %s: checker", variants[v].pipeline, mpath);
                snprintf(path, sizeof path, "%s/%d.%s.onnx", dir, i, variants[v].suffix);
                uint8_t *buf = NULL;
                size_t len = 0;
                cr_assert_eq(oq_model_write_buffer(m, &buf, &len, &d), OQ_OK, "serialize %s", path);
                cr_assert_eq(tu_write_file(path, buf, len), 0);
                free(buf);
                written++;
            } else if (st == OQ_OK) {
                unchanged++;
            } else {
                refused++;
            }
            oq_model_free(m);
            oq_diag_free(&d);
        }
    }
    fclose(idx);
    oq_registry_free(reg);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cr_log_info("%d backend models: %d changed copies, %d unchanged, %d refusals (e.g. opset < 7), %d unreadable",
                models, written, unchanged, refused, unreadable);
    cr_assert_gt(written, 1500);

    int off = snprintf(cmd, sizeof cmd, "ORT_PATH=" ORT " node '%s/equiv.js' '%s'", dir, dir);
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++)
        off += snprintf(cmd + off, sizeof cmd - (size_t)off, " %s:%s", variants[v].suffix, variants[v].tol);
    int rc = tu_run(cmd, &log);
    clock_gettime(CLOCK_MONOTONIC, &t2);
    cr_log_info("passes %.1f s, onnxruntime %.1f s", (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9,
                (double)(t2.tv_sec - t1.tv_sec) + (double)(t2.tv_nsec - t1.tv_nsec) * 1e-9);
    const char *summary = strstr(log, "compared ");
    cr_log_info("%s", summary ? summary : log);
    cr_assert_eq(rc, 0, "%s", log);
    free(log);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    tu_run(cmd, NULL);
    free(dir);
}
