#!/bin/bash
# onnxq quantize's default calibration, --method select (src/job/quantize_select.c), checked
# against an independent path: for each candidate the job reports its judgement on the
# held-out samples (every 4th: sample_003, sample_007, ...) of a model calibrated on the
# other samples: per output part, the mean of each sample's SQNR, the worst part. Here the
# same is done by hand with the command line: quantize on a folder of the fit samples with
# that method alone, `onnxq verify` on each held-out sample alone (its sums per part), and
# the mean and the jackknife standard errors of the differences computed in Python. The
# numbers must agree, the choice must follow the rule (the first candidate unless another
# beats it by more than 0.1 dB and by more than twice the standard error of the
# difference), and the written model must compute what quantizing on every sample with
# the chosen method alone gives (up to the histogram merge: the job's observers saw the two
# shares apart); a small model is judged on more held-out samples (32 of 128), and one whose
# held-out samples make a candidate look much better because of one sample keeps the first.
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
: > "$T/by_hand.txt"
while read -r name db; do
  args=$(method_args "$name")
  [ -n "$args" ] || continue # mse: auto's fast search, no method of its own
  # shellcheck disable=SC2086
  "$EXE" quantize "$MODEL" -o "$T/$name.onnx" --calib "$T/fit" $args "${COMMON[@]}" || bad "$name: quantize on the fit samples"
  # each held-out sample alone: its sums per output part, for the standard errors below
  for s in $(ls "$T/held"); do
    mkdir -p "$T/one/$s"; ln -sfn "$T/held/$s" "$T/one/$s/$s"
    "$EXE" verify "$MODEL" "$T/$name.onnx" --data "$T/one/$s" --no-isolation --json "$T/one/$s/$name.json" >/dev/null 2>&1 \
      || bad "$name: verify on $s alone"
  done
  echo "$name" >> "$T/by_hand.txt"
  checked=$((checked + 1))
done < <(tail -n +2 "$T/choice.txt")
[ $checked -ge 3 ] || bad "only $checked candidates checked by hand"

# the judgement and the rule, computed here from each held-out sample's verify sums: per
# output part, the mean of the samples' SQNRs, the worst part; the standard error of a
# difference: leave each sample out in turn, both scores over the rest, the spread
/usr/bin/python3 - "$T" "$chosen" <<'PY' || bad "the scores, standard errors or the choice do not follow the rule (above)"
import json, math, os, sys
T, chosen = sys.argv[1], sys.argv[2]
c = json.load(open(os.path.join(T, "sel.json")))["calibration_choice"]
cand = c["candidates"]
names = [l.strip() for l in open(os.path.join(T, "by_hand.txt"))]
held = sorted(os.listdir(os.path.join(T, "held")))
def sums(name):  # [sample][part] -> (sum x^2, sum err^2)
    out = []
    for s in held:
        v = json.load(open(os.path.join(T, "one", s, name + ".json")))
        out.append([(sl["error"]["sum_sq_ref"], sl["error"]["sum_sq_err"]) for o in v["outputs"] for sl in o["slices"]])
    return out
def score(rows, skip=None):
    keep = [r for k, r in enumerate(rows) if k != skip]
    return min(sum(10 * math.log10(r[p][0] / r[p][1]) for r in keep) / len(keep) for p in range(len(rows[0])))
first = cand[0]["name"]
assert first in names, "the first candidate is checked by hand"
s0, n, ok = sums(first), len(held), True
se = {}
for x in cand:
    if x["name"] not in names:
        se[x["name"]] = x.get("se_vs_first_db") or 0.0  # mse: no command of its own, the job's figures
        continue
    sx = sums(x["name"])
    good = abs(score(sx) - x["worst_sqnr_db"]) < 0.005
    ok &= good
    print("%s: job %.4f dB, by hand %.4f dB (mean of %d samples' SQNRs)%s" % (
        x["name"], x["worst_sqnr_db"], score(sx), n, "" if good else "  <- differs"))
    if x is cand[0]:
        continue
    d = [score(sx, k) - score(s0, k) for k in range(n)]
    m = sum(d) / n
    se[x["name"]] = math.sqrt((n - 1) / n * sum((v - m) ** 2 for v in d))
    job = x["se_vs_first_db"] or 0.0
    good = abs(job - se[x["name"]]) <= 0.02 + 0.05 * se[x["name"]]
    ok &= good
    print("%s: standard error of the difference from %s: job %.4f dB, by hand %.4f dB%s" % (
        x["name"], first, job, se[x["name"]], "" if good else "  <- differs"))
best, best_db = first, cand[0]["worst_sqnr_db"]
for x in cand[1:]:
    gain = x["worst_sqnr_db"] - cand[0]["worst_sqnr_db"]
    clear = gain > 0.1 and gain > 2 * se[x["name"]]
    if clear != x["clearly_better"]:
        print("%s: clearly_better %s, the rule gives %s" % (x["name"], x["clearly_better"], clear)); ok = False
    if clear and (best == first or x["worst_sqnr_db"] > best_db):
        best, best_db = x["name"], x["worst_sqnr_db"]
if best != chosen:
    print("chosen %s, the rule gives %s" % (chosen, best)); ok = False
print("rule: %s" % best)
sys.exit(0 if ok else 1)
PY

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

# held-out samples whose difference is mostly noise: two pixels per sample set to 6x the
# image's maximum; on these 8 held-out samples p99.999 scores over 2 dB above p99.99, but
# its standard error is as large: a candidate that is not clearly better does not replace
# the first (the rule before the standard errors took the highest score)
/usr/bin/python3 - "$CALIB" "$T/pix" <<'PY' || bad "could not write the bright-pixel samples"
import os, sys
import numpy as np
src, dst = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(1)
for s in sorted(os.listdir(src)):
    x = np.load(os.path.join(src, s, "image.npy")).copy()
    for _ in range(2):
        i, j = rng.integers(0, x.shape[2]), rng.integers(0, x.shape[3])
        x[..., i, j] = x.max() * 6
    os.makedirs(os.path.join(dst, s))
    np.save(os.path.join(dst, s, "image.npy"), x.astype(np.float32))
PY
"$EXE" quantize "$MODEL" -o "$T/pix.onnx" --calib "$T/pix" "${COMMON[@]}" --json "$T/pix.json" || bad "bright-pixel samples"
/usr/bin/python3 - "$T/pix.json" <<'PY' || bad "bright-pixel samples: expected a higher-scoring candidate within its noise, and the first kept"
import json, sys
c = json.load(open(sys.argv[1]))["calibration_choice"]
first = c["candidates"][0]
noisy = [x for x in c["candidates"][1:] if x["worst_sqnr_db"] > first["worst_sqnr_db"] + 0.1 and not x["clearly_better"]]
for x in c["candidates"][1:]:
    print("bright pixels: %s %+.2f dB against %s, standard error %.2f dB%s" % (
        x["name"], x["worst_sqnr_db"] - first["worst_sqnr_db"], first["name"], x["se_vs_first_db"] or 0,
        ", clearly better" if x["clearly_better"] else ""))
ok = noisy and c["chosen"] == first["name"] and all(
    x["clearly_better"] == (x["worst_sqnr_db"] - first["worst_sqnr_db"] > max(0.1, 2 * (x["se_vs_first_db"] or 0)))
    for x in c["candidates"][1:])
sys.exit(0 if ok else 1)
PY

[ $fail = 0 ] && echo "quantize_select: OK"
exit $fail
