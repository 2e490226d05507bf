#!/bin/bash
# What a new user meets (issue 13): output paths checked before any work, `--json -`,
# one sample-folder reader for every command, generated data for every input dtype
# with --dim / --input-value, quantize --calib-images without --size and with --grey,
# one cause per error (no generic category line after it), symbolic dims by name,
# progress on stderr, --json on every command that reports.
# usage: bash cli_ux.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
EXE=$1 SRC=$2 BIN=$3
T="$BIN/cli_ux.tmp.d"
rm -rf "$T"; mkdir -p "$T"
cd "$T" || exit 1
fail=0
bad() { echo "FAIL: $*"; fail=1; }
M="$SRC/models/shapes_cnn.onnx"
CALIB="$SRC/models/calib"
PY=/usr/bin/python3
# python3-onnx, numpy and PIL make the small models and data (checked by tests/prereqs.sh)
if ! $PY -c 'import onnx, numpy, PIL' 2>/dev/null; then
    if [ "${ONNXQ_REQUIRE_ALL:-0}" = 1 ]; then echo "FAIL: python3-onnx/numpy/PIL missing"; exit 1; fi
    echo "SKIP: python3-onnx, numpy or PIL missing"; exit 77
fi

# rc EXPECTED NAME CMD...: run, keep stderr in $T/err, stdout in $T/out
expect() {
    local want=$1 name=$2; shift 2
    "$@" >"$T/out" 2>"$T/err"
    local got=$?
    [ "$got" = "$want" ] || { bad "$name: exit $got, expected $want"; sed 's/^/    /' "$T/err" | head -5; }
}
one_line() { # NAME PATTERN: stderr is exactly one line and matches
    [ "$(wc -l <"$T/err")" = 1 ] || { bad "$1: $(wc -l <"$T/err") lines on stderr"; sed 's/^/    /' "$T/err" | head -5; }
    grep -q -- "$2" "$T/err" || bad "$1: stderr lacks \"$2\": $(cat "$T/err")"
}
last_line() { # NAME PATTERN: the last stderr line is the cause
    tail -n 1 "$T/err" | grep -q -- "$2" || bad "$1: last line is not the cause: $(tail -n 1 "$T/err")"
    grep -q 'failed: \(usage error\|parse error\|invalid model\|unsupported\)' "$T/err" &&
        bad "$1: a generic category line follows the cause"
}
is_json() { # NAME FILE: valid JSON with "version": 1
    $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["version"] == 1, d.get("version")' "$2" ||
        bad "$1: not JSON with \"version\": 1"
}

# ---- 1. outputs checked before any work --------------------------------------------
expect 2 "quantize -o nodir/q.onnx" "$EXE" quantize "$M" -o nodir/q.onnx --calib "$CALIB"
one_line "quantize -o nodir/q.onnx" "nodir/q.onnx"
grep -q calibrating "$T/err" && bad "quantize -o nodir: calibrated before failing"
mkdir -p somedir
expect 2 "quantize -o somedir" "$EXE" quantize "$M" -o somedir --calib "$CALIB"
one_line "quantize -o somedir" "somedir: is a folder"
cp "$M" in.onnx; ln -sf in.onnx link.onnx
expect 2 "quantize -o IN" "$EXE" quantize in.onnx -o in.onnx --calib "$CALIB"
one_line "quantize -o IN" "refusing to overwrite the input model"
expect 2 "quantize -o IN via a link" "$EXE" quantize link.onnx -o in.onnx --calib "$CALIB"
one_line "quantize -o IN via a link" "refusing to overwrite the input model"
cmp -s in.onnx "$M" || bad "the input was modified"
expect 2 "opt -o nodir" "$EXE" opt "$M" -o nodir/o.onnx --passes eliminate-dead
one_line "opt -o nodir" "nodir/o.onnx"
expect 2 "opt -o IN" "$EXE" opt in.onnx -o link.onnx --passes eliminate-dead
one_line "opt -o IN" "refusing to overwrite the input model"
expect 2 "convert to nodir" "$EXE" convert "$M" nodir/c.onnx
one_line "convert to nodir" "nodir/c.onnx"
expect 2 "convert to a folder" "$EXE" convert "$M" somedir
one_line "convert to a folder" "is a folder"
expect 2 "verify --json nodir" "$EXE" verify "$M" "$M" --data "$CALIB" --json nodir/v.json
one_line "verify --json nodir" "nodir/v.json"
expect 2 "verify --html somedir" "$EXE" verify "$M" "$M" --data "$CALIB" --html somedir
one_line "verify --html somedir" "is a folder"
touch afile
expect 2 "run --output-dir FILE" "$EXE" run "$M" --random --dim N=1 --output-dir afile
grep -q "afile" "$T/err" || bad "run --output-dir FILE: message"
expect 0 "run --output-dir NEW" "$EXE" run "$M" --random --dim N=1 --output-dir newout
[ -f newout/logits.pb ] || bad "run --output-dir: folder not created"

