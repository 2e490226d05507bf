#!/bin/bash
# Results do not depend on the thread count: PaddleOCR det and rec (and cls) outputs
# with 1 to 5 threads must be bit-identical (the blocked GEMM, on-the-fly im2col,
# depthwise and elementwise kernels split work differently for each count; det at 320x320
# with 3 threads once differed in its Sigmoid, where a range's vector blocks fell).
# usage: bash exec_threads.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
exe=$1 bin=${3:-/tmp}
dir=${ONNXQ_OCR_DIR:-${ONNXQ_CACHE:-/work/cache}/ocr/package/assets}
if [ ! -f "$dir/ch_PP-OCRv4_det_infer.onnx" ]; then
  echo "SKIP: PaddleOCR models not found in $dir (set ONNXQ_OCR_DIR)"
  exit 0
fi
tmp=$(mktemp -d "$bin/exec-threads.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
for spec in det:ch_PP-OCRv4_det_infer.onnx:x=1,3,320,320 rec:ch_PP-OCRv4_rec_infer.onnx:x=1,3,48,320 \
            cls:ch_ppocr_mobile_v2.0_cls_infer.onnx:x=1,3,48,192; do
  IFS=: read -r name file shape <<<"$spec"
  dims=${shape#x=}
  IFS=, read -r d0 d1 d2 d3 <<<"$dims"
  for t in 1 2 3 4 5; do
    mkdir -p "$tmp/$name.$t"
    if ! "$exe" run "$dir/$file" --random --seed 7 --dim p2o.DynamicDimension.0=$d0 \
        --dim p2o.DynamicDimension.1=$d2 --dim p2o.DynamicDimension.2=$d3 \
        --threads $t --output-dir "$tmp/$name.$t" >"$tmp/$name.$t.log" 2>&1; then
      echo "FAIL: $name with $t threads did not run:"; cat "$tmp/$name.$t.log"; fail=1; continue
    fi
  done
  for t in 2 3 4 5; do
    if [ -n "$(ls "$tmp/$name.1")" ] && diff -r "$tmp/$name.1" "$tmp/$name.$t" >/dev/null; then
      echo "ok: $name: $t threads bit-identical to 1 thread"
    else
      echo "FAIL: $name: outputs with $t threads differ from 1 thread"; fail=1
    fi
  done
done
exit $fail
