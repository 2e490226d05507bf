#!/bin/bash
# Past 2^31 elements: calibrate and quantize a MatMul whose weight W [65536, 32769] has
# 2,147,549,184 float32 elements (8.6 GB in a sparse external data file, a few KB on
# disk), then check the scales and the quantized values at elements planted on both sides
# of element 2^31 (tests/big/big_tensor.py). Three runs: per-channel uint8 weights (the
# default target), per-tensor int8, int4 in blocks of 32.
# Not in the default suite: about 2-4 minutes per run on 2 cores, ~13 GB of RAM (the
# mapped weight) and ~3.5 GB of disk for the outputs. Run it with
#   cmake -S . -B build -DONNXQ_BIG_TESTS=ON && ctest --test-dir build -R big_tensor -V
# usage: bash big_tensor.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
exe=$1 src=$2 bin=${3:-/tmp}
/usr/bin/python3 -c "import onnx, numpy" 2>/dev/null || { echo "FAIL: python3-onnx / python3-numpy missing"; exit 1; }
work=$(mktemp -d "$bin/big_tensor.XXXXXX")
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$src/tests/big/big_tensor.py" make "$work" || { echo "FAIL: model generation"; exit 1; }
fail=0
run() { # NAME MODE ARGS...
  local name=$1 mode=$2; shift 2
  local t0=$SECONDS
  if ! "$exe" quantize "$work/big.onnx" -o "$work/$name.onnx" --calib "$work/calib" --quiet "$@"; then
    echo "FAIL: onnxq quantize $*"; fail=1; return
  fi
  echo "quantize $* ($((SECONDS - t0)) s)"
  /usr/bin/python3 "$src/tests/big/big_tensor.py" check "$work" "$work/$name.onnx" "$mode" || fail=1
  rm -f "$work/$name.onnx" "$work/$name.onnx.data"
}
run q_pc per-channel
run q_pt per-tensor --per-tensor --target generic
run q_int4 int4-block32 --weight-dtype int4 --weight-block-size 32 --target generic
[ $fail = 0 ] && echo "big_tensor: ok" || echo "big_tensor: FAILED"
exit $fail
