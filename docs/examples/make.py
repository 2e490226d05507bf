#!/usr/bin/python3
"""Make the small files the docs examples use (they are not shipped):

    /usr/bin/python3 docs/examples/make.py [DIR]     # default: the current folder

writes into DIR (run the examples from there, with the repo's models/ linked or given
by path):

  bn.onnx         Conv + BatchNormalization, and a BatchNormalization on the input
                  (docs/passes/fold-batchnorm.md, docs/opt.md)
  dead.onnx       Relu plus a dead Sigmoid -> Mul branch and an unused initializer
                  (docs/passes/eliminate-dead.md, docs/opt.md)
  dedupe.onnx     two equal initializers w1, w2 (docs/passes/dedupe-initializers.md)
  broken.onnx     an Add reading a value nothing produces (docs/check.md)
  nan_model.onnx  y = Relu(Sqrt(x - 0.5)): NaN for x < 0.5 (docs/run.md)
  ints.onnx       float, int64, bool and float16 inputs (docs/data.md)
  inf_mask.onnx   y = MatMul(Max(0.5 * Log(x), -10), W): Log(0) = -Inf in a tensor that is
                  never quantized; infcalib/: 6 samples with a 0 in x (docs/quantize.md)
  outlier.onnx    models/shapes_cnn.onnx with one conv2 weight 40x the largest
                  (docs/verify.md, docs/quantize.md; needs models/shapes_cnn.onnx)
  nan/            two calibration samples for shapes_cnn, s1 with one NaN
                  (element 651) (docs/quantize.md)
  wrong/          one sample of the wrong shape [1,3,20,20] (docs/data.md)
  conv.onnx       a copy of the ONNX backend test test_conv_with_strides_padding when
                  /usr/share/libonnx-testdata is installed (docs/dump.md)

Needs Debian's python3-onnx and python3-numpy (/usr/bin/python3).
"""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx import numpy_helper as nh

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def f32(a):
    return np.asarray(a, dtype=np.float32)