# ---- 2. --json - is standard output ---------------------------------------------------
expect 0 "verify --json -" "$EXE" verify "$M" "$M" --data "$SRC/models/eval" --json - --no-isolation
is_json "verify --json -" "$T/out"
[ -e ./- ] && bad "verify --json - wrote a file named -"
expect 0 "dump --json -" "$EXE" dump --json - "$M"
is_json "dump --json -" "$T/out"
expect 0 "run --json -" "$EXE" run "$M" --random --dim N=2 --json -
is_json "run --json -" "$T/out"
$PY - "$T/out" <<'EOF' || bad "run --json: shapes / values"
import json, sys
d = json.load(open(sys.argv[1]))
o = {x["name"]: x for x in d["outputs"]}
assert o["logits"]["shape"] == [2, 4] and o["probs"]["dtype"] == "float32", o
assert 0 < o["probs"]["min"] <= o["probs"]["max"] < 1 and abs(o["probs"]["mean"] - 0.25) < 1e-6, o["probs"]
EOF
expect 0 "check --json -" "$EXE" check "$M" --json -
is_json "check --json -" "$T/out"
printf 'garbage' > broken.onnx
expect 2 "check --json - (broken)" "$EXE" check broken.onnx --json -
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["ok"] is False and d["problems"], d' "$T/out" ||
    bad "check --json: broken model not reported"
expect 0 "opt --json -" "$EXE" opt "$M" -o o.onnx --passes eliminate-dead,dedupe-initializers --stats --json -
is_json "opt --json -" "$T/out"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert [p["name"] for p in d["passes"]] == ["eliminate-dead", "dedupe-initializers"], d' "$T/out" ||
    bad "opt --json: passes"
expect 0 "quantize --json -" "$EXE" quantize "$M" -o q.onnx --calib "$CALIB" --max-samples 4 --quiet --json -
is_json "quantize --json -" "$T/out"
$PY - "$T/out" <<'EOF' || bad "quantize --json: summary"
import json, sys
d = json.load(open(sys.argv[1]))
p = {x["name"]: x for x in d["passes"]}
assert d["status"] == "ok" and d["output"] == "q.onnx", d
assert p["calibrate"]["stats"]["samples"] == 4, p["calibrate"]
assert p["insert-qdq"]["stats"]["weights_quantized"] == 3, p["insert-qdq"]  # 2 Conv + 1 Gemm
# the default method, select; 4 samples hold out 1, too few to judge: the first candidate
c = d["calibration_choice"]
assert d["config"]["method"] == "select" and c["chosen"] == "p99.99" and c["held_out_samples"] == 0, c
EOF
mkdir -p conf/case/test_data_set_0
cp "$M" conf/case/model.onnx
"$EXE" run "$M" --input image="$CALIB/sample_000/image.npy" --output-dir conf/case/test_data_set_0 >/dev/null ||
    bad "conformance case outputs"
cp "$CALIB/sample_000/image.npy" conf/case/test_data_set_0/input_0.npy
$PY -c '
import numpy as np, onnx
from onnx import numpy_helper as nh
t = nh.from_array(np.load("conf/case/test_data_set_0/input_0.npy"), "image")
open("conf/case/test_data_set_0/input_0.pb", "wb").write(t.SerializeToString())
for i, n in enumerate(["logits", "probs"]):
    p = "conf/case/test_data_set_0/%s.pb" % n
    __import__("os").rename(p, "conf/case/test_data_set_0/output_%d.pb" % i)
' || bad "conformance case files"
rm -f conf/case/test_data_set_0/input_0.npy
expect 0 "conformance --json -" "$EXE" conformance conf --json -
is_json "conformance --json -" "$T/out"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["passed"] == 1 and d["cases"][0]["result"] == "pass", d' "$T/out" ||
    bad "conformance --json: counts"

