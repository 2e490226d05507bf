#!/usr/bin/env bash
# docs/api.md: install the build into a fresh prefix (cmake --install), check the manual
# page and onnxq.pc are there, build the page's example program with
# `pkg-config --cflags --libs onnxq` and run it WITHOUT LD_LIBRARY_PATH (the .pc's rpath
# must find the installed libonnxq.so); its standard output must be the page's, and its
# stderr the page's diagnostic. The classes it prints are the shapes the program draws
# (ground truth by construction), for the float and the quantized model; the model's op
# histogram and its largest weight's statistics (onnxq/inspect.h) are checked against
# python3-onnx and numpy.
# Usage (ctest does this): bash tests/api_example.sh ONNXQ SOURCE_DIR BINARY_DIR
set -u
SRC=${2:?usage: api_example.sh ONNXQ SOURCE_DIR BINARY_DIR}
BIN=${3:?}
work=$BIN/api_example_work
rm -rf "$work"
mkdir -p "$work"
fail=0
die() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }

cmake --install "$BIN" --prefix "$work/prefix" >"$work/install.log" 2>&1 || die "cmake --install: $(tail -3 "$work/install.log")"
man1=$(ls "$work"/prefix/share/man/man1/onnxq.1 2>/dev/null) || die "onnxq.1 not installed in share/man/man1"
ok "installed $man1"
pc=$(ls "$work"/prefix/lib*/pkgconfig/onnxq.pc 2>/dev/null | head -1)
[ -n "$pc" ] || die "onnxq.pc not installed"
export PKG_CONFIG_PATH=$(dirname "$pc")
unset LD_LIBRARY_PATH

# the ```c block of docs/api.md, and the two blocks after "Its standard output"
awk '/^```c$/ {on=1; next} on && /^```$/ {exit} on' "$SRC/docs/api.md" >"$work/example.c"
# the second ```c block (the quantize job) and the block after "The quantize example prints"
awk '/^```c$/ {n++; if (n==2) {on=1; next}} on && /^```$/ {exit} on' "$SRC/docs/api.md" >"$work/qexample.c"
awk '/^The quantize example prints/ {f=1} f && /^```$/ {n++; next} f && n==1' "$SRC/docs/api.md" >"$work/qwant.out"
[ -s "$work/qexample.c" ] && [ -s "$work/qwant.out" ] || die "docs/api.md: the quantize example or its output not found"
awk '/^Its standard output/ {f=1} f && /^```$/ {n++; next} f && n==1' "$SRC/docs/api.md" >"$work/want.out"
awk '/^Its standard output/ {f=1} f && /^```$/ {n++; next} f && n==3' "$SRC/docs/api.md" >"$work/want.err"
[ -s "$work/example.c" ] && [ -s "$work/want.out" ] && [ -s "$work/want.err" ] || die "docs/api.md: example or its output not found"

flags=$(pkg-config --cflags --libs onnxq) || die "pkg-config --cflags --libs onnxq"
case $flags in *-Wl,-rpath,*) ok "pkg-config --libs has an rpath" ;; *) die "no rpath in: $flags" ;; esac
# a sanitizer build of the library needs its runtime first in the program too
san=""
libso=$(pkg-config --variable=libdir onnxq)/libonnxq.so
ldd "$libso" 2>/dev/null | grep -q libasan && san="-fsanitize=address,undefined"
${CC:-cc} -std=c11 -Wall -Wextra -Werror $san -o "$work/example" "$work/example.c" $flags -lm \
    2>"$work/cc.log" || die "example does not build: $(head -5 "$work/cc.log")"
