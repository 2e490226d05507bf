#!/bin/bash
# Create (or reuse) the venv of the Python peers that run.py compares onnxq with, NNCF and
# AMD Quark (variants nncf*, quark* of bench/zoo/run.py, script bench/zoo/peer_quant.py);
# prints its path.
#   PEERS=$(bash bench/zoo/peers-venv.sh)   # idempotent: installs only missing/other versions
# Location: $ONNXQ_CACHE/peers-venv (ONNXQ_CACHE defaults to ~/.cache/onnxq), apart from the
# zoo venv because amd-quark 0.13 requires onnx <= 1.22 (the zoo venv has 1.23.2). Never a
# run-time dependency of onnxq. onnxruntime is the zoo's 1.30.0 (quark.onnx calibrates with
# it); torch==2.13.0 is the CPU build the zoo venv uses (quark.onnx imports torch, and its
# AdaRound/AdaQuant run in it). The quantized models are judged in the zoo venv, like the others.
set -euo pipefail
CACHE="${ONNXQ_CACHE:-$HOME/.cache/onnxq}"
VENV="$CACHE/peers-venv"
PINS=(nncf==3.4.0 amd-quark==0.13 onnxruntime==1.30.0 onnx==1.22.0 numpy==2.4.6
      torch==2.13.0)
mkdir -p "$CACHE"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV" >&2
fi
PIPS="$(cd "$(dirname "$0")/../.." && pwd)/.ci/pip-pins.sh"
bash "$PIPS" "$VENV/bin/python" "${PINS[@]}"
echo "$VENV"
