#!/bin/bash
# PP-OCRv6 det, small (PP-OCRv6_det_small.onnx in the PyPI wheel rapidocr 3.10.0, installed
# --no-deps into the zoo venv by bench/zoo/venv.sh). calib: models/make_text_images.py --set
# calib; eval: bench/zoo/ocr_text.py (ImageMagick, other fonts, Chinese poems + English
# fortunes), the same sample folders as paddleocr-det. Idempotent.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${ZOO_PY:-$(bash "$HERE/../../venv.sh")/bin/python}
exec nice "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import ocr_text, zoolib; ocr_text.prepare_model("ppocrv6-det", "det", None, "json", zoolib.package_file("rapidocr", "models/PP-OCRv6_det_small.onnx"))' "$HERE/../.."
