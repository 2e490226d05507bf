#!/bin/bash
# onnxq quantize's default calibration, --method select (src/job/quantize_select.c), checked
# against an independent path: for each candidate the job reports the worst output part's
# SQNR on the held-out samples (every 4th: sample_003, sample_007, ...) of a model
# calibrated on the other samples. Here the same is done by hand with the command line:
# quantize on a folder of the fit samples with that method alone, `onnxq verify` on a
# folder of the held-out samples. The numbers must agree, the choice must follow the rule
# (the first candidate unless another beats it by more than 0.1 dB), and the written
# model must compute what quantizing on every sample with the chosen method alone gives
# (up to the histogram merge: the job's observers saw the two shares apart); a small model
# is judged on more held-out samples (32 of 128).
# usage: bash quantize_select.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
EXE=$1 SRC=$2 BIN=$3
T="$BIN/quantize_select.tmp.d"
rm -rf "$T"; mkdir -p "$T/fit" "$T/held"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
MODEL="$SRC/models/shapes_cnn.onnx"
CALIB="$(cd "$SRC/models/calib" && pwd)"
COMMON=(--no-bias-correction --smooth-quant off --quiet)

k=0
for s in $(ls "$CALIB" | sort); do
  if [ $((k % 4)) = 3 ]; then ln -s "$CALIB/$s" "$T/held/$s"; else ln -s "$CALIB/$s" "$T/fit/$s"; fi
  k=$((k + 1))
done

"$EXE" quantize "$MODEL" -o "$T/sel.onnx" --calib "$CALIB" "${COMMON[@]}" --json "$T/sel.json" \
  || bad "default quantize exited $?"

method_args() { # candidate name -> quantize options of that method alone
  case $1 in
    minmax) echo "--method minmax" ;;
    p*) echo "--percentile ${1#p}" ;;
    *) echo "" ;;
  esac
}

worst_db() { # verify JSON -> the worst part's SQNR
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["worst"]["sqnr_db"])' "$1"
}

/usr/bin/python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["calibration_choice"]
print(c["chosen"], c["held_out_samples"])
for x in c["candidates"]:
    print(x["name"], x["worst_sqnr_db"])
' "$T/sel.json" > "$T/choice.txt" || bad "no calibration_choice in the --json summary"
read -r chosen held < "$T/choice.txt"
[ "$held" = "$(ls "$T/held" | wc -l)" ] || bad "held-out samples: job $held, expected $(ls "$T/held" | wc -l)"

checked=0
best_name="" best_db=""
while read -r name db; do
  if [ -z "$best_name" ]; then best_name=$name best_db=$db
  elif /usr/bin/python3 -c "import sys; sys.exit(0 if $db > $best_db + 0.1 else 1)"; then best_name=$name best_db=$db; fi
  args=$(method_args "$name")
  [ -n "$args" ] || continue # mse: auto's fast search, no method of its own
  # shellcheck disable=SC2086
  "$EXE" quantize "$MODEL" -o "$T/$name.onnx" --calib "$T/fit" $args "${COMMON[@]}" || bad "$name: quantize on the fit samples"
  "$EXE" verify "$MODEL" "$T/$name.onnx" --data "$T/held" --no-isolation --json "$T/$name.verify.json" >/dev/null 2>&1 \
    || bad "$name: verify on the held-out samples"
  ref=$(worst_db "$T/$name.verify.json")
  /usr/bin/python3 -c "import sys; sys.exit(0 if abs($db - $ref) < 0.005 else 1)" \
    || bad "$name: the job judged $db dB on the held-out samples, quantize + verify by hand $ref dB"
  echo "$name: job $db dB, by hand $ref dB"
  checked=$((checked + 1))
done < <(tail -n +2 "$T/choice.txt")
[ $checked -ge 3 ] || bad "only $checked candidates checked by hand"
[ "$chosen" = "$best_name" ] || bad "chosen $chosen, the rule gives $best_name"

# the written model: the chosen method over every sample
args=$(method_args "$chosen")
if [ -n "$args" ]; then
  # shellcheck disable=SC2086
  "$EXE" quantize "$MODEL" -o "$T/all.onnx" --calib "$CALIB" $args "${COMMON[@]}" || bad "quantize with $chosen"
  "$EXE" verify "$T/all.onnx" "$T/sel.onnx" --data "$CALIB" --no-isolation --json "$T/same.json" >/dev/null 2>&1
  same=$(worst_db "$T/same.json")
  /usr/bin/python3 -c "import sys; sys.exit(0 if float('$same') >= 50 else 1)" \
    || bad "the written model differs from quantizing with $chosen on every sample ($same dB)"
  echo "written model against $chosen on every sample: $same dB"
fi

# --percentile alone is that percentile, no choice; --method select with too few samples: the first
"$EXE" quantize "$MODEL" -o "$T/p.onnx" --calib "$CALIB" --percentile 99.9 "${COMMON[@]}" --json "$T/p.json" || bad "--percentile"
/usr/bin/python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["calibration_choice"] is None and j["calibration"]["method"] == "percentile" else 1)' "$T/p.json" \
  || bad "--percentile 99.9 alone should calibrate with that percentile, without a choice"
mkdir -p "$T/few"; for s in sample_000 sample_001 sample_002 sample_003 sample_004; do ln -s "$CALIB/$s" "$T/few/$s"; done
out=$("$EXE" quantize "$MODEL" -o "$T/few.onnx" --calib "$T/few" --no-bias-correction --smooth-quant off 2>&1)
echo "$out" | grep -q "calibration: p99.99 (too few samples" || bad "5 samples: expected the first candidate and a note; got: $out"

# a small model (weights under 16 MiB) is judged on up to 32 held-out samples: 128 samples
# (the 32 four times over) hold out 32
mkdir -p "$T/many"
for r in 0 1 2 3; do for s in $(ls "$CALIB"); do ln -s "$CALIB/$s" "$T/many/r${r}_$s"; done; done
"$EXE" quantize "$MODEL" -o "$T/many.onnx" --calib "$T/many" "${COMMON[@]}" --json "$T/many.json" || bad "128 samples"
/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["calibration_choice"]; sys.exit(0 if c["held_out_samples"] == 32 else 1)' "$T/many.json" \
  || bad "128 samples of a small model: expected 32 held-out samples judged"

[ $fail = 0 ] && echo "quantize_select: OK"
exit $fail
