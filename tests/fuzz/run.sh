#!/usr/bin/env bash
# Run the reader fuzzer on one core.
#   CC=clang cmake -B build-fuzz -DONNXQ_FUZZ=ON -DONNXQ_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
#   cmake --build build-fuzz --target fuzz_read
#   bash tests/fuzz/run.sh build-fuzz [SECONDS]      (default 600)
# The working corpus (seeds + what the fuzzer finds) is build-fuzz/fuzz/corpus; crashes go to
# build-fuzz/fuzz/artifacts; the libFuzzer log is build-fuzz/fuzz/fuzz-0.log.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bdir=$(cd "${1:?usage: run.sh BUILD_DIR [SECONDS]}" && pwd)
secs=${2:-600}
exe=$bdir/tests/fuzz/fuzz_read
work=$bdir/fuzz
mkdir -p "$work/corpus" "$work/artifacts" "$work/tmp"
cp -n "$here"/seeds/* "$work/corpus/" 2>/dev/null || true
export TMPDIR=$work/tmp
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
if [ -f "$here/../ubsan.supp" ]; then
    export UBSAN_OPTIONS="$UBSAN_OPTIONS:suppressions=$here/../ubsan.supp"
fi
cd "$work"
rc=0
"$exe" -max_total_time="$secs" -jobs=1 -workers=1 -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 -dict="$here/onnx.dict" -artifact_prefix="$work/artifacts/" \
    "$work/corpus" || rc=$?
rm -rf "$work/tmp"
tail -25 "$work/fuzz-0.log"
ls "$work/artifacts"
exit $rc
