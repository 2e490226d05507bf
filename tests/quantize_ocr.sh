#!/bin/bash
# onnxq quantize on PaddleOCR cls and det (from .ci/fetch-models.sh), calibrated on a few
# rendered text images (models/make_text_images.py; det at 96x96 to keep CI short) and
# checked on different images: the ONNX checker accepts the result and onnxruntime-node
# agrees with onnxq's executor within one quantization step of each output.
# cls is also calibrated from PNG files with --calib-images (PaddleOCR cls preprocessing:
# 48x192, (x/255 - 0.5) / 0.5).
# usage: bash quantize_ocr.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
# onnxruntime on an emulated Haswell (tests/ortnode.bash): onnxq's --target host must mean
# that CPU's arithmetic, not this one's
[ "${ONNXQ_ORT_CPU:-}" = haswell ] && export ONNXQ_HOST_CPU=avx2
EXE=$1 SRC=$2 BIN=$3
CACHE="${ONNXQ_CACHE:-$HOME/.cache/onnxq}"
A="$CACHE/ocr/package/assets"
if [ ! -f "$A/ch_PP-OCRv4_det_infer.onnx" ] || ! command -v node >/dev/null; then
  echo "note: PaddleOCR models or node missing (run .ci/fetch-models.sh); skipping"; exit 0
fi
if ! /usr/bin/python3 -c 'import PIL, onnx' 2>/dev/null; then
  echo "note: python3-pil / python3-onnx not installed; skipping"; exit 0
fi
T="$BIN/quantize_ocr.tmp.d"
rm -rf "$T"; mkdir -p "$T"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
GEN=(/usr/bin/python3 "$SRC/models/make_text_images.py" --det 3 --cls 8 --rec 1 --det-size 96)
"${GEN[@]}" --seed 11 "$T/calib" >/dev/null || { echo "FAIL: make_text_images"; exit 1; }
"${GEN[@]}" --seed 12 "$T/eval" >/dev/null || { echo "FAIL: make_text_images"; exit 1; }

compare() { # name model input.npy [light]
  local name=$1 q=$2 in=$3
  /usr/bin/python3 -c "import onnx,sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)" "$q" \
    || bad "$name: ONNX checker"
  mkdir -p "$T/$name.a"
  if [ "${4:-}" = light ]; then # outputs only, onnxruntime fully optimized
    "$EXE" run "$q" --input x="$in" --output-dir "$T/$name.a" --npy --target host 2>/dev/null >/dev/null || { bad "$name: onnxq run"; return; }
    bash "$SRC/tests/ortnode.bash" "$SRC/tests/quantize_ort.js" "$q" "$T/$name.c" x="$in" || { bad "$name: onnxruntime run"; return; }
    echo "$name:"
    /usr/bin/python3 "$SRC/tests/quantize_compare.py" "$q" "$T/$name.a" "$T/$name.c" --deep || bad "$name: onnxq vs onnxruntime"
    return
  fi
  # every intermediate tensor from both runtimes (onnxruntime: all of them made graph
  # outputs, optimizations off so that it runs the QDQ reference math)
  "$EXE" run "$q" --input x="$in" --output-dir "$T/$name.a" --npy --dump-all "$T/$name.a" >/dev/null \
    || { bad "$name: onnxq run"; return; }
  /usr/bin/python3 - "$q" "$T/$name.all.onnx" <<'PY'
import sys, onnx
m = onnx.load(sys.argv[1])
have = {o.name for o in m.graph.output}
for n in m.graph.node:
    for o in n.output:
        if o and o not in have:
            m.graph.output.append(onnx.ValueInfoProto(name=o))
onnx.save(m, sys.argv[2])
PY
  ONNXQ_ORT_OPT=disabled bash "$SRC/tests/ortnode.bash" "$SRC/tests/quantize_ort.js" "$T/$name.all.onnx" "$T/$name.b" x="$in"; local rc=$?
  [ $rc = 77 ] && { echo "note: onnxruntime-node missing"; return; }
  [ $rc = 0 ] || { bad "$name: onnxruntime run"; return; }
  echo "$name:"
  /usr/bin/python3 "$SRC/tests/quantize_compare.py" "$q" "$T/$name.a" "$T/$name.b" --deep || bad "$name: onnxq vs onnxruntime"
  # and the plain run with onnxruntime's full optimizations (fused integer kernels)
  # against onnxq's emulation of this CPU's integer arithmetic (--target host)
  bash "$SRC/tests/ortnode.bash" "$SRC/tests/quantize_ort.js" "$q" "$T/$name.c" x="$in" || bad "$name: onnxruntime (optimized) run"
  mkdir -p "$T/$name.h"
  "$EXE" run "$q" --input x="$in" --output-dir "$T/$name.h" --npy --dump-all "$T/$name.h" --target host \
    2>/dev/null >/dev/null || { bad "$name: onnxq run --target host"; return; }
  /usr/bin/python3 "$SRC/tests/quantize_compare.py" "$q" "$T/$name.h" "$T/$name.c" --deep || bad "$name: onnxq --target host vs onnxruntime (optimized)"
}

"$EXE" quantize "$A/ch_ppocr_mobile_v2.0_cls_infer.onnx" -o "$T/cls.onnx" --calib "$T/calib/cls/tensors" --quiet \
  || bad "cls: quantize"
compare cls "$T/cls.onnx" "$T/eval/cls/tensors/000/x.npy"

"$EXE" quantize "$A/ch_ppocr_mobile_v2.0_cls_infer.onnx" -o "$T/cls_img.onnx" --calib-images "$T/calib/cls/images" \
  --size 48x192 --mean 0.5,0.5,0.5 --std 0.5,0.5,0.5 --method entropy --quiet || bad "cls: --calib-images"
compare cls_img "$T/cls_img.onnx" "$T/eval/cls/tensors/001/x.npy" light

"$EXE" quantize "$A/ch_PP-OCRv4_det_infer.onnx" -o "$T/det.onnx" --calib "$T/calib/det/tensors" --quiet \
  || bad "det: quantize"
compare det "$T/det.onnx" "$T/eval/det/tensors/000/x.npy"

if [ $fail = 0 ]; then rm -rf "$T"; echo PASS; fi
exit $fail
