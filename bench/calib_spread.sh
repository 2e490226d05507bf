#!/bin/bash
# How much a PaddleOCR model's quantized accuracy depends on the calibration set: quantize it
# with each recipe on K calibration subsets (subset s leaves out every sample whose index
# modulo K is s) and measure each result in onnxruntime-node against the float model on the
# eval set (models/eval_ort.js: SQNR and argmax agreement, optimizations on and off).
# Prints one line per subset and recipe, then the mean and range per recipe. Used for the
# calibration-spread numbers in docs/quantize.md and docs/accuracy.md.
#
#   bash bench/calib_spread.sh ONNXQ MODEL RECIPE...
#     MODEL   det | rec | cls
#     RECIPE  NAME=ARGS: onnxq quantize arguments, e.g. default= 'u8u8=--weight-dtype uint8'
#             'mse=--method mse'
#   FOLDS=4 (K), ONNXQ_CACHE (default ~/.cache/onnxq: ocr/package/assets, textdata/ as
#   bench/deploy.py renders it), ONNXQ_ORT_CPU as for the tests (tests/ortnode.bash).
#
# Example: bash bench/calib_spread.sh build/onnxq rec default= 'mse=--method mse'
set -u
[ $# -ge 3 ] || { sed -n '2,16p' "$0"; exit 2; }
exe=$1 model=$2
shift 2
src=$(cd "$(dirname "$0")/.." && pwd)
cache=${ONNXQ_CACHE:-$HOME/.cache/onnxq}
assets=$cache/ocr/package/assets data=$cache/textdata
case $model in
det) f=ch_PP-OCRv4_det_infer.onnx ;;
rec) f=ch_PP-OCRv4_rec_infer.onnx ;;
cls) f=ch_ppocr_mobile_v2.0_cls_infer.onnx ;;
*) echo "calib_spread.sh: model \"$model\": det, rec or cls" >&2; exit 2 ;;
esac
[ -f "$assets/$f" ] || { echo "calib_spread.sh: $assets/$f missing (.ci/fetch-models.sh)" >&2; exit 2; }
[ -d "$data/calib/$model/tensors" ] && [ -d "$data/eval/$model" ] ||
  { echo "calib_spread.sh: $data/{calib,eval}/$model missing (run bench/deploy.py once, or models/make_text_images.py)" >&2; exit 2; }
folds=${FOLDS:-4}
work=$(mktemp -d "${TMPDIR:-/tmp}/calib_spread.XXXXXX")
trap 'rm -rf "$work"' EXIT
results=$work/results.txt
for ((s = 0; s < folds; s++)); do
  cal=$work/calib_$s
  mkdir -p "$cal"
  i=0
  for d in "$data/calib/$model/tensors"/*; do
    [ $((i % folds)) != $s ] && ln -s "$d" "$cal/$(basename "$d")"
    i=$((i + 1))
  done
  for r in "$@"; do
    name=${r%%=*} args=${r#*=}
    # shellcheck disable=SC2086
    if ! "$exe" quantize "$assets/$f" -o "$work/q.onnx" --calib "$cal" $args --quiet 2>"$work/err"; then
      echo "calib_spread.sh: quantize failed for $name on subset $s: $(tail -1 "$work/err")" >&2
      exit 1
    fi
    line=$(bash "$src/tests/ortnode.bash" "$src/models/eval_ort.js" "$model" "$assets/$f" "$work/q.onnx" \
           "$data/eval/$model" | python3 -c '
import json, sys
r = json.load(sys.stdin)
a = r.get("agreement_opt_on")
print(r["sqnr_db_opt_on"], r["sqnr_db_opt_off"], "-" if a is None else round(100 * a, 2))') || exit 1
    echo "$name $s $line" | tee -a "$results"
  done
done
python3 - "$results" <<'PY'
import sys, statistics
rows = {}
for ln in open(sys.argv[1]):
    name, s, on, off, agree = ln.split()
    rows.setdefault(name, []).append((float(on), float(off), agree))
print("recipe          mean SQNR opt (dB)  range            mean no-opt  agreement opt (%)")
for name, v in rows.items():
    on = [x[0] for x in v]
    ag = [x[2] for x in v]
    print(f"{name:15s} {statistics.mean(on):8.2f}           {min(on):6.2f} .. {max(on):6.2f}  "
          f"{statistics.mean(x[1] for x in v):8.2f}     {' '.join(ag)}")
PY
