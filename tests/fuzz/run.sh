#!/usr/bin/env bash
# Run one fuzz target on one core.
#   CC=clang cmake -B build-fuzz -DONNXQ_FUZZ=ON -DONNXQ_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
#   cmake --build build-fuzz --target fuzz_NAME
#   bash tests/fuzz/run.sh NAME [SECONDS] [BUILD_DIR]    (default 600 s, build-fuzz)
# NAME: read (models), tensor (.npy/.pb), image (PNG/JPEG), json (config, overrides,
# calibration table), pipeline (pass strings). The working corpus (seeds + what the
# fuzzer finds) is BUILD_DIR/fuzz/NAME/corpus; crashes go to BUILD_DIR/fuzz/NAME/artifacts;
# the libFuzzer log is BUILD_DIR/fuzz/NAME/fuzz-0.log.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
name=${1:?usage: run.sh NAME [SECONDS] [BUILD_DIR]  (NAME: read tensor image json pipeline)}
secs=${2:-600}
bdir=$(cd "${3:-$here/../../build-fuzz}" && pwd)
exe=$bdir/tests/fuzz/fuzz_$name
[ -x "$exe" ] || { echo "run.sh: $exe not built (cmake --build $bdir --target fuzz_$name)" >&2; exit 2; }
case $name in
    read) seeds=$here/seeds; dict=$here/onnx.dict ;;
    *) seeds=$here/seeds-$name; dict=$here/$name.dict ;;
esac
work=$bdir/fuzz/$name
mkdir -p "$work/corpus" "$work/artifacts" "$work/tmp"
cp -n "$seeds"/* "$work/corpus/" 2>/dev/null || true
export TMPDIR=$work/tmp
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
if [ -f "$here/../ubsan.supp" ]; then
    export UBSAN_OPTIONS="$UBSAN_OPTIONS:suppressions=$here/../ubsan.supp"
fi
dictopt=()
[ -f "$dict" ] && dictopt=(-dict="$dict")
cd "$work"
rc=0
"$exe" -max_total_time="$secs" -jobs=1 -workers=1 -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 "${dictopt[@]}" -artifact_prefix="$work/artifacts/" \
    "$work/corpus" || rc=$?
rm -rf "$work/tmp"
tail -25 "$work/fuzz-0.log"
ls "$work/artifacts"
exit $rc
