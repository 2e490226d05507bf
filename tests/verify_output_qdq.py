#!/usr/bin/env python3
"""Quantize a graph output with one uint8 scale, as a quantizer that puts a QDQ pair on a
detection head's Concat does: OUT = IN with NAME -> QuantizeLinear -> DequantizeLinear.

    verify_output_qdq.py IN.onnx OUT.onnx NAME SCALE
"""
import sys

import numpy as np
import onnx
from onnx import helper
from onnx import numpy_helper as nh

src, dst, name, scale = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
m = onnx.load(src)
g = m.graph
for n in g.node:
    for i, o in enumerate(n.output):
        if o == name:
            n.output[i] = name + "_prequant"
g.initializer.extend([nh.from_array(np.array(scale, np.float32), name + "_scale"),
                      nh.from_array(np.array(0, np.uint8), name + "_zero_point")])
g.node.extend([
    helper.make_node("QuantizeLinear", [name + "_prequant", name + "_scale", name + "_zero_point"],
                     [name + "_quantized"], name=name + "_QuantizeLinear"),
    helper.make_node("DequantizeLinear", [name + "_quantized", name + "_scale", name + "_zero_point"],
                     [name], name=name + "_DequantizeLinear"),
])
onnx.save(m, dst)
