#!/bin/bash
# Create (or reuse) the architecture sweep's bench-only Python venv; prints its path.
#   VENV=$(bash bench/arch_sweep/venv.sh)   # idempotent: installs only missing/other versions
# Location: $ONNXQ_CACHE/arch-sweep-venv (ONNXQ_CACHE defaults to ~/.cache/onnxq). Never a
# run-time dependency of onnxq. onnxruntime is pinned to .ci/venv.sh's 1.30.0 (the same
# MLAS kernels as onnxruntime-node in the tests). torch==2.13.0 is the CPU build that lies
# on this machine's disk (other torch versions download CUDA builds). onnxscript is only
# for torch's dynamo exporter (the *_dyn models in models.py). transformers builds the
# Hugging Face models of models.py (HF_*) from small configs: no download; it leaves torch
# as it is (its dependencies: huggingface_hub, tokenizers, safetensors, regex, ...).
set -euo pipefail
CACHE="${ONNXQ_CACHE:-$HOME/.cache/onnxq}"
VENV="$CACHE/arch-sweep-venv"
PINS=(onnxruntime==1.30.0 onnx==1.23.2 numpy==2.4.6 torch==2.13.0 onnxscript==0.7.2 transformers==5.23.0)
mkdir -p "$CACHE"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV" >&2
fi
bash "$(cd "$(dirname "$0")/../.." && pwd)/.ci/pip-pins.sh" "$VENV/bin/python" "${PINS[@]}"
echo "$VENV"
