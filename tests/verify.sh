#!/bin/bash
# onnxq verify on the bundled model, checked against independent references.
#   usage: bash verify.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
# - a QDQ model made by tests/verify_make_qdq.py (python3-onnx + numpy, following the QDQ
#   naming conventions): every output number (SQNR, cosine, max/mean |err|, top-1) and
#   every layer's accumulated SQNR agree with numpy on `onnxq run --dump-all` tensors,
#   and the isolated SQNR of the Gemm agrees with a numpy QDQ(Gemm(QDQ(x), DQ(W), DQ(B)));
# - a model with one activation range shrunk on purpose (conv c2): c2 (and its Relu, which
#   reads QDQ(c2)) lead the list, and c2's own output-QDQ error is the worst;
# - the float model against itself: +inf dB, cosine 1, --min-sqnr 1000 holds;
# - --min-sqnr exit codes 0 / 1, bad input exit 2, input_N.pb sample folders, PNG images
#   (--calib-images), --random;
# - peak RSS at 150 samples is within 1 MiB of that at 5;
# - the HTML report is one self-contained file (no script, no external reference);
# - weights that onnxq quantize folded (Conv + BatchNormalization -> W_bnfold, absent from
#   the float model) are compared with the float model folded the same way: the weight
#   SQNR verify reports equals numpy's on `onnxq opt --passes fold-batchnorm` output;
# - slices: a head whose output concatenates boxes and sigmoid scores, its output quantized
#   with one scale (tests/verify_make_concat.py, verify_output_qdq.py): per part numbers
#   equal numpy's, the scores part is named the worst in the table, the JSON and the
#   --min-sqnr message, also with a Transpose after the Concat; an output without a Concat
#   is one slice equal to the whole.
set -u
EXE=${1:?onnxq executable}
SRC=${2:?source dir}
. "$SRC/tests/testlib.bash"
workdir TMP
F=$SRC/models/shapes_cnn.onnx

# float dumps of 8 calibration samples -> QDQ models
calib_dumps "$F" 000 001 002 003 004 005 006 007
$PY "$SRC/tests/verify_make_qdq.py" "$F" "$TMP/q.onnx" "${args[@]}" >/dev/null || bad "make q.onnx"
$PY "$SRC/tests/verify_make_qdq.py" "$F" "$TMP/bad.onnx" "${args[@]}" --shrink c2=0.25 >/dev/null ||
    bad "make bad.onnx"

# 12 evaluation samples; float and quantized tensors of each
mkdir -p "$TMP/data" "$TMP/fd" "$TMP/qd"
for s in $(ls "$SRC/models/eval" | grep sample_ | head -12); do
    cp -r "$SRC/models/eval/$s" "$TMP/data/$s"
    for m in f q; do
        model=$F; [ $m = q ] && model=$TMP/q.onnx
        mkdir -p "$TMP/${m}d/$s"
        "$EXE" run "$model" --input image="$TMP/data/$s/image.npy" --dump-all "$TMP/${m}d/$s" \
            --output-dir "$TMP/${m}d/$s" >/dev/null || bad "run $m $s"
    done
done

"$EXE" verify "$F" "$TMP/q.onnx" --data "$TMP/data" --json "$TMP/r.json" --html "$TMP/r.html" \
    --threads 2 >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc = 0 ] || { bad "verify exit $rc"; cat "$TMP/err"; }
grep -q "^outputs" "$TMP/out" && grep -q "worst isolated SQNR first" "$TMP/out" || bad "table missing"
$PY "$SRC/tests/verify_check.py" "$TMP/r.json" "$TMP/fd" "$TMP/qd" --iso-gemm logits "$TMP/q.onnx" ||
    bad "numbers differ from numpy"

# the same with one thread: identical report
"$EXE" verify "$F" "$TMP/q.onnx" --data "$TMP/data" --json "$TMP/r1.json" --threads 1 --quiet ||
    bad "verify --threads 1"
$PY - "$TMP/r.json" "$TMP/r1.json" <<'PYEOF' || bad "report depends on the thread count"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for x in (a, b):
    x.pop("memory")
sys.exit(0 if a == b else 1)
PYEOF

