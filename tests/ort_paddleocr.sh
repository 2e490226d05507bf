#!/bin/bash
# PaddleOCR cls/rec/det: onnxq vs onnxruntime-node on the same random input.
# usage: bash ort_paddleocr.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
exe=$1 src=$2 bin=${3:-/tmp}
if ! command -v node >/dev/null; then
  echo "SKIP: node is not installed"
  exit 0
fi
bash "$src/tests/ortnode.bash" "$src/tests/ort_paddleocr.js" "$exe" "${ONNXQ_OCR_DIR:-${ONNXQ_CACHE:-$HOME/.cache/onnxq}/ocr/package/assets}" "$bin"
rc=$?
# 77: onnxruntime-node is missing (tests/ortlib.js printed SKIP)
[ $rc = 77 ] && exit 0
exit $rc
