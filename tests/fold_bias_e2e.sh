#!/bin/bash
# fold-bias end to end: pre-quantized model -> onnxq opt --passes fold-bias -> ONNX
# checker, hand-computed int32 biases, idempotency, onnxruntime-node vs onnxq executor
# (see tests/fold_bias_e2e.py). usage: bash fold_bias_e2e.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
# onnxruntime on an emulated Haswell (tests/ortnode.bash): onnxq's --target host must mean
# that CPU's arithmetic, not this one's
[ "${ONNXQ_ORT_CPU:-}" = haswell ] && export ONNXQ_HOST_CPU=avx2
exe=$1 src=$2 bin=${3:-/tmp}
if ! command -v node >/dev/null; then
  echo "SKIP: node is not installed"
  exit 0
fi
work="$bin/fold_bias_e2e"
rm -rf "$work"
/usr/bin/python3 "$src/tests/fold_bias_e2e.py" "$exe" "$work"
rc=$?
if [ $rc -eq 77 ]; then echo "SKIP"; exit 0; fi
exit $rc
