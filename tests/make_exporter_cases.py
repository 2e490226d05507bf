#!/usr/bin/env python3
"""Small graphs in the shapes exporters write, for tests/placement.sh.

  python3 make_exporter_cases.py OUT_DIR

writes, each with OUT_DIR/<name>_calib/NNN/x.npy (16 samples) and OUT_DIR/<name>_eval/NNN/x.npy
(16, another seed):

attn_uniform.onnx: x [1, 32, 16] -> MatMul Wq [16, 32] (small weights) -> Softmax over 32
  -> MatMul Wv [32, 16] -> y. The attention probabilities stay within 0.02 .. 0.05 (nearly
  uniform, as in a first layer over 32 tokens). The scores MatMul writes float
  (MatMulIntegerToFloat) and the Softmax runs in float (docs/passes/insert-qdq.md).
attn_add.onnx: the same with scores = MatMul(x, Wq) + MatMul(x, Wk): the Add of two quantized
  tensors runs as QLinearAdd, so DQ -> Softmax -> Q becomes onnxruntime's QLinearSoftmax, and
  a range calibrated on the probabilities, [0, 0.05], has 1 / y_scale above 32 e^5: that
  kernel overflows and writes zeros unless the range is widened ("Fixed output ranges").

shared_identity.onnx / shared_copy.onnx: x [1, 16, 64] -> MatMul W -> Relu -> MatMul W' -> y,
  where W' is Identity(W) (the TorchScript exporter's form of a shared parameter, e.g. the
  cloned layers of nn.TransformerEncoder), or in shared_copy a second initializer holding
  the same values. Quantized, both must give the same model arithmetic: W' a per-channel
  int8 weight, not an activation calibrated and quantized per tensor.

upsample.onnx: x [1, 4, 8, 8] -> Conv -> Relu -> ConvTranspose (2x2, stride 2) -> Relu -> Conv
  -> y [1, 4, 16, 16]: a float ConvTranspose between a DequantizeLinear and a QuantizeLinear,
  which onnxruntime would give a per-tensor int8 weight of its own (its output channels'
  weights span 0.2 to 3 times He scale): quantized per channel instead.

shuffle.onnx: x [1, 8, 8, 8] -> Conv 1x1 -> Relu -> channel shuffle (Reshape [1, 4, 4, 8, 8] ->
  Transpose -> Reshape) -> depthwise Conv 3x3 (channels' weights 0.1 to 3 times He scale) ->
  Relu -> Conv 1x1 -> y: onnxruntime's QDQPropagation carries the first Conv's
  DequantizeLinear through the shuffle to the depthwise Conv, which it would then give a
  per-tensor int8 weight of its own: quantized per channel instead.
concat_out.onnx: x [1, 8, 8, 8] -> Conv -> Relu -> x10 and Conv -> Tanh -> x0.01, Concat of both
  and x -> cat, a graph output that a Conv also reads -> y. The output cat keeps the float
  Concat; only the Conv reads a Q/DQ (the x0.01 part came out as zeros at that Conv input's
  scale).
tied.onnx: ids [1, 8] -> Gather(E) -> MatMul -> Relu -> MatMul(h, Transpose(E)) -> logits: a
  tied LM head as torch's dynamo exporter writes it. cast16.onnx: x -> MatMul(x, Cast(W16))
  with float16 weights. Both weights are computed from constants: quantized per channel as
  weights (the head got an activation's per-tensor uint8 pair in static mode and stayed
  float in dynamic mode).
logspec.onnx: x [1, 1, 1024] -> two Convs (DFT kernels of a 64-point STFT, hop 32) -> |X|^2 ->
  Log -> Conv 1x1 -> y, on tones over quiet noise: the STFT Convs stay float (quantized,
  their output's small values lose all relative precision in the Log).
loop_weight.onnx: x -> MatMul -> Loop (5 steps) of h = Tanh(MatMul(h, W)) with W carried as loop
  state (paddle2onnx's decoders): the body's MatMul stays float (its Q/DQ pairs would run at
  every step, fused by nothing); the MatMul before the loop is quantized.
recip.onnx: x -> Conv -> Abs -> + 0.01 -> Reciprocal -> Conv -> y: 8-bit quantization ruins it;
  quantize says so in a warning (the held-out samples' worst part below 15 dB).
Needs python3-onnx and python3-numpy."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(model, path):
    onnx.checker.check_model(model)
    onnx.save(model, path)


def samples(d, shape, n, seed):
    r = np.random.default_rng(seed)
    for i in range(n):
        os.makedirs(os.path.join(d, "%03d" % i), exist_ok=True)
        np.save(os.path.join(d, "%03d" % i, "x.npy"), r.standard_normal(shape).astype(np.float32))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    r = np.random.default_rng(7)
    op13 = [helper.make_opsetid("", 13)]

    wq = (r.standard_normal((16, 32)) * 0.02).astype(np.float32)
    wv = (r.standard_normal((32, 16)) * 0.5).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "Wq"], ["s"], name="scores"),
         helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1),
         helper.make_node("MatMul", ["p", "Wv"], ["y"], name="values")],
        "attn_uniform", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 16])],
        [numpy_helper.from_array(wq, "Wq"), numpy_helper.from_array(wv, "Wv")])
    save(helper.make_model(g, opset_imports=op13, ir_version=8), os.path.join(out, "attn_uniform.onnx"))
    samples(os.path.join(out, "attn_uniform_calib"), (1, 32, 16), 16, 1001)
    samples(os.path.join(out, "attn_uniform_eval"), (1, 32, 16), 16, 2002)
    wk = (r.standard_normal((16, 32)) * 0.02).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "Wq"], ["s1"], name="q_scores"),
         helper.make_node("MatMul", ["x", "Wk"], ["s2"], name="k_scores"),
         helper.make_node("Add", ["s1", "s2"], ["s"], name="scores"),
         helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1),
         helper.make_node("MatMul", ["p", "Wv"], ["y"], name="values")],
        "attn_add", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 16])],
        [numpy_helper.from_array(wq, "Wq"), numpy_helper.from_array(wk, "Wk"),
         numpy_helper.from_array(wv, "Wv")])
    save(helper.make_model(g, opset_imports=op13, ir_version=8), os.path.join(out, "attn_add.onnx"))
    samples(os.path.join(out, "attn_add_calib"), (1, 32, 16), 16, 1001)
    samples(os.path.join(out, "attn_add_eval"), (1, 32, 16), 16, 2002)

    w = (r.standard_normal((64, 64)) * 0.2).astype(np.float32)
    for name, ident in (("shared_identity", True), ("shared_copy", False)):
        nodes = [helper.make_node("MatMul", ["x", "W"], ["a"], name="mm0"),
                 helper.make_node("Relu", ["a"], ["b"], name="relu")]
        inits = [numpy_helper.from_array(w, "W")]
        if ident:
            nodes.append(helper.make_node("Identity", ["W"], ["W1"], name="shared"))
        else:
            inits.append(numpy_helper.from_array(w.copy(), "W1"))
        nodes.append(helper.make_node("MatMul", ["b", "W1"], ["y"], name="mm1"))
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 64])], inits)
        save(helper.make_model(g, opset_imports=op13, ir_version=8), os.path.join(out, name + ".onnx"))
        samples(os.path.join(out, name + "_calib"), (1, 16, 64), 16, 1001)
        samples(os.path.join(out, name + "_eval"), (1, 16, 64), 16, 2002)
    # a decoder step: Conv -> Relu -> ConvTranspose (2x up) -> Relu -> Conv
    def conv(name, x, w, y, **kw):
        return helper.make_node("Conv", [x, name + ".w"], [y], name=name, **kw), \
            numpy_helper.from_array(w, name + ".w")
    he = lambda co, ci, k: (r.standard_normal((co, ci, k, k)) * np.sqrt(2.0 / (ci * k * k))).astype(np.float32)
    n0, i0 = conv("enc", "x", he(8, 4, 3), "e", pads=[1, 1, 1, 1])
    wt = (r.standard_normal((8, 8, 2, 2)) * np.sqrt(2.0 / 8) * np.linspace(0.2, 3, 8)[None, :, None, None]).astype(np.float32)
    n2, i2 = conv("dec", "u", he(4, 8, 3), "y", pads=[1, 1, 1, 1])
    g = helper.make_graph(
        [n0, helper.make_node("Relu", ["e"], ["er"], name="enc_relu"),
         helper.make_node("ConvTranspose", ["er", "up.w"], ["t"], name="up", strides=[2, 2], kernel_shape=[2, 2]),
         helper.make_node("Relu", ["t"], ["u"], name="up_relu"), n2],
        "upsample", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])],
        [i0, numpy_helper.from_array(wt, "up.w"), i2])
    save(helper.make_model(g, opset_imports=op13, ir_version=8), os.path.join(out, "upsample.onnx"))
    for name in ("upsample",):
        samples(os.path.join(out, name + "_calib"), (1, 4, 8, 8), 16, 1001)
        samples(os.path.join(out, name + "_eval"), (1, 4, 8, 8), 16, 2002)
    # a ShuffleNet unit: Conv -> Relu -> channel shuffle (Reshape -> Transpose -> Reshape) ->
    # depthwise Conv -> Relu -> Conv
    n0, i0 = conv("pw1", "x", he(16, 8, 1), "a")
    wd = (he(16, 1, 3) * np.linspace(0.1, 3, 16)[:, None, None, None]).astype(np.float32)
    n2, i2 = conv("dw", "s", wd, "d", pads=[1, 1, 1, 1], group=16)
    n4, i4 = conv("pw2", "dr", he(8, 16, 1), "y")
    g = helper.make_graph(
        [n0, helper.make_node("Relu", ["a"], ["ar"], name="pw1_relu"),
         helper.make_node("Reshape", ["ar", "shape5"], ["r5"], name="split_groups"),
         helper.make_node("Transpose", ["r5"], ["t5"], name="shuffle", perm=[0, 2, 1, 3, 4]),
         helper.make_node("Reshape", ["t5", "shape4"], ["s"], name="merge_groups"),
         n2, helper.make_node("Relu", ["d"], ["dr"], name="dw_relu"), n4],
        "shuffle", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])],
        [i0, numpy_helper.from_array(np.array([1, 4, 4, 8, 8], np.int64), "shape5"),
         numpy_helper.from_array(np.array([1, 16, 8, 8], np.int64), "shape4"), i2, i4])
    save(helper.make_model(g, opset_imports=op13, ir_version=8), os.path.join(out, "shuffle.onnx"))
    samples(os.path.join(out, "shuffle_calib"), (1, 8, 8, 8), 16, 1001)
    samples(os.path.join(out, "shuffle_eval"), (1, 8, 8, 8), 16, 2002)
    # a graph output that a Conv also reads: Concat(Relu(Conv) x 10, Tanh(Conv) x 0.01, x)
    n0, i0 = conv("wide", "x", he(8, 8, 3), "a", pads=[1, 1, 1, 1])
    n1, i1 = conv("narrow", "x", he(8, 8, 3), "b", pads=[1, 1, 1, 1])
    n3, i3 = conv("head", "cat", he(4, 24, 1), "y")
    g = helper.make_graph(
        [n0, helper.make_node("Relu", ["a"], ["ar"], name="wide_relu"),
         helper.make_node("Mul", ["ar", "ten"], ["aw"], name="wide_scale"),
         n1, helper.make_node("Tanh", ["b"], ["bt"], name="narrow_tanh"),
         helper.make_node("Mul", ["bt", "hundredth"], ["bn"], name="narrow_scale"),
         helper.make_node("Concat", ["aw", "bn", "x"], ["cat"], name="concat", axis=1), n3],
        "concat_out", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8]),
         helper.make_tensor_value_info("cat", TensorProto.FLOAT, [1, 24, 8, 8])],
        [i0, i1, i3, numpy_helper.from_array(np.array(10, np.float32), "ten"),
         numpy_helper.from_array(np.array(0.01, np.float32), "hundredth")])
    save(helper.make_model(g, opset_imports=op13, ir_version=8), os.path.join(out, "concat_out.onnx"))
    samples(os.path.join(out, "concat_out_calib"), (1, 8, 8, 8), 16, 1001)
    samples(os.path.join(out, "concat_out_eval"), (1, 8, 8, 8), 16, 2002)
    # a tied LM head: Gather(E, ids) -> MatMul -> Relu -> MatMul(h, Transpose(E)) (torch's
    # dynamo export of GPT-2), and float16 weights through Cast
    E = (r.standard_normal((100, 32)) * 0.5).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Gather", ["E", "ids"], ["e"], name="embed"),
         helper.make_node("MatMul", ["e", "w1"], ["m"], name="mm1"),
         helper.make_node("Relu", ["m"], ["hdn"], name="relu"),
         helper.make_node("Transpose", ["E"], ["Et"], name="tie", perm=[1, 0]),
         helper.make_node("MatMul", ["hdn", "Et"], ["logits"], name="head")],
        "tied", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 8, 100])],
        [numpy_helper.from_array(E, "E"),
         numpy_helper.from_array((r.standard_normal((32, 32)) * 0.3).astype(np.float32), "w1")])
    save(helper.make_model(g, opset_imports=op13, ir_version=8), os.path.join(out, "tied.onnx"))
    for name, seed in (("tied_calib", 1001), ("tied_eval", 2002)):
        rr = np.random.default_rng(seed)
        for i in range(16):
            os.makedirs(os.path.join(out, name, "%03d" % i), exist_ok=True)
            np.save(os.path.join(out, name, "%03d" % i, "ids.npy"), rr.integers(0, 100, (1, 8)).astype(np.int64))
    w16 = (r.standard_normal((64, 48)) * np.linspace(0.05, 1, 48)[None, :]).astype(np.float16)
    g = helper.make_graph(
        [helper.make_node("Cast", ["W16"], ["W"], name="to_float", to=TensorProto.FLOAT),
         helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
        "cast16", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 48])],
        [numpy_helper.from_array(w16, "W16")])
    save(helper.make_model(g, opset_imports=op13, ir_version=8), os.path.join(out, "cast16.onnx"))
    samples(os.path.join(out, "cast16_calib"), (1, 16, 64), 16, 1001)
    samples(os.path.join(out, "cast16_eval"), (1, 16, 64), 16, 2002)
    # a log-power spectrum front end: framed waveform -> Conv (DFT real / imaginary
    # kernels) -> square, add -> Log -> Conv 1x1 classifier
    nfft, hop = 64, 32
    kk = np.arange(nfft)
    freqs = np.arange(nfft // 2 + 1)[:, None]
    win = np.hanning(nfft)
    wre = (np.cos(2 * np.pi * freqs * kk / nfft) * win)[:, None, :].astype(np.float32)
    wim = (-np.sin(2 * np.pi * freqs * kk / nfft) * win)[:, None, :].astype(np.float32)
    wcls = (r.standard_normal((4, nfft // 2 + 1, 1)) * 0.2).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "Wre"], ["re"], name="stft_real", strides=[hop]),
         helper.make_node("Conv", ["x", "Wim"], ["im"], name="stft_imag", strides=[hop]),
         helper.make_node("Mul", ["re", "re"], ["re2"], name="re_sq"),
         helper.make_node("Mul", ["im", "im"], ["im2"], name="im_sq"),
         helper.make_node("Add", ["re2", "im2"], ["pw"], name="power"),
         helper.make_node("Add", ["pw", "eps"], ["pwe"], name="floor"),
         helper.make_node("Log", ["pwe"], ["lp"], name="log"),
         helper.make_node("Conv", ["lp", "Wcls"], ["y"], name="classifier")],
        "logspec", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 1024])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 31])],
        [numpy_helper.from_array(wre, "Wre"), numpy_helper.from_array(wim, "Wim"),
         numpy_helper.from_array(wcls, "Wcls"), numpy_helper.from_array(np.array(1e-6, np.float32), "eps")])
    save(helper.make_model(g, opset_imports=op13, ir_version=8), os.path.join(out, "logspec.onnx"))
    for name, seed in (("logspec_calib", 1001), ("logspec_eval", 2002)):
        rr = np.random.default_rng(seed)
        t = np.arange(1024)
        for i in range(16):  # tones over quiet noise: most bins far below the peaks
            x = sum(rr.uniform(0.2, 1) * np.sin(2 * np.pi * rr.uniform(2, 30) / 64 * t + rr.uniform(0, 6))
                    for _ in range(3)) + rr.standard_normal(1024) * 1e-3
            os.makedirs(os.path.join(out, name, "%03d" % i), exist_ok=True)
            np.save(os.path.join(out, name, "%03d" % i, "x.npy"), x.astype(np.float32)[None, None, :])
    # a decoder loop whose MatMul weight is loop-carried state (paddle2onnx's form)
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"], name="keep_going"),
         helper.make_node("MatMul", ["h_in", "w_in"], ["hm"], name="step_mm"),
         helper.make_node("Tanh", ["hm"], ["h_out"], name="step_tanh"),
         helper.make_node("Identity", ["w_in"], ["w_out"], name="carry_w")], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [1, 16]),
         helper.make_tensor_value_info("w_in", TensorProto.FLOAT, [16, 16])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [1, 16]),
         helper.make_tensor_value_info("w_out", TensorProto.FLOAT, [16, 16])])
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W0"], ["h0"], name="embed"),
         helper.make_node("Loop", ["n", "cond", "h0", "Wl"], ["y", "w_last"], name="decode", body=body)],
        "loop_weight", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])],
        [numpy_helper.from_array((r.standard_normal((16, 16)) * 0.3).astype(np.float32), "W0"),
         numpy_helper.from_array((r.standard_normal((16, 16)) * 0.3).astype(np.float32), "Wl"),
         numpy_helper.from_array(np.array(5, np.int64), "n"), numpy_helper.from_array(np.array(True), "cond")])
    save(helper.make_model(g, opset_imports=op13, ir_version=8), os.path.join(out, "loop_weight.onnx"))
    samples(os.path.join(out, "loop_weight_calib"), (1, 16), 16, 1001)
    samples(os.path.join(out, "loop_weight_eval"), (1, 16), 16, 2002)
    # a model 8-bit quantization ruins: 1 / (Conv(x) + 0.01), the Conv's small outputs
    # rounded to a step of its wide range
    n0, i0 = conv("near_zero", "x", he(8, 8, 3), "a", pads=[1, 1, 1, 1])
    n1, i1 = conv("out", "ri", he(4, 8, 1), "y")
    g = helper.make_graph(
        [n0, helper.make_node("Abs", ["a"], ["aa"], name="abs"),
         helper.make_node("Add", ["aa", "hundredth"], ["ae"], name="floor"),
         helper.make_node("Reciprocal", ["ae"], ["ri"], name="recip"), n1],
        "recip", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [i0, i1, numpy_helper.from_array(np.array(0.01, np.float32), "hundredth")])
    save(helper.make_model(g, opset_imports=op13, ir_version=8), os.path.join(out, "recip.onnx"))
    samples(os.path.join(out, "recip_calib"), (1, 8, 8, 8), 16, 1001)
    samples(os.path.join(out, "recip_eval"), (1, 8, 8, 8), 16, 2002)
    print("%s: attn_uniform, shared_identity, shared_copy, upsample, shuffle, concat_out, tied, cast16, logspec, "
          "loop_weight, recip (.onnx) with 16 calib and 16 eval samples each" % out)


if __name__ == "__main__":
    main()