# ---- 3. one sample reader: the same layouts for verify and quantize ------------------
mkdir -p flat
for s in sample_000 sample_001 sample_002; do cp "$CALIB/$s/image.npy" "flat/$s.npy"; done
expect 0 "verify --data FLAT" "$EXE" verify "$M" "$M" --data flat --json v.json --quiet --no-isolation
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["samples"] == 3, d["samples"]' v.json ||
    bad "verify --data FLAT: not one sample per file"
expect 0 "quantize --calib FLAT" "$EXE" quantize "$M" -o qf.onnx --calib flat --quiet --json qf.json
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert [p for p in d["passes"] if p["name"] == "calibrate"][0]["stats"]["samples"] == 3' qf.json ||
    bad "quantize --calib FLAT: not one sample per file"
# the ONNX test-data layout: one folder holding input_0.pb is one sample
expect 0 "verify --data test_data_set" "$EXE" verify "$M" "$M" --data conf/case/test_data_set_0 --json v.json --quiet
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["samples"] == 1, d["samples"]' v.json ||
    bad "verify --data test_data_set_0: not one sample"
expect 0 "quantize --calib test_data_set" "$EXE" quantize "$M" -o qt.onnx --calib conf/case/test_data_set_0 --quiet

# ---- 4. generated data for every input dtype; --input-value; --dim --------------------
$PY - <<'EOF' || bad "making the int64-input model"
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper as nh
# y = x @ W ; s = Cast(sr) ; k = Cast(flag) (silero-like: a float input and an int64 scalar)
W = np.arange(8, dtype=np.float32).reshape(4, 2) / 8
g = helper.make_graph(
    [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm"),
     helper.make_node("Cast", ["sr"], ["s"], to=TensorProto.FLOAT, name="cast"),
     helper.make_node("Cast", ["flag"], ["k"], to=TensorProto.FLOAT, name="cast2"),
     helper.make_node("Cast", ["h"], ["hf"], to=TensorProto.FLOAT, name="cast3")],
    "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4]),
     helper.make_tensor_value_info("sr", TensorProto.INT64, []),
     helper.make_tensor_value_info("flag", TensorProto.BOOL, [3]),
     helper.make_tensor_value_info("h", TensorProto.FLOAT16, [2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2]),
     helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
     helper.make_tensor_value_info("k", TensorProto.FLOAT, [3]),
     helper.make_tensor_value_info("hf", TensorProto.FLOAT, [2])],
    [nh.from_array(W, "W")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "ints.onnx")
EOF
expect 0 "quantize --calib-random (int64, bool, float16 inputs)" \
    "$EXE" quantize ints.onnx -o qi.onnx --calib-random 3 --input-value sr=16000 --dim batch=5 --quiet
expect 0 "run --random --input-value" "$EXE" run ints.onnx --random --dim batch=3 --input-value sr=16000 --json -
$PY - "$T/out" <<'EOF' || bad "run --random: generated values"
import json, sys
o = {x["name"]: x for x in json.load(open(sys.argv[1]))["outputs"]}
assert o["s"]["min"] == o["s"]["max"] == 16000, o["s"]          # --input-value
assert o["y"]["shape"] == [3, 2], o["y"]                        # --dim batch=3
assert set([o["k"]["min"], o["k"]["max"]]) <= {0.0, 1.0}, o["k"]  # bools 0/1
assert 0 <= o["hf"]["min"] <= o["hf"]["max"] < 1, o["hf"]       # float16 in [0, 1)
EOF
expect 0 "run --random (int64 scalar)" "$EXE" run ints.onnx --random --dim batch=1 --json -
$PY -c '
import json, sys
o = {x["name"]: x for x in json.load(open(sys.argv[1]))["outputs"]}
v = o["s"]["min"]
assert v == int(v) and 0 <= v <= 9, v   # integers: uniform in {0..9}
' "$T/out" || bad "run --random: int64 not in 0..9"
expect 2 "run --random without --dim" "$EXE" run ints.onnx --random
one_line "run --random without --dim" "give --dim batch=N"
$PY - <<'EOF' || bad "making the unnamed-dim model"
import onnx
from onnx import helper, TensorProto
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 3])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "unnamed.onnx")
EOF
expect 2 "run --random, unnamed dim" "$EXE" run unnamed.onnx --random
one_line "run --random, unnamed dim" "give --dim x\\[0\\]=N"
expect 0 "run --random --dim x[0]=4" "$EXE" run unnamed.onnx --random --dim 'x[0]=4' --json -
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["outputs"][0]["shape"] == [4, 3], d' "$T/out" ||
    bad "--dim x[0]=4: shape"
