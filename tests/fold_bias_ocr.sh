#!/bin/bash
# fold-bias on PaddleOCR cls and det made pre-quantized (QDQ inputs and weights, float
# biases; see tests/fold_bias_ocr.py): every bias folded, ONNX checker, onnxruntime-node
# vs onnxq, folded vs float-bias model. usage: bash fold_bias_ocr.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
# onnxruntime on an emulated Haswell (tests/ortnode.bash): onnxq's --target host must mean
# that CPU's arithmetic, not this one's
[ "${ONNXQ_ORT_CPU:-}" = haswell ] && export ONNXQ_HOST_CPU=avx2
exe=$1 src=$2 bin=${3:-/tmp}
assets=${ONNXQ_OCR_ASSETS:-}
for c in "${ONNXQ_CACHE:-}" "$HOME/.cache/onnxq" /work/cache; do
  if [ -z "$assets" ] && [ -n "$c" ] && [ -d "$c/ocr/package/assets" ]; then assets="$c/ocr/package/assets"; fi
done
if ! command -v node >/dev/null || [ -z "$assets" ]; then
  echo "SKIP: node or the PaddleOCR models are not available"
  exit 0
fi
rc=0
run() {
  /usr/bin/python3 "$src/tests/fold_bias_ocr.py" "$exe" "$assets/$1" "$bin/fold_bias_ocr_$2" "${@:3}"
  local r=$?
  if [ $r -eq 77 ]; then echo "SKIP $1"; elif [ $r -ne 0 ]; then rc=1; fi
}
run ch_ppocr_mobile_v2.0_cls_infer.onnx cls 48 192
run ch_PP-OCRv4_det_infer.onnx det 96 96
exit $rc
