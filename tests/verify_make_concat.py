#!/usr/bin/env python3
"""A small detection head whose output concatenates parts of very different ranges, as
YOLOv8's output0 = Concat(box coordinates 0..~300, sigmoid class scores 0..1) on axis 1.

    verify_make_concat.py OUT.onnx DATA_DIR [--samples N] [--seed S] [--transpose]

x [1, 3, 16, 16] -> Conv 3x3 s2 -> Relu -> feat [1, 8, 8, 8]
  boxes:  Conv 1x1 (4)  -> Relu -> Mul 40 -> Reshape [1, 4, 64]
  scores: Conv 1x1 (6)  -> Sigmoid        -> Reshape [1, 6, 64]
  output0 = Concat(boxes, scores, axis 1) [1, 10, 64]
  --transpose: output0 = Transpose(Concat, perm 0 2 1) [1, 64, 10]
DATA_DIR gets N sample folders s000.../x.npy (uniform [0, 1)).
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx import numpy_helper as nh

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("data")
ap.add_argument("--samples", type=int, default=8)
ap.add_argument("--seed", type=int, default=3)
ap.add_argument("--transpose", action="store_true")
a = ap.parse_args()
rng = np.random.default_rng(7)  # the weights: fixed
inits = [
    nh.from_array(rng.normal(0, 0.4, (8, 3, 3, 3)).astype(np.float32), "w0"),
    nh.from_array(rng.normal(0, 0.1, 8).astype(np.float32), "b0"),
    nh.from_array(rng.normal(0, 0.5, (4, 8, 1, 1)).astype(np.float32), "wbox"),
    nh.from_array(np.full(4, 0.5, np.float32), "bbox"),
    nh.from_array(rng.normal(0, 0.8, (6, 8, 1, 1)).astype(np.float32), "wcls"),
    nh.from_array(rng.normal(-1, 0.5, 6).astype(np.float32), "bcls"),
    nh.from_array(np.array(40, np.float32), "stride"),
    nh.from_array(np.array([1, 4, 64], np.int64), "shape_box"),
    nh.from_array(np.array([1, 6, 64], np.int64), "shape_cls"),
]
cat = "cat" if a.transpose else "output0"
nodes = [
    helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], name="conv0", pads=[1, 1, 1, 1], strides=[2, 2]),
    helper.make_node("Relu", ["c0"], ["feat"], name="relu0"),
    helper.make_node("Conv", ["feat", "wbox", "bbox"], ["cbox"], name="conv_box"),
    helper.make_node("Relu", ["cbox"], ["rbox"], name="relu_box"),
    helper.make_node("Mul", ["rbox", "stride"], ["box"], name="mul_box"),
    helper.make_node("Reshape", ["box", "shape_box"], ["boxes"], name="reshape_box"),
    helper.make_node("Conv", ["feat", "wcls", "bcls"], ["ccls"], name="conv_cls"),
    helper.make_node("Sigmoid", ["ccls"], ["cls"], name="sigmoid_cls"),
    helper.make_node("Reshape", ["cls", "shape_cls"], ["scores"], name="reshape_cls"),
    helper.make_node("Concat", ["boxes", "scores"], [cat], name="concat_head", axis=1),
]
oshape = [1, 10, 64]
if a.transpose:
    nodes.append(helper.make_node("Transpose", [cat], ["output0"], name="transpose_head", perm=[0, 2, 1]))
    oshape = [1, 64, 10]
g = helper.make_graph(nodes, "concat_head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                      [helper.make_tensor_value_info("output0", TensorProto.FLOAT, oshape)], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(m, full_check=True)
onnx.save(m, a.out)
drng = np.random.default_rng(a.seed)
for i in range(a.samples):
    d = os.path.join(a.data, "s%03d" % i)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "x.npy"), drng.uniform(0, 1, (1, 3, 16, 16)).astype(np.float32))
