#!/bin/bash
# models/make_text_images.py: the same seed gives the same files, and the float
# PaddleOCR models do their job on the data (models/check_text_images.js: cls
# orientation accuracy, det lines found, rec characters read), which is what
# shows that the rendering and PaddleOCR's preprocessing are right.
# Needs python3-pil + fonts, node, and the models from .ci/fetch-models.sh.
set -euo pipefail
SRC="$2"; BIN="$3"
CACHE="${ONNXQ_CACHE:-$HOME/.cache/onnxq}"
if ! /usr/bin/python3 -c 'import PIL' 2>/dev/null; then
    echo "note: python3-pil not installed (.ci/install-deps.sh --test); skipping"; exit 0
fi
if [ ! -f "$CACHE/ocr/package/assets/ch_PP-OCRv4_det_infer.onnx" ] || ! command -v node >/dev/null; then
    echo "note: PaddleOCR models or node missing (run .ci/fetch-models.sh); skipping"; exit 0
fi
OUT="$BIN/text_images.tmp.d"
rm -rf "$OUT"
GEN=(/usr/bin/python3 "$SRC/models/make_text_images.py" --seed 77 --det 4 --cls 40 --rec 8)
"${GEN[@]}" "$OUT/a"
"${GEN[@]}" "$OUT/b" >/dev/null
if ! diff -r "$OUT/a" "$OUT/b" >/dev/null; then
    echo "FAIL: two runs with the same seed differ"; exit 1
fi
n=$(find "$OUT/a/cls/tensors" -name x.npy | wc -l)
[ "$n" = 40 ] || { echo "FAIL: $n cls tensors, expected 40"; exit 1; }
rc=0
bash "$SRC/tests/ortnode.bash" "$SRC/models/check_text_images.js" "$OUT/a" || rc=$?
rm -rf "$OUT"
# 77: onnxruntime-node is missing (tests/ortlib.js printed SKIP)
[ $rc = 77 ] && exit 0
exit $rc
