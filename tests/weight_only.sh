#!/bin/bash
# onnxq quantize --mode weight-only (and the quantize-weights pass) on small hand-built
# models (tests/weight_only.py make):
#  1. every output's integers, scales, zero points and packing equal an independent numpy
#     reference: RTN by the documented rule (and hand-computed blocks), GPTQ by a plain
#     numpy GPTQ, in both formats (blocked DequantizeLinear, MatMulNBits);
#  2. GPTQ's layer output error on its calibration inputs is below RTN's;
#  3. onnxq's executor and onnxruntime both compute x @ dequant(W) on every model;
#  4. bad options exit 2 with one line.
# usage: bash weight_only.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
exe=$1 src=$2 bin=${3:-/tmp}
. "$src/tests/testlib.bash"
/usr/bin/python3 -c "import onnx, numpy" 2>/dev/null || skip "python3-onnx / python3-numpy missing"
workdir w "$bin/weight_only.XXXXXX"
/usr/bin/python3 "$src/tests/weight_only.py" make "$w" || { echo "FAIL: model generation"; exit 1; }
fail=0
# NAME BASE FORMAT DTYPE SYM BLOCK ALGO (read by weight_only.py and weight_only_ort.js)
cat > "$w/cases.txt" <<'CASES'
mm_qdq_int4 mm qdq int4 sym 16 rtn
mm_qdq_uint4_asym mm qdq uint4 asym 16 rtn
mm_qdq_int8 mm qdq int8 sym 32 rtn
mm_nbits_int4 mm matmulnbits int4 sym 16 rtn
mm_nbits_int4_asym mm matmulnbits int4 asym 16 rtn
mm_nbits_uint8_asym mm matmulnbits uint8 asym 32 rtn
mm_nbits_int8 mm matmulnbits int8 sym 16 rtn
gemm_qdq_int4 gemm qdq int4 sym 16 rtn
gemm_nbits_int4_asym gemm matmulnbits int4 asym 32 rtn
hand_qdq_int4 hand qdq int4 sym 16 rtn
hand_nbits_uint4_asym hand matmulnbits uint4 asym 16 rtn
two_gptq two qdq int4 sym 16 gptq
CASES
while read -r name base fmt dt sym block algo; do
  opt=(--mode weight-only --format "$fmt" --weight-dtype "$dt" --weight-block-size "$block" --algo "$algo" --quiet)
  # float16 scales (smallest); the default, float32, is checked below
  [ "$fmt" = qdq ] && opt+=(--weight-scale-dtype float16)
  [ "$sym" = asym ] && opt+=(--weight-asymmetric)
  [ "$algo" = gptq ] && opt+=(--calib "$w/calib")
  if ! "$exe" quantize "$w/$base.onnx" -o "$w/$name.onnx" "${opt[@]}" 2>"$w/err"; then
    echo "FAIL: onnxq quantize $name: $(cat "$w/err")"; fail=1; continue
  fi
  "$exe" run "$w/$name.onnx" --input "x=$w/x_$base.npy" --output-dir "$w/out_$name" --npy >/dev/null 2>"$w/err" &&
    cp "$w/out_$name/y.npy" "$w/onnxq_$name.npy" || { echo "FAIL: onnxq run $name: $(cat "$w/err")"; fail=1; }
done < "$w/cases.txt"
# the pass directly (onnxq opt) gives the same model as the command
"$exe" opt "$w/mm.onnx" -o "$w/mm_pass.onnx" \
  --passes 'constant-to-initializer,quantize-weights{dtype=int4,block-size=16,scale-dtype=float16}' 2>"$w/err" || { echo "FAIL: opt: $(cat "$w/err")"; fail=1; }
# the default scales are float32: DequantizeLinear feeds the MatMul directly (no Cast),
# the form onnxruntime turns into MatMulNBits; the integers are those of float16 scales
# except where the scale's rounding moves them
"$exe" quantize "$w/mm.onnx" -o "$w/mm_default.onnx" --mode weight-only --weight-block-size 16 --quiet 2>"$w/err" ||
  { echo "FAIL: quantize default scales: $(cat "$w/err")"; fail=1; }
