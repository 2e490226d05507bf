#!/bin/bash
# onnxq quantize refuses a run that quantizes no node: exit 1, nothing written, and a
# message saying why (docs/quantize.md "Models with control flow").
# usage: bash quantize_nothing.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
EXE=$1 SRC=$2 BIN=$3
T="$BIN/quantize_nothing.tmp.d"
rm -rf "$T"; mkdir -p "$T"
fail=0
"$EXE" quantize "$SRC/models/shapes_cnn.onnx" -o "$T/q.onnx" --calib "$SRC/models/calib" --op-types LSTM,GRU \
  --quiet 2>"$T/err"
rc=$?
[ $rc = 1 ] || { echo "FAIL: exit $rc, expected 1"; fail=1; }
[ -e "$T/q.onnx" ] && { echo "FAIL: a model was written"; fail=1; }
grep -q "no node quantized: no node of the requested op types LSTM,GRU in the model or its subgraphs" "$T/err" ||
  { echo "FAIL: message:"; cat "$T/err"; fail=1; }
# excluding every Conv/Gemm by name: the same refusal, naming the filter
"$EXE" quantize "$SRC/models/shapes_cnn.onnx" -o "$T/q.onnx" --calib "$SRC/models/calib" --exclude-nodes '.' \
  --quiet 2>"$T/err2"
rc=$?
[ $rc = 1 ] && grep -q "(after --include-nodes/--exclude-nodes)" "$T/err2" ||
  { echo "FAIL: --exclude-nodes . gave exit $rc:"; cat "$T/err2"; fail=1; }
# dynamic mode on a model whose only MatMul/Gemm is excluded: its Conv nodes are static mode's
"$EXE" quantize "$SRC/models/shapes_cnn.onnx" -o "$T/q.onnx" --mode dynamic --exclude-nodes '^fc$' \
  --quiet 2>"$T/err3"
rc=$?
[ $rc = 1 ] && [ ! -e "$T/q.onnx" ] && grep -q "static mode quantizes the model's 2 Conv nodes" "$T/err3" ||
  { echo "FAIL: dynamic on convolutions gave exit $rc:"; cat "$T/err3"; fail=1; }
# the normal run still exits 0
"$EXE" quantize "$SRC/models/shapes_cnn.onnx" -o "$T/q.onnx" --calib "$SRC/models/calib" --quiet ||
  { echo "FAIL: default quantize"; fail=1; }
[ $fail = 0 ] && echo "quantize_nothing: ok"
exit $fail
