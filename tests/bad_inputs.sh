#!/usr/bin/env bash
# Hostile-input corpus: every tests/bad/*.onnx must be refused by `onnxq check` and
# `onnxq convert` with exit code 2, exactly one stderr line that names the file and matches
# the regex in tests/bad/EXPECT, no output file, and no sanitizer report.
# Usage (ctest does this): bash tests/bad_inputs.sh ONNXQ SOURCE_DIR BINARY_DIR
set -u
ONNXQ=${1:?usage: bad_inputs.sh ONNXQ SOURCE_DIR BINARY_DIR}
SRC=${2:?}
BIN=${3:?}
case $ONNXQ in /*) ;; *) ONNXQ=$PWD/$ONNXQ ;; esac

work=$BIN/bad_inputs_work
rm -rf "$work"
mkdir -p "$work"
# copy the corpus (cp -a keeps the committed symlinks as symlinks)
cp -a "$SRC/tests/bad" "$work/bad"
bad=$work/bad
# a FIFO cannot be committed: make it here (opening it for reading would block forever)
mkfifo "$bad/fifo.bin"
outdir=$work/out
mkdir -p "$outdir"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
if [ -f "$SRC/tests/ubsan.supp" ]; then
    export UBSAN_OPTIONS="$UBSAN_OPTIONS:suppressions=$SRC/tests/ubsan.supp"
fi

pass=0
fail=0
ok() { pass=$((pass + 1)); printf 'ok    %s\n' "$1"; }
bad_case() { fail=$((fail + 1)); printf 'FAIL  %s: %s\n' "$1" "$2"; }

# run_refused LABEL FILE REGEX CMD...: the command must refuse FILE properly
run_refused() {
    local label=$1 file=$2 regex=$3
    shift 3
    local err=$work/stderr out=$work/stdout
    timeout 60 "$@" >"$out" 2>"$err"
    local rc=$?
    local lines
    lines=$(wc -l <"$err")
    if grep -qE 'runtime error|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer' "$err"; then
        bad_case "$label" "sanitizer report: $(grep -m1 -E 'runtime error|Sanitizer' "$err")"
    elif [ "$rc" -eq 124 ]; then
        bad_case "$label" "timed out"
    elif [ "$rc" -ne 2 ]; then
        bad_case "$label" "exit code $rc, expected 2; stderr: $(head -c 300 "$err")"
    elif [ "$lines" -ne 1 ]; then
        bad_case "$label" "$lines stderr lines, expected 1: $(head -c 400 "$err" | tr '\n' '|')"
    elif ! grep -qF -- "$file" "$err"; then
        bad_case "$label" "error does not name the file: $(cat "$err")"
    elif ! grep -qE -- "$regex" "$err"; then
        bad_case "$label" "error does not match /$regex/: $(cat "$err")"
    elif [ -s "$out" ]; then
        bad_case "$label" "printed on stdout: $(head -c 200 "$out")"
    else
        ok "$label: $(cat "$err")"
    fi
}

# every corpus file must have an expectation and vice versa
n_files=$(find "$bad" -maxdepth 1 -name '*.onnx' | wc -l)
n_expect=$(grep -cv '^#' "$bad/EXPECT")
if [ "$n_files" -ne "$n_expect" ]; then
    bad_case "corpus" "$n_files .onnx files but $n_expect EXPECT entries"
fi

while IFS=$'\t' read -r name regex; do
    case $name in '#'*|'') continue ;; esac
    f=$bad/$name
    if [ ! -f "$f" ]; then
        bad_case "$name" "missing from the corpus"
        continue
    fi
    run_refused "check   $name" "$f" "$regex" "$ONNXQ" check "$f"
    o=$outdir/$name.out
    run_refused "convert $name" "$f" "$regex" "$ONNXQ" convert "$f" "$o"
    if [ -n "$(ls -A "$outdir")" ]; then
        bad_case "convert $name" "left files behind: $(ls -A "$outdir" | tr '\n' ' ')"
        rm -rf "${outdir:?}"/* "${outdir:?}"/.[!.]* 2>/dev/null
    fi
done <"$bad/EXPECT"

# the model path itself is hostile: a FIFO (must not block), a directory, missing
mkfifo "$work/model_fifo.onnx"
run_refused "check   model path is a FIFO" "$work/model_fifo.onnx" "not a regular file" \
    "$ONNXQ" check "$work/model_fifo.onnx"
run_refused "check   model path is a directory" "$bad/adir" "not a regular file|directory" \
    "$ONNXQ" check "$bad/adir"
run_refused "check   model path is missing" "$work/nope.onnx" "No such file" \
    "$ONNXQ" check "$work/nope.onnx"

# controls: the external-data models with a good location load and convert, so the
# refusals above come from the attacks, not from the models around them; and nesting of
# exactly 100 levels (graphs, types) is accepted
for g in "$bad"/good_*.onnx.ok; do
    m=${g%.ok}
    cp "$g" "$m"
    name=$(basename "$m")
    if timeout 60 "$ONNXQ" check "$m" >"$work/stdout" 2>"$work/stderr" && [ ! -s "$work/stderr" ]; then
        ok "control $name: $(cat "$work/stdout")"
    else
        bad_case "control $name" "should load: $(cat "$work/stderr")"
    fi
    if timeout 60 "$ONNXQ" convert "$m" "$outdir/$name" 2>"$work/stderr" && [ -s "$outdir/$name" ] &&
        timeout 60 "$ONNXQ" check "$outdir/$name" >/dev/null 2>>"$work/stderr"; then
        ok "control convert $name"
    else
        bad_case "control convert $name" "should convert to a model that loads: $(cat "$work/stderr")"
    fi
    rm -f "$m"
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
