"""quantize --weight-rounding gptq end to end (tests/weight_rounding.sh), judged by onnxruntime.

A two-layer CNN whose inputs are strongly correlated across channels and neighbouring
pixels (a smooth pattern shared by the 8 channels plus a little noise), as in images, and
whose weights have one large value per output channel (which sets the channel's scale:
the others get a few steps each, so that weight rounding decides the output error):
  x[N,8,10,10] -> conv1 (3x3, pad 1, 8->16) -> Relu -> conv2 (1x1, 16->8) -> y
Rounded to nearest, the errors of a layer's weights add up over correlated inputs; GPTQ
spreads each weight's rounding error over the weights not yet rounded so that the layer's
output error is least on the calibration inputs (include/onnxq/wround.h). Checks, with
onnxruntime (onnxruntime-node through tests/ortnode.bash) as the judge:
  1. the --json record: both layers seen (a layer whose GPTQ rounding is not better than
     its rounding to nearest on the fit samples is left as it is), fitted on the 16 fit
     samples of 24 (every fourth one is held out), kept, judged on the 6 held-out samples,
     with at least the SQNR without;
  2. only int8 weight values differ from the rounding to nearest: every scale, zero point,
     bias and node is the same;
  3. each weight within 8 steps of its float value (GPTQ moves weights, not far), and
     every same-sign pair in onnxruntime's (kh, kw, cin) order within 128 steps (the pair
     limit of ort-x86: an AVX2 CPU's int16 sums cannot saturate);
  4. on 16 samples from the same generator that calibration never saw, in onnxruntime
     optimized (fused integer kernels), the output SQNR against the float model is at least
     3 dB above the rounding to nearest's;
  5. the check: with calibration data whose held-out samples are anti-correlated across
     channels (where the correlation GPTQ uses does not hold), the rounding fitted on the
     others makes them worse; the job says so (kept false) and writes the rounding to
     nearest;
  6. auto_pad SAME_UPPER and SAME_LOWER give the roundings of the pads they stand for
     written out (the im2col's padding).
usage: python3 weight_rounding.py ONNXQ_EXE SOURCE_DIR WORKDIR   (exit 77: modules or
onnxruntime-node missing)"""
import json
import os
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print("SKIP:", e)
    sys.exit(77)

exe, src, work = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.join(src, "tests"))
import e2e  # noqa: E402
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(11)
w1 = rng.normal(0, 0.02, (16, 8, 3, 3)).astype(np.float32)
for o in range(16):  # one large weight per channel sets its scale: the others get few steps
    w1[o, o % 8, 1, 1] = 1.0
b1 = rng.normal(0, 0.1, 16).astype(np.float32)
w2 = rng.normal(0, 0.03, (8, 16, 1, 1)).astype(np.float32)
for o in range(8):
    w2[o, 2 * o, 0, 0] = 1.0
b2 = rng.normal(0, 0.1, 8).astype(np.float32)
nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    helper.make_node("Conv", ["r1", "w2", "b2"], ["y"], name="conv2"),
]
inits = [numpy_helper.from_array(a, n) for a, n in [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2")]]
g = helper.make_graph(nodes, "correlated", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, 10, 10])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, 10, 10])], inits)
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 7
onnx.checker.check_model(model)
fp = os.path.join(work, "float.onnx")
onnx.save(model, fp)


def pattern(r, anti=False):
    """A smooth 10x10 pattern shared by the channels (anti: alternate channels negated)."""
    a, b, c, f = r.uniform(0.5, 1), r.normal(), r.uniform(0.5, 1), r.uniform(0.2, 0.5)
    i = np.arange(10, dtype=np.float64)
    p = a * np.sin(f * i[:, None] + b) + c * np.cos(f * i[None, :])
    sign = np.where(np.arange(8) % 2 == 1, -1.0, 1.0) if anti else np.ones(8)
    x = sign[:, None, None] * p[None] + 0.05 * r.normal(size=(8, 10, 10))
    return x[None].astype(np.float32)


def samples(name, n, seed, anti_held=False):
    d = os.path.join(work, name)
    r = np.random.default_rng(seed)
    xs = []
    for k in range(n):
        os.makedirs(os.path.join(d, "%02d" % k), exist_ok=True)
        x = pattern(r, anti_held and k % 4 == 3)
        np.save(os.path.join(d, "%02d" % k, "x.npy"), x)
        xs.append(x)
    batch = os.path.join(work, name + "_batch.npy")
    np.save(batch, np.concatenate(xs))
    return d, batch


calib, _ = samples("calib", 24, 31)
evald, eval_batch = samples("eval", 16, 32)


def run(args, want=0):
    return e2e.run(exe, args, want)


def ort(path, batch):
    return e2e.ort(src, path, batch, "all")["y"].astype(np.float64)


sqnr = e2e.sqnr


