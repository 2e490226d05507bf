#!/bin/bash
# Install into a venv only the pinned packages it lacks or has at another version (a pip
# check per package is slow; this compares versions). Used by .ci/venv.sh and the bench
# venvs (bench/zoo/venv.sh, bench/zoo/models/*/fetch.sh).
#   bash .ci/pip-pins.sh PYTHON [--no-deps] NAME==VERSION...
set -euo pipefail
py=$1; shift
flags=()
if [ "${1:-}" = --no-deps ]; then flags=(--no-deps); shift; fi
[ $# -gt 0 ] || exit 0
need=$("$py" - "$@" <<'PY'
import sys
from importlib import metadata
for pin in sys.argv[1:]:
    name, ver = pin.split("==")
    try:
        ok = metadata.version(name) == ver
    except metadata.PackageNotFoundError:
        ok = False
    if not ok:
        print(pin)
PY
)
if [ -n "$need" ]; then
    # shellcheck disable=SC2086
    "$py" -m pip install --quiet --disable-pip-version-check "${flags[@]}" $need >&2
fi