ok "example.c builds with pkg-config"
lib=$(ldd "$work/example" | awk '/libonnxq/ {print $3}')
case $lib in "$work"/prefix/*) ok "uses $lib" ;; *) echo "FAIL: libonnxq resolved to '$lib', not the prefix"; fail=1 ;; esac

(cd "$SRC" && "$work/example" models/shapes_cnn.onnx models/calib "$work/q.onnx") \
    >"$work/got.out" 2>"$work/got.err"
rc=$?
[ $rc = 0 ] || { echo "FAIL: example exit $rc: $(head -3 "$work/got.err")"; fail=1; }
if diff -u "$work/want.out" "$work/got.out"; then ok "stdout is the page's"; else echo "FAIL: stdout differs from docs/api.md"; fail=1; fi
if diff -u "$work/want.err" "$work/got.err"; then ok "stderr is the page's"; else echo "FAIL: stderr differs from docs/api.md"; fail=1; fi
# the quantize job's example (onnxq/quantize.h)
${CC:-cc} -std=c11 -Wall -Wextra -Werror $san -o "$work/qexample" "$work/qexample.c" $flags \
    2>"$work/qcc.log" || die "quantize example does not build: $(head -5 "$work/qcc.log")"
(cd "$SRC" && "$work/qexample" models/shapes_cnn.onnx models/calib "$work/qq.onnx") >"$work/qgot.out" 2>"$work/qgot.err" \
    || { echo "FAIL: quantize example: $(head -3 "$work/qgot.err")"; fail=1; }
if diff -u "$work/qwant.out" "$work/qgot.out"; then ok "quantize example's stdout is the page's"; else echo "FAIL: quantize example's stdout differs from docs/api.md"; fail=1; fi
"$1" quantize "$SRC/models/shapes_cnn.onnx" -o "$work/qcli.onnx" --calib "$SRC/models/calib" --quiet \
    || { echo "FAIL: onnxq quantize"; fail=1; }
# the same model as the command's but the configuration record (where the samples came from)
/usr/bin/python3 - "$work/qq.onnx" "$work/qcli.onnx" <<'EOF2' || fail=1
import json, sys
import onnx
a, b = onnx.load(sys.argv[1]), onnx.load(sys.argv[2])
ca, cb = [json.loads(m.metadata_props[[p.key for p in m.metadata_props].index("onnxq.quantize.config")].value) for m in (a, b)]
for m in (a, b):
    keep = [p for p in m.metadata_props if p.key != "onnxq.quantize.config"]
    del m.metadata_props[:]
    m.metadata_props.extend(keep)
same = a.SerializeToString() == b.SerializeToString() and ca["calib"] is None and cb["calib"].endswith("models/calib")
print(("ok" if same else "FAIL") + ": the fed model equals the command's but the record of the samples' source")
sys.exit(0 if same else 1)
EOF2
# the inspection lines (onnxq/inspect.h) against python3-onnx and numpy on the same model
/usr/bin/python3 - "$SRC/models/shapes_cnn.onnx" "$work/got.out" <<'EOF' || fail=1
import collections, sys
import onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
got = open(sys.argv[2]).read().splitlines()
ops = collections.Counter(n.op_type for n in m.graph.node)
nodes = [l for l in got if l.startswith("nodes: ")]
want = {}
if nodes:
    it = nodes[0].split(":", 2)[2].split()
    want = {it[i]: int(it[i + 1]) for i in range(0, len(it), 2)}
ok = bool(nodes) and nodes[0].split(":")[1].strip() == str(len(m.graph.node)) and want == dict(ops)
print(("ok" if ok else "FAIL") + ": op histogram", nodes, dict(ops))
w = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
big = max(w, key=lambda k: w[k].size)
line = [l for l in got if l.startswith("largest: ")]
ref = "largest: %s float32, min %.6g max %.6g, %d channels (axis 0 of Gemm)" % (
    big, w[big].min(), w[big].max(), w[big].shape[0])
ok2 = line == [ref]
print(("ok" if ok2 else "FAIL") + ": largest weight statistics", line, ref)
sys.exit(0 if ok and ok2 else 1)
EOF
# the written model is valid and quantized
"$1" check "$work/q.onnx" >/dev/null 2>&1 || { echo "FAIL: onnxq check on the quantized model"; fail=1; }
nq=$("$1" dump "$work/q.onnx" | awk '$2 == "QuantizeLinear" && $1 ~ /^[0-9]+$/ {print $1; exit}')
[ "${nq:-0}" -gt 0 ] && ok "$nq QuantizeLinear in the written model" || { echo "FAIL: no QuantizeLinear"; fail=1; }
exit $fail