# the deliberately bad layer comes first, with its range and clipping
"$EXE" verify "$F" "$TMP/bad.onnx" --data "$TMP/data" --json "$TMP/bad.json" --quiet || bad "verify bad"
$PY - "$TMP/bad.json" "$TMP/r.json" <<'PYEOF' || bad "shrunk layer c2 not found first"
import json, sys
r, good = (json.load(open(p)) for p in sys.argv[1:3])
# c2's clipping shows in c2 and in its Relu (which reads QDQ(c2)): both lead the list,
# and c2's own output quantization is the worst of all tensors
assert set(r["worst_layers"][:2]) == {"c2", "r2"}, r["worst_layers"]
own = {l["tensor"]: l["output_qdq"]["sqnr_db"] for l in r["layers"] if "output_qdq" in l}
assert min(own, key=own.get) == "c2", own
L = {l["tensor"]: l for l in r["layers"]}["c2"]
G = {l["tensor"]: l for l in good["layers"]}["c2"]
assert L["op_type"] == "Conv" and L["quantized"]
assert L["quant_range"][1] < 0.3 * L["float_range"][1], (L["quant_range"], L["float_range"])
assert L["clipped_fraction"] > G["clipped_fraction"]
assert L["isolated"]["sqnr_db"] < G["isolated"]["sqnr_db"] - 6
PYEOF

# float vs itself: identical -> +inf
"$EXE" verify "$F" "$F" --data "$TMP/data" --json "$TMP/same.json" --min-sqnr 1000 --quiet
[ $? = 0 ] || bad "float vs float --min-sqnr 1000 should pass"
$PY - "$TMP/same.json" <<'PYEOF' || bad "float vs float not reported as identical"
import json, sys
r = json.load(open(sys.argv[1]))
for o in r["outputs"]:
    assert o["error"]["sqnr_db"] == "Infinity" and o["error"]["cosine"] == 1, o
    assert o["error"]["max_abs_err"] == 0 and o["top1_agreement"] == 1
PYEOF

# exit codes
"$EXE" verify "$F" "$TMP/q.onnx" --data "$TMP/data" --min-sqnr 5 --quiet; [ $? = 0 ] || bad "--min-sqnr 5"
"$EXE" verify "$F" "$TMP/q.onnx" --data "$TMP/data" --min-sqnr 90 --quiet 2>"$TMP/err"
[ $? = 1 ] || bad "--min-sqnr 90 should exit 1"
grep -q 'output "logits": SQNR .* below --min-sqnr' "$TMP/err" || bad "no message for the missed target"
"$EXE" verify "$F" "$TMP/q.onnx" --data "$TMP/nope" 2>/dev/null; [ $? = 2 ] || bad "missing data dir"
"$EXE" verify "$F" "$TMP/nope.onnx" --random 1 --dim N=1 2>/dev/null; [ $? = 2 ] || bad "missing model"
"$EXE" verify "$F" "$TMP/q.onnx" 2>/dev/null; [ $? = 2 ] || bad "no data source"
"$EXE" verify "$F" "$TMP/q.onnx" --random 1 2>/dev/null; [ $? = 2 ] || bad "--random without --dim N"
mkdir -p "$TMP/wrong/s0"
# two files, neither named after the input (one file of any name is the sample: docs/data.md)
cp "$SRC/models/calib/sample_000/image.npy" "$TMP/wrong/s0/other.npy"
cp "$SRC/models/calib/sample_000/image.npy" "$TMP/wrong/s0/another.npy"
"$EXE" verify "$F" "$TMP/q.onnx" --data "$TMP/wrong" 2>"$TMP/err"; [ $? = 2 ] || bad "sample without input"
grep -q 'no file for input "image"' "$TMP/err" || bad "message for a sample without input"

# input_N.pb folders give the same numbers as <name>.npy
mkdir -p "$TMP/pb"
for s in $(ls "$TMP/data"); do
    mkdir -p "$TMP/pb/$s"
    $PY -c "import numpy as np, onnx, sys; from onnx import numpy_helper as h
open(sys.argv[2], 'wb').write(h.from_array(np.load(sys.argv[1]), 'image').SerializeToString())" \
        "$TMP/data/$s/image.npy" "$TMP/pb/$s/input_0.pb"
done
"$EXE" verify "$F" "$TMP/q.onnx" --data "$TMP/pb" --json "$TMP/pb.json" --quiet || bad "input_N.pb"
$PY - "$TMP/r.json" "$TMP/pb.json" <<'PYEOF' || bad "input_0.pb data gives other numbers"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["outputs"] == b["outputs"] and a["layers"] == b["layers"]
PYEOF

