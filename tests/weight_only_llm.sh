#!/bin/bash
# --mode weight-only --algo awq / gptq on a small decoder made in the test (two blocks,
# RMSNorm with outlier channels, attention, SwiGLU): the AWQ fold keeps the float
# function, every variant runs in onnxruntime, AWQ and GPTQ beat RTN on held-out
# sequences, GPTQ in chunks (tests/weight_only_llm.py, in the venv of .ci/venv.sh; skipped
# without it). Bad option values exit 2 with one line.
# usage: bash weight_only_llm.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
exe=$1 src=$2 bin=${3:-/tmp}
. "$src/tests/testlib.bash"
work="$bin/weight_only_llm"
rm -rf "$work"
mkdir -p "$work"
fails=0
model="$src/models/shapes_cnn.onnx"
for opt in "--algo awq" "--algo awq --calib-random 2 --weight-block-size 48" "--gptq-act-order" \
           "--algo awq --calib-random 2 --gptq-act-order"; do
  # shellcheck disable=SC2086
  "$exe" quantize "$model" -o "$work/bad.onnx" --mode weight-only $opt >"$work/out" 2>"$work/err"
  rc=$?
  if [ $rc -ne 2 ] || [ "$(wc -l <"$work/err")" -ne 1 ] || [ -e "$work/bad.onnx" ]; then
    echo "FAIL: quantize $opt: exit $rc:"; cat "$work/err"; fails=$((fails + 1))
  fi
done
grep -q "no calibration data" <("$exe" quantize "$model" -o "$work/bad.onnx" --mode weight-only --algo awq 2>&1) ||
  { echo "FAIL: --algo awq without samples does not say so"; fails=$((fails + 1)); }
for p in "awq-grid=0" "chunk=-1" "awq-fold-only=1"; do
  "$exe" opt "$model" -o "$work/bad.onnx" --passes "upgrade-opset{to=21},quantize-weights{$p,random=2}" >"$work/out" 2>"$work/err"
  rc=$?
  if [ $rc -ne 2 ] || ! grep -q "${p%%=*}" "$work/err"; then
    echo "FAIL: quantize-weights{$p}: exit $rc:"; cat "$work/err"; fails=$((fails + 1))
  fi
done
py="${ONNXQ_CACHE:-$HOME/.cache/onnxq}/venv/bin/python"
if [ -x "$py" ]; then
  bash "$src/tests/ortpy.bash" "$py" "$src/tests/weight_only_llm.py" "$exe" "$work/e2e"
  rc=$?
  if [ $rc -eq 77 ]; then echo "SKIP: end to end (python modules missing)"
  elif [ $rc -ne 0 ]; then fails=$((fails + 1)); fi
else
  echo "SKIP: end to end: no venv at $py (bash .ci/venv.sh creates it)"
fi
[ $fails -eq 0 ] && echo "weight_only_llm: all passed"
exit $((fails > 0))