def graph(path):
    m = onnx.load(path)
    return m, {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


fails = 0
near = os.path.join(work, "nearest.onnx")
gptq = os.path.join(work, "gptq.onnx")
rep = os.path.join(work, "gptq.json")
run(["quantize", fp, "-o", near, "--calib", calib, "--no-bias-correction", "--quiet"])
run(["quantize", fp, "-o", gptq, "--calib", calib, "--no-bias-correction", "--weight-rounding", "gptq", "--quiet",
     "--json", rep])
# 1. the record
r = json.load(open(rep))["weight_rounding"]
print("record:", {k: r[k] for k in ("layers", "samples", "kept", "held_out_samples", "held_out_worst_db_with",
                                    "held_out_worst_db_without", "mean_layer_gain_db")})
if not (r["layers"] >= 1 and r["layers"] + r["skipped"] == 2 and r["samples"] == 16 and r["kept"] and r["held_out_samples"] == 6 and
        r["held_out_worst_db_with"] >= r["held_out_worst_db_without"] and r["changed"] > 0):
    print("FAIL: the --json record")
    fails += 1
# 2. only int8 weight values differ
mn, ini_n = graph(near)
mg, ini_g = graph(gptq)
same_nodes = [(n.op_type, list(n.input), list(n.output)) for n in mn.graph.node] == \
             [(n.op_type, list(n.input), list(n.output)) for n in mg.graph.node]
differ = sorted(k for k in ini_n if not np.array_equal(ini_n[k], ini_g.get(k)))
print("initializers that differ:", differ)
if not same_nodes or sorted(ini_n) != sorted(ini_g) or not differ or \
        not set(differ) <= {"w1_quantized", "w2_quantized"}:
    print("FAIL: something other than the int8 weights changed")
    fails += 1
# 3. near the float weights, and the pair limit in (kh, kw, cin) order
for name, wf in (("w1", w1), ("w2", w2)):
    q = ini_g[name + "_quantized"].astype(np.int64)
    s = ini_g[name + "_scale"].reshape(-1, 1, 1, 1).astype(np.float64)
    dev = np.abs(q * s - wf) / s
    order = q.transpose(0, 2, 3, 1).reshape(q.shape[0], -1)  # [M, (kh, kw, cin)]
    a, b = order[:, 0:order.shape[1] - 1:2], order[:, 1::2]
    bad = np.sum((np.sign(a) == np.sign(b)) & (a != 0) & (np.abs(a) + np.abs(b) > 128))
    print("%s: weights moved at most %.2f steps from float; pairs over 128 steps: %d" % (name, dev.max(), bad))
    if bad or dev.max() > 8:
        print("FAIL: %s: a pair over the limit, or a weight far from its float value" % name)
        fails += 1
# 4. better on samples calibration never saw, in onnxruntime optimized
ref = ort(fp, eval_batch)
sn, sg = sqnr(ref, ort(near, eval_batch)), sqnr(ref, ort(gptq, eval_batch))
print("new samples, onnxruntime optimized: nearest %.2f dB, gptq %.2f dB" % (sn, sg))
if not sg >= sn + 3.0:
    print("FAIL: GPTQ should gain at least 3 dB on new samples")
    fails += 1
# 5. held-out samples where the correlation does not hold: not kept
calib_anti, _ = samples("calib_anti", 24, 31, anti_held=True)
near2, gptq2, rep2 = (os.path.join(work, f) for f in ("nearest2.onnx", "gptq2.onnx", "gptq2.json"))
run(["quantize", fp, "-o", near2, "--calib", calib_anti, "--no-bias-correction", "--quiet"])
p = run(["quantize", fp, "-o", gptq2, "--calib", calib_anti, "--no-bias-correction", "--weight-rounding", "gptq",
         "--json", rep2])
r2 = json.load(open(rep2))["weight_rounding"]
line = [l for l in p.stderr.splitlines() if "weight rounding" in l]
print("anti-correlated held-out samples:", line[0] if line else "(no line)")
_, i2n = graph(near2)
_, i2g = graph(gptq2)
if r2["kept"] or not line or "NOT kept" not in line[0] or \
        any(not np.array_equal(i2n[k], i2g[k]) for k in i2n):
    print("FAIL: a rounding that made the held-out samples worse was kept")
    fails += 1
# 6. auto_pad: a stride-2 3x3 convolution over 10x10 with SAME_UPPER pads 0 before and 1
#    after on each axis (ONNX: total (5 - 1) * 2 + 3 - 10 = 1, the odd one at the end): the
#    same rounding as with those pads written out, and SAME_LOWER as pads 1 before, 0 after
rw = np.random.default_rng(12).normal(0, 0.2, (8, 8, 3, 3)).astype(np.float32)
got = {}
for tag, kw in (("upper", dict(auto_pad="SAME_UPPER")), ("upper_pads", dict(pads=[0, 0, 1, 1])),
                ("lower", dict(auto_pad="SAME_LOWER")), ("lower_pads", dict(pads=[1, 1, 0, 0]))):
    n = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", strides=[2, 2], **kw)
    gg = helper.make_graph([n], "pad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 10, 10])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                           [numpy_helper.from_array(rw, "w")])
    mm = helper.make_model(gg, opset_imports=[helper.make_opsetid("", 13)])
    mm.ir_version = 7
    fpath, qpath = (os.path.join(work, "pad_%s%s.onnx" % (tag, sfx)) for sfx in ("", "_q"))
    onnx.save(mm, fpath)
    run(["quantize", fpath, "-o", qpath, "--calib", calib, "--weight-rounding", "gptq", "--no-bias-correction",
         "--min-intensity", "0", "--quiet"])  # one small Conv: float on AVX2 hosts otherwise
    got[tag] = graph(qpath)[1]["w_quantized"]
same = np.array_equal(got["upper"], got["upper_pads"]) and np.array_equal(got["lower"], got["lower_pads"])
print("auto_pad SAME_UPPER / SAME_LOWER against their pads written out: %s; the two differ: %s"
      % ("same roundings" if same else "DIFFERENT", not np.array_equal(got["upper"], got["lower"])))
if not same:
    print("FAIL: auto_pad read differently from the pads it stands for")
    fails += 1
print("weight_rounding.py: %s" % ("all passed" if fails == 0 else "%d failed" % fails))
sys.exit(1 if fails else 0)
