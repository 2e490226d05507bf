#!/usr/bin/python3
"""End-to-end check of `onnxq opt --passes fold-bias` on a pre-quantized model.

Usage: fold_bias_e2e.py ONNXQ_EXE WORKDIR

Builds (with onnx.helper) the kind of model a QAT / pre-quantized export gives: QDQ on
activations and weights, float biases:
  x1 -Q/DQ-> Conv(W1 int8 per-channel, B1 float) -> Q/DQ -> y1
  x1 ------> Conv(W4 int8 per-channel, channel 1 scale 1e-7, B4 float) -> y4
             (B4[1] / (s_x1 * 1e-7) does not fit int32: the weight scale gets raised)
  x2 -Q/DQ-> Gemm(W2 int8 per-tensor, transB=1, B2 float) -> Q/DQ -> g
  x2_dequant -> MatMul(W3 int8 per-channel axis 1) -> Add(B3 float) -> m
then checks:
  - the pass folds 4 biases and adjusts 1 weight channel, and running it again writes the
    same bytes (idempotent);
  - every B_quantized equals round(B / (s_in * s_w)) computed here in float32 (numpy), and
    the adjusted weight scale equals the smallest float32 s with
    round(|b| / (s_in * s)) <= 2147483520 - room, where room = max|x_q| * (sum|w| / s0 + K)
    keeps the int32 accumulator from overflowing (s0: the same without room);
  - the output passes onnx.checker (full_check=True);
  - onnxruntime-node runs it; onnxruntime's outputs agree with `onnxq run` within one
    quantization step of the output (y1, g: the output scale; y4, m: float outputs,
    within 1e-5 relative: float accumulation order);
  - compared with the float-bias model (also run in onnxruntime), each output moves by
    no more than the bound worked out below (after taking out the int16 saturation of
    onnxruntime's integer kernels on a CPU without VNNI, which onnxq's host arithmetic
    reproduces; see main()): bias rounding |b - s_b*b_q| <= s_b/2 per
    channel, plus for the adjusted channel sum|x| * max|w - w'| (the requantized
    weights), plus one output step where the output is quantized (the rounding there
    may flip).
Exit 0 = ok, 1 = failure, 77 = onnx/numpy/onnxruntime-node not available.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ortfind import find_ort, node_cmd  # noqa: E402

try:
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper, TensorProto
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)




rng = np.random.default_rng(5)
F32 = np.float32


def qweight(w, axis):
    """int8 symmetric quantization (per channel along axis, or per tensor if None)."""
    if axis is None:
        s = F32(np.abs(w).max() / 127)
        q = np.clip(np.rint(w / s), -127, 127).astype(np.int8)
        return q, np.array(s, dtype=F32)
    red = tuple(i for i in range(w.ndim) if i != axis)
    s = (np.abs(w).max(axis=red) / 127).astype(F32)
    shp = [1] * w.ndim
    shp[axis] = -1
    q = np.clip(np.rint(w / s.reshape(shp)), -127, 127).astype(np.int8)
    return q, s


def build(path):
    inits, nodes = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))

    def qdq_act(src, name, scale, zp, out):
        init(name + "_scale", np.array(scale, dtype=F32))
        init(name + "_zero_point", np.array(zp, dtype=np.uint8))
        nodes.append(helper.make_node("QuantizeLinear", [src, name + "_scale", name + "_zero_point"],
                                      [name + "_quantized"], name=name + "_QuantizeLinear"))
        nodes.append(helper.make_node("DequantizeLinear", [name + "_quantized", name + "_scale",
                                                          name + "_zero_point"], [out],
                                      name=name + "_DequantizeLinear"))

    def dq_weight(name, q, s, axis):
        init(name + "_quantized", q)
        init(name + "_scale", s)
        init(name + "_zero_point", np.zeros(s.shape, dtype=np.int8))
        kw = {"axis": axis} if axis is not None else {}
        nodes.append(helper.make_node("DequantizeLinear", [name + "_quantized", name + "_scale",
                                                          name + "_zero_point"], [name],
                                      name=name + "_DequantizeLinear", **kw))

    # x1 in [-1, 1): scale 2/255, zero point 128
    qdq_act("x1", "x1", 2.0 / 255, 128, "x1_dequant")
    w1 = rng.normal(0, 0.3, (4, 3, 3, 3)).astype(F32)
    q1, s1 = qweight(w1, 0)
    dq_weight("W1", q1, s1, 0)
    init("B1", rng.normal(0, 0.5, 4).astype(F32))
    nodes.append(helper.make_node("Conv", ["x1_dequant", "W1", "B1"], ["y1_prequant"], name="conv1"))
    qdq_act("y1_prequant", "y1", 0.05, 128, "y1")

    q4 = rng.integers(-127, 128, (3, 3, 3, 3)).astype(np.int8)
    s4 = np.array([0.01, 1e-7, 0.02], dtype=F32)
    dq_weight("W4", q4, s4, 0)
    init("B4", np.array([0.25, 5.0, -0.5], dtype=F32))
    nodes.append(helper.make_node("Conv", ["x1_dequant", "W4", "B4"], ["y4"], name="conv4"))

    # x2 in [0, 4): scale 4/255, zero point 0
    qdq_act("x2", "x2", 4.0 / 255, 0, "x2_dequant")
    w2 = rng.normal(0, 0.2, (5, 16)).astype(F32)
    q2, s2 = qweight(w2, None)
    dq_weight("W2", q2, s2, None)
    init("B2", rng.normal(0, 1.0, 5).astype(F32))
    nodes.append(helper.make_node("Gemm", ["x2_dequant", "W2", "B2"], ["g_prequant"], name="gemm",
                                  transB=1))
    qdq_act("g_prequant", "g", 0.04, 128, "g")
    w3 = rng.normal(0, 0.2, (16, 6)).astype(F32)
    q3, s3 = qweight(w3, 1)
    dq_weight("W3", q3, s3, 1)
    init("B3", rng.normal(0, 1.0, 6).astype(F32))
    nodes.append(helper.make_node("MatMul", ["x2_dequant", "W3"], ["mm"], name="matmul"))
    nodes.append(helper.make_node("Add", ["mm", "B3"], ["m"], name="add"))

    g = helper.make_graph(
        nodes, "prequant",
        [helper.make_tensor_value_info("x1", TensorProto.FLOAT, [1, 3, 6, 6]),
         helper.make_tensor_value_info("x2", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, d) for n, d in
         (("y1", [1, 4, 4, 4]), ("y4", [1, 3, 4, 4]), ("g", [2, 5]), ("m", [2, 6]))],
        initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)


ORT_JS = """
const ort = require(process.argv[2]);
const fs = require('fs');
const feeds = JSON.parse(fs.readFileSync(process.argv[4]));
(async () => {
  const s = await ort.InferenceSession.create(process.argv[3]);
  const f = {};
  for (const k in feeds) f[k] = new ort.Tensor('float32', Float32Array.from(feeds[k].data), feeds[k].dims);
  const r = await s.run(f);
  const out = {};
  for (const k in r) out[k] = Array.from(r[k].data);
  fs.writeFileSync(process.argv[5], JSON.stringify(out));
})().catch(e => { console.error(e.message); process.exit(1); });
"""


def run_ort(ort, js, model, feeds_json, out_json):
    r = subprocess.run(node_cmd() + [js, ort, model, feeds_json, out_json], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: onnxruntime on {model}: {r.stderr.strip()[-1500:]}")
    return {k: np.array(v, dtype=F32) for k, v in json.load(open(out_json)).items()}


def main():
    exe, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    ort = find_ort()
    if not ort:
        print("skip: onnxruntime-node not found")
        return 77
    src = os.path.join(work, "prequant.onnx")
    out = os.path.join(work, "folded.onnx")
    out2 = os.path.join(work, "folded2.onnx")
    build(src)
    fails = []

    r = subprocess.run([exe, "opt", src, "-o", out, "--passes", "fold-bias", "--stats"],
                       capture_output=True, text=True)
    print(r.stdout, r.stderr, sep="")
    if r.returncode != 0:
        print("FAIL: onnxq opt exit", r.returncode)
        return 1
    stats = {}
    for line in r.stdout.splitlines():
        p = line.split()
        if len(p) == 2 and p[1].lstrip("-").isdigit():
            stats[p[0]] = int(p[1])
    if stats.get("biases_folded") != 4 or stats.get("weights_adjusted") != 1:
        fails.append(f"stats {stats}: want biases_folded 4, weights_adjusted 1")
    if 'channel 1' not in r.stderr or '"conv4"' not in r.stderr:
        fails.append("no note naming conv4 channel 1 for the weight adjustment")

    r2 = subprocess.run([exe, "opt", out, "-o", out2, "--passes", "fold-bias"], capture_output=True,
                        text=True)
    if r2.returncode != 0 or open(out, "rb").read() != open(out2, "rb").read():
        fails.append("second fold-bias run changed the model (not idempotent)")

    onnx.checker.check_model(onnx.load(out), full_check=True)

    # hand-computed int32 biases
    a = onnx.load(src)
    b = onnx.load(out)
    A = {t.name: numpy_helper.to_array(t) for t in a.graph.initializer}
    B = {t.name: numpy_helper.to_array(t) for t in b.graph.initializer}
    for name in ("B1", "B2", "B3", "B4"):
        if name in B or name + "_quantized" not in B:
            fails.append(f"{name}: expected {name}_quantized and no float {name}")
    dq = {n.output[0]: n for n in b.graph.node if n.op_type == "DequantizeLinear"}
    for name in ("B1", "B2", "B3", "B4"):
        if name not in dq or list(dq[name].input) != [name + "_quantized", name + "_scale",
                                                       name + "_zero_point"]:
            fails.append(f"{name}: not produced by DequantizeLinear({name}_quantized, ...)")
    layers = {"B1": ("x1_scale", "W1_scale"), "B2": ("x2_scale", "W2_scale"),
              "B3": ("x2_scale", "W3_scale"), "B4": ("x1_scale", "W4_scale")}
    s4_new = None
    for name, (xs, ws) in layers.items():
        sw = B[ws].astype(F32)
        if name == "B4":
            # channel 1 needs the smallest float32 scale s with round(5/(s_x*s)) <= limit:
            # first with limit 2147483520 (s0), then leaving room in the int32 accumulator
            # for sum|w_q| * max|x_q| after requantizing at s >= s0: x1 is uint8 with zero
            # point 128 (max|x_q| = 128), 27 weights, sum|w_q| <= sum|w| / s0 + 27
            sx = A[xs].astype(F32)
            def smallest(limit):
                s = F32(5.0 / (float(sx) * (limit + 0.5)) * (1 - 1e-6))
                while abs(np.rint(np.float64(F32(5.0) / F32(sx * s)))) > limit:
                    s = np.nextafter(s, F32(np.inf))
                return s
            s0 = smallest(2147483520.0)
            sumw = float(np.abs(A["W4_quantized"][1].astype(np.float64)).sum()) * float(A[ws][1])
            room = 128.0 * (sumw / float(s0) + 27)
            s = smallest(2147483520.0 - room)
            if sw[1] != s:
                fails.append(f"W4_scale[1] = {sw[1]!r}, expected {s!r}")
            if sw[0] != A[ws][0] or sw[2] != A[ws][2]:
                fails.append("W4 scales of channels 0 and 2 changed")
            s4_new = sw
        sb = (A[xs].astype(F32) * sw).astype(F32)
        want = np.rint((A[name] / sb).astype(F32).astype(np.float64)).astype(np.int64)
        got = B[name + "_quantized"].astype(np.int64)
        if not np.array_equal(want, got):
            fails.append(f"{name}_quantized {got.tolist()} != hand {want.tolist()}")
        if not np.array_equal(B[name + "_scale"].astype(F32).reshape(-1), sb.reshape(-1)):
            fails.append(f"{name}_scale {B[name + '_scale']} != {sb}")
    # weights untouched except W4 channel 1, requantized from its dequantized values
    for w in ("W1", "W2", "W3"):
        if not np.array_equal(A[w + "_quantized"], B[w + "_quantized"]):
            fails.append(f"{w}_quantized changed")
    wold = A["W4_quantized"].astype(np.float32) * A["W4_scale"].reshape(-1, 1, 1, 1)
    wnew = B["W4_quantized"].astype(np.float32) * B["W4_scale"].reshape(-1, 1, 1, 1)
    want_q1 = np.rint((wold[1] / s4_new[1]).astype(F32)).astype(np.int64)
    if not np.array_equal(want_q1, B["W4_quantized"][1].astype(np.int64)):
        fails.append("W4_quantized channel 1 is not round(w_dequant / new scale)")
    if not np.array_equal(A["W4_quantized"][[0, 2]], B["W4_quantized"][[0, 2]]):
        fails.append("W4_quantized channels 0/2 changed")

    # "touches nothing else": every original node is still there, unchanged and in the
    # same order; every initializer but the biases and W4's is byte-identical
    new_nodes = [n for n in b.graph.node if not (n.op_type == "DequantizeLinear" and
                                                 n.output[0] in layers)]
    if [n.SerializeToString() for n in new_nodes] != [n.SerializeToString() for n in a.graph.node]:
        fails.append("nodes other than the bias DequantizeLinear changed")
    bi = {t.name: t.SerializeToString() for t in b.graph.initializer}
    for t in a.graph.initializer:
        if t.name in layers or t.name in ("W4_quantized", "W4_scale"):
            continue
        if bi.get(t.name) != t.SerializeToString():
            fails.append(f"initializer {t.name} changed")
    if [x.SerializeToString() for x in a.graph.input] != [x.SerializeToString() for x in b.graph.input] or \
            [x.SerializeToString() for x in a.graph.output] != [x.SerializeToString() for x in b.graph.output]:
        fails.append("graph inputs/outputs changed")

    # inputs, quantized-model runs
    x1 = rng.uniform(-1, 1, (1, 3, 6, 6)).astype(F32)
    x2 = rng.uniform(0, 4, (2, 16)).astype(F32)
    np.save(os.path.join(work, "x1.npy"), x1)
    np.save(os.path.join(work, "x2.npy"), x2)
    feeds = os.path.join(work, "feeds.json")
    json.dump({"x1": {"data": x1.ravel().tolist(), "dims": list(x1.shape)},
               "x2": {"data": x2.ravel().tolist(), "dims": list(x2.shape)}}, open(feeds, "w"))
    js = os.path.join(work, "ort_run.js")
    open(js, "w").write(ORT_JS)
    ort_q = run_ort(ort, js, out, feeds, os.path.join(work, "ort_q.json"))
    ort_f = run_ort(ort, js, src, feeds, os.path.join(work, "ort_f.json"))
    # --target host: onnxruntime runs its fused integer kernels (docs/run.md), which on a
    # CPU without VNNI saturate u8 x s8 pairs; --target reference: the ONNX QDQ semantics
    oqs = {}
    for target, model in (("host", out), ("reference", out), ("prequant", src)):
        od = os.path.join(work, "onnxq_" + target)
        os.makedirs(od, exist_ok=True)
        r = subprocess.run([exe, "run", model, "--input", "x1=" + os.path.join(work, "x1.npy"),
                            "--input", "x2=" + os.path.join(work, "x2.npy"), "--output-dir", od,
                            "--npy", "--target", "host" if target == "host" else "reference"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr)
            fails.append(f"onnxq run --target {target} failed")
            return report(fails)
        if target == "host":
            print(r.stderr.strip())
        oqs[target] = {k: np.load(os.path.join(od, k + ".npy")).astype(F32).ravel()
                       for k in ("y1", "y4", "g", "m")}
    oq = oqs["host"]

    steps = {"y1": 0.05, "g": 0.04}
    # The folded model's outputs in onnxruntime differ from the float-bias model's by the
    # bias rounding (bounded below) and, on a CPU whose integer kernels saturate, by the
    # saturation of the layers that folding lets onnxruntime fuse (the MatMul + Add of m
    # becomes a QGemm where the float-bias model ran a float Gemm). "saturation" is what
    # onnxq's host arithmetic adds to its reference arithmetic on the folded model (0 on
    # a CPU with VNNI; checked above to match onnxruntime). Where it is 0 the bound is
    # checked on onnxruntime's two outputs; where it is not, on onnxq's reference
    # arithmetic of the two models (the fold itself; the column says which).
    print("output  |onnxq-ort| max   tol        saturation   |folded-float| max   bound     by")
    # the x actually seen by the layers: dequantized inputs
    x1d = ((np.clip(np.rint(x1 / F32(2.0 / 255)) + 128, 0, 255) - 128) * F32(2.0 / 255)).astype(F32)
    # |y4[ch1] change| from requantizing W4[1]: sum over the 3x3x3 window of |x| |dw|
    dw1 = np.abs(wnew[1] - wold[1]).max()
    win = 27 * float(np.abs(x1d).max())
    sb = {n: (A[xs].astype(F32) * B[ws].astype(F32)).astype(np.float64) for n, (xs, ws) in layers.items()}
    bounds = {
        "y1": sb["B1"].max() / 2 + steps["y1"],
        "y4": sb["B4"].max() / 2 + win * dw1 + 1e-5 * np.abs(ort_f["y4"]).max(),
        "g": sb["B2"].max() / 2 + steps["g"],
        "m": sb["B3"].max() / 2 + 1e-5 * np.abs(ort_f["m"]).max(),
    }
    for k in ("y1", "y4", "g", "m"):
        d_eng = float(np.abs(oq[k] - ort_q[k]).max())
        tol = steps.get(k, 1e-5 * float(np.abs(ort_q[k]).max()))
        sat = float(np.abs(oqs["host"][k] - oqs["reference"][k]).max())
        exact = sat <= 1e-6 * float(np.abs(oqs["reference"][k]).max())
        d_f = float(np.abs(ort_q[k] - ort_f[k]).max()) if exact else \
            float(np.abs(oqs["reference"][k] - oqs["prequant"][k]).max())
        print(f"{k:6s}  {d_eng:.3g}{'':8s} {tol:.3g}{'':6s} {sat:<12.3g} "
              f"{d_f:.3g}{'':12s} {bounds[k]:<9.3g} {'onnxruntime' if exact else 'onnxq reference'}")
        if d_eng > tol * 1.0001:
            fails.append(f"{k}: onnxq and onnxruntime differ by {d_eng} > {tol}")
        if d_f > bounds[k]:
            fails.append(f"{k}: folded model moved by {d_f} > bound {bounds[k]}")
    return report(fails)


def report(fails):
    for f in fails:
        print("FAIL:", f)
    print("fold-bias e2e:", "ok" if not fails else f"{len(fails)} failure(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
