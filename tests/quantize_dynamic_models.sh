#!/bin/bash
# quantize --mode dynamic on real models, measured in onnxruntime-node with its graph
# optimizations on (the fused DynamicQuantizeMatMul / MatMulIntegerToFloat kernels):
#  - PaddleOCR rec (ch_PP-OCRv4) on the eval set of models/make_text_images.py
#    (models/eval_ort.js): output SQNR >= 25 dB against the float model;
#  - the openWakeWord classifier hello_deepa (npm openwakeword-js; three Gemm layers). Its
#    input is a [1, 25, 96] window of speech-embedding features; the melspectrogram and
#    embedding models that make them are not in the package (it downloads them at run
#    time), so the input is random N(0, 1) features (tests/sqnr_ort.js): SQNR >= 25 dB of
#    the wake-word probability and of the logit before its Sigmoid.
# Each with the default target (ort-x86: uint8 weights) and --target host when that is
# another (int8 weights on a VNNI CPU; under ONNXQ_ORT_CPU=haswell host is ort-x86, and
# only 4 rec crops are run: emulated, rec takes about a CPU minute per crop and session). Every MatMul/Gemm chain
# the quantizer wrote must be fused by onnxruntime (its optimizedModelFilePath model holds
# no MatMulInteger). usage: bash quantize_dynamic_models.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
[ "${ONNXQ_ORT_CPU:-}" = haswell ] && export ONNXQ_HOST_CPU=avx2
exe=$1 src=$2 bin=${3:-/tmp}
CACHE="${ONNXQ_CACHE:-$HOME/.cache/onnxq}"
skip() { # a missing reference: skip, or fail when CI requires every reference
  if [ "${ONNXQ_REQUIRE_ALL:-0}" = 1 ]; then echo "FAIL: $1 (ONNXQ_REQUIRE_ALL=1)"; exit 1; fi
  echo "SKIP: $1"; exit 0
}
rec="$CACHE/ocr/package/assets/ch_PP-OCRv4_rec_infer.onnx"
oww="$CACHE/openwakeword/package/models/hello_deepa.onnx"
[ -f "$rec" ] || skip "PaddleOCR rec missing (bash .ci/fetch-models.sh)"
[ -f "$oww" ] || skip "openWakeWord models missing (bash .ci/fetch-models.sh)"
[ -f "$CACHE/node_modules/onnxruntime-node/package.json" ] || skip "onnxruntime-node missing"
command -v node >/dev/null || skip "node missing"
/usr/bin/python3 -c "import onnx, numpy, PIL" 2>/dev/null || skip "python3-onnx / numpy / pil missing"
work=$(mktemp -d "$bin/quantize_dynamic_models.XXXXXX")
trap 'rm -rf "$work"' EXIT
node_ort() { bash "$src/tests/ortnode.bash" "$@"; }
max=64
[ "${ONNXQ_ORT_CPU:-}" = haswell ] && max=4 # emulated: rec takes about a CPU minute per sample and session
fail=0
# fused QUANT.onnx OPTIMIZED.onnx: every MatMulInteger of QUANT became one of onnxruntime's
# fused kernels (DynamicQuantizeMatMul or MatMulIntegerToFloat)
fused() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import sys, onnx
q = [n.op_type for n in onnx.load(sys.argv[1]).graph.node]
o = [n.op_type for n in onnx.load(sys.argv[2]).graph.node]
n, f = q.count("MatMulInteger"), o.count("DynamicQuantizeMatMul") + o.count("MatMulIntegerToFloat")
ok = n > 0 and f == n and "MatMulInteger" not in o
print(("ok  " if ok else "FAIL") + f" fused: {n} MatMulInteger chains -> {o.count('DynamicQuantizeMatMul')} "
      f"DynamicQuantizeMatMul + {o.count('MatMulIntegerToFloat')} MatMulIntegerToFloat, "
      f"{o.count('MatMulInteger')} MatMulInteger left")
