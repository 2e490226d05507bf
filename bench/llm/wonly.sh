#!/bin/bash
# Int4 weight-only on the trained decoder (bench/llm/train_decoder.py): onnxq RTN (block 32
# and 128), GPTQ, GPTQ act order, AWQ against onnxruntime's matmul_nbits_quantizer
# (blockwise RTN, HQQ, k-quant, GPTQ) and NNCF compress_weights (data-free, AWQ, AWQ + scale
# estimation); time and peak RSS of each (/usr/bin/time; peers under prlimit --as=16 GB),
# file size and perplexity on the evaluation text in onnxruntime (bench/llm/perplexity.py).
# Calibration: the 128 sequences of the calibration source; evaluation: another source.
#   bash bench/llm/wonly.sh [ONNXQ_EXE]        (results: $ONNXQ_CACHE/llm/wonly/results.json)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exe=${1:-$here/../../build/onnxq}
cache=${ONNXQ_CACHE:-$HOME/.cache/onnxq}
dec=$cache/llm/decoder
out=$cache/llm/wonly
model=$dec/model.onnx
calib=$dec/calib
[ -f "$model" ] || { echo "no $model: run bench/llm/train_decoder.py first" >&2; exit 2; }
mkdir -p "$out"
peers=$(bash "$here/../zoo/peers-venv.sh")/bin/python
ortpy=$(bash "$here/../../.ci/venv.sh")/bin/python
: > "$out/times.txt"
q() { # NAME ARGS...: onnxq quantize, MatMulNBits (float activations in onnxruntime)
  local name=$1; shift
  /usr/bin/time -f "$name %e %M" -a -o "$out/times.txt" \
    "$exe" quantize "$model" -o "$out/$name.onnx" --mode weight-only --format matmulnbits --quiet "$@"
}
q onnxq-rtn32 --weight-block-size 32
q onnxq-rtn128 --weight-block-size 128
q onnxq-gptq32 --weight-block-size 32 --algo gptq --calib "$calib"
q onnxq-gptq32-ao --weight-block-size 32 --algo gptq --gptq-act-order --calib "$calib"
q onnxq-gptq128 --weight-block-size 128 --algo gptq --calib "$calib"
q onnxq-awq32 --weight-block-size 32 --algo awq --calib "$calib"
q onnxq-awq128 --weight-block-size 128 --algo awq --calib "$calib"
for v in ${PEERS:-ort-default32 ort-default128 ort-hqq128 ort-kquant ort-gptq nncf-int4 nncf-awq nncf-awq-se}; do
  prlimit --as=16000000000 /usr/bin/time -f "$v %e %M" -a -o "$out/times.txt" \
    "$peers" "$here/peers_wonly.py" "$v" "$model" "$out/$v.onnx" --calib "$calib" >"$out/$v.log" 2>&1 ||
    echo "$v failed: $(grep -v Warning "$out/$v.log" | tail -1)"
done
models=("$model")
while read -r name _; do [ -f "$out/$name.onnx" ] && models+=("$out/$name.onnx"); done < "$out/times.txt"
"$ortpy" "$here/perplexity.py" "${models[@]}" --json "$out/ppl.json"
"$ortpy" - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
t = {l.split()[0]: (float(l.split()[-2]), int(l.split()[-1])) for l in open(f"{out}/times.txt")
     if len(l.split()) >= 3 and l.split()[-1].isdigit()}
rows = json.load(open(f"{out}/ppl.json"))["rows"]
ref = rows[0]["ppl"]
print(f"| variant | time s | peak RSS MB | file MB | perplexity | vs float |")
print("|---|---:|---:|---:|---:|---:|")
res = []
for r in rows:
    name = os.path.basename(r["model"])[:-5]
    name = "float" if name == "model" else name
    s, kb = t.get(name, (0, 0))
    print(f"| {name} | {s:.1f} | {kb / 1024:.0f} | {r['bytes'] / 1e6:.2f} | {r['ppl']:.3f} | {100 * (r['ppl'] / ref - 1):+.2f} % |")
    res.append(dict(r, variant=name, seconds=s, peak_rss_kb=kb))
json.dump(res, open(f"{out}/results.json", "w"), indent=1)
PY