/usr/bin/python3 - "$w" <<'PY' || fail=1
import sys, onnx
from onnx import TensorProto
m = onnx.load(f'{sys.argv[1]}/mm_default.onnx')
inits = {t.name: t for t in m.graph.initializer}
dq = [n for n in m.graph.node if n.op_type == 'DequantizeLinear']
mm = [n for n in m.graph.node if n.op_type == 'MatMul']
ok = len(dq) == 1 and inits[dq[0].input[1]].data_type == TensorProto.FLOAT and \
    not any(n.op_type == 'Cast' for n in m.graph.node) and mm and mm[0].input[1] == dq[0].output[0]
print('ok default scales: float32, DequantizeLinear -> MatMul' if ok else 'FAIL: default scales not float32 DQ -> MatMul')
sys.exit(0 if ok else 1)
PY
/usr/bin/python3 - "$w" <<'PY' || fail=1
import sys, onnx
w = sys.argv[1]
a, b = (onnx.load(f'{w}/{n}.onnx') for n in ('mm_pass', 'mm_qdq_int4'))
same = {t.name: t.raw_data for t in a.graph.initializer} == {t.name: t.raw_data for t in b.graph.initializer}
print('ok quantize-weights pass == quantize --mode weight-only' if same else 'FAIL: the pass and the command differ')
sys.exit(0 if same else 1)
PY
/usr/bin/python3 "$src/tests/weight_only.py" check "$w" || fail=1
# onnxruntime
if [ -f "${ONNXQ_CACHE:-$HOME/.cache/onnxq}/node_modules/onnxruntime-node/package.json" ] || [ -n "${ONNXQ_ORT_DIR:-}" ]; then
  if bash "$src/tests/ortnode.bash" "$src/tests/weight_only_ort.js" "$w"; then
    /usr/bin/python3 "$src/tests/weight_only.py" outputs "$w" || fail=1
  else
    echo "FAIL: onnxruntime run"; fail=1
  fi
else
  [ "${ONNXQ_REQUIRE_ALL:-0}" = 1 ] && { echo "FAIL: onnxruntime-node missing (ONNXQ_REQUIRE_ALL=1)"; fail=1; }
  echo "SKIP: onnxruntime-node missing: outputs not compared"
fi
# bad options: exit 2, one line naming the problem
bad() { # expected-substring args...
  local want=$1; shift
  "$exe" quantize "$w/mm.onnx" -o "$w/bad.onnx" "$@" >/dev/null 2>"$w/err"; local rc=$?
  if [ $rc -ne 2 ] || [ "$(wc -l < "$w/err")" -ne 1 ] || ! grep -q -- "$want" "$w/err"; then
    echo "FAIL: quantize $* exited $rc (want 2, one line with \"$want\"): $(cat "$w/err")"; fail=1
  fi
}
bad "power of two in 16..256" --mode weight-only --weight-block-size 48
bad "power of two in 16..256" --mode weight-only --weight-block-size 512
bad "unknown (static, dynamic, weight-only" --mode dynamicx
bad "one of qdq, matmulnbits" --mode weight-only --format qlinear
bad "no calibration data" --mode weight-only --algo gptq
bad "one of rtn, gptq, awq" --mode weight-only --algo hqq
bad "0..4" --mode weight-only --format matmulnbits --accuracy-level 5
bad "one of int4, uint4, int8, uint8" --mode weight-only --weight-dtype int16
bad "do not apply" --mode weight-only --act-dtype int8
bad "float32 scales" --mode weight-only --format matmulnbits --weight-scale-dtype float16
"$exe" opt "$w/mm.onnx" -o "$w/bad.onnx" --passes 'quantize-weights{block-size=24}' >/dev/null 2>"$w/err"
rc=$?; [ $rc -eq 2 ] && grep -q "power of two" "$w/err" || { echo "FAIL: opt block-size=24 exit $rc: $(cat "$w/err")"; fail=1; }
"$exe" opt "$w/mm.onnx" -o "$w/bad.onnx" --passes 'upgrade-opset{to=13},quantize-weights' >/dev/null 2>"$w/err"
[ $? -eq 0 ] && { echo "FAIL: format=qdq accepted below opset 21"; fail=1; }
if [ $fail -eq 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; exit 1; fi
