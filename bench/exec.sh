#!/bin/bash
# Executor speed against onnxruntime-node (PaddleOCR det/rec/cls, 1 and 2 threads).
# usage: bash bench/exec.sh [ONNXQ_EXE] [MODEL_DIR]
# Build first with optimisation (the default RelWithDebInfo is fine):
#   cmake -B build && cmake --build build -j2
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exe=${1:-$here/../build/onnxq}
shift || true
command -v node >/dev/null || { echo "bench/exec.sh: node is not installed" >&2; exit 2; }
echo "command: bash bench/exec.sh $exe $*"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "cpu: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p'), $(nproc) cores online"
exec nice -n 0 bash "$here/../tests/ortnode.bash" "$here/exec.js" "$exe" "$@"
