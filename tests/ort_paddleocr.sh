#!/bin/bash
# PaddleOCR cls/rec/det: onnxq vs onnxruntime-node on the same random input.
# usage: bash ort_paddleocr.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
exe=$1 src=$2 bin=${3:-/tmp}
. "$src/tests/testlib.bash"
ortnode_suite "$src/tests/ort_paddleocr.js" "$exe" "${ONNXQ_OCR_DIR:-${ONNXQ_CACHE:-$HOME/.cache/onnxq}/ocr/package/assets}" "$bin"
