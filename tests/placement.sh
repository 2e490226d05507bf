#!/bin/bash
# Placement by value in onnxruntime (docs/passes/insert-qdq.md, "Placement by value"), on
# the two hand-built models of tests/make_yolo_head.py (32 calibration images, 32 eval
# images drawn with another seed), quantized with the defaults (target ort-x86) and run in
# onnxruntime 1.30 with graph optimizations on (tests/placement_ort.py):
#   yolo_head: box logits (~ +-57) and class logits (~ -10 .. 0.7) -> Concat -> Reshape ->
#     Split -> Sigmoid. No QLinearConcat (nothing after the Concat runs in integers), and the
#     class scores keep >= 25 dB (measured 27.0 dB; 20.3 dB with one uint8 scale for the
#     Concat, the rules before) and the boxes >= 26 dB (28.4 dB either way).
#   neck: Concat of a wide (~ +-100) and a narrow (~ +-1) branch into a Conv, the narrow
#     branch also read by a second Conv: that Conv's output keeps >= 26 dB (measured 29.3;
#     3.4 dB when the narrow branch shared the Concat's scale), the Concat's Conv >= 27 dB
#     (29.9 dB either way), and the Concat still runs as QLinearConcat.
# Needs python3-onnx + python3-numpy (the models) and the venv of .ci/venv.sh (onnxruntime).
# usage: bash placement.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
EXE=$1 SRC=$2 BIN=$3
py="${ONNXQ_CACHE:-$HOME/.cache/onnxq}/venv/bin/python"
/usr/bin/python3 -c 'import onnx, numpy' 2>/dev/null || { echo "SKIP: python3-onnx / python3-numpy missing"; exit 0; }
[ -x "$py" ] || { echo "SKIP: no venv at $py (bash .ci/venv.sh creates it)"; exit 0; }
T="$BIN/placement.tmp.d"
rm -rf "$T"; mkdir -p "$T"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
/usr/bin/python3 "$SRC/tests/make_yolo_head.py" "$T" || { echo "FAIL: make_yolo_head.py"; exit 1; }
for m in yolo_head neck; do
  "$EXE" quantize "$T/$m.onnx" -o "$T/$m.q.onnx" --calib "$T/calib" --quiet --json "$T/$m.json" \
    || { bad "$m: quantize"; continue; }
  "$py" "$SRC/tests/placement_ort.py" "$T/$m.onnx" "$T/$m.q.onnx" "$T/eval" 2>/dev/null | tee "$T/$m.txt"
  "$py" "$SRC/tests/placement_ort.py" "$T/$m.onnx" "$T/$m.q.onnx" "$T/eval" --json 2>/dev/null > "$T/$m.ort.json" \
    || bad "$m: onnxruntime"
done
/usr/bin/python3 - "$T" <<'PY' || bad "thresholds"
import json, sys
t = sys.argv[1]
ok = True
def need(what, cond, value):
    global ok
    print(f"{'ok  ' if cond else 'FAIL'} {what}: {value}")
    ok &= bool(cond)
def stats(m):
    d = json.load(open(f"{t}/{m}.json"))
    return [p for p in d["passes"] if p["name"] == "insert-qdq"][0]["stats"]
y = json.load(open(f"{t}/yolo_head.ort.json"))
need("yolo_head: class scores >= 25 dB", y["sqnr_db"]["scores"] >= 25, y["sqnr_db"]["scores"])
need("yolo_head: boxes >= 26 dB", y["sqnr_db"]["boxes"] >= 26, y["sqnr_db"]["boxes"])
need("yolo_head: no QLinearConcat", "QLinearConcat" not in y["integer_kernels"], y["integer_kernels"])
need("yolo_head: 7 QLinearConv", y["integer_kernels"].get("QLinearConv") == 7, y["integer_kernels"])
need("yolo_head: Q/DQ of the Concat and the Reshape dropped", stats("yolo_head").get("qdq_dropped_float_readers") == 2,
     stats("yolo_head"))
n = json.load(open(f"{t}/neck.ort.json"))
need("neck: side Conv >= 26 dB", n["sqnr_db"]["side"] >= 26, n["sqnr_db"]["side"])
need("neck: fuse Conv >= 27 dB", n["sqnr_db"]["fuse"] >= 27, n["sqnr_db"]["fuse"])
need("neck: QLinearConcat kept", n["integer_kernels"].get("QLinearConcat") == 1, n["integer_kernels"])
need("neck: one Concat input with its own scale", stats("neck").get("concat_inputs_own_scale") == 1, stats("neck"))
sys.exit(0 if ok else 1)
PY
[ $fail = 0 ] && echo "placement: all checks passed"
exit $fail
