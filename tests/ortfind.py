"""Where .ci/fetch-models.sh put onnxruntime-node: $ONNXQ_CACHE, else ~/.cache/onnxq;
and how to start node for it on the CPU that ONNXQ_ORT_CPU chooses (tests/ortnode.bash)."""
import json
import os
import subprocess


def find_ort():
    """Path of the onnxruntime-node package, or None when it is not installed."""
    cache = os.environ.get("ONNXQ_CACHE") or os.path.expanduser("~/.cache/onnxq")
    p = os.path.join(cache, "node_modules", "onnxruntime-node")
    return p if os.path.isfile(os.path.join(p, "package.json")) else None


def node_cmd():
    """argv prefix that runs a node script with onnxruntime on the CPU of ONNXQ_ORT_CPU
    (native by default, or under qemu-x86_64 -cpu Haswell: see tests/ortnode.bash)."""
    return ["bash", os.path.join(os.path.dirname(os.path.abspath(__file__)), "ortnode.bash")]


def find_ort_or_say_skip():
    """find_ort(), or None after printing why the check is skipped."""
    ort = find_ort()
    if not ort:
        print("skip: onnxruntime-node not found (run .ci/fetch-models.sh)")
    return ort


def run_js(d, ort, source):
    """Write source to D/run.js and run it with node (node_cmd) as `run.js ORT D`. False,
    after printing the end of onnxruntime's error, when it failed."""
    js = os.path.join(d, "run.js")
    with open(js, "w") as f:
        f.write(source)
    r = subprocess.run(node_cmd() + [js, ort, d], capture_output=True, text=True)
    if r.returncode != 0:
        print("onnxruntime failed:", r.stderr.strip()[-2000:])
        return False
    return True


def run_cases_js(d, ort, cases_json, per_case):
    """Run onnxruntime over the cases of D/CASES_JSON (a JSON list): per_case, JS
    statements run for case `c` (index `i`) with `ort` and `dir` (D) in scope, push one
    result each to `out`. The list of results, or None (printed) when node failed."""
    ok = run_js(d, ort, f"""
const ort = require(process.argv[2]);
const fs = require('fs');
const dir = process.argv[3];
const cases = JSON.parse(fs.readFileSync(dir + '/{cases_json}'));
(async () => {{
  const out = [];
  for (let i = 0; i < cases.length; i++) {{
    const c = cases[i];
{per_case}
  }}
  fs.writeFileSync(dir + '/ort.json', JSON.stringify(out));
}})().catch(e => {{ console.error(e.message); process.exit(1); }});
""")
    if not ok:
        return None
    with open(os.path.join(d, "ort.json")) as f:
        return json.load(f)
