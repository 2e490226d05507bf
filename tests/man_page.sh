#!/usr/bin/env bash
# The manual page onnxq(1) (BINARY_DIR/onnxq.1, written by docs/man/make-man.sh from the
# --help texts at build time): `man -l` renders it, groff reports no warning, it has a
# section per command of `onnxq --help`, and every line of every command's --help text
# is on the rendered page (spaces squeezed), so the page says what the program says.
# Needs man-db and groff-base (.ci/install-deps.sh --test).
# Usage (ctest does this): bash tests/man_page.sh ONNXQ SOURCE_DIR BINARY_DIR
set -u
ONNXQ=${1:?usage: man_page.sh ONNXQ SOURCE_DIR BINARY_DIR}
BIN=${3:?}
page=$BIN/onnxq.1
if ! command -v man >/dev/null || ! command -v groff >/dev/null; then
    echo "SKIP: man-db/groff-base not installed"
    [ "${ONNXQ_REQUIRE_ALL:-0}" = 1 ] && exit 1
    exit 0
fi
[ -s "$page" ] || { echo "FAIL: $page missing (cmake --build builds target man)"; exit 1; }
work=$BIN/man_page_work
rm -rf "$work"
mkdir -p "$work"
fail=0
warn=$(groff -man -ww -z "$page" 2>&1)
[ -z "$warn" ] && echo "ok: groff -man -ww: no warning" || { echo "FAIL: groff: $warn"; fail=1; }
# one long line per paragraph would break the check: render wide, plain text
MANWIDTH=200 LC_ALL=C.UTF-8 man -l "$page" 2>"$work/man.err" | col -b >"$work/page.txt"
[ -s "$work/page.txt" ] && [ ! -s "$work/man.err" ] || { echo "FAIL: man -l: $(head -3 "$work/man.err")"; exit 1; }
squeeze() { tr -s ' \t' ' ' | sed 's/^ //; s/ $//'; }
squeeze <"$work/page.txt" >"$work/page.sq"
cmds=$("$ONNXQ" --help | sed -n '/^commands:/,/^$/p' | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p')
[ -n "$cmds" ] || { echo "FAIL: no commands in onnxq --help"; exit 1; }
n=0
for c in "" $cmds; do
    grep -qx "onnxq${c:+ $c}" "$work/page.sq" || [ -z "$c" ] || { echo "FAIL: no section \"onnxq $c\""; fail=1; }
    "$ONNXQ" $c --help | squeeze | grep -v '^$' >"$work/help.sq"
    missing=0
    while IFS= read -r line; do
        n=$((n + 1))
        if ! grep -qxF -- "$line" "$work/page.sq"; then
            [ $missing = 0 ] && echo "FAIL: onnxq $c --help line not on the page: $line"
            missing=$((missing + 1))
        fi
    done <"$work/help.sq"
    [ $missing = 0 ] || { echo "  ($missing lines missing for '$c')"; fail=1; }
done
echo "checked $n --help lines of $(echo $cmds | wc -w) commands and the top level"
exit $fail
