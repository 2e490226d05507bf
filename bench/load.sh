#!/bin/bash
# Loading and writing speed: `onnxq convert` against `cp` of the same file.
#
# usage: bench/load.sh [ONNXQ] [WORKDIR]
#   ONNXQ    the onnxq program (default: build/onnxq; use a release build)
#   WORKDIR  where the models go (default: a fresh /tmp/onnxq-load.XXXXXX, removed at the end)
#   REPS=N   repetitions per measurement (default 5); the median is printed
#   SIZES="256 1024"  initializer sizes in MiB
#
# For each size it writes a model whose initializers are raw_data (bench/make_load_models.py)
# and converts it once with --external-data. Then, with the files in the page cache:
#   cp            cp raw.onnx copy.onnx                        (no fsync)
#   cp+sync       cp, then `sync copy.onnx` (fsync), like onnxq's durable write
#   convert raw   onnxq convert raw.onnx out.onnx              (read + write + fsync + rename)
#   check raw     onnxq check raw.onnx                         (load + structural check only)
#   check ext     onnxq check ext.onnx                         (load with external data: mmap)
#   convert ext   onnxq convert ext.onnx out2.onnx             (external stays external: data copied)
# Between timed runs the page cache is flushed to disk (`sync`, untimed) so one run's
# writeback does not land in the next one's time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ONNXQ=${1:-build/onnxq}
ONNXQ=$(cd "$(dirname "$ONNXQ")" && pwd)/$(basename "$ONNXQ")
PY=/usr/bin/python3
REPS=${REPS:-5}
SIZES=${SIZES:-"256 1024"}
if [ -n "${2:-}" ]; then WORK=$2; mkdir -p "$WORK"; KEEP=1; else WORK=$(mktemp -d /tmp/onnxq-load.XXXXXX); KEEP=${KEEP:-0}; fi
cleanup() { [ "$KEEP" = 1 ] || rm -rf "$WORK"; }
trap cleanup EXIT
cd "$WORK"

# median of REPS runs of a command, in milliseconds; $PRE is run (untimed) before each
timeit() {
    local pre=$1; shift
    local ts=()
    for _ in $(seq "$REPS"); do
        eval "$pre"
        sync
        local s e
        s=$(date +%s%N)
        "$@" >/dev/null
        e=$(date +%s%N)
        ts+=($(( (e - s) / 1000000 )))
    done
    printf '%s\n' "${ts[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

cpsync() { cp "$1" "$2" && sync "$2"; }

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM," \
     "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "filesystem of $WORK: $(df -T "$WORK" | awk 'NR==2 {print $2}')"
echo "onnxq: $ONNXQ ($("$ONNXQ" --version))"
echo "repetitions: $REPS (median shown), times in ms"
echo
printf '%-8s %8s %8s %12s %10s %10s %12s %14s %18s\n' size cp cp+sync "convert raw" "check raw" "check ext" "convert ext" "convert/cp" "convert/(cp+sync)"
for mib in $SIZES; do
    raw=raw_$mib.onnx ext=ext_$mib.onnx
    [ -f "$raw" ] || "$PY" "$here/make_load_models.py" "$mib" "$raw"
    [ -f "$ext" ] || "$ONNXQ" convert "$raw" "$ext" --external-data >/dev/null
    cat "$raw" "$ext" "$ext.data" >/dev/null # warm cache
    t_cp=$(timeit "rm -f copy.onnx" cp "$raw" copy.onnx)
    t_cps=$(timeit "rm -f copy.onnx" cpsync "$raw" copy.onnx)
    t_conv=$(timeit "rm -f out.onnx" "$ONNXQ" convert "$raw" out.onnx)
    t_chk=$(timeit ":" "$ONNXQ" check "$raw")
    t_chke=$(timeit ":" "$ONNXQ" check "$ext")
    t_conve=$(timeit "rm -f out2.onnx out2.onnx.data" "$ONNXQ" convert "$ext" out2.onnx)
    cmp -s "$raw" out.onnx || { echo "convert output differs from its input" >&2; exit 1; }
    rm -f copy.onnx out.onnx out2.onnx out2.onnx.data
    printf '%-8s %8d %8d %12d %10d %10d %12d %14s %18s\n' "${mib}MiB" "$t_cp" "$t_cps" "$t_conv" "$t_chk" "$t_chke" "$t_conve" \
        "$(awk -v a="$t_conv" -v b="$t_cp" 'BEGIN {printf "%.2fx", a / (b ? b : 1)}')" \
        "$(awk -v a="$t_conv" -v b="$t_cps" 'BEGIN {printf "%.2fx", a / (b ? b : 1)}')"
done
