#!/bin/bash
# The `onnxq verify --html` report renders in headless Chromium: a screenshot of the
# page is taken and must show the chart (many non-white pixels, red highlight bars and
# blue bars present), with no network access.
#   usage: bash verify_html.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
# Skipped (with a message, exit 0) when chromium is not installed
# (Debian: apt-get install chromium; .ci/install-deps.sh --test installs it).
set -u
EXE=${1:?onnxq executable}
SRC=${2:?source dir}
CHROME=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROME" ]; then
    echo "verify_html.sh: SKIP: chromium not installed (apt-get install chromium)"
    exit 0
fi
. "$SRC/tests/testlib.bash"
workdir TMP
F=$SRC/models/shapes_cnn.onnx

calib_dumps "$F" 000 001 002 003
$PY "$SRC/tests/verify_make_qdq.py" "$F" "$TMP/q.onnx" "${args[@]}" >/dev/null || bad "make q.onnx"
"$EXE" verify "$F" "$TMP/q.onnx" --data "$SRC/models/eval" --html "$TMP/report.html" --quiet ||
    bad "verify --html"

# an empty page for comparison: the check below must tell it apart
printf '<!DOCTYPE html><html><body></body></html>\n' >"$TMP/blank.html"
shot() { # HTML PNG
    "$CHROME" --headless --no-sandbox --disable-gpu --disable-background-networking \
        --disable-component-update --disable-sync --no-first-run \
        --user-data-dir="$(mktemp -d -p "$TMP")" --screenshot="$2" --window-size=1200,900 \
        "file://$1" >"$TMP/chrome.log" 2>&1
    [ -s "$2" ] || { bad "no screenshot of $1"; cat "$TMP/chrome.log"; }
}
shot "$TMP/report.html" "$TMP/report.png"
shot "$TMP/blank.html" "$TMP/blank.png"
$PY - "$TMP/report.png" "$TMP/blank.png" <<'PYEOF' || bad "the screenshot does not show the report"
import sys
from PIL import Image
def counts(p):
    im = Image.open(p).convert("RGB")
    px = list(im.getdata())
    nonwhite = sum(1 for r, g, b in px if r < 240 or g < 240 or b < 240)
    red = sum(1 for r, g, b in px if r > 180 and g < 80 and b < 80)       # worst layers
    blue = sum(1 for r, g, b in px if r < 110 and 100 < g < 150 and b > 140)  # other bars
    return len(px), nonwhite, red, blue
n, nw, red, blue = counts(sys.argv[1])
bn, bnw, _, _ = counts(sys.argv[2])
print("report: %d of %d pixels not white, %d red, %d blue; blank page: %d" % (nw, n, red, blue, bnw))
assert bnw < 0.001 * bn, "blank page is not blank: the measure is broken"
assert nw > 0.05 * n and red > 2000 and blue > 10000
PYEOF
[ $fail = 0 ] && echo "verify_html.sh: ok"
exit $fail
