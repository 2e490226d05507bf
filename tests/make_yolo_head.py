#!/usr/bin/env python3
"""A small YOLO-style detector head for placement by value (docs/passes/insert-qdq.md).

  python3 make_yolo_head.py OUT_DIR

writes OUT_DIR/yolo_head.onnx, OUT_DIR/neck.onnx and two sample sets of smooth random images drawn with
different seeds, OUT_DIR/calib/NNN/x.npy (32) and OUT_DIR/eval/NNN/x.npy (32):

  x [1,3,64,64] -> Conv 3x3 s2 + Relu -> Conv 3x3 s2 + Relu -> Conv 3x3 + Relu (backbone)
    -> box branch:   Conv 3x3 + Relu -> Conv 1x1 -> 64 box-distribution logits (range ~ +-60)
    -> class branch: Conv 3x3 + Relu -> Conv 1x1 -> 8 class logits (range ~ -10 .. 2)
    -> Concat(axis 1) -> Reshape [1, 72, 256] -> Split [64, 8] -> boxes (output 0)
                                                             -> Sigmoid -> scores (output 1)

neck.onnx: Concat of a wide-range (~ +-100) and a narrow (~ +-1) branch into a Conv, the
narrow branch also feeding a second Conv (the concat-range-ratio rule).

yolo_head.onnx is as in the heads of YOLOv8 (box distribution and class logits concatenated per scale, split
again before the decode), where onnxruntime runs the Concat/Reshape on uint8 data only if
each of them sits between a DequantizeLinear and a QuantizeLinear: the Split and the Sigmoid
after it run in float. Weights are fixed random (seed 7), He-scaled, so the two branches'
ranges differ as in a trained model. Needs python3-onnx and python3-numpy."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def images(n, seed):
    r = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        # smooth blobs on a gradient: a little like photos, not white noise
        yy, xx = np.mgrid[0:64, 0:64] / 64.0
        img = np.zeros((3, 64, 64), np.float32)
        for c in range(3):
            img[c] = r.uniform(0, 0.5) * xx + r.uniform(0, 0.5) * yy
            for _ in range(4):
                cx, cy, s, a = r.uniform(0, 1), r.uniform(0, 1), r.uniform(0.05, 0.2), r.uniform(-1, 1)
                img[c] += a * np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * s * s))
        out.append(img[None].astype(np.float32))
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    r = np.random.default_rng(7)
    inits, nodes = [], []

    def conv(name, x, cin, cout, k, stride=1, relu=True, gain=1.0, bias=0.0):
        w = (r.standard_normal((cout, cin, k, k)) * gain * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
        b = (np.full(cout, bias) + 0.05 * r.standard_normal(cout)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, name + ".w"))
        inits.append(numpy_helper.from_array(b, name + ".b"))
        p = k // 2
        out = name + (".c" if relu else "")
        nodes.append(helper.make_node("Conv", [x, name + ".w", name + ".b"], [out], name=name,
                                      kernel_shape=[k, k], strides=[stride, stride], pads=[p, p, p, p]))
        if relu:
            nodes.append(helper.make_node("Relu", [out], [name], name=name + ".relu"))
            out = name
        return out

    f = conv("stem", "x", 3, 16, 3, 2)
    f = conv("b1", f, 16, 32, 3, 2)
    f = conv("b2", f, 32, 32, 3, 1)
    bx = conv("box1", f, 32, 32, 3)
    bx = conv("box_out", bx, 32, 64, 1, relu=False, gain=36.0)
    cl = conv("cls1", f, 32, 32, 3)
    cl = conv("cls_out", cl, 32, 8, 1, relu=False, gain=5.0, bias=-4.0)
    nodes.append(helper.make_node("Concat", [bx, cl], ["cat"], name="cat", axis=1))
    inits.append(numpy_helper.from_array(np.array([1, 72, 256], np.int64), "shape"))
    nodes.append(helper.make_node("Reshape", ["cat", "shape"], ["flat"], name="reshape"))
    inits.append(numpy_helper.from_array(np.array([64, 8], np.int64), "split"))
    nodes.append(helper.make_node("Split", ["flat", "split"], ["boxes", "logits"], name="split", axis=1))
    nodes.append(helper.make_node("Sigmoid", ["logits"], ["scores"], name="sigmoid"))
    g = helper.make_graph(nodes, "yolo_head",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 64, 64])],
                          [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 64, 256]),
                           helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 8, 256])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(d, "yolo_head.onnx"))
    # the neck: a Concat whose output feeds a Conv, of a wide-range branch (an upsampled
    # deep feature, ~ +-100) and a narrow one (~ +-1) that also feeds a second path
    inits.clear()
    nodes.clear()
    f = conv("stem", "x", 3, 16, 3, 2)
    f = conv("b1", f, 16, 32, 3, 2)
    up = conv("up", f, 32, 16, 1, relu=False, gain=60.0)
    skip = conv("skip", f, 32, 16, 1, relu=False, gain=0.6)
    nodes.append(helper.make_node("Concat", [up, skip], ["neck"], name="neck", axis=1))
    conv("fuse", "neck", 32, 16, 1, relu=False, gain=0.05)
    conv("side", skip, 16, 16, 3, relu=False)
    g = helper.make_graph(nodes, "neck",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 64, 64])],
                          [helper.make_tensor_value_info("fuse", TensorProto.FLOAT, [1, 16, 16, 16]),
                           helper.make_tensor_value_info("side", TensorProto.FLOAT, [1, 16, 16, 16])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(d, "neck.onnx"))
    for sub, seed in (("calib", 1001), ("eval", 2002)):
        for i, img in enumerate(images(32, seed)):
            os.makedirs(os.path.join(d, sub, "%03d" % i), exist_ok=True)
            np.save(os.path.join(d, sub, "%03d" % i, "x.npy"), img)
    print("%s: yolo_head.onnx, neck.onnx, 32 calib and 32 eval images" % d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
