#!/bin/bash
# Install onnxq to a temporary prefix, then build the example plugin out of tree
# against the installed headers only — once with its Makefile and pkg-config, once
# with its CMakeLists.txt and find_package(onnxq) — and run both builds.
# usage: plugin_outoftree.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
EXE=$1 SRC=$2 BIN=$3
TMP=$(mktemp -d /tmp/onnxq-plugin-oot-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail=0
check() {
    local what=$1; shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
PREFIX=$TMP/prefix
cmake --install "$BIN" --prefix "$PREFIX" >"$TMP/install.log" 2>&1
check "cmake --install" test $? -eq 0
LIBDIR=$(dirname "$(find "$PREFIX" -name onnxq.pc | head -1)")/..
check "header installed" test -f "$PREFIX/include/onnxq/pass.h"
check "library installed" test -f "$LIBDIR/libonnxq.a"
check "onnxq.pc installed" test -f "$LIBDIR/pkgconfig/onnxq.pc"
check "onnxqConfig.cmake installed" test -f "$LIBDIR/cmake/onnxq/onnxqConfig.cmake"
check "example plugin installed" test -f "$LIBDIR/onnxq/plugins/libonnxq-rename-nodes.so"

# the example sources as a user would copy them (not the source tree)
mkdir -p "$TMP/mk" "$TMP/cm"
cp "$PREFIX/share/onnxq/examples/plugin/"* "$TMP/mk/"
cp "$PREFIX/share/onnxq/examples/plugin/"* "$TMP/cm/"
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig"
cflags=$(pkg-config --cflags onnxq)
check "pkg-config --cflags points into the prefix ($cflags)" grep -q "$PREFIX" <<<"$(readlink -f "${cflags#-I}")"
# only the installed headers are visible: the compiler gets no -I into the source tree
make -C "$TMP/mk" CC=cc >"$TMP/make.log" 2>&1
check "Makefile + pkg-config build" test $? -eq 0 || cat "$TMP/make.log"
cmake -S "$TMP/cm" -B "$TMP/cm/build" -DCMAKE_PREFIX_PATH="$PREFIX" >"$TMP/cmake.log" 2>&1 &&
    cmake --build "$TMP/cm/build" >>"$TMP/cmake.log" 2>&1
check "CMake find_package(onnxq) build" test $? -eq 0 || cat "$TMP/cmake.log"

/usr/bin/python3 - "$TMP/in.onnx" <<'PY'
import sys, onnx
from onnx import helper, TensorProto
n1 = helper.make_node("Relu", ["x"], ["a"])
n2 = helper.make_node("Neg", ["a"], ["y"])
g = helper.make_graph([n1, n2], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
INSTALLED_EXE=$PREFIX/bin/onnxq
for so in "$TMP/mk/libonnxq-rename-nodes.so" "$TMP/cm/build/libonnxq-rename-nodes.so"; do
    for exe in "$EXE" "$INSTALLED_EXE"; do
        "$exe" opt "$TMP/in.onnx" -o "$TMP/out.onnx" --plugin "$so" --passes 'rename-nodes{pattern=L%i}' >/dev/null 2>&1
        rc=$?
        names=$(/usr/bin/python3 -c 'import onnx,sys; print(",".join(n.name for n in onnx.load(sys.argv[1]).graph.node))' "$TMP/out.onnx" 2>/dev/null)
        check "$(basename "$(dirname "$so")") plugin with $(basename "$(dirname "$exe")")/onnxq: rc=$rc names=$names" test "$rc.$names" = "0.L0,L1"
        rm -f "$TMP/out.onnx"
    done
done
exit $fail
