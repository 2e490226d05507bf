#!/bin/bash
# Create (or reuse) the Python venv that bench/ and test-side scripts use for the Python
# onnxruntime and its quantizer (bench/deploy.py). It is never a run-time dependency of
# onnxq. Prints the venv's path; its interpreter is "$(bash .ci/venv.sh)/bin/python".
#   bash .ci/venv.sh          # idempotent: installs only what is missing or at another version
# Location: $ONNXQ_CACHE/venv (ONNXQ_CACHE defaults to ~/.cache/onnxq). The Python is the
# python3 on PATH. onnxruntime is pinned to the release of onnxruntime-node that
# .ci/fetch-models.sh installs (1.30.0: the same MLAS kernels in both).
set -euo pipefail
CACHE="${ONNXQ_CACHE:-$HOME/.cache/onnxq}"
VENV="$CACHE/venv"
# sympy: onnxruntime.quantization.quant_pre_process (symbolic shape inference).
PINS=(onnxruntime==1.30.0 onnx==1.23.2 numpy==2.4.6 sympy==1.14.0)
mkdir -p "$CACHE"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV" >&2
fi
bash "$(dirname "$0")/pip-pins.sh" "$VENV/bin/python" "${PINS[@]}"
echo "$VENV"
