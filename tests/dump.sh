#!/bin/bash
# onnxq dump: checks against independent references.
#   usage: bash dump.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
# - every model of the ONNX backend test data (Debian libonnx-testdata) and the
#   PaddleOCR models (when present): `dump --json --stats` is valid strict JSON and
#   agrees with python3-onnx + numpy on op histogram, graph inputs/outputs, parameter
#   counts/bytes by dtype, and every initializer / Constant tensor's min, max, mean,
#   std, zero/NaN/Inf counts and per-output-channel min/max;
# - output is byte-identical between two runs (text, --json --stats, --dot);
# - --dot output is accepted by Graphviz `dot` (skipped with a message if absent);
# - usage errors and unreadable models exit 2 with one line on stderr.
set -u
EXE=${1:?onnxq executable}
SRC=${2:?source dir}
BIN=${3:-.}
DATA=/usr/share/libonnx-testdata/data
OCR="${ONNXQ_CACHE:-$HOME/.cache/onnxq}/ocr/package/assets"
. "$SRC/tests/testlib.bash"

workdir TMP

# ---------------------------------------------------------------- usage errors ----
expect_exit() { # CODE DESCRIPTION ARGS...
    local want=$1 what=$2
    shift 2
    "$EXE" dump "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    if [ "$rc" != "$want" ]; then
        bad "$what: exit $rc, expected $want"
    elif [ "$want" != 0 ] && [ "$(wc -l <"$TMP/err")" != 1 ]; then
        bad "$what: expected one line on stderr, got: $(cat "$TMP/err")"
    fi
}
printf 'not a model' >"$TMP/junk.onnx"
: >"$TMP/empty.onnx"
CONV=$DATA/node/test_conv_with_strides_padding/model.onnx
expect_exit 2 "unknown option" --bogus "$CONV"
expect_exit 2 "two models" "$CONV" "$CONV"
expect_exit 2 "--dot with --json" --dot --json "$CONV"
expect_exit 2 "missing file" "$TMP/does-not-exist.onnx"
expect_exit 2 "junk file" "$TMP/junk.onnx"
"$EXE" dump >/dev/null 2>&1; rc=$?
[ "$rc" = 2 ] || bad "no MODEL: exit $rc, expected 2"
"$EXE" dump --help >/dev/null 2>&1 || bad "--help should exit 0"
if [ -f "$CONV" ]; then
    head -c 60 "$CONV" >"$TMP/trunc.onnx"
    expect_exit 2 "truncated model" "$TMP/trunc.onnx"
    expect_exit 0 "plain dump" "$CONV"
fi

if [ ! -x "$PY" ] || ! "$PY" -c 'import onnx, numpy' 2>/dev/null; then
    note "SKIP reference checks: $PY with onnx and numpy not available"
    exit $fail
fi
if [ ! -d "$DATA" ]; then
    note "SKIP reference checks: $DATA (Debian libonnx-testdata) not installed"
    exit $fail
fi

# ---------------------------------------------------------------- deep nesting ----
# 60 nested Loop bodies: the JSON is ~300 levels deep and must still be complete.
"$PY" - "$TMP/deep.onnx" <<'EOF'
import sys
import onnx
from onnx import helper, TensorProto
def make(depth):
    c = helper.make_node("Constant", [], ["o%d" % depth],
                         value=helper.make_tensor("t", TensorProto.FLOAT, [1], [float(depth)]))
    out = [helper.make_tensor_value_info("o%d" % depth, TensorProto.FLOAT, [1])]
    if depth == 0:
        return helper.make_graph([c], "g0", [], out)
    n = helper.make_node("Loop", ["", ""], [], body=make(depth - 1), name="loop%d" % depth)
    return helper.make_graph([n, c], "g%d" % depth, [], out)
