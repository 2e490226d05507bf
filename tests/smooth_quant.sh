#!/bin/bash
# quantize --smooth-quant: bad values exit 2 with one line; end to end on a LayerNorm ->
# MatMul block with planted outlier channels (float equivalence and the SQNR gain in
# onnxq's executor and in onnxruntime, the --json record: tests/smooth_quant.py, in the
# venv of .ci/venv.sh; skipped without it).
# usage: bash smooth_quant.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
exe=$1 src=$2 bin=${3:-/tmp}
work="$bin/smooth_quant"
rm -rf "$work"
mkdir -p "$work"
fails=0
model="$src/models/shapes_cnn.onnx"
# bad values: exit 2, one line naming the option and the value
for v in 1.5 -0.1 abc nan "" 0.5x; do
  "$exe" quantize "$model" -o "$work/bad.onnx" --calib-random 2 --smooth-quant "$v" >"$work/out" 2>"$work/err"
  rc=$?
  lines=$(wc -l <"$work/err")
  if [ $rc -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q -- "--smooth-quant" "$work/err" || [ -e "$work/bad.onnx" ]; then
    echo "FAIL: --smooth-quant '$v': exit $rc, $lines stderr lines:"; cat "$work/err"; fails=$((fails + 1))
  fi
done
"$exe" quantize "$model" -o "$work/bad.onnx" --smooth-quant >"$work/out" 2>"$work/err"
[ $? -eq 2 ] || { echo "FAIL: --smooth-quant without a value"; fails=$((fails + 1)); }
# no calibration data (only --overrides): refused
echo '{}' >"$work/ov.json"
"$exe" quantize "$model" -o "$work/bad.onnx" --overrides "$work/ov.json" --smooth-quant 0.5 >"$work/out" 2>"$work/err"
rc=$?
if [ $rc -ne 2 ] || [ "$(wc -l <"$work/err")" -ne 1 ] || ! grep -q "needs calibration data" "$work/err"; then
  echo "FAIL: --smooth-quant without calibration data: exit $rc"; cat "$work/err"; fails=$((fails + 1))
fi
# a config file with a bad value
echo '{"smooth_quant": 2}' >"$work/cfg.json"
"$exe" quantize "$model" -o "$work/bad.onnx" --calib-random 2 --config "$work/cfg.json" >"$work/out" 2>"$work/err"
[ $? -eq 2 ] && grep -q "smooth_quant" "$work/err" || { echo "FAIL: config smooth_quant 2 accepted"; cat "$work/err"; fails=$((fails + 1)); }
# --print-config shows it, in the pipeline too
"$exe" quantize "$model" --calib-random 2 --smooth-quant 0.25 --print-config >"$work/cfg.out" 2>&1
grep -q '"smooth_quant": 0.25' "$work/cfg.out" && grep -q 'calibrate{random=2[^}]*,smooth-quant=0.25' "$work/cfg.out" ||
  { echo "FAIL: --print-config:"; cat "$work/cfg.out"; fails=$((fails + 1)); }
# and --config reads it back
"$exe" quantize "$model" --calib-random 2 --smooth-quant 0.25 --print-config >"$work/cfg.json" 2>/dev/null
"$exe" quantize "$model" --config "$work/cfg.json" --print-config >"$work/cfg2.out" 2>&1
cmp -s "$work/cfg.json" "$work/cfg2.out" || { echo "FAIL: --config does not round-trip smooth_quant"; fails=$((fails + 1)); }
# the default: auto (search) in static mode with calibration data, off without it or in
# dynamic mode; off on request
"$exe" quantize "$model" --calib-random 2 --print-config >"$work/cfg.out" 2>&1
grep -q '"smooth_quant": "auto"' "$work/cfg.out" && grep -q 'calibrate{random=2[^}]*,smooth-quant=\\"search' "$work/cfg.out" ||
  { echo "FAIL: --print-config without --smooth-quant:"; cat "$work/cfg.out"; fails=$((fails + 1)); }
for args in "--calib-random 2 --smooth-quant off" "--mode dynamic" "--overrides $work/ov.json"; do
  # shellcheck disable=SC2086
  "$exe" quantize "$model" $args --print-config >"$work/cfg.out" 2>&1
  grep -q '"smooth_quant": null' "$work/cfg.out" && ! grep -q 'smooth-quant' <(grep pipeline "$work/cfg.out") ||
    { echo "FAIL: --print-config $args:"; cat "$work/cfg.out"; fails=$((fails + 1)); }
done
# auto round-trips through --config
"$exe" quantize "$model" --calib-random 2 --print-config >"$work/cfg3.json" 2>/dev/null
"$exe" quantize "$model" --config "$work/cfg3.json" --print-config >"$work/cfg3.out" 2>&1
cmp -s "$work/cfg3.json" "$work/cfg3.out" || { echo "FAIL: --config does not round-trip smooth_quant auto"; fails=$((fails + 1)); }

py="${ONNXQ_CACHE:-$HOME/.cache/onnxq}/venv/bin/python"
if [ -x "$py" ]; then
  # onnxruntime on the CPU of ONNXQ_ORT_CPU (tests/ortpy.bash)
  bash "$src/tests/ortpy.bash" "$py" "$src/tests/smooth_quant.py" "$exe" "$work/e2e"
  rc=$?
  if [ $rc -eq 77 ]; then echo "SKIP: end to end (python modules missing)"
  elif [ $rc -ne 0 ]; then fails=$((fails + 1)); fi
else
  echo "SKIP: end to end: no venv at $py (bash .ci/venv.sh creates it)"
fi
[ $fails -eq 0 ] && echo "smooth_quant: all passed"
exit $((fails > 0))
