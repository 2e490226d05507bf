#!/bin/bash
# Accuracy of onnxq quantize on PaddleOCR (docs/accuracy.md), a reduced version of the
# measurement there: calibrate on rendered text images (models/make_text_images.py, the
# calib seed) and evaluate on different ones (the eval seed), with onnxq's executor and with
# onnxruntime-node running the quantized model (models/eval_quant.sh / eval_quant.js).
#   cls, default recipe, 64 calib crops, 100 eval crops: class agreement with the float
#       model >= 99 %.
#   det, default recipe (uint8/int8), 8 calib pages, 4 eval pages: output SQNR >= 12 dB.
#       This is NOT the issue's 30 dB target: 8-bit PTQ of this detector reaches about
#       15 dB (docs/design/paddleocr-8bit.md has the per-layer analysis); the check guards against
#       regressions below what the recipe reaches.
#   det, --act-dtype uint16 --weight-dtype int16: output SQNR >= 30 dB (the target).
#   det, default recipe with --target-sqnr 32 --max-fallback 64 --fallback-search bisect
#       (measured on the calibration pages): output SQNR >= 30 dB on the eval pages with
#       at least 25 % of the 62 Conv nodes still int8 (the search lands on 18: all in float
#       would be a failure of the search, not of the model). With ONNXQ_QUICK=1 (2 calib
#       pages, 1 eval page) the search sees too little data for its 32 dB to carry over
#       (28.9 dB measured): there it needs >= 25 dB, against 15 dB without fallback.
# usage: bash accuracy_ocr.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
EXE=$1 SRC=$2 BIN=$3
CACHE="${ONNXQ_CACHE:-$HOME/.cache/onnxq}"
A="$CACHE/ocr/package/assets"
DET="$A/ch_PP-OCRv4_det_infer.onnx" CLS="$A/ch_ppocr_mobile_v2.0_cls_infer.onnx"
if [ ! -f "$DET" ] || [ ! -f "$CLS" ] || ! command -v node >/dev/null; then
  echo "note: PaddleOCR models or node missing (run .ci/fetch-models.sh); skipping"; exit 0
fi
if ! /usr/bin/python3 -c 'import PIL, numpy' 2>/dev/null; then
  echo "note: python3-pil / python3-numpy not installed; skipping"; exit 0
fi
T="$BIN/accuracy_ocr.tmp.d"
rm -rf "$T"; mkdir -p "$T"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
GEN=(/usr/bin/python3 "$SRC/models/make_text_images.py" --rec 0)
# ONNXQ_QUICK=1 (the sanitizer run in CI): the same checks on less data
if [ "${ONNXQ_QUICK:-0}" = 1 ]; then NC=(--det 2 --cls 16) NE=(--det 1 --cls 20)
else NC=(--det 8 --cls 64) NE=(--det 4 --cls 100); fi
"${GEN[@]}" --set calib "${NC[@]}" "$T/calib" || { echo "FAIL: make_text_images"; exit 1; }
"${GEN[@]}" --set eval "${NE[@]}" "$T/eval" || { echo "FAIL: make_text_images"; exit 1; }

# check NAME JSON_FILE KEY MIN: KEY of both the onnxq and the onnxruntime result >= MIN
check() {
  /usr/bin/python3 - "$@" <<'PY' || fail=1
import json, sys
name, f, key, lo = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
r = json.loads(open(f).read().strip().splitlines()[-1])
ok = True
for v in ("onnxq", "ort"):
    x = r[v][key]
    good = x >= lo
    ok = ok and good
    print("%s %s: %s %.4g (need >= %g) %s" % (name, v, key, x, lo, "ok" if good else "FAIL"))
sys.exit(0 if ok else 1)
PY
}

q() { # name model calib-dir options...
  local name=$1 model=$2 cal=$3; shift 3
  "$EXE" quantize "$model" -o "$T/$name.onnx" --calib "$cal" --quiet "$@" 2>"$T/$name.log" \
    || { cat "$T/$name.log"; bad "$name: quantize"; return 1; }
}

if q cls "$CLS" "$T/calib/cls/tensors"; then
  bash "$SRC/models/eval_quant.sh" "$EXE" cls "$CLS" "$T/cls.onnx" "$T/eval/cls" > "$T/cls.json" \
    || bad "cls: eval"
  head -2 "$T/cls.json"
  check cls "$T/cls.json" agreement 0.99
fi
if q det8 "$DET" "$T/calib/det/tensors"; then
  bash "$SRC/models/eval_quant.sh" "$EXE" det "$DET" "$T/det8.onnx" "$T/eval/det" > "$T/det8.json" \
    || bad "det8: eval"
  head -2 "$T/det8.json"
  check det-uint8 "$T/det8.json" sqnr_db 12
fi
if q det16 "$DET" "$T/calib/det/tensors" --act-dtype uint16 --weight-dtype int16; then
  bash "$SRC/models/eval_quant.sh" "$EXE" det "$DET" "$T/det16.onnx" "$T/eval/det" > "$T/det16.json" \
    || bad "det16: eval"
  head -2 "$T/det16.json"
  check det-uint16 "$T/det16.json" sqnr_db 30
fi
# (--min-intensity 0: the share of int8 layers below is the search's, not the speed rule's)
if q detfb "$DET" "$T/calib/det/tensors" --target-sqnr 32 --max-fallback 64 --fallback-search bisect --min-intensity 0; then
  grep 'fallback: target' "$T/detfb.log"
  bash "$SRC/models/eval_quant.sh" "$EXE" det "$DET" "$T/detfb.onnx" "$T/eval/det" > "$T/detfb.json" \
    || bad "detfb: eval"
  head -2 "$T/detfb.json"
  if [ "${ONNXQ_QUICK:-0}" = 1 ]; then check det-fallback "$T/detfb.json" sqnr_db 25
  else check det-fallback "$T/detfb.json" sqnr_db 30; fi
  /usr/bin/python3 - "$T/detfb.onnx" <<'PY' || bad "detfb: too few int8 convolutions"
import sys, onnx
m = onnx.load(sys.argv[1])
prod = {o: n for n in m.graph.node for o in n.output}
# ConvTranspose is never int8 for the default target ort-x86 (no integer ConvTranspose in
# onnxruntime's CPU provider), so the share counts Conv only. The bisect's candidates
# include the Add/Mul groups the onnxruntime placement quantizes; it lands on 18 of 62 since
# the ranking counts what float nodes after a layer do to its error (a923e4f; 20 before,
# while at --target-sqnr 25 it now needs 21 nodes in float instead of 24): at least 25 %.
conv = [n for n in m.graph.node if n.op_type == 'Conv']
q = [n for n in conv if n.input[1] in prod and prod[n.input[1]].op_type == 'DequantizeLinear']
print('det-fallback: %d of %d convolutions int8' % (len(q), len(conv)))
sys.exit(0 if 4 * len(q) >= len(conv) else 1)
PY
fi
[ $fail = 0 ] && rm -rf "$T"
exit $fail