# random data
"$EXE" verify "$F" "$TMP/q.onnx" --random 3 --dim N=2 --json "$TMP/rand.json" --quiet || bad "--random"
$PY -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['samples']==3 and r['outputs'][0]['rows']==6" \
    "$TMP/rand.json" || bad "--random 3 --dim N=2: samples/rows"

# memory does not grow with the number of samples (peak RSS at 5 and at 150 samples;
# under AddressSanitizer its quarantine of freed blocks is switched off for this)
saved_asan=${ASAN_OPTIONS-}
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0
"$EXE" verify "$F" "$TMP/q.onnx" --random 5 --dim N=1 --json "$TMP/m5.json" --threads 1 --quiet &&
    "$EXE" verify "$F" "$TMP/q.onnx" --random 150 --dim N=1 --json "$TMP/m150.json" --threads 1 \
        --quiet || bad "--random 5 / 150"
$PY - "$TMP/m5.json" "$TMP/m150.json" <<'PYEOF' || bad "memory grows with the number of samples"
import json, sys
a, b = (json.load(open(p))["memory"] for p in sys.argv[1:3])
print("verify.sh: peak RSS %d kB at 5 samples, %d kB at 150" % (a["peak_rss_bytes"] // 1024,
                                                             b["peak_rss_bytes"] // 1024))
assert a["float_tensors_held_bytes"] == b["float_tensors_held_bytes"]
assert b["peak_rss_bytes"] <= a["peak_rss_bytes"] + 1024 * 1024
PYEOF
if [ -n "$saved_asan" ]; then export ASAN_OPTIONS=$saved_asan; else unset ASAN_OPTIONS; fi

# images: the evaluation tensors written as PNG files (pixels = round(255 x))
mkdir -p "$TMP/img"
$PY - "$TMP/data" "$TMP/img" <<'PYEOF' || bad "writing PNG files"
import os, sys
import numpy as np
from PIL import Image
for s in sorted(os.listdir(sys.argv[1])):
    x = np.load(os.path.join(sys.argv[1], s, "image.npy"))[0]
    px = np.clip(np.round(x * 255), 0, 255).astype(np.uint8).transpose(1, 2, 0)
    Image.fromarray(px).save(os.path.join(sys.argv[2], s + ".png"))
PYEOF
"$EXE" verify "$F" "$TMP/q.onnx" --calib-images "$TMP/img" --json "$TMP/img.json" --quiet ||
    bad "--calib-images"
$PY - "$TMP/img.json" "$TMP/r.json" <<'PYEOF' || bad "--calib-images: other results than the tensors"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["samples"] == b["samples"] == 12
# the PNGs hold the same pixels up to 8-bit rounding: same predictions, close SQNR
for x, y in zip(a["outputs"], b["outputs"]):
    assert x["top1_agreement"] == y["top1_agreement"]
    assert abs(x["error"]["sqnr_db"] - y["error"]["sqnr_db"]) < 3, (x["error"], y["error"])
PYEOF

# HTML: self-contained
grep -qi '<script\|<link\|<img\|@import\|url(' "$TMP/r.html" && bad "HTML refers to something outside"
grep -o 'https\?://[^"]*' "$TMP/r.html" | grep -v '^http://www.w3.org/2000/svg$' | grep -q . &&
    bad "HTML has a network address"
grep -q '<svg' "$TMP/r.html" && grep -q 'stroke="#d62728"' "$TMP/r.html" || bad "HTML lacks the charts"

# folded weights
$PY - "$TMP/bn.onnx" "$TMP/bncal" <<'PYEOF' || bad "making the Conv+BN model"
import sys, os, numpy as np, onnx
from onnx import helper, numpy_helper as nh, TensorProto
rng = np.random.default_rng(5)
W = rng.normal(0, 0.5, (4, 3, 3, 3)).astype(np.float32)
inits = [nh.from_array(W, "W"), nh.from_array(rng.normal(0, 0.1, 4).astype(np.float32), "B"),
         nh.from_array(rng.uniform(0.5, 2, 4).astype(np.float32), "gamma"),
         nh.from_array(rng.normal(0, 0.2, 4).astype(np.float32), "beta"),
         nh.from_array(rng.normal(0, 0.3, 4).astype(np.float32), "mean"),
         nh.from_array(rng.uniform(0.2, 3, 4).astype(np.float32), "var")]
nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["y"], name="bn")]
g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
for i in range(4):
    os.makedirs(os.path.join(sys.argv[2], "s%d" % i), exist_ok=True)
    np.save(os.path.join(sys.argv[2], "s%d" % i, "x.npy"), rng.normal(0, 1, (1, 3, 8, 8)).astype(np.float32))
