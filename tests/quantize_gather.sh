#!/bin/bash
# int8 embedding tables (--embedding-dtype, passes/quantize_gather.c): a bad value exits 2
# with one line; --print-config shows the choice and the pipeline; end to end on a Gather
# embedding + MatMul in dynamic and static mode against numpy and onnxruntime
# (tests/quantize_gather.py, in the venv of .ci/venv.sh, on the CPU of ONNXQ_ORT_CPU).
# usage: bash quantize_gather.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
exe=$1 src=$2 bin=${3:-/tmp}
. "$src/tests/testlib.bash"
workdir work "$bin/quantize_gather.XXXXXX"
model="$src/models/shapes_cnn.onnx"
"$exe" quantize --mode dynamic "$model" -o "$work/bad.onnx" --embedding-dtype int4 >"$work/out" 2>"$work/err"
rc=$?
[ $rc = 2 ] && [ "$(wc -l <"$work/err")" = 1 ] && grep -q -- '--embedding-dtype "int4": int8 or float' "$work/err" &&
  [ ! -e "$work/bad.onnx" ] && note "ok   refused --embedding-dtype int4" || { bad "--embedding-dtype int4: exit $rc"; cat "$work/err"; }
for args in "--mode dynamic:int8:embedding-dtype=\"int8\"" "--mode dynamic --embedding-dtype float:float:embedding-dtype=\"float\"" \
            "--calib-random 2:int8:,quantize-gather" "--calib-random 2 --embedding-dtype float:float:"; do
  IFS=: read -r a want pat <<<"$args"
  # shellcheck disable=SC2086
  "$exe" quantize "$model" $a --print-config >"$work/cfg.json" 2>"$work/err" || { bad "print-config $a"; continue; }
  got=$(/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c["embedding_dtype"])' "$work/cfg.json")
  p=$(/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c["resolved"]["pipeline"])' "$work/cfg.json")
  if [ "$got" != "$want" ]; then bad "$a: embedding_dtype $got, want $want"
  elif [ -n "$pat" ] && ! grep -qF -- "$pat" <<<"$p"; then bad "$a: pipeline without $pat: $p"
  elif [ -z "$pat" ] && grep -q quantize-gather <<<"$p"; then bad "$a: pipeline has quantize-gather: $p"
  else note "ok   $a: embedding_dtype $got"; fi
  # --config reads it back
  "$exe" quantize "$model" --config "$work/cfg.json" --print-config >"$work/cfg2.json" 2>/dev/null
  cmp -s "$work/cfg.json" "$work/cfg2.json" || bad "$a: --config does not round-trip embedding_dtype"
done
py="${ONNXQ_CACHE:-$HOME/.cache/onnxq}/venv/bin/python"
if [ -x "$py" ]; then
  bash "$src/tests/ortpy.bash" "$py" "$src/tests/quantize_gather.py" "$exe" "$work/e2e"
  rc=$?
  if [ $rc = 77 ]; then skip "python modules missing"
  elif [ $rc != 0 ]; then bad "end to end (tests/quantize_gather.py)"; fi
else
  skip "no venv at $py (bash .ci/venv.sh creates it)"
fi
[ $fail = 0 ] && note "all passed"
exit $fail