def main(out):
    os.makedirs(out, exist_ok=True)
    p = lambda n: os.path.join(out, n)
    rng = np.random.default_rng(13)
    F = TensorProto.FLOAT

    # bn.onnx
    inits = [nh.from_array(f32(rng.normal(0, 0.5, (3, 4, 1, 1))), "W"),
             nh.from_array(f32(rng.normal(0, 0.1, 3)), "B"),
             nh.from_array(f32(rng.uniform(0.5, 2, 3)), "scale"),
             nh.from_array(f32(rng.normal(0, 0.2, 3)), "bias"),
             nh.from_array(f32(rng.normal(0, 0.3, 3)), "mean"),
             nh.from_array(f32(rng.uniform(0.2, 3, 3)), "var"),
             nh.from_array(f32(rng.uniform(0.5, 2, 4)), "s4"),
             nh.from_array(f32(rng.normal(0, 0.2, 4)), "b4"),
             nh.from_array(f32(rng.normal(0, 0.3, 4)), "m4"),
             nh.from_array(f32(rng.uniform(0.2, 3, 4)), "v4")]
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["z"], name="conv"),
             helper.make_node("BatchNormalization", ["z", "scale", "bias", "mean", "var"], ["y"],
                              name="bn", epsilon=1e-5),
             helper.make_node("BatchNormalization", ["x", "s4", "b4", "m4", "v4"], ["y2"], name="bn_input")]
    onnx.save(model(nodes, [vi("x", F, [1, 4, 8, 8])], [vi("y", F, None), vi("y2", F, None)], inits),
              p("bn.onnx"))

    # dead.onnx
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu"),
             helper.make_node("Sigmoid", ["x"], ["s"], name="unused_sigmoid"),
             helper.make_node("Mul", ["s", "w"], ["t"], name="unused_mul")]
    onnx.save(model(nodes, [vi("x", F, [2])], [vi("y", F, [2])],
                    [nh.from_array(f32([1, 2]), "w"), nh.from_array(f32([3, 4]), "stale")]), p("dead.onnx"))

    # dedupe.onnx
    w = f32([0.5, -1, 2, 0.25])
    nodes = [helper.make_node("Add", ["x", "w1"], ["a"], name="add1"),
             helper.make_node("Mul", ["a", "w2"], ["y"], name="mul")]
    onnx.save(model(nodes, [vi("x", F, [4])], [vi("y", F, [4])],
                    [nh.from_array(w, "w1"), nh.from_array(w.copy(), "w2")]), p("dedupe.onnx"))

    # broken.onnx (saved without the checker)
    nodes = [helper.make_node("Relu", ["x"], ["x1"], name="relu"),
             helper.make_node("Add", ["x1", "x2"], ["y"], name="add1")]
    onnx.save(model(nodes, [vi("x", F, [2])], [vi("y", F, [2])]), p("broken.onnx"))

    # nan_model.onnx
    nodes = [helper.make_node("Sub", ["x", "half"], ["d"], name="sub"),
             helper.make_node("Sqrt", ["d"], ["s"], name="root"),
             helper.make_node("Relu", ["s"], ["y"], name="relu")]
    onnx.save(model(nodes, [vi("x", F, [8])], [vi("y", F, [8])], [nh.from_array(f32(0.5), "half")]),
              p("nan_model.onnx"))

    # ints.onnx
    W = np.arange(8, dtype=np.float32).reshape(4, 2) / 8
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm"),
             helper.make_node("Cast", ["sr"], ["s"], to=F, name="cast"),
             helper.make_node("Cast", ["flag"], ["k"], to=F, name="cast2"),
             helper.make_node("Cast", ["h"], ["hf"], to=F, name="cast3")]
    onnx.save(model(nodes,
                    [vi("x", F, ["batch", 4]), vi("sr", TensorProto.INT64, []),
                     vi("flag", TensorProto.BOOL, [3]), vi("h", TensorProto.FLOAT16, [2])],
                    [vi("y", F, ["batch", 2]), vi("s", F, []), vi("k", F, [3]), vi("hf", F, [2])],
                    [nh.from_array(W, "W")]), p("ints.onnx"))

    # inf_mask.onnx and infcalib/
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("Log", ["x"], ["t"], name="log"),
             helper.make_node("Mul", ["t", "k"], ["tk"], name="mul"),
             helper.make_node("Max", ["tk", "lo"], ["u"], name="clampmin"),
             helper.make_node("MatMul", ["u", "W"], ["y"], name="mm")]
    onnx.save(model(nodes, [vi("x", F, [2, 8])], [vi("y", F, [2, 4])],
                    [nh.from_array(rng.standard_normal((8, 4)).astype(np.float32), "W"),
                     nh.from_array(f32(0.5), "k"), nh.from_array(f32(-10), "lo")]), p("inf_mask.onnx"))
    for k in range(6):
        os.makedirs(p(os.path.join("infcalib", "s%d" % k)), exist_ok=True)
        x = rng.uniform(0, 2, (2, 8)).astype(np.float32)
        x[0, k] = 0.0
        np.save(p(os.path.join("infcalib", "s%d" % k, "x.npy")), x)

    shapes = os.path.join(REPO, "models", "shapes_cnn.onnx")
    calib = os.path.join(REPO, "models", "calib")
    if os.path.exists(shapes):
        # outlier.onnx (as tests/fallback.sh makes it)
        m = onnx.load(shapes)
        for t in m.graph.initializer:
            if t.name == "w2":
                a = nh.to_array(t).copy()
                a[1, 0, 1, 1] = 40 * np.abs(a).max()
                t.CopyFrom(nh.from_array(a, "w2"))
        onnx.save(m, p("outlier.onnx"))
        # nan/: s0 clean, s1 with one NaN at element 651
        for s, src in (("s0", "sample_000"), ("s1", "sample_001")):
            os.makedirs(p(os.path.join("nan", s)), exist_ok=True)
            x = np.load(os.path.join(calib, src, "image.npy"))
            if s == "s1":
                x.reshape(-1)[651] = np.nan
            np.save(p(os.path.join("nan", s, "image.npy")), x)
        # wrong/: one sample of the wrong shape
        os.makedirs(p(os.path.join("wrong", "s0")), exist_ok=True)
        np.save(p(os.path.join("wrong", "s0", "image.npy")), np.zeros((1, 3, 20, 20), np.float32))

    conv = "/usr/share/libonnx-testdata/data/node/test_conv_with_strides_padding/model.onnx"
    if os.path.exists(conv):
        shutil.copy(conv, p("conv.onnx"))
    print("wrote the docs example files to %s" % os.path.abspath(out))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