PYEOF
"$EXE" quantize "$TMP/bn.onnx" -o "$TMP/bnq.onnx" --calib "$TMP/bncal" --min-intensity 0 --quiet || bad "quantize Conv+BN"
"$EXE" opt "$TMP/bn.onnx" -o "$TMP/bnf.onnx" --passes constant-to-initializer,fold-batchnorm || bad "opt fold-batchnorm"
"$EXE" verify "$TMP/bn.onnx" "$TMP/bnq.onnx" --data "$TMP/bncal" --json "$TMP/bn.json" --quiet || bad "verify Conv+BN"
$PY - "$TMP/bn.json" "$TMP/bnf.onnx" "$TMP/bnq.onnx" <<'PYEOF' || bad "folded weight SQNR"
import sys, json, numpy as np, onnx
from onnx import numpy_helper as nh
v = json.load(open(sys.argv[1]))
f = {i.name: nh.to_array(i) for i in onnx.load(sys.argv[2]).graph.initializer}
q = {i.name: nh.to_array(i) for i in onnx.load(sys.argv[3]).graph.initializer}
w = {x["name"]: x for x in v["weights"]}
assert "W_bnfold" in w, sorted(w)
x = f["W_bnfold"].astype(np.float64)
zp = q["W_bnfold_zero_point"].astype(np.float64).reshape(-1, 1, 1, 1)
y = (q["W_bnfold_quantized"].astype(np.float64) - zp) * q["W_bnfold_scale"].astype(np.float64).reshape(-1, 1, 1, 1)
want = 10 * np.log10((x ** 2).sum() / ((x - y) ** 2).sum())
got = w["W_bnfold"]["error"]["sqnr_db"]
print("verify.sh: folded weight W_bnfold: verify %.4f dB, numpy %.4f dB" % (got, want))
assert abs(got - want) < 1e-3, (got, want)
PYEOF

# slices: a detection head whose output0 = Concat(boxes 0..~70, sigmoid scores 0..1) on
# axis 1, the float model with its output quantized with one uint8 scale (0.3; whatever
# onnxq quantize's placement does): the whole output looks fine, the scores part collapses;
# each part's numbers equal numpy's on `onnxq run` outputs; the same with a Transpose after
# the Concat (the parts then lie along axis 2)
$PY "$SRC/tests/verify_make_concat.py" "$TMP/cf.onnx" "$TMP/ccal" --samples 1 &&
    $PY "$SRC/tests/verify_make_concat.py" "$TMP/cft.onnx" "$TMP/ccal" --samples 1 --transpose &&
    $PY "$SRC/tests/verify_make_concat.py" "$TMP/cjunk.onnx" "$TMP/cev" --samples 6 --seed 11 || bad "make concat models"
for t in "" t; do
    $PY "$SRC/tests/verify_output_qdq.py" "$TMP/cf$t.onnx" "$TMP/cq$t.onnx" output0 0.3 || bad "output QDQ cq$t"
    "$EXE" verify "$TMP/cf$t.onnx" "$TMP/cq$t.onnx" --data "$TMP/cev" --json "$TMP/cs$t.json" --html "$TMP/cs$t.html" \
        --min-sqnr 20 >"$TMP/cs$t.out" 2>"$TMP/cs$t.err"
    [ $? = 1 ] || bad "verify cq$t --min-sqnr 20: the scores part misses it, exit 1 expected"
    for s in $(ls "$TMP/cev"); do
        for m in f q; do
            mkdir -p "$TMP/c$m$t/$s"
            "$EXE" run "$TMP/c$m$t.onnx" --input x="$TMP/cev/$s/x.npy" --output-dir "$TMP/c$m$t/$s" >/dev/null ||
                bad "run c$m$t $s"
        done
    done
