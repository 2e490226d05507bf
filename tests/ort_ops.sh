#!/bin/bash
# Single-operator models: onnxq vs onnxruntime-node (see tests/ort_ops.js).
# usage: bash ort_ops.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
exe=$1 src=$2 bin=${3:-/tmp}
if ! command -v node >/dev/null; then
  echo "SKIP: node is not installed"
  exit 0
fi
bash "$src/tests/ortnode.bash" "$src/tests/ort_ops.js" "$exe" "$src/tests/ort_ops" "$bin"
rc=$?
# 77: onnxruntime-node is missing (tests/ortlib.js printed SKIP)
[ $rc = 77 ] && exit 0
exit $rc
