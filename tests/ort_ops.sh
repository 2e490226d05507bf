#!/bin/bash
# Single-operator models: onnxq vs onnxruntime-node (see tests/ort_ops.js).
# usage: bash ort_ops.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
exe=$1 src=$2 bin=${3:-/tmp}
. "$src/tests/testlib.bash"
ortnode_suite "$src/tests/ort_ops.js" "$exe" "$src/tests/ort_ops" "$bin"
