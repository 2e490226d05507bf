#!/bin/bash
# YOLOv8n 320x320 detector shipped as nudenet/320n.onnx in the PyPI wheel nudenet 3.4.2
# (installed --no-deps into the zoo venv by bench/zoo/venv.sh). Idempotent.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${ZOO_PY:-$(bash "$HERE/../../venv.sh")/bin/python}
exec nice "$PY" "$HERE/prep.py"
