# Helpers for the tests of one quantize option that `--print-config` resolves (sourced by
# tests/bias_correction.sh and tests/weight_rounding.sh; not a test itself). The caller
# sets exe, src, model, work and fails, and KEY: the option's config key.
# resolved: "<top-level value> <resolved value> <its source>" of KEY from --print-config JSON
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
cfg() { "$exe" quantize "$model" --calib "$src/models/calib" "$@" --print-config 2>&1; }
resolved() {
  /usr/bin/python3 -c 'import json,sys; k=sys.argv[1]; r=json.load(sys.stdin); print(r[k], r["resolved"][k], r["resolved"]["sources"][k])' "$KEY"
}
check() { # args: expected "top resolved source", then quantize options
  local want=$1 got
  shift
  got=$(cfg "$@" | resolved) || { fail "--print-config $*: not JSON"; return; }
  [ "$got" = "$want" ] || fail "--print-config $*: $KEY $got, want $want"
}
refuse() { # args: text the message must contain, then quantize options: exit 2, one line, no output
  local text=$1
  shift
  "$exe" quantize "$model" -o "$work/r.onnx" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ $rc -ne 2 ] || [ "$(wc -l <"$work/err")" -ne 1 ] || ! grep -q -- "$text" "$work/err" || [ -e "$work/r.onnx" ]; then
    fail "quantize $*: exit $rc, want 2 with one line containing \"$text\":"; cat "$work/err"
  fi
}
