#!/bin/bash
# Mixed precision through the overrides file: one activation in uint16, the rest uint8.
# A 16-bit dtype needs opset 21, so `onnxq quantize` must upgrade the model (opset 13
# otherwise) just as it does for --act-dtype uint16; the result passes the ONNX checker
# (when python3-onnx knows opset 21) and onnxruntime-node runs it, and it has exactly the
# requested zero-point types.
# usage: bash quantize_overrides16.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
EXE=$1 SRC=$2 BIN=$3
T="$BIN/quantize_overrides16.tmp.d"
rm -rf "$T"; mkdir -p "$T"
echo '{"r1": {"dtype": "uint16"}}' > "$T/over.json"
"$EXE" quantize "$SRC/models/shapes_cnn.onnx" -o "$T/q.onnx" --calib "$SRC/models/calib" \
  --overrides "$T/over.json" --quiet || { echo "FAIL: quantize with a uint16 override"; exit 1; }
if ! /usr/bin/python3 -c 'import onnx' 2>/dev/null; then
  echo "note: python3-onnx not installed; only checked that quantize succeeds"; rm -rf "$T"; exit 0
fi
/usr/bin/python3 - "$T/q.onnx" <<'PY' || exit 1
import sys, onnx
from onnx import TensorProto
m = onnx.load(sys.argv[1])
opset = [o.version for o in m.opset_import if o.domain in ('', 'ai.onnx')][0]
if opset <= onnx.defs.onnx_opset_version():
    onnx.checker.check_model(m, full_check=True)
else:
    print('note: onnx %s knows opset <= %d; checker skipped' % (onnx.__version__, onnx.defs.onnx_opset_version()))
zp = {i.name: i.data_type for i in m.graph.initializer if i.name.endswith('_zero_point')}
ok = opset >= 21 and zp.get('r1_zero_point') == TensorProto.UINT16
others = [n for n, t in zp.items() if n != 'r1_zero_point' and t == TensorProto.UINT16]
print('opset %d, r1_zero_point %s, other uint16 zero points: %s' % (
    opset, TensorProto.DataType.Name(zp.get('r1_zero_point', 0)), others or 'none'))
sys.exit(0 if ok else 1)
PY
node "$SRC/tests/quantize_ort.js" "$T/q.onnx" "$T/ort" image="$SRC/models/calib/sample_000/image.npy"
rc=$?
[ $rc = 77 ] && { rm -rf "$T"; exit 0; }
[ $rc = 0 ] || { echo "FAIL: onnxruntime-node cannot run the mixed-precision model"; exit 1; }
echo "onnxruntime-node runs it"
rm -rf "$T"
