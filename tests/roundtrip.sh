#!/bin/bash
# Lossless round trip: every backend-test model and the PaddleOCR models, through
# `onnxq convert`, compare equal in python3-onnx, and a second write gives the same bytes.
set -euo pipefail
ONNXQ="$1"; SRC="$2"
CACHE="${ONNXQ_CACHE:-$HOME/.cache/onnxq}"
DIRS=(/usr/share/libonnx-testdata/data)
if [ -d "$CACHE/ocr/package/assets" ]; then
    DIRS+=("$CACHE/ocr/package/assets")
else
    echo "note: PaddleOCR models not in $CACHE (run .ci/fetch-models.sh); skipping them"
fi
/usr/bin/python3 "$SRC/tests/roundtrip.py" "$ONNXQ" "${DIRS[@]}"
