#!/bin/bash
# Several suites skip (with a message) when an external reference is missing, so that a
# developer without them can still run the rest. In CI (.ci/test-all.sh sets
# ONNXQ_REQUIRE_ALL=1) a missing reference must fail loudly instead of turning those
# suites into tests that cannot fail: this suite checks every one of them.
set -u
CACHE="${ONNXQ_CACHE:-$HOME/.cache/onnxq}"
fail=0 ok=0
need() { # description, command...
    local what="$1"; shift
    if "$@" >/dev/null 2>&1; then ok=$((ok + 1)); echo "ok      $what"
    else fail=$((fail + 1)); echo "MISSING $what"; fi
}
need "ONNX backend test data" test -d /usr/share/libonnx-testdata/data/node/test_add
need "python3-onnx" /usr/bin/python3 -c "import onnx, numpy"
need "python3-pil + fonts" /usr/bin/python3 -c "import PIL; from PIL import ImageFont; ImageFont.truetype('DejaVuSans.ttf', 12)"
need "node" node --version
need "onnxruntime-node" test -f "$CACHE/node_modules/onnxruntime-node/package.json"
need "PaddleOCR det" test -f "$CACHE/ocr/package/assets/ch_PP-OCRv4_det_infer.onnx"
need "PaddleOCR rec" test -f "$CACHE/ocr/package/assets/ch_PP-OCRv4_rec_infer.onnx"
need "PaddleOCR cls" test -f "$CACHE/ocr/package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx"
need "silero VAD models" test -f "$CACHE/silero/package/weights/silero_vad_op18_ifless.onnx"
need "openWakeWord models" test -f "$CACHE/openwakeword/package/models/hello_deepa.onnx"
need "espeak-ng + sox" sh -c 'command -v espeak-ng && command -v sox'
need "graphviz dot" dot -V
need "chromium" chromium --version
need "qemu-user (qemu-x86_64)" qemu-x86_64 -version
need "man-db + groff" sh -c 'command -v man && command -v groff'
echo "$ok passed, $fail failed"
if [ "$fail" -gt 0 ] && [ "${ONNXQ_REQUIRE_ALL:-0}" = 1 ]; then
    echo "prereqs: references missing in a run that requires them all (ONNXQ_REQUIRE_ALL=1)"
    exit 1
fi
exit 0
