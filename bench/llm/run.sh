#!/bin/bash
# Weight-only int4 of generated decoders: onnxq against onnxruntime's matmul_nbits_quantizer
# (default RTN and HQQ) and NNCF, wall time and peak RSS (/usr/bin/time -v), file size,
# logits SQNR against the float model in onnxruntime (bench/llm/decoder_ort.py).
#   bash bench/llm/run.sh PRESET [TOOLS] [BLOCKS]
#     PRESET  1b | 7b | small | tiny  (bench/llm/make_decoder.py, float16 weights)
#     TOOLS   default "onnxq ort-default ort-hqq nncf"; onnxq-gptq: GPTQ on CALIB_SAMPLES (128)
#             sequences of CALIB_TOKENS (512) random tokens (make_calib.py, made once)
#     BLOCKS  default "32 128"
# Models live in $ONNXQ_CACHE/llm (~/.cache/onnxq/llm), never in the repo; one JSON line per
# run is appended to $ONNXQ_CACHE/llm/results.jsonl. Each quantized model is deleted after
# it is measured (ONNXQ_KEEP=1 keeps them). The peers run under `prlimit --as` (PEER_AS,
# default 18e9 bytes) so that one that runs out of memory fails instead of pushing the
# machine into the OOM killer; a failure is recorded as a result. SQNR=0 skips the
# comparison; SQNR=ref compares with the float32 numpy reference of decoder_ref.py (made once
# per preset, $ONNXQ_CACHE/llm/PRESET16.ref.npz) instead of the float16 model in onnxruntime,
# which cannot load the 7b-shaped one (README.md).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
preset=${1:?usage: run.sh PRESET [TOOLS] [BLOCKS]}
tools=${2:-onnxq ort-default ort-hqq nncf}
blocks=${3:-32 128}
cache="${ONNXQ_CACHE:-$HOME/.cache/onnxq}/llm"
mkdir -p "$cache"
py="$(bash "$root/.ci/venv.sh")/bin/python"
peers="$(bash "$root/bench/zoo/peers-venv.sh")/bin/python"
onnxq="${ONNXQ_EXE:-$root/build/onnxq}"
model="$cache/${preset}16.onnx"
if [ ! -e "$model" ]; then
  "$py" "$here/make_decoder.py" --preset "$preset" --dtype float16 -q -o "$model" || exit 1
fi
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
results="$cache/results.jsonl"
for block in $blocks; do
  for tool in $tools; do
    out="$cache/q_${preset}_${tool}_b${block}.onnx"
    rm -f "$out" "$out.data"
    log="$cache/q_${preset}_${tool}_b${block}.log"
    if [ "$tool" = onnxq ]; then
      /usr/bin/time -v "$onnxq" quantize "$model" -o "$out" --mode weight-only --format matmulnbits \
        --weight-block-size "$block" --quiet >"$log" 2>&1
    elif [ "$tool" = onnxq-gptq ]; then
      cal="$cache/cal_${preset}_${CALIB_SAMPLES:-128}x${CALIB_TOKENS:-512}"
      [ -d "$cal" ] || "$py" "$here/make_calib.py" "$model" "$cal" --samples "${CALIB_SAMPLES:-128}" \
        --tokens "${CALIB_TOKENS:-512}" >/dev/null || exit 1
      /usr/bin/time -v "$onnxq" quantize "$model" -o "$out" --mode weight-only --format matmulnbits \
        --weight-block-size "$block" --algo gptq --calib "$cal" --quiet >"$log" 2>&1
    else
      /usr/bin/time -v prlimit --as="${PEER_AS:-18000000000}" "$peers" "$here/peer_wq.py" "$tool" "$model" "$out" \
        --block "$block" >"$log" 2>&1
    fi
    rc=$?
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$log")
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$log")
    size=0
    [ -e "$out" ] && size=$(( $(stat -c %s "$out") + $( [ -e "$out.data" ] && stat -c %s "$out.data" || echo 0) ))
    sq='{}'
    if [ $rc = 0 ] && [ "${SQNR:-1}" = ref ]; then
      ref="$cache/${preset}16.ref.npz"
      [ -e "$ref" ] || "$py" "$here/decoder_ref.py" "$model" -o "$ref" --prompts 4 --prompt-len 32 --generate 8 2>>"$log"
      sq=$("$py" "$here/decoder_ort.py" "$out" --ref-npz "$ref" --prompts 4 --prompt-len 32 --generate 8 2>>"$log" | tail -1)
      [ -n "$sq" ] || sq='{"error": "onnxruntime could not run it"}'
    elif [ $rc = 0 ] && [ "${SQNR:-1}" != 0 ]; then
      sq=$("$py" "$here/decoder_ort.py" "$out" --ref "$model" --prompts 4 --prompt-len 32 --generate 8 2>>"$log" | tail -1)
      [ -n "$sq" ] || sq='{"error": "onnxruntime could not run it"}'
    fi
    err=$(grep -m1 -E '"ok": false|Error|error:' "$log" | cut -c1-300 | sed 's/"/\\"/g')
    line=$(printf '{"preset": "%s", "tool": "%s", "block": %s, "exit": %s, "wall": "%s", "peak_rss_kb": %s, "bytes": %s, "cpu": "%s", "error": "%s", "ort": %s}' \
      "$preset" "$tool" "$block" "$rc" "$wall" "${rss:-0}" "$size" "$cpu" "$err" "$sq")
    echo "$line" | tee -a "$results"
    [ "${ONNXQ_KEEP:-0}" = 1 ] || rm -f "$out" "$out.data"
  done
done
