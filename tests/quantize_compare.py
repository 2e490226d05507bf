#!/usr/bin/python3
"""Compare onnxq's and onnxruntime's outputs of a quantized model.

usage: quantize_compare.py MODEL DIR_ONNXQ DIR_ORT
Every graph output that a DequantizeLinear produces (per the QDQ naming conventions its
scale is the initializer <output>_scale) must agree within one quantization step:
|a - b| <= scale * (1 + 1e-5). Outputs not produced by a DequantizeLinear must agree within
rtol 1e-3 + atol 1e-4 * max|b|. Prints the worst difference in steps for each output.
Exit 0 ok, 1 mismatch.
"""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

model, da, db = sys.argv[1:4]
m = onnx.load(model)
inits = {t.name: t for t in m.graph.initializer}
producer = {o: n for n in m.graph.node for o in n.output}
bad = 0
for out in m.graph.output:
    a = np.load(os.path.join(da, out.name + ".npy")).astype(np.float64)
    b = np.load(os.path.join(db, out.name + ".npy")).astype(np.float64)
    if a.shape != b.shape:
        print(f"{out.name}: shape {a.shape} vs {b.shape}")
        bad += 1
        continue
    diff = np.abs(a - b)
    n = producer.get(out.name)
    if n is not None and n.op_type == "DequantizeLinear" and n.input[1] in inits:
        s = numpy_helper.to_array(inits[n.input[1]]).astype(np.float64)
        steps = diff / s
        worst = float(steps.max()) if steps.size else 0.0
        n_one = int(np.count_nonzero(steps > 0.5))
        ok = worst <= 1 + 1e-5
        print(f"{out.name}: {a.size} values, scale {float(s.max()):.6g}, max diff {worst:.3f} steps, "
              f"{n_one} values differ by one step{'' if ok else '  FAIL'}")
    else:
        tol = 1e-3 * np.abs(b) + 1e-4 * (np.abs(b).max() if b.size else 0)
        ok = bool(np.all(diff <= tol))
        print(f"{out.name}: {a.size} values (float output), max |diff| {float(diff.max()):.3g}{'' if ok else '  FAIL'}")
    bad += not ok
sys.exit(1 if bad else 0)
