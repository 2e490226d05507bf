#!/bin/bash
# ONNX backend conformance: run every case of the Debian libonnx-testdata folders and
# fail if a case listed in tests/conformance/passing.txt does not pass any more.
# usage: bash conformance.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
exe=$1 src=$2 bin=${3:-/tmp}
data=${ONNXQ_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
if [ ! -d "$data/node" ]; then
  echo "SKIP: ONNX backend test data not found in $data (set ONNXQ_ONNX_TESTDATA)"
  exit 0
fi
dirs=()
for d in node pytorch-converted pytorch-operator simple; do
  [ -d "$data/$d" ] && dirs+=("$data/$d")
done
log="$bin/conformance.log"
"$exe" conformance "${dirs[@]}" > "$log"
rc=$?
if [ $rc -gt 1 ]; then
  echo "onnxq conformance failed to run (exit $rc)"
  cat "$log"
  exit 1
fi
grep -E '^fail ' "$log"
tail -n 1 "$log"
status=0
while read -r case; do
  [ -z "$case" ] && continue
  if ! grep -qxF "pass        $case" "$log"; then
    echo "REGRESSION: $case no longer passes: $(grep -F " $case" "$log" | head -n 1)"
    status=1
  fi
done < "$src/tests/conformance/passing.txt"
exit $status
