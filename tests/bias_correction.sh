#!/bin/bash
# quantize bias correction: which targets turn it on (--print-config, sources), the options
# and the config key, refusals (exit 2, one line naming the option), and end to end against
# onnxruntime on a model with a planted weight-rounding shift (tests/bias_correction.py:
# Debian python3-onnx/numpy and onnxruntime-node; skipped without them).
# usage: bash bias_correction.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
exe=$1 src=$2 bin=${3:-/tmp}
work="$bin/bias_correction"
rm -rf "$work"
mkdir -p "$work"
fails=0
model="$src/models/shapes_cnn.onnx"
KEY=bias_correction
. "$src/tests/quantize_option.bash"

# what each target resolves to, and where the choice came from
check "None True target"
check "None True target" --target ort-x86-vnni
check "None False target" --target generic
check "False False option" --no-bias-correction
check "None False fallback" --target-sqnr 30
check "True True option" --target-sqnr 30 --bias-correction
check "True True option" --target generic --bias-correction
# the config file sets it: --print-config output read back keeps the choice, now from "config"
cfg --no-bias-correction >"$work/cfg.json"
"$exe" quantize "$model" --config "$work/cfg.json" --print-config >"$work/cfg2.json" 2>&1
[ "$(resolved <"$work/cfg2.json")" = "False False config" ] || fail "--config bias_correction false: $(resolved <"$work/cfg2.json")"
echo '{"bias_correction": "yes"}' >"$work/bad.json"
"$exe" quantize "$model" --calib "$src/models/calib" --config "$work/bad.json" -o "$work/x.onnx" >"$work/out" 2>"$work/err"
[ $? -eq 2 ] && grep -q bias_correction "$work/err" || fail "config bias_correction \"yes\" accepted"

# refusals: exit 2, one stderr line naming the option, no output file
echo '{}' >"$work/ov.json"
refuse "--bias-correction needs calibration data" --overrides "$work/ov.json" --bias-correction
refuse "--bias-correction is for --mode static" --mode dynamic --bias-correction
refuse "--bias-correction is for --mode static" --mode weight-only --bias-correction
# --overrides alone (no data): the default quietly does without
"$exe" quantize "$model" --overrides "$work/ov.json" --print-config >"$work/ov.out" 2>&1
[ "$(resolved <"$work/ov.out")" = "None False data" ] || fail "--overrides alone: $(resolved <"$work/ov.out")"

# the bundled model: it runs, says what it did, and the result still verifies
"$exe" quantize "$model" -o "$work/q.onnx" --calib "$src/models/calib" >"$work/q.out" 2>&1 ||
  { fail "quantize the bundled model"; cat "$work/q.out"; }
grep -q "bias correction: [0-9]* layer(s) on [0-9]* sample(s)" "$work/q.out" || fail "no bias correction line"
"$exe" quantize "$model" -o "$work/q2.onnx" --calib "$src/models/calib" --quiet 2>"$work/q2.err"
[ ! -s "$work/q2.err" ] || { fail "--quiet printed:"; cat "$work/q2.err"; }
# the same initializers with 1 and 3 threads (the config in the metadata names the count)
"$exe" quantize "$model" -o "$work/q1.onnx" --calib "$src/models/calib" --threads 1 --quiet
"$exe" quantize "$model" -o "$work/q3.onnx" --calib "$src/models/calib" --threads 3 --quiet
"$exe" quantize "$model" -o "$work/q0.onnx" --calib "$src/models/calib" --no-bias-correction --quiet
/usr/bin/python3 - "$work" <<'PY' || fail "initializers with 1 and 3 threads, or against no correction"
import sys, onnx
w = sys.argv[1]
def inits(f):
    return {t.name: t.SerializeToString() for t in onnx.load(f"{w}/{f}").graph.initializer}
a, b, c = inits("q1.onnx"), inits("q3.onnx"), inits("q0.onnx")
moved = [k for k in a if a[k] != c.get(k)]
print("biases corrected:", len(moved))
sys.exit(0 if a == b and moved and all(k.endswith("_quantized") for k in moved) else 1)
PY

/usr/bin/python3 "$src/tests/bias_correction.py" "$exe" "$src" "$work/e2e"
rc=$?
if [ $rc -eq 77 ]; then echo "SKIP: end to end (python modules or onnxruntime-node missing)"
elif [ $rc -ne 0 ]; then fails=$((fails + 1)); fi
[ $fails -eq 0 ] && echo "bias_correction: all passed"
exit $((fails > 0))
