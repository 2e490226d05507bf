#!/bin/bash
# Run a node script that uses onnxruntime-node (tests/ortlib.js) on the CPU chosen by
# ONNXQ_ORT_CPU. Every test, model and bench script that starts node for onnxruntime goes
# through here:
#   bash tests/ortnode.bash SCRIPT.js ARGS...
# ONNXQ_ORT_CPU unset, empty or "native": plain `node`.
# ONNXQ_ORT_CPU=haswell: node runs under `qemu-x86_64 -cpu Haswell` (Debian qemu-user),
#   whose CPUID reports AVX2 without AVX-512 or VNNI, so onnxruntime's MLAS dispatches
#   to its AVX2 kernels (u8 x s8 products summed in pairs with vpmaddubsw, which
#   saturates in int16) even on a VNNI machine. Any other value is passed to qemu as the
#   CPU model name (`qemu-x86_64 -cpu help` lists them).
# Programs node starts (onnxq run, ...) run natively: qemu-user does not follow exec.
# qemu's "TCG doesn't support requested feature" warnings are dropped from stderr; the
# exit status is the script's. Timings taken under qemu mean nothing.
set -u
if [ $# -lt 1 ]; then echo "usage: bash tests/ortnode.bash SCRIPT.js ARGS..." >&2; exit 2; fi
cpu="${ONNXQ_ORT_CPU:-native}"
case "$cpu" in
  native|"") exec node "$@" ;;
  haswell|Haswell) cpu=Haswell ;;
esac
if ! command -v qemu-x86_64 >/dev/null; then
  echo "tests/ortnode.bash: ONNXQ_ORT_CPU=$ONNXQ_ORT_CPU needs qemu-x86_64 (Debian qemu-user)" >&2
  exit 2
fi
nodebin=$(command -v node) || { echo "tests/ortnode.bash: node is not installed" >&2; exit 2; }
# stderr through the filter, stdout straight to fd 3 (the original stdout)
{ qemu-x86_64 -cpu "$cpu" "$nodebin" "$@" 2>&1 1>&3 3>&- |
    grep -v "TCG doesn't support requested feature" >&2; } 3>&1
exit "${PIPESTATUS[0]}"
