#!/bin/bash
# Calibration and evaluation speech for the audio models of the zoo (silero-vad,
# oww-embedding, oww-hey-jarvis), 16 kHz mono 16-bit WAV, deterministic (sox -R).
#   bash make_speech.sh OUTDIR      -> OUTDIR/calib.wav, OUTDIR/eval.wav (idempotent)
# calib.wav: espeak-ng (Debian espeak-ng), 8 sentences in 4 voices, plus "hey jarvis"
#            three times, with 0.6 s pauses, under low white noise (sox synth).
# eval.wav:  real human recordings: 36 prompts of Debian's asterisk-core-sounds-en-wav
#            (Allison Smith, 8 kHz telephone prompts, CC-BY-SA 3.0) and the 8 channel
#            names of alsa-utils' /usr/share/sounds/alsa (48 kHz), plus "hey jarvis" four
#            times by flite (Debian flite, another synthesizer than calibration's),
#            with 0.5..1.0 s pauses, mixed with pink noise (sox synth, another noise).
set -euo pipefail
OUT=$1
mkdir -p "$OUT"
[ -f "$OUT/eval.wav" ] && [ -f "$OUT/calib.wav" ] && exit 0
for t in espeak-ng flite sox; do command -v $t >/dev/null || { echo "$t missing (apt-get install espeak-ng flite sox)" >&2; exit 1; }; done
AST=/usr/share/asterisk/sounds/en_US_f_Allison ALSA=/usr/share/sounds/alsa
[ -d "$AST" ] || { echo "$AST missing (apt-get install asterisk-core-sounds-en-wav)" >&2; exit 1; }
[ -f "$ALSA/Front_Center.wav" ] || { echo "$ALSA missing (apt-get install alsa-utils)" >&2; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
norm() { sox -R -D "$1" -r 16000 -c 1 -b 16 "$2" pad 0 "$3"; }   # resample, pause after
i=0; parts=()
say() {  # VOICE SPEED TEXT
  i=$((i + 1)); espeak-ng -v "$1" -a 100 -s "$2" -w "$T/c$i.raw.wav" "$3"
  norm "$T/c$i.raw.wav" "$T/c$i.wav" 0.6; parts+=("$T/c$i.wav")
}
say en-us 150 "The quick brown fox jumps over the lazy dog. Seven wizards quietly judge the boxing match."
say en-us+f2 160 "Quantization maps real numbers to a small set of integers."
say en-gb+m3 145 "How vexingly quick daft zebras jump, said the teacher, pointing at the blackboard."
say en+f4 170 "Please remember to water the plants on Tuesday and to lock the back door at night."
say en-us 140 "hey jarvis"
say en-us+m2 155 "A detector tells speech from silence, frame by frame, all day long."
say en-gb+f3 165 "The library closes at six, but the reading room stays open until nine."
say en-us+f2 150 "hey jarvis"
say en+m4 150 "Turn left at the second light, then follow the river past the old mill."
say en-us+m3 145 "Bright stars shone above the quiet harbour while the boats rocked gently."
say en-gb 160 "hey jarvis"
sox -R -D -n -r 16000 -c 1 -b 16 "$T/sil.wav" trim 0 0.5
sox -R -D "$T/sil.wav" "${parts[@]}" "$T/calib_clean.wav"
len=$(soxi -D "$T/calib_clean.wav")
sox -R -D -n -r 16000 -c 1 -b 16 "$T/wn.wav" synth "$len" whitenoise vol 0.01
sox -R -D -m "$T/calib_clean.wav" "$T/wn.wav" "$OUT/calib.wav.tmp.wav"
mv "$OUT/calib.wav.tmp.wav" "$OUT/calib.wav"

j=0; parts=()
add() { j=$((j + 1)); norm "$1" "$T/e$j.wav" "0.$((5 + j % 6))"; parts+=("$T/e$j.wav"); }
k=0
for f in $(ls "$AST"/*.wav | LC_ALL=C sort | awk 'NR % 14 == 1' | head -36); do
  add "$f"; k=$((k + 1))
  if [ $((k % 9)) -eq 0 ]; then
    flite -voice $([ $((k % 2)) -eq 0 ] && echo slt || echo rms) -t "hey jarvis" -o "$T/f$k.wav"; add "$T/f$k.wav"
  fi
done
for f in Front_Center Front_Left Front_Right Rear_Center Rear_Left Rear_Right Side_Left Side_Right; do add "$ALSA/$f.wav"; done
sox -R -D "$T/sil.wav" "${parts[@]}" "$T/eval_clean.wav"
len=$(soxi -D "$T/eval_clean.wav")
sox -R -D -n -r 16000 -c 1 -b 16 "$T/pn.wav" synth "$len" pinknoise vol 0.02
sox -R -D -m "$T/eval_clean.wav" "$T/pn.wav" "$OUT/eval.wav.tmp.wav"
mv "$OUT/eval.wav.tmp.wav" "$OUT/eval.wav"
