#!/bin/bash
# The Debian packages make_speech.sh needs (espeak-ng, flite, sox, the asterisk prompts
# and alsa-utils' recordings), installed when missing. Shared by the speech models'
# fetch.sh (silero-vad, oww-embedding).
set -euo pipefail
need=()
command -v espeak-ng >/dev/null || need+=(espeak-ng)
command -v flite >/dev/null || need+=(flite)
command -v sox >/dev/null || need+=(sox)
[ -d /usr/share/asterisk/sounds/en_US_f_Allison ] || need+=(asterisk-core-sounds-en-wav)
[ -f /usr/share/sounds/alsa/Front_Center.wav ] || need+=(alsa-utils)
if [ ${#need[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2
fi
