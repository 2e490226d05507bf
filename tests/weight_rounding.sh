#!/bin/bash
# quantize --weight-rounding: what it resolves to (--print-config, sources), the config key,
# refusals (exit 2, one line naming the option), the bundled model, and end to end against
# onnxruntime (tests/weight_rounding.py: Debian python3-onnx/numpy and onnxruntime-node;
# skipped without them).
# usage: bash weight_rounding.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
exe=$1 src=$2 bin=${3:-/tmp}
work="$bin/weight_rounding"
rm -rf "$work"
mkdir -p "$work"
fails=0
model="$src/models/shapes_cnn.onnx"
KEY=weight_rounding
. "$src/tests/quantize_option.bash"

check "None nearest target"
check "gptq gptq option" --weight-rounding gptq
check "None nearest weight_dtype" --weight-dtype uint8 --weight-asymmetric
got=$("$exe" quantize "$model" --mode dynamic --print-config 2>&1 | resolved)
[ "$got" = "None nearest mode" ] || fail "--print-config --mode dynamic: weight_rounding $got"
cfg --weight-rounding gptq >"$work/cfg.json"
"$exe" quantize "$model" --config "$work/cfg.json" --print-config >"$work/cfg2.json" 2>&1
[ "$(resolved <"$work/cfg2.json")" = "gptq gptq config" ] || fail "--config weight_rounding gptq: $(resolved <"$work/cfg2.json")"

echo '{}' >"$work/ov.json"
refuse '--weight-rounding "best": nearest or gptq' --calib "$src/models/calib" --weight-rounding best
refuse "--weight-rounding gptq needs calibration data" --overrides "$work/ov.json" --weight-rounding gptq
refuse "--weight-rounding gptq is for --mode static" --mode dynamic --weight-rounding gptq
refuse "--weight-rounding gptq needs int8 symmetric weights" --calib "$src/models/calib" --weight-dtype int4 --weight-rounding gptq

# the bundled model: one line saying what was done and whether it was kept; --quiet silent
"$exe" quantize "$model" -o "$work/q.onnx" --calib "$src/models/calib" --weight-rounding gptq >"$work/q.out" 2>&1 ||
  { fail "quantize the bundled model"; cat "$work/q.out"; }
grep -q "weight rounding (gptq): [0-9]* layer(s) on 16 sample(s), .*kept: 8 held-out sample(s)" "$work/q.out" ||
  { fail "no weight rounding line"; cat "$work/q.out"; }
"$exe" quantize "$model" -o "$work/q2.onnx" --calib "$src/models/calib" --weight-rounding gptq --quiet 2>"$work/q2.err"
[ ! -s "$work/q2.err" ] || { fail "--quiet printed:"; cat "$work/q2.err"; }
/usr/bin/python3 - "$work" <<'PY' || fail "the same initializers twice, or only weights changed against --weight-rounding nearest"
import sys, onnx
w = sys.argv[1]
def inits(f):
    return {t.name: t.SerializeToString() for t in onnx.load(f"{w}/{f}").graph.initializer}
a, b = inits("q.onnx"), inits("q2.onnx")
sys.exit(0 if a == b else 1)
PY

/usr/bin/python3 "$src/tests/weight_rounding.py" "$exe" "$src" "$work/e2e"
rc=$?
if [ $rc -eq 77 ]; then echo "SKIP: end to end (python modules or onnxruntime-node missing)"
elif [ $rc -ne 0 ]; then fails=$((fails + 1)); fi
[ $fails -eq 0 ] && echo "weight_rounding: all passed"
exit $((fails > 0))