onnx.save(helper.make_model(make(60), opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
EOF
if "$EXE" dump --json --stats "$TMP/deep.onnx" >"$TMP/deep.json"; then
    "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["node_count"] == 121, d["node_count"]
s = d["stats"]
# node order: the Loop (and its body) comes before the Constant of each graph
assert len(s) == 61 and s[0]["min"] == 0.0 and s[-1]["min"] == 60.0, s[:2]
assert s[0]["scope"].count("/") == 59 and s[-1]["scope"] == "", s[0]["scope"]
' "$TMP/deep.json" || bad "deeply nested model: wrong JSON"
else
    bad "dump --json of a deeply nested model failed"
fi

# ---------------------------------------------------------------- determinism -----
MODELS=("$CONV" "$DATA/node/test_if/model.onnx" "$DATA/node/test_loop13_seq/model.onnx"
        "$DATA/pytorch-converted/test_Conv2d/model.onnx")
[ -f "$OCR/ch_ppocr_mobile_v2.0_cls_infer.onnx" ] && MODELS+=("$OCR/ch_ppocr_mobile_v2.0_cls_infer.onnx")
for m in "${MODELS[@]}"; do
    for mode in "" "--stats" "--json --stats" "--dot"; do
        # shellcheck disable=SC2086
        "$EXE" dump $mode "$m" >"$TMP/a" 2>&1 || bad "dump $mode $m failed"
        # shellcheck disable=SC2086
        "$EXE" dump $mode "$m" >"$TMP/b" 2>&1
        cmp -s "$TMP/a" "$TMP/b" || bad "dump $mode $m: two runs differ"
    done
done

# ---------------------------------------------------------------- Graphviz --------
if command -v dot >/dev/null 2>&1; then
    for m in "${MODELS[@]}" "$DATA/node/test_scan9_sum/model.onnx"; do
        "$EXE" dump --dot "$m" >"$TMP/g.dot" || bad "dump --dot $m failed"
        if ! dot -Tsvg "$TMP/g.dot" -o "$TMP/g.svg" 2>"$TMP/dot.err" || [ -s "$TMP/dot.err" ]; then
            bad "dot rejects dump --dot $m: $(head -3 "$TMP/dot.err")"
        fi
    done
    # a node name that needs quoting must still give valid DOT
    "$PY" - "$TMP/weird.onnx" <<'EOF'
import sys, onnx
from onnx import helper, TensorProto
n = helper.make_node("Relu", ['in "x"\\'], ['out\nnl'], name='we"ird\\ {name}')
g = helper.make_graph([n], 'g "quoted"',
    [helper.make_tensor_value_info('in "x"\\', TensorProto.FLOAT, ["N", 3])],
    [helper.make_tensor_value_info('out\nnl', TensorProto.FLOAT, ["N", 3])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
EOF
    "$EXE" dump --dot "$TMP/weird.onnx" >"$TMP/w.dot" || bad "dump --dot weird names failed"
    dot -Tsvg "$TMP/w.dot" -o /dev/null 2>"$TMP/dot.err" && [ ! -s "$TMP/dot.err" ] ||
        bad "dot rejects the weird-names graph: $(cat "$TMP/dot.err")"
    "$EXE" dump --json "$TMP/weird.onnx" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
n = d["graph"]["nodes"][0]
assert n["name"] == "we\"ird\\ {name}", n["name"]
assert n["inputs"] == ["in \"x\"\\"], n["inputs"]
assert n["outputs"] == ["out\nnl"], n["outputs"]
assert d["graph"]["inputs"][0]["type"]["shape"] == ["N", 3]
' || bad "JSON of the weird-names graph"
else
    note "SKIP Graphviz check: 'dot' not installed (apt-get install graphviz)"
fi

# ---------------------------------------------------------------- references ------
LIST=("$DATA")
[ -d "$OCR" ] && LIST+=("$OCR") || note "PaddleOCR models not found under $OCR: checked the backend data only"
"$PY" - "$EXE" "${LIST[@]}" <<'EOF' || fail=1
import json, math, os, subprocess, sys
from collections import Counter
import numpy as np
import onnx
from onnx import numpy_helper, TensorProto

exe = sys.argv[1]
DT = {TensorProto.FLOAT: "float32", TensorProto.DOUBLE: "float64"}
def dtname(t):
    return DT.get(t, TensorProto.DataType.Name(t).lower())

def models(args):
    # ONNXQ_QUICK=1 (the sanitizer run in CI): every 4th backend-test model, all others
    quick = os.environ.get("ONNXQ_QUICK") == "1"
    k = 0
    for a in args:
        for root, _, files in sorted(os.walk(a)):
            for f in sorted(files):
                if f.endswith(".onnx"):
                    k += 1
                    if quick and "libonnx-testdata" in root and k % 4:
                        continue
                    yield os.path.join(root, f)

def subgraphs(node):
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            yield from a.graphs

def walk(g, ops, tensors, params, consumers):
    for t in g.initializer:
        tensors.append((t.name, "initializer", t))
        add_param(params, t.data_type, t)
    for n in g.node:
        d = "" if n.domain in ("", "ai.onnx") else n.domain
        ops[(n.op_type, d)] += 1
        for i, name in enumerate(n.input):
            if i == 1 and d == "" and n.op_type in ("Conv", "ConvTranspose", "Gemm", "MatMul"):
                consumers.setdefault(name, []).append(n)
        if n.op_type == "Constant" and d == "":
            for a in n.attribute:
                if a.name == "value":
                    tensors.append((n.output[0], "constant", a.t))
                    add_param(params, a.t.data_type, a.t)
                elif a.name == "value_float":
                    bump(params, "float32", 1, 4)
                elif a.name == "value_floats":
                    bump(params, "float32", len(a.floats), 4 * len(a.floats))
                elif a.name == "value_int":
                    bump(params, "int64", 1, 8)
                elif a.name == "value_ints":
                    bump(params, "int64", len(a.ints), 8 * len(a.ints))
                elif a.name == "value_string":
                    bump(params, "string", 1, len(a.s))
                elif a.name == "value_strings":
                    bump(params, "string", len(a.strings), sum(len(s) for s in a.strings))
        for sg in subgraphs(n):
            walk(sg, ops, tensors, params, consumers)

def bump(params, dt, n, b):
    e = params.setdefault(dt, [0, 0, 0])
    e[0] += 1; e[1] += n; e[2] += b

def add_param(params, dt, t):
    n = int(np.prod(t.dims)) if len(t.dims) else 1
    if dt == TensorProto.STRING:
        b = sum(len(s) for s in t.string_data)
    else:
        bits = {TensorProto.FLOAT16: 16, TensorProto.BFLOAT16: 16, TensorProto.BOOL: 8}.get(dt)
        if bits is None:
            bits = np.dtype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[dt]).itemsize * 8
        b = n * bits // 8
    bump(params, dtname(dt), n, b)

def close(a, b, scale):
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= 2e-7 * abs(b) + 1e-9 * scale

def type_json(tp):
    if not tp.HasField("tensor_type"):
        return None
    tt = tp.tensor_type
    shape = None
    if tt.HasField("shape"):
        shape = [d.dim_value if d.HasField("dim_value") else
                 d.dim_param if d.HasField("dim_param") else None for d in tt.shape.dim]
    return {"kind": "tensor", "elem_type": dtname(tt.elem_type) if tt.elem_type else None,
            "shape": shape}

def reject_constant(c):
    raise ValueError("non-standard JSON constant " + c)

def check(path):
    r = subprocess.run([exe, "dump", "--json", "--stats", path], capture_output=True)
    if r.returncode != 0:
        return "exit %d: %s" % (r.returncode, r.stderr.decode(errors="replace").strip())
    try:
        d = json.loads(r.stdout.decode("utf-8"), parse_constant=reject_constant)
    except Exception as e:
        return "invalid JSON: %s" % e
    m = onnx.load(path)
    ops, tensors, params, consumers = Counter(), [], {}, {}
    walk(m.graph, ops, tensors, params, consumers)
    # op histogram: counts, then order (count desc, op, domain)
    want = sorted(([op, dom, c] for (op, dom), c in ops.items()),
                  key=lambda x: (-x[2], x[0], x[1]))
    got = [[h["op"], h["domain"], h["count"]] for h in d["op_histogram"]]
    if got != want:
        return "op histogram %s != python %s" % (got, want)
    if d["node_count"] != sum(ops.values()):
        return "node_count"
    if d["ir_version"] != m.ir_version:
        return "ir_version"
    if d["producer"]["name"] != (m.producer_name if m.HasField("producer_name") else None):
        return "producer name"
    ops_want = [("" if o.domain in ("", "ai.onnx") else o.domain, o.version) for o in m.opset_import]
    if [(o["domain"], o["version"]) for o in d["opset_import"]] != ops_want:
        return "opset_import"
    for key in ("inputs", "outputs"):
        lst = getattr(m.graph, "input" if key == "inputs" else "output")
        if [v["name"] for v in d["graph"][key]] != [v.name for v in lst]:
            return "graph %s names" % key
        for v, pv in zip(d["graph"][key], lst):
            tj = type_json(pv.type)
            if tj is not None and v["type"] != tj:
                return "graph %s %s type %s != %s" % (key, pv.name, v["type"], tj)
    # parameters by dtype
    got = {e["dtype"]: [e["tensors"], e["elements"], e["bytes"]] for e in d["parameters"]["by_dtype"]}
    if got != params:
        return "parameters by dtype %s != python %s" % (got, params)
    # statistics
    st = d["stats"]
    if [(s["name"], s["source"]) for s in st] != [(n, src) for n, src, _ in tensors]:
        return "stats tensor list differs"
    checked = 0
    for s, (name, src, t) in zip(st, tensors):
        if t.data_type in (TensorProto.STRING, TensorProto.COMPLEX64, TensorProto.COMPLEX128,
                           TensorProto.UNDEFINED):
            if "skipped" not in s:
                return "%s: expected skipped" % name
            continue
        x = numpy_helper.to_array(t)
        if t.data_type == TensorProto.BFLOAT16 and x.dtype != np.float32:
            continue  # old numpy_helper: no bfloat16 decoding to compare with
        x = x.astype(np.float64).ravel()
        fin = x[np.isfinite(x)]
        if s["elements"] != x.size or s["finite"] != fin.size:
            return "%s: elements/finite" % name
        if s["nans"] != int(np.isnan(x).sum()) or s["pos_infs"] != int(np.isposinf(x).sum()) \
                or s["neg_infs"] != int(np.isneginf(x).sum()) or s["zeros"] != int((x == 0).sum()):
            return "%s: zero/NaN/Inf counts" % name
        if fin.size == 0:
            if any(s[k] is not None for k in ("min", "max", "mean", "std")):
                return "%s: no finite values but stats not null" % name
            continue
        scale = float(np.abs(fin).max())
        ref = {"min": fin.min(), "max": fin.max(), "mean": fin.mean(), "std": fin.std()}
        for k, v in ref.items():
            if not close(s[k], float(v), scale):
                return "%s: %s %r != numpy %r" % (name, k, s[k], float(v))
        # per output channel
        cons = consumers.get(name, [])
        axis = None
        dims = list(t.dims)
        for n in cons:
            if n.op_type == "Conv" and len(dims) >= 1: ax = 0
            elif n.op_type == "ConvTranspose" and len(dims) >= 2: ax = 1
            elif n.op_type == "Gemm" and len(dims) == 2:
                tb = [a.i for a in n.attribute if a.name == "transB"]
                ax = 0 if tb and tb[0] else 1
            elif n.op_type == "MatMul" and len(dims) >= 2: ax = len(dims) - 1
            else: continue
            if dims[ax] > 0:
                axis = ax
                break
        pc = s.get("per_channel")
        if axis is None:
            if pc is not None:
                return "%s: unexpected per_channel" % name
        else:
            if pc is None or pc["axis"] != axis:
                return "%s: per_channel axis %s, expected %d" % (name, pc and pc["axis"], axis)
            y = np.moveaxis(x.reshape(dims), axis, 0).reshape(dims[axis], -1)
            ok = np.isfinite(y)
            mn = np.where(ok, y, np.inf).min(axis=1)
            mx = np.where(ok, y, -np.inf).max(axis=1)
            for c in range(dims[axis]):
                if not close(pc["min"][c], float(mn[c]), scale) or \
                        not close(pc["max"][c], float(mx[c]), scale):
                    return "%s: channel %d min/max %r %r != numpy %r %r" % (
                        name, c, pc["min"][c], pc["max"][c], mn[c], mx[c])
        checked += 1
    return checked

n_models = n_tensors = n_fail = 0
for path in models(sys.argv[2:]):
    try:
        res = check(path)
    except Exception as e:  # a python-side failure to load is not ours to judge
        if isinstance(e, (onnx.checker.ValidationError,)):
            continue
        res = "python: %r" % e
    if isinstance(res, str):
        print("dump.sh: FAIL %s: %s" % (path, res))
        n_fail += 1
    else:
        n_models += 1
        n_tensors += res
print("dump.sh: %d models agree with python3-onnx/numpy (%d tensors with statistics), %d differ"
      % (n_models, n_tensors, n_fail))
sys.exit(1 if n_fail or n_models == 0 else 0)
EOF

[ $fail = 0 ] && note "all checks passed"
exit $fail