expect 2 "--input-value not a number" "$EXE" run ints.onnx --random --input-value sr=abc
one_line "--input-value not a number" "sr"

# ---- 5. quantize --calib-images: size from the model, --grey ---------------------------
mkdir -p img grey
$PY - <<EOF || bad "writing PNG files"
import numpy as np
from PIL import Image
for i, s in enumerate(["sample_000", "sample_001", "sample_002"]):
    x = np.load("$CALIB/%s/image.npy" % s)[0]
    px = np.clip(np.round(x * 255), 0, 255).astype(np.uint8).transpose(1, 2, 0)
    Image.fromarray(px).save("img/%s.png" % s)
    Image.fromarray(px).convert("L").resize((8, 8)).save("grey/%s.png" % s)
EOF
expect 0 "quantize --calib-images without --size" "$EXE" quantize "$M" -o qimg.onnx --calib-images img --quiet
$PY - <<'EOF' || bad "making the one-channel model"
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper as nh
W = (np.arange(18, dtype=np.float32).reshape(2, 1, 3, 3) - 9) / 9
g = helper.make_graph([helper.make_node("Conv", ["x", "W"], ["y"], name="conv")], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 6, 6])], [nh.from_array(W, "W")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "grey.onnx")
EOF
expect 0 "quantize --calib-images --grey" "$EXE" quantize grey.onnx -o qgrey.onnx --calib-images grey --grey --min-intensity 0 --quiet
expect 0 "quantize --calib-images --grey --target-sqnr (the fallback reads the images too)" \
    "$EXE" quantize grey.onnx -o qgrey2.onnx --calib-images grey --grey --target-sqnr 20 --min-intensity 0 --quiet
expect 0 "verify --calib-images --grey" "$EXE" verify grey.onnx qgrey.onnx --calib-images grey --grey --quiet
expect 2 "quantize --size bad" "$EXE" quantize "$M" -o qimg.onnx --calib-images img --size 24by24
one_line "quantize --size bad" "--size wants HxW"

# ---- 6. one cause per error; exit 2 for bad input --------------------------------------
mkdir -p trunc/s0 wrong/s0 jpg
head -c 200 "$CALIB/sample_000/image.npy" > trunc/s0/image.npy
expect 2 "quantize: truncated .npy" "$EXE" quantize "$M" -o q2.onnx --calib trunc --quiet
last_line "quantize: truncated .npy" "trunc/s0/image.npy"
mkdir -p notnpy/s0; printf 'garbage, not numpy' > notnpy/s0/image.npy
expect 2 "quantize: .npy without the magic" "$EXE" quantize "$M" -o q2.onnx --calib notnpy --quiet
last_line "quantize: .npy without the magic" "notnpy/s0/image.npy: not a .npy file"
$PY -c 'import numpy as np; np.save("wrong/s0/image.npy", np.zeros((1, 3, 20, 20), np.float32))'
expect 2 "quantize: wrong shape" "$EXE" quantize "$M" -o q2.onnx --calib wrong --quiet
last_line "quantize: wrong shape" "got float32\[1,3,20,20\]"
# 7. symbolic dims by name
grep -q 'expects float32\[N,3,24,24\]' "$T/err" || bad "symbolic dim not shown by name: $(cat "$T/err")"
expect 2 "verify: wrong shape" "$EXE" verify "$M" "$M" --data wrong --quiet
last_line "verify: wrong shape" "expects float32\[N,3,24,24\]"
mkdir -p wrong2/s1; cp -r "$CALIB/sample_000" wrong2/s00; cp wrong/s0/image.npy wrong2/s1/
expect 2 "verify: wrong shape after a good sample" "$EXE" verify "$M" "$M" --data wrong2 --quiet
one_line "verify: wrong shape after a good sample" "sample .*wrong2/s1: .*expects float32\[N,3,24,24\]"
cp img/sample_000.png jpg/a.jpg; printf '\377\330\377\340garbage' > jpg/b.jpg
expect 2 "quantize: corrupt JPEG" "$EXE" quantize "$M" -o q2.onnx --calib-images jpg --quiet
last_line "quantize: corrupt JPEG" "b.jpg"
expect 2 "quantize --calib FILE" "$EXE" quantize "$M" -o q2.onnx --calib "$CALIB/sample_000/image.npy"
one_line "quantize --calib FILE" "is a file"
expect 2 "verify --data FILE" "$EXE" verify "$M" "$M" --data "$CALIB/sample_000/image.npy"
one_line "verify --data FILE" "is a file"
[ -e q2.onnx ] && bad "a failed quantize left an output"

