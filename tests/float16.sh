#!/bin/bash
# A float16 model (models/shapes_cnn.onnx with every float tensor in float16, as a GPU
# export writes it): onnxq quantize computes it in float32 inside (widen-float16) and
# keeps its float16 inputs and outputs; onnxruntime runs the result; its logits against
# the float16 model >= 35 dB on models/eval (measured 44.9 dB; onnxruntime's
# quantize_static writes float16 DequantizeLinear scales there that onnxruntime refuses);
# onnxq run and verify take the float16 model (no float16 Conv kernel: widened inside).
# usage: bash float16.sh ONNXQ_EXE SOURCE_DIR BINARY_DIR
set -u
EXE=$1 SRC=$2 BIN=$3
. "$SRC/tests/testlib.bash"
py="${ONNXQ_CACHE:-$HOME/.cache/onnxq}/venv/bin/python"
[ -x "$py" ] || skip "no venv at $py (bash .ci/venv.sh creates it)"
T="$BIN/float16.tmp.d"
rm -rf "$T"; mkdir -p "$T"
"$py" - "$SRC/models/shapes_cnn.onnx" "$SRC/models/calib" "$T" <<'PYEOF' || { echo "FAIL: making the float16 model"; exit 1; }
import glob, os, sys
import numpy as np
import onnx
from onnx import TensorProto, numpy_helper
src, calib, out = sys.argv[1:]
m = onnx.load(src)
for i in m.graph.initializer:
    if i.data_type == TensorProto.FLOAT:
        i.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(i).astype(np.float16), i.name))
for v in list(m.graph.input) + list(m.graph.output):
    if v.type.tensor_type.elem_type == TensorProto.FLOAT:
        v.type.tensor_type.elem_type = TensorProto.FLOAT16
del m.graph.value_info[:]
onnx.save(m, f"{out}/cnn16.onnx")
for d in sorted(glob.glob(f"{calib}/*")):
    os.makedirs(f"{out}/calib/{os.path.basename(d)}", exist_ok=True)
    for f in glob.glob(f"{d}/*.npy"):
        np.save(f"{out}/calib/{os.path.basename(d)}/{os.path.basename(f)}", np.load(f).astype(np.float16))
PYEOF
"$EXE" quantize "$T/cnn16.onnx" -o "$T/q16.onnx" --calib "$T/calib" --quiet || bad "quantize of the float16 model"
"$py" - "$T/cnn16.onnx" "$T/q16.onnx" "$SRC/models/eval" <<'PYEOF' || bad "the quantized float16 model in onnxruntime"
import glob, sys
import numpy as np
import onnx
import onnxruntime as ort
f16, q16, ev = sys.argv[1:]
m = onnx.load(q16)
io = [(v.name, v.type.tensor_type.elem_type) for v in list(m.graph.input) + list(m.graph.output)]
assert all(t == onnx.TensorProto.FLOAT16 for _, t in io), f"interface not float16: {io}"
ops = [n.op_type for n in m.graph.node]
assert ops.count("QuantizeLinear") >= 4 and ops.count("Cast") == 3, ops
f, q = ort.InferenceSession(f16), ort.InferenceSession(q16)
num = den = 0.0
for p in sorted(glob.glob(f"{ev}/*/image.npy")):
    x = np.load(p).astype(np.float16)
    a = f.run(["logits"], {"image": x})[0].astype(np.float64)
    b = q.run(["logits"], {"image": x})[0].astype(np.float64)
    num += (a ** 2).sum()
    den += ((a - b) ** 2).sum()
sq = 10 * np.log10(num / den)
print(f"float16 model, quantized: logits {sq:.2f} dB against the float16 model in onnxruntime")
assert sq >= 35, sq
PYEOF
x=$(ls "$SRC"/models/eval/*/image.npy | head -1)
"$py" -c "import numpy as np, sys; np.save(sys.argv[2], np.load(sys.argv[1]).astype(np.float16))" "$x" "$T/x16.npy"
"$EXE" run "$T/cnn16.onnx" --input image="$T/x16.npy" >"$T/run.out" 2>&1 || bad "onnxq run of the float16 model: $(tail -2 "$T/run.out")"
grep -q "logits: float16" "$T/run.out" || bad "onnxq run: the output is not float16: $(cat "$T/run.out")"
"$EXE" verify "$T/cnn16.onnx" "$T/q16.onnx" --data "$T/calib" --quiet >"$T/verify.out" 2>&1 ||
    bad "onnxq verify of the float16 pair: $(tail -2 "$T/verify.out")"
[ $fail = 0 ] && echo "float16: all ok"
exit $fail
