#!/bin/bash
# Run a Python script that uses the Python onnxruntime (the venv of .ci/venv.sh) on the CPU
# chosen by ONNXQ_ORT_CPU, as tests/ortnode.bash does for onnxruntime-node:
#   bash tests/ortpy.bash PYTHON SCRIPT.py ARGS...
# ONNXQ_ORT_CPU unset, empty or "native": PYTHON runs as it is.
# ONNXQ_ORT_CPU=haswell: PYTHON runs under `qemu-x86_64 -cpu Haswell` (AVX2, no AVX-512,
#   no VNNI: onnxruntime's MLAS takes its AVX2 integer kernels, whose u8 x s8 pairs
#   saturate in int16), and ONNXQ_HOST_CPU=avx2 is exported so that the onnxq programs the
#   script starts (natively: qemu-user does not follow exec) pick the same arithmetic for
#   --target host. Any other value is passed to qemu as the CPU model name.
set -u
if [ $# -lt 2 ]; then echo "usage: bash tests/ortpy.bash PYTHON SCRIPT.py ARGS..." >&2; exit 2; fi
cpu="${ONNXQ_ORT_CPU:-native}"
case "$cpu" in
  native|"") exec "$@" ;;
  haswell|Haswell) cpu=Haswell; export ONNXQ_HOST_CPU=avx2 ;;
esac
if ! command -v qemu-x86_64 >/dev/null; then
  echo "tests/ortpy.bash: ONNXQ_ORT_CPU=$ONNXQ_ORT_CPU needs qemu-x86_64 (Debian qemu-user)" >&2
  exit 2
fi
py=$1; shift
# a venv's python is a symlink to the base interpreter: qemu needs the real file, and the
# venv must still be found (sys.prefix from pyvenv.cfg next to the link's directory)
real=$(readlink -f "$py")
{ qemu-x86_64 -cpu "$cpu" -0 "$py" "$real" "$@" 2>&1 1>&3 3>&- |
    grep -v "TCG doesn't support requested feature" >&2; } 3>&1
exit "${PIPESTATUS[0]}"
