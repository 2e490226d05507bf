#!/bin/bash
# The docs examples that use only the repo's files and those of docs/examples/make.py
# run and print what their page shows (times masked): tests/docs_examples.py.
# usage: bash docs_examples.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
EXE=$1 SRC=$2 BIN=$3
/usr/bin/python3 -c 'import onnx, numpy' 2>/dev/null || {
    [ "${ONNXQ_REQUIRE_ALL:-0}" = 1 ] && { echo "FAIL: python3-onnx missing"; exit 1; }
    echo "SKIP: /usr/bin/python3 has no onnx/numpy"; exit 77; }
W="$BIN/docs_examples.tmp.d"
rm -rf "$W"
exec /usr/bin/python3 "$SRC/tests/docs_examples.py" "$SRC" "$(dirname "$EXE")" "$W"