done
ax=1
for t in "" t; do
    grep -q "^    output0\[$ax:0\.\.4\] .* from boxes (Reshape)$" "$TMP/cs$t.out" &&
        grep -q "^    output0\[$ax:4\.\.10\] .* from scores (Reshape)$" "$TMP/cs$t.out" &&
        grep -q "^  worst: output0\[$ax:4\.\.10\] from scores (Reshape), SQNR" "$TMP/cs$t.out" ||
        { bad "slice lines of cq$t"; cat "$TMP/cs$t.out"; }
    grep -q "output \"output0\": part output0\[$ax:4\.\.10\] from scores (Reshape): SQNR .* below --min-sqnr 20.00 (whole output" \
        "$TMP/cs$t.err" || { bad "--min-sqnr message of cq$t"; cat "$TMP/cs$t.err"; }
    grep -q "output0\[$ax:4\.\.10\]" "$TMP/cs$t.html" || bad "HTML of cq$t lacks the slices"
    $PY - "$TMP/cs$t.json" "$TMP/cf$t" "$TMP/cq$t" $ax <<'PYEOF' || bad "slice numbers of cq$t differ from numpy"
import json, os, sys
import numpy as np, onnx
from onnx import numpy_helper as nh
r = json.load(open(sys.argv[1])); fd, qd, ax = sys.argv[2], sys.argv[3], int(sys.argv[4])
def load(d):
    return [nh.to_array(onnx.load_tensor(os.path.join(d, s, "output0.pb"))).astype(np.float64)
            for s in sorted(os.listdir(d))]
F, Q = load(fd), load(qd)
o = r["outputs"][0]
assert o["concat"] == "concat_head", o["concat"]
sl = o["slices"]
assert [(s["axis"], s["start"], s["end"], s["tensor"], s["op_type"], s["node"]) for s in sl] == \
    [(ax, 0, 4, "boxes", "Reshape", "reshape_box"), (ax, 4, 10, "scores", "Reshape", "reshape_cls")], sl
def nums(parts):
    x = np.concatenate([p[0].ravel() for p in parts]); y = np.concatenate([p[1].ravel() for p in parts])
    return (10 * np.log10((x * x).sum() / ((x - y) ** 2).sum()), (x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum()),
            np.abs(x - y).max(), x.size)
def part(a, b, s):
    idx = [slice(None)] * a.ndim; idx[ax] = slice(s["start"], s["end"]); idx = tuple(idx)
    return a[idx], b[idx]
want = [nums([part(f, q, s) for f, q in zip(F, Q)]) for s in sl]
whole = nums(list(zip(F, Q)))
for s, w in zip(sl, want):
    e = s["error"]
    print("verify.sh: %s: verify %.4f dB, numpy %.4f dB" % (s["label"], e["sqnr_db"], w[0]))
    assert abs(e["sqnr_db"] - w[0]) < 1e-6 and abs(e["cosine"] - w[1]) < 1e-9, (e, w)
    assert abs(e["max_abs_err"] - w[2]) < 1e-6 and e["elements"] == w[3], (e, w)
assert abs(o["error"]["sqnr_db"] - whole[0]) < 1e-6
# the whole output looks fine, the scores part does not; the worst part decides
assert whole[0] > 30 and want[1][0] < 15, (whole, want)
for wst in (o["worst"], r["worst"]):
    assert wst["output"] == "output0" and wst["slice"] == 1 and wst["tensor"] == "scores", wst
    assert wst["label"] == "output0[%d:4..10]" % ax and abs(wst["sqnr_db"] - want[1][0]) < 1e-6, wst
assert o["meets_min_sqnr"] is False
PYEOF
    ax=2
done
# an output without a Concat has exactly one slice: the whole output
$PY - "$TMP/r.json" <<'PYEOF' || bad "an output without a Concat is not one whole slice"
import json, sys
r = json.load(open(sys.argv[1]))
for o in r["outputs"]:
    assert len(o["slices"]) == 1 and o["slices"][0]["axis"] is None and o["concat"] is None, o["slices"]
    assert o["slices"][0]["error"] == o["error"] and o["slices"][0]["label"] == o["name"]
    assert o["worst"]["slice"] == 0 and o["worst"]["sqnr_db"] == o["error"]["sqnr_db"]
assert r["worst"]["output"] == r["outputs"][0]["name"]
PYEOF

[ $fail = 0 ] && note "ok"
exit $fail
