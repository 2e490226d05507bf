#!/bin/bash
# Mixed precision through the overrides file: one activation in uint16, the rest uint8;
# then one weight in int16 (per channel, scale max|w_c| / 32767, every value within half a
# step of the float weight), the other weights the default target's int8; a weight dtype that is not a weight
# type exits 2 naming the weight.
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
bash "$SRC/tests/ortnode.bash" "$SRC/tests/quantize_ort.js" "$T/q.onnx" "$T/ort" image="$SRC/models/calib/sample_000/image.npy"
rc=$?
[ $rc = 77 ] && { rm -rf "$T"; exit 0; }
[ $rc = 0 ] || { echo "FAIL: onnxruntime-node cannot run the mixed-precision model"; exit 1; }
echo "onnxruntime-node runs it"

echo '{"w2": {"dtype": "int16"}, "r1": {"dtype": "uint16"}}' > "$T/overw.json"
"$EXE" quantize "$SRC/models/shapes_cnn.onnx" -o "$T/qw.onnx" --calib "$SRC/models/calib" \
  --overrides "$T/overw.json" --quiet || { echo "FAIL: quantize with an int16 weight override"; exit 1; }
/usr/bin/python3 - "$SRC/models/shapes_cnn.onnx" "$T/qw.onnx" <<'PY' || exit 1
import sys, onnx, numpy as np
from onnx import TensorProto, numpy_helper as nh
f = {i.name: nh.to_array(i) for i in onnx.load(sys.argv[1]).graph.initializer}
m = onnx.load(sys.argv[2])
t = {i.name: i.data_type for i in m.graph.initializer}
a = {i.name: nh.to_array(i) for i in m.graph.initializer}
ok = t.get('w2_quantized') == TensorProto.INT16 and t.get('w2_zero_point') == TensorProto.INT16
w8 = [n for n in t if n.endswith('_quantized') and n not in ('w2_quantized',) and n.startswith('w')]
ok = ok and all(t[n] == TensorProto.INT8 for n in w8)  # the default target's (ort-x86) 8-bit weights
w, q, s = f['w2'].astype(np.float64), a['w2_quantized'].astype(np.float64), a['w2_scale'].astype(np.float64)
sc = s.reshape(-1, *([1] * (w.ndim - 1)))
want = np.abs(w).reshape(w.shape[0], -1).max(axis=1) / 32767
err = (np.abs(q * sc - w) / sc).max()
ok = ok and np.allclose(s, want, rtol=1e-6) and np.all(np.abs(q * sc - w) <= sc / 2 * (1 + 1e-6))
print('w2: %s, scale max|w_c|/32767: %s, max error %.3f steps; other weights int8: %s' % (
    TensorProto.DataType.Name(t.get('w2_quantized', 0)), np.allclose(s, want, rtol=1e-6), err, w8))
sys.exit(0 if ok else 1)
PY
bash "$SRC/tests/ortnode.bash" "$SRC/tests/quantize_ort.js" "$T/qw.onnx" "$T/ortw" image="$SRC/models/calib/sample_000/image.npy" \
  || { echo "FAIL: onnxruntime-node cannot run the int16-weight model"; exit 1; }
echo '{"w2": {"dtype": "int32"}}' > "$T/bad.json"
"$EXE" quantize "$SRC/models/shapes_cnn.onnx" -o "$T/bad.onnx" --calib "$SRC/models/calib" \
  --overrides "$T/bad.json" --quiet 2> "$T/bad.txt"
rc=$?
if [ $rc != 2 ] || ! grep -q 'weight "w2": dtype must be' "$T/bad.txt"; then
  echo "FAIL: a bad weight dtype must exit 2 naming the weight (rc $rc)"; cat "$T/bad.txt"; exit 1
fi
rm -rf "$T"
