#!/bin/bash
# Streaming weight-only quantization of generated decoders (bench/llm/make_decoder.py):
# known answers against numpy's round to nearest, onnxruntime logits SQNR and KV-cache
# interface, the embedding as GatherBlockQuantized (tied head too), GPTQ/AWQ on float16 (the
# boundary cache byte-identical to sweeps from the inputs), peak RSS bounded on a
# model of 437 MB of weights, no file left by SIGINT (tests/llm_stream.py, in the venv of
# .ci/venv.sh). Bad --embedding-dtype in weight-only mode exits 2 with one line.
# usage: bash llm_stream.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
exe=$1 src=$2 bin=${3:-/tmp}
. "$src/tests/testlib.bash"
workdir work "$bin/llm_stream.XXXXXX"
"$exe" quantize "$src/models/shapes_cnn.onnx" -o "$work/bad.onnx" --mode weight-only --embedding-dtype int2 \
  >"$work/out" 2>"$work/err"
rc=$?
[ $rc = 2 ] && [ "$(wc -l <"$work/err")" = 1 ] && grep -q -- 'int4, int8 or float in --mode weight-only' "$work/err" &&
  [ ! -e "$work/bad.onnx" ] && note "ok   refused --embedding-dtype int2" || { bad "--embedding-dtype int2: exit $rc"; cat "$work/err"; }
py="${ONNXQ_CACHE:-$HOME/.cache/onnxq}/venv/bin/python"
if [ -x "$py" ]; then
  # a sanitizer build: ASan's quarantine keeps freed blocks, the RSS bound does not apply
  san=0; ldd "$exe" 2>/dev/null | grep -q libasan && san=1
  ONNXQ_SANITIZED=$san "$py" "$src/tests/llm_stream.py" "$exe" "$src" "$work/e2e"
  rc=$?
  if [ $rc = 77 ]; then skip "python modules missing"
  elif [ $rc != 0 ]; then bad "tests/llm_stream.py"; fi
else
  skip "no venv at $py (bash .ci/venv.sh creates it)"
fi
[ $fail = 0 ] && note "all passed"