# ---- 8. progress: plain lines when not a terminal, a self-updating line on one --------
expect 0 "verify progress" "$EXE" verify "$M" "$M" --data "$SRC/models/eval" --no-isolation --json v.json
grep -q '^verify: 64/64, ' "$T/err" || bad "verify: no progress lines: $(head -3 "$T/err")"
expect 0 "verify --quiet" "$EXE" verify "$M" "$M" --data "$SRC/models/eval" --no-isolation --quiet --json v.json
[ -s "$T/err" ] && bad "verify --quiet printed: $(head -3 "$T/err")"
if command -v script >/dev/null; then
    script -qec "'$EXE' verify '$M' '$M' --data '$SRC/models/eval' --no-isolation --json v.json >/dev/null" /dev/null \
        >tty.txt 2>&1
    grep -q $'\rverify \[##############################\] 64/64' tty.txt || bad "verify on a terminal: no progress line"
fi

# ---- 9. repeated notes: one line per kind with the worst case and a count; --quiet ----
# prints nothing but errors; --verbose and --json list every note. A Conv whose weight
# channels 1..3 are tiny (1e-36: scale FLT_MIN) but whose biases are not: fold-bias raises each of those
# channels' scale so the bias fits int32 (three notes of one kind, the worst is the
# largest bias: channel 3).
$PY - "$T/zb.onnx" <<'PY'
import sys, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as TP
w = np.full((4, 1, 1, 1), 1e-36, np.float32); w[0] = 1.0
b = np.array([0.1, 5.0, 7.0, 9.0], np.float32)
g = h.make_graph([h.make_node("Conv", ["x", "w", "b"], ["y"], name="conv")], "zb",
                 [h.make_tensor_value_info("x", TP.FLOAT, [1, 1, 4, 4])],
                 [h.make_tensor_value_info("y", TP.FLOAT, [1, 4, 4, 4])],
                 [nh.from_array(w, "w"), nh.from_array(b, "b")])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), sys.argv[1])
PY
Q=(quantize "$T/zb.onnx" -o zb.q.onnx --calib-random 2 --no-bias-correction --min-intensity 0)
expect 0 "notes grouped" "$EXE" "${Q[@]}" --json zb.json
n=$(grep -c 'fold-bias' "$T/err")
[ "$n" = 1 ] || bad "notes: $n fold-bias lines on stderr, expected 1: $(cat "$T/err")"
grep 'fold-bias' "$T/err" | grep -q 'channel 3 .*\[worst of 3 like it' || bad "notes: not the worst of 3: $(cat "$T/err")"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1]))["diagnostics"]; sys.exit(0 if sum("fold-bias" in x["message"] for x in d) == 3 else 1)' zb.json \
    || bad "notes: --json does not list the 3 notes"
expect 0 "notes --verbose" "$EXE" "${Q[@]}" --verbose
n=$(grep -c 'fold-bias' "$T/err")
[ "$n" = 3 ] || bad "notes --verbose: $n fold-bias lines, expected 3"
expect 0 "notes --quiet" "$EXE" "${Q[@]}" --quiet
[ -s "$T/err" ] && bad "quantize --quiet printed: $(head -3 "$T/err")"
# the same Conv (4 multiply-adds per output pixel against 1 + 4 elements crossing to float)
# left float by --min-intensity: nothing quantized, exit 1, and the error says why
expect 1 "all convs below --min-intensity" "$EXE" quantize "$T/zb.onnx" -o zb.q.onnx --calib-random 2 --min-intensity 64
last_line "all convs below --min-intensity" 'no node quantized: the 1 Conv node of the model does too few multiply-adds.*--min-intensity 0 quantizes it'
# a stem (3 -> 256, 3x3: 6912 multiply-adds against 3 + 256 elements crossing) left float, a
# 1x1 256 -> 256 after the HardSwish (65536 against 512) quantized: one line says so
$PY - "$T/mi.onnx" <<'PY'
import sys, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as TP
r = np.random.default_rng(0)
w1 = (0.1 * r.standard_normal((256, 3, 3, 3))).astype(np.float32)
w2 = (0.05 * r.standard_normal((256, 256, 1, 1))).astype(np.float32)
g = h.make_graph([h.make_node("Conv", ["x", "w1"], ["a"], name="stem", pads=[1, 1, 1, 1]),
                  h.make_node("HardSwish", ["a"], ["b"], name="hs"),
                  h.make_node("Conv", ["b", "w2"], ["y"], name="pw")], "mi",
                 [h.make_tensor_value_info("x", TP.FLOAT, [1, 3, 8, 8])],
                 [h.make_tensor_value_info("y", TP.FLOAT, [1, 256, 8, 8])],
                 [nh.from_array(w1, "w1"), nh.from_array(w2, "w2")])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), sys.argv[1])
