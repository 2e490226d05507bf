#!/bin/bash
# Where onnxruntime's optimized integer kernels on another CPU start to differ from this
# one: runs a QDQ model in onnxruntime-node (all optimizations) natively and under
# ONNXQ_ORT_CPU (default haswell: qemu-x86_64 -cpu Haswell, MLAS's AVX2 kernels; see
# tests/ortnode.bash), with every QuantizeLinear output made a graph output, and prints
# the first quantized tensors (graph order) that differ, in quantization steps, and how
# far each real output moved.
#   bash models/ort_cpu_diff.sh MODEL.onnx WORK_DIR NAME=INPUT.npy...
# e.g. on a VNNI host, an onnxq-quantized PaddleOCR det shows the saturation of the AVX2
# u8 x s8 kernel from its first Conv on. Needs /usr/bin/python3 with onnx and numpy.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: bash models/ort_cpu_diff.sh MODEL.onnx WORK_DIR NAME=INPUT.npy..." >&2; exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
Q=$1 W=$2; shift 2
OTHER=${ONNXQ_ORT_CPU:-haswell}
[ "$OTHER" = native ] && { echo "ONNXQ_ORT_CPU=native: nothing to compare with" >&2; exit 2; }
mkdir -p "$W"
/usr/bin/python3 - "$Q" "$W/all.onnx" <<'PY'
import sys, onnx
m = onnx.load(sys.argv[1])
have = {o.name for o in m.graph.output}
for n in m.graph.node:
    if n.op_type == "QuantizeLinear" and n.output[0] not in have:
        m.graph.output.append(onnx.ValueInfoProto(name=n.output[0]))
onnx.save(m, sys.argv[2])
PY
ONNXQ_ORT_CPU=native bash "$HERE/../tests/ortnode.bash" "$HERE/../tests/quantize_ort.js" "$W/all.onnx" "$W/native" "$@"
ONNXQ_ORT_CPU=$OTHER bash "$HERE/../tests/ortnode.bash" "$HERE/../tests/quantize_ort.js" "$W/all.onnx" "$W/other" "$@"
/usr/bin/python3 - "$Q" "$W" "$OTHER" <<'PY'
import os, sys
import numpy as np, onnx
m = onnx.load(sys.argv[1]); W, other = sys.argv[2], sys.argv[3]
producer = {o: n for n in m.graph.node for o in n.output}
qouts = [n.output[0] for n in m.graph.node if n.op_type == "QuantizeLinear"]
load = lambda side, t: np.load(os.path.join(W, side, t + ".npy")).astype(np.float64)
ndiff = shown = 0
for t in qouts:
    a, b = load("native", t), load("other", t)
    d = np.abs(a - b)
    if d.max() == 0:
        continue
    ndiff += 1
    if shown < 5:
        src = producer.get(producer[t].input[0])
        print("%s (QuantizeLinear of %s): %d of %d values differ, max %d steps, mean %.3g" % (
            t, "%s %s" % (src.op_type, src.name) if src else "an input", int((d > 0).sum()), d.size,
            int(d.max()), d.mean()))
        shown += 1
print("%d of %d quantized tensors differ between native and %s" % (ndiff, len(qouts), other))
for o in m.graph.output:
    a, b = load("native", o.name), load("other", o.name)
    e, s = float(((a - b) ** 2).sum()), float((a ** 2).sum())
    print("output %s: max |native - %s| %.4g, SQNR %s vs native %s dB" % (
        o.name, other, np.abs(a - b).max(), other, "inf" if e == 0 else "%.1f" % (10 * np.log10(s / e))))
PY
