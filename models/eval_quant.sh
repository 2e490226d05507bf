#!/bin/bash
# Run a quantized PaddleOCR det or cls model with onnxq's executor on every sample of a
# make_text_images.py set, then compare it and onnxruntime-node's run of it with the float
# model (models/eval_quant.js: det output SQNR, cls class agreement and accuracy).
#   bash models/eval_quant.sh ONNXQ det|cls FLOAT.onnx QUANT.onnx SET_DIR [--max N]
# SET_DIR is e.g. build/textdata/eval/det. onnxq's outputs go to a temporary folder.
set -euo pipefail
if [ $# -lt 5 ]; then
  echo "usage: bash models/eval_quant.sh ONNXQ det|cls FLOAT.onnx QUANT.onnx SET_DIR [--max N]" >&2; exit 2
fi
EXE=$1 KIND=$2 FLOAT=$3 QUANT=$4 SET=$5; shift 5
MAX=1000000
if [ "${1:-}" = --max ]; then MAX=$2; fi
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
i=0
for d in $(ls "$SET/tensors" | sort); do
  [ -f "$SET/tensors/$d/x.npy" ] || continue
  [ "$i" -lt "$MAX" ] || break
  mkdir -p "$OUT/$d"
  "$EXE" run "$QUANT" --input x="$SET/tensors/$d/x.npy" --output-dir "$OUT/$d" --npy --threads 1 >/dev/null
  i=$((i + 1))
done
bash "$HERE/../tests/ortnode.bash" "$HERE/eval_quant.js" "$KIND" "$FLOAT" "$QUANT" "$SET" --onnxq-out "$OUT" --max "$MAX"