PY
expect 0 "one Conv below --min-intensity" "$EXE" quantize "$T/mi.onnx" -o mi.q.onnx --calib-random 2 --min-intensity 64
grep -q 'placement: 1 Conv node left float, too few multiply-adds.*--min-intensity 64; 0 quantizes them' "$T/err" ||
    bad "min-intensity: no placement line: $(cat "$T/err")"
expect 0 "one Conv below --min-intensity, --quiet" "$EXE" quantize "$T/mi.onnx" -o mi.q.onnx --calib-random 2 --min-intensity 64 --quiet
[ -s "$T/err" ] && bad "quantize --quiet printed: $(head -3 "$T/err")"

# names from the file are printed escaped: a node name with a terminal escape, a newline and
# a byte that is not UTF-8 gives one line of printable text naming it
$PY - "$T/badname.onnx" <<'PYEOF'
import sys
from onnx import helper, TensorProto
n = helper.make_node("Conv", ["x", "w"], ["y"], name="bad\x1b[31mnXme\n", kernel_shape=[3, 3])
g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
b = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
open(sys.argv[1], "wb").write(b.replace(b"nXme", b"n\xffme"))
PYEOF
expect 2 "escaped names" "$EXE" check "$T/badname.onnx"
[ "$(wc -l <"$T/err")" = 1 ] || bad "escaped names: $(wc -l <"$T/err") lines on stderr, expected 1"
grep -q 'node "bad\\x1B\[31mn\\xFFme\\x0A"' "$T/err" || bad "escaped names: $(cat -A "$T/err")"
LC_ALL=C grep -q $'\x1b' "$T/err" && bad "escaped names: a raw escape byte reached the terminal"

# a Conv without a bias of its own: bias correction says in one line that it corrected nothing
# and why (it printed "0 layer(s) on 0 sample(s) ... largest correction 0.000 x ... (-)")
$PY - "$T/nobias.onnx" "$T/nobias_calib" <<'PYEOF'
import os, sys
import numpy as np
from onnx import helper, numpy_helper, TensorProto
rng = np.random.default_rng(0)
w = numpy_helper.from_array(rng.normal(0, 0.3, (16, 8, 3, 3)).astype(np.float32), "w")
g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
open(sys.argv[1], "wb").write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
for k in range(8):
    os.makedirs(f"{sys.argv[2]}/{k:03d}", exist_ok=True)
    np.save(f"{sys.argv[2]}/{k:03d}/x.npy", rng.normal(0, 1, (1, 8, 16, 16)).astype(np.float32))
PYEOF
expect 0 "bias correction, no bias" "$EXE" quantize "$T/nobias.onnx" -o "$T/nobias_q.onnx" --calib "$T/nobias_calib" --min-intensity 0
grep -q "bias correction: nothing corrected: 1 quantized layer(s) skipped" "$T/err" ||
    bad "bias correction, no bias: $(grep 'bias correction' "$T/err")"

# run --profile: the time per operator type over the timed runs; without --time it is a usage error
expect 2 "run --profile without --time" "$EXE" run "$M" --random --dim N=1 --profile
one_line "run --profile without --time" "give --time too"
expect 0 "run --time --profile" "$EXE" run "$M" --random --dim N=1 --time 3 --profile
grep -q "^profile: 2 runs" "$T/out" || bad "run --profile: no profile line: $(head -3 "$T/out")"
grep -q "^  Conv  *2 " "$T/out" || bad "run --profile: the model's 2 Convs are not listed: $(cat "$T/out")"

[ $fail = 0 ] && echo "cli_ux: all ok"
exit $fail
