#!/bin/bash
# The Python package (issue 23), as .ci/test-all.sh runs it: build the wheel with the
# pinned scikit-build-core over this CMake project, make it self-contained with auditwheel,
# install it into the test venv (.ci/py-venv.sh) and run tests/python with pytest (its
# summary line is the last line printed). The packaging tests build once more with
# `pip install .` in a fresh venv and install the wheel into another one with the system's
# protobuf-c, libpng, libjpeg and cJSON hidden.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(bash .ci/py-venv.sh)
PY="$VENV/bin/python"
OUT=$(mktemp -d "${TMPDIR:-/tmp}/onnxq-py.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
"$PY" -m build --wheel --no-isolation --outdir "$OUT/dist" . >"$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; exit 1; }
PATH="$VENV/bin:$PATH" "$VENV/bin/auditwheel" repair "$OUT"/dist/*.whl -w "$OUT/wheelhouse" >"$OUT/repair.log" 2>&1 \
  || { tail -40 "$OUT/repair.log"; exit 1; }
WHEEL=$(ls "$OUT"/wheelhouse/*.whl)
echo "wheel: $(basename "$WHEEL") ($(du -k "$WHEEL" | cut -f1) KiB)"
"$PY" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$WHEEL"
ONNXQ_WHEEL="$WHEEL" "$PY" -m pytest -p no:cacheprovider -q -rs tests/python
