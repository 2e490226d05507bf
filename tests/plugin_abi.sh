#!/bin/bash
# Plugin loading: the example plugin runs; plugins built for another major ABI or a
# newer minor one are refused with both versions named; ONNXQ_PLUGIN_PATH is searched.
# usage: plugin_abi.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
EXE=$1 SRC=$2 BIN=$3
PLUG=$BIN/plugins
TMP=$(mktemp -d /tmp/onnxq-plugin-abi-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail=0
check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
MAJ=$(sed -n 's/^#define OQ_PASS_ABI_MAJOR \([0-9]*\).*/\1/p' "$SRC/include/onnxq/pass.h")
MIN=$(sed -n 's/^#define OQ_PASS_ABI_MINOR \([0-9]*\).*/\1/p' "$SRC/include/onnxq/pass.h")

# a newer major ABI
out=$("$EXE" passes --plugin "$PLUG/libonnxq-abi-major.so" 2>&1); rc=$?
check "major mismatch exits 2" test $rc -eq 2
check "major mismatch message" grep -qF "plugin $PLUG/libonnxq-abi-major.so: built for ABI 2.0, this onnxq speaks $MAJ.$MIN" <<<"$out"
# a newer minor ABI
out=$("$EXE" passes --plugin "$PLUG/libonnxq-abi-minor.so" 2>&1); rc=$?
check "newer minor exits 2" test $rc -eq 2
check "newer minor message" grep -qF "built for ABI $MAJ.$((MIN + 1)), this onnxq speaks $MAJ.$MIN" <<<"$out"
# same ABI loads
out=$("$EXE" passes --plugin "$PLUG/libonnxq-abi-same.so" 2>&1); rc=$?
check "same ABI loads" test $rc -eq 0
check "same ABI pass listed" grep -q "^abi-test .*(plugin $PLUG/libonnxq-abi-same.so)" <<<"$out"
# opt refuses too, and writes nothing
"$EXE" opt /dev/null -o "$TMP/never.onnx" --plugin "$PLUG/libonnxq-abi-major.so" --passes abi-test >/dev/null 2>&1
check "opt refuses a bad plugin (exit 2)" test $? -eq 2
check "nothing written" test ! -e "$TMP/never.onnx"
# not a plugin at all
echo "not elf" >"$TMP/libjunk.so"
out=$("$EXE" passes --plugin "$TMP/libjunk.so" 2>&1); rc=$?
check "junk file refused" test $rc -eq 2
check "junk message names the file" grep -qF "plugin $TMP/libjunk.so: cannot load" <<<"$out"
# search path
out=$(ONNXQ_PLUGIN_PATH="/nonexistent:$PLUG" "$EXE" passes --plugin libonnxq-rename-nodes 2>&1); rc=$?
check "ONNXQ_PLUGIN_PATH finds libonnxq-rename-nodes(.so)" test $rc -eq 0
check "plugin pass listed" grep -q "^rename-nodes " <<<"$out"
out=$(ONNXQ_PLUGIN_PATH="$TMP" "$EXE" passes --plugin libnothere.so 2>&1); rc=$?
check "missing plugin exit 2" test $rc -eq 2
check "missing plugin message" grep -qF "plugin libnothere.so: not found (ONNXQ_PLUGIN_PATH=$TMP)" <<<"$out"
# JSON lists the plugin's options
out=$("$EXE" passes --json --plugin "$PLUG/libonnxq-rename-nodes.so")
check "json lists the plugin pass" /usr/bin/python3 -c '
import json, sys
passes = {p["name"]: p for p in json.loads(sys.stdin.read())}
p = passes["rename-nodes"]
assert p["origin"].endswith("libonnxq-rename-nodes.so"), p
assert [o["name"] for o in p["options"]] == ["pattern", "only-unnamed"], p
assert passes["upgrade-opset"]["options"][0]["default"] is None
' <<<"$out"

# the example plugin does its job: build a model with python, rename, read names back
/usr/bin/python3 - "$TMP/in.onnx" <<'PY'
import sys, onnx
from onnx import helper, TensorProto
n1 = helper.make_node("Relu", ["x"], ["a"], name="keep_me")
n2 = helper.make_node("Neg", ["a"], ["b"])
n3 = helper.make_node("Abs", ["b"], ["y"])
g = helper.make_graph([n1, n2, n3], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
out=$("$EXE" opt "$TMP/in.onnx" -o "$TMP/out.onnx" --plugin "$PLUG/libonnxq-rename-nodes.so" \
      --passes 'rename-nodes{pattern="n%i_%o",only-unnamed=true}' --stats --verify-each 2>&1); rc=$?
check "rename-nodes runs" test $rc -eq 0
check "rename-nodes stats" grep -qE "nodes_renamed +2" <<<"$out"
names=$(/usr/bin/python3 -c 'import onnx,sys; print(",".join(n.name for n in onnx.load(sys.argv[1]).graph.node))' "$TMP/out.onnx")
check "names after rename-nodes ($names)" test "$names" = "keep_me,n1_Neg,n2_Abs"
# option type errors in a plugin pass point at the value
out=$("$EXE" opt "$TMP/in.onnx" -o "$TMP/x.onnx" --plugin "$PLUG/libonnxq-rename-nodes.so" \
      --passes 'rename-nodes{only-unnamed=perhaps}' 2>&1); rc=$?
check "plugin option type checked (exit 2)" test $rc -eq 2
check "caret under the value" grep -qxF "                            ^" <<<"$out"

# --verify-each names the pass that breaks the model; without it the final check
# still refuses to write an invalid model
out=$("$EXE" opt "$TMP/in.onnx" -o "$TMP/broken.onnx" --plugin "$PLUG/libonnxq-abi-same.so" \
      --passes 'eliminate-dead,abi-test{break=true},eliminate-identity' --verify-each --stats 2>&1); rc=$?
check "verify-each: exit 1" test $rc -eq 1
check "verify-each names the pass" grep -qF 'pass "abi-test" (#2 in the pipeline) broke the model' <<<"$out"
check "verify-each gives the checker's reason" grep -q 'ghost.*is not produced' <<<"$out"
check "verify-each stops there" test "$(grep -c '^eliminate-identity' <<<"$out")" -eq 0
check "nothing written" test ! -e "$TMP/broken.onnx"
out=$("$EXE" opt "$TMP/in.onnx" -o "$TMP/broken.onnx" --plugin "$PLUG/libonnxq-abi-same.so" \
      --passes 'abi-test{break=1},eliminate-identity' 2>&1); rc=$?
check "final check: exit 1" test $rc -eq 1
check "final check message" grep -qF "the pipeline left an invalid model" <<<"$out"
check "nothing written" test ! -e "$TMP/broken.onnx"

# the plugin links nothing from onnxq
und=$(nm -D --undefined-only "$PLUG/libonnxq-rename-nodes.so" | grep -c ' oq_' || true)
check "plugin has no undefined oq_ symbols" test "$und" -eq 0
exit $fail
