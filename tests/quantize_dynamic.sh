#!/bin/bash
# quantize --mode dynamic on hand-built MatMul/Gemm/Conv models whose answer is computed
# independently (tests/quantize_dynamic.py): the graph onnxruntime fuses, the weights, onnxq
# run and onnxruntime (optimizations on and off, its fused DynamicQuantizeMatMul) against
# the expectation for onnxruntime's CPU (ONNXQ_ORT_CPU=haswell: AVX2 under qemu), and the
# exit-2 refusals of options dynamic mode has no use for.
# usage: bash quantize_dynamic.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
# onnxruntime on an emulated Haswell (tests/ortnode.bash): --target host means that CPU
[ "${ONNXQ_ORT_CPU:-}" = haswell ] && export ONNXQ_HOST_CPU=avx2
exe=$1 src=$2 bin=${3:-/tmp}
skip() { # a missing reference: skip, or fail when CI requires every reference
  if [ "${ONNXQ_REQUIRE_ALL:-0}" = 1 ]; then echo "FAIL: $1 (ONNXQ_REQUIRE_ALL=1)"; exit 1; fi
  echo "SKIP: $1"; exit 0
}
fail=0
model="$src/models/shapes_cnn.onnx"
work=$(mktemp -d "$bin/quantize_dynamic.XXXXXX")
trap 'rm -rf "$work"' EXIT
# bad usage: exit 2 and one line naming the problem
refuse() { # expected-substring, args...
  local want=$1; shift
  "$exe" quantize --mode dynamic "$model" -o "$work/bad.onnx" "$@" >"$work/out" 2>"$work/err"
  local rc=$? lines
  lines=$(wc -l <"$work/err")
  if [ $rc = 2 ] && [ "$lines" = 1 ] && grep -q -- "$want" "$work/err" && [ ! -e "$work/bad.onnx" ]; then
    echo "ok   refused ($*): $(cat "$work/err")"
  else
    echo "FAIL ($*): exit $rc, $lines lines, want 2 and one line with \"$want\":"; cat "$work/err"; fail=1
  fi
}
refuse "--calib does not apply" --calib "$src/models/calib"
refuse "--calib-random does not apply" --calib-random 4
refuse "--calib-images does not apply" --calib-images "$src/models"
refuse "--target-sqnr does not apply" --target-sqnr 30
refuse "--weight-block-size does not apply" --weight-block-size 32
refuse "--act-dtype int8 does not apply" --act-dtype int8
refuse "--weight-dtype int4: uint8 or int8" --weight-dtype int4
# the pass itself (onnxq opt) refuses a weight type its integer ops do not take
"$exe" opt "$model" -o "$work/bad.onnx" --passes 'quantize-dynamic{weight-dtype="int16"}' 2>"$work/err"
[ $? = 2 ] && [ "$(wc -l <"$work/err")" = 1 ] && grep -q 'weight-dtype "int16": uint8 or int8' "$work/err" &&
  echo "ok   refused opt quantize-dynamic{weight-dtype=int16}: $(cat "$work/err")" ||
  { echo "FAIL: opt quantize-dynamic{weight-dtype=int16}"; cat "$work/err"; fail=1; }
"$exe" quantize --mode fast "$model" -o "$work/bad.onnx" 2>"$work/err"
[ $? = 2 ] && grep -q -- '--mode "fast": unknown (static, dynamic, weight-only)' "$work/err" && echo "ok   refused --mode fast" ||
  { echo "FAIL: --mode fast"; cat "$work/err"; fail=1; }
# the resolved weight type follows the target
for t in ort-x86:int8 ort-x86-vnni:int8 generic:int8; do
  got=$("$exe" quantize --mode dynamic "$model" --target "${t%%:*}" --print-config |
        /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin)["resolved"]; print(r["weight_dtype"], r["op_types"], "quantize-dynamic{" in r["pipeline"])')
  [ "$got" = "${t#*:} MatMul,Gemm True" ] && echo "ok   --target ${t%%:*}: $got" ||
    { echo "FAIL: --target ${t%%:*}: got \"$got\", want \"${t#*:} MatMul,Gemm True\""; fail=1; }
done
# nothing to quantize: exit 1 naming the op types
"$exe" quantize --mode dynamic "$model" -o "$work/none.onnx" --op-types LSTM 2>"$work/err"
[ $? = 1 ] && grep -q "no node quantized" "$work/err" && [ ! -e "$work/none.onnx" ] &&
  echo "ok   --op-types LSTM: nothing quantized, exit 1" || { echo "FAIL: --op-types LSTM"; cat "$work/err"; fail=1; }
/usr/bin/python3 -c "import onnx, numpy" 2>/dev/null || skip "python3-onnx / python3-numpy missing"
command -v node >/dev/null || skip "node missing"
/usr/bin/python3 "$src/tests/quantize_dynamic.py" "$exe" "$work/hand"
rc=$?
[ $rc = 77 ] && skip "onnxruntime-node missing"
[ $rc = 0 ] || fail=1
[ $fail = 0 ] && echo "quantize_dynamic: ok" || echo "quantize_dynamic: FAILED"
exit $fail