sys.exit(0 if ok else 1)
PY
}
# at_least JSON KEY DB
at_least() {
  /usr/bin/python3 -c 'import json,sys; v=json.loads(sys.argv[1])[sys.argv[2]]; ok=v>=float(sys.argv[3]); print(("ok  " if ok else "FAIL")+f" {sys.argv[2]} = {v} dB (>= {sys.argv[3]})"); sys.exit(0 if ok else 1)' "$@"
}
/usr/bin/python3 "$src/models/make_text_images.py" "$work/eval" --set eval >/dev/null || { echo "FAIL: eval images"; exit 1; }
# the classifier with its logit as a second output (the quantized model keeps the name)
/usr/bin/python3 - "$oww" "$work/oww.onnx" <<'PY' || { echo "FAIL: logit output"; exit 1; }
import sys, onnx
from onnx import helper, TensorProto
m = onnx.load(sys.argv[1])
sig = [n for n in m.graph.node if n.op_type == "Sigmoid"][-1]
m.graph.output.append(helper.make_tensor_value_info(sig.input[0], TensorProto.FLOAT, None))
onnx.save(m, sys.argv[2])
PY
targets=ort-x86
host=$("$exe" quantize --mode dynamic "$oww" --target host --print-config |
       /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["resolved"]["target"])')
[ "$host" != ort-x86 ] && targets="ort-x86 host"
for t in $targets; do
  echo "== --target $t${host:+ (host: $host)}"
  q="$work/rec_$t.onnx"
  "$exe" quantize --mode dynamic "$rec" -o "$q" --target "$t" --quiet || { echo "FAIL: quantize rec"; fail=1; continue; }
  r=$(node_ort "$src/models/eval_ort.js" rec "$rec" "$q" "$work/eval/rec" --max $max) || { echo "FAIL: eval rec"; fail=1; }
  echo "rec: $r"
  at_least "$r" sqnr_db_opt_on 25 || fail=1
  ONNXQ_ORT_OPTIMIZED="$work/rec_opt.onnx" node_ort "$src/tests/quantize_ort.js" "$q" "$work/rec_out" \
    "x=$work/eval/rec/tensors/000/x.npy" || { echo "FAIL: onnxruntime rec"; fail=1; }
  fused "$q" "$work/rec_opt.onnx" || fail=1
  q="$work/oww_$t.onnx"
  "$exe" quantize --mode dynamic "$work/oww.onnx" -o "$q" --target "$t" --quiet || { echo "FAIL: quantize oww"; fail=1; continue; }
  r=$(node_ort "$src/tests/sqnr_ort.js" "$work/oww.onnx" "$q" --samples $max) || { echo "FAIL: eval oww"; fail=1; }
  echo "openwakeword hello_deepa: $r"
  for k in $(/usr/bin/python3 -c 'import json,sys; print(" ".join(k for k in json.loads(sys.argv[1]) if k.endswith("_opt_on")))' "$r"); do
    at_least "$r" "$k" 25 || fail=1
  done
  /usr/bin/python3 -c "import numpy as np; np.save('$work/f.npy', np.random.default_rng(1).normal(size=(1, 25, 96)).astype(np.float32))"
  # (the model as shipped: an output name with '/' cannot name quantize_ort.js's .npy file)
  "$exe" quantize --mode dynamic "$oww" -o "$work/oww0_$t.onnx" --target "$t" --quiet || { echo "FAIL: quantize"; fail=1; }
  ONNXQ_ORT_OPTIMIZED="$work/oww_opt.onnx" node_ort "$src/tests/quantize_ort.js" "$work/oww0_$t.onnx" \
    "$work/oww_out" "onnx::Flatten_0=$work/f.npy" || { echo "FAIL: onnxruntime oww"; fail=1; }
  fused "$work/oww0_$t.onnx" "$work/oww_opt.onnx" || fail=1
done
[ $fail = 0 ] && echo "quantize_dynamic_models: ok" || echo "quantize_dynamic_models: FAILED"
exit $fail
