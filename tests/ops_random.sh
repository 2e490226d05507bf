#!/bin/bash
# Randomized single-operator models, onnxq against onnxruntime and, where they differ, the
# ONNX reference implementation (tests/ops_random.py): 5 fixed seeds x 300 cases (50: a
# half_pixel_symmetric nearest coordinate that lands on a whole number).
# Needs the venv of .ci/venv.sh (onnxruntime, onnx >= 1.16 with onnx.reference).
# usage: bash ops_random.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
EXE=$1 SRC=$2 BIN=$3
. "$SRC/tests/testlib.bash"
py="${ONNXQ_CACHE:-$HOME/.cache/onnxq}/venv/bin/python"
[ -x "$py" ] || skip "no venv at $py (bash .ci/venv.sh creates it)"
T="$BIN/ops_random.tmp.d"
rm -rf "$T"
for seed in 1 2 3 4 50; do
    "$py" "$SRC/tests/ops_random.py" "$EXE" "$T/$seed" 300 "$seed" || fail=1
done
[ $fail = 0 ] && echo "ops_random: all ok"
exit $fail
