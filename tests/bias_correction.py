"""quantize bias correction end to end (tests/bias_correction.sh), judged by onnxruntime.

A three-layer CNN whose first layer's int8 weights are biased on purpose:
  x[N,8,12,12] -> conv1 (3x3, pad 1, 8->16) -> Relu -> conv2 (1x1, 16->16) -> Relu
               -> conv3 (1x1, 16->4) -> y
Each conv1 output channel has one weight 1.0 (which sets its per-channel scale to 1/127)
and 71 small positive weights of 0.45 to 0.49 of that step, which all round to 0: with
inputs in [0, 1) every conv1 output loses about 71 * 0.0036 * 0.5 = 0.13 on average, a
systematic shift that int8 rounding alone cannot remove and that bias correction should.
Bias correction fits on the calibration samples that are not held out (every fourth one
is: 0, 1, 2, 4, 5, 6, ... fit) and shrinks each channel's mean error d by
(1 - se^2 / d^2)+, se the standard error of d from the samples' own mean errors
(include/onnxq/biascorr.h). Checks, with onnxruntime (onnxruntime-node through
tests/ortnode.bash) as the judge:
  1. without correction the conv1 outputs' per-channel mean error on the calibration
     samples is over 10 bias steps (so check 2 can fail);
  2. with correction, for every Conv of the quantized model, on the fit samples in
     onnxruntime with optimizations off (ONNX QDQ math, which onnxq's reference arithmetic
     reproduces): the bias moved by the shrunk mean error to within half a bias step, the
     error before the move being the error left plus the move (each layer measured with
     the ones before it corrected): the documented invariant;
  3. conv1's int32 bias moved by round(shrunk mean error / step) computed here from the
     uncorrected model's onnxruntime outputs (first layer: nothing upstream is corrected);
  4. on other samples, in onnxruntime optimized (fused integer kernels), the output SQNR
     against the float model gains at least 6 dB;
  5. the --json record: 3 layers, 12 fit samples, kept, judged on 4 held-out samples, the
     held-out difference's standard error equal to a jackknife computed here from
     onnxruntime's outputs, and kept as the rule says (dropped only when it loses more
     than 0.1 dB and two standard errors);
  6. the check on held-out samples: with calibration data whose held-out samples have
     inputs near 0 (where conv1 has no shift to correct), the correction fitted on the
     others makes the held-out outputs worse; the job says so (kept false) and writes the
     uncorrected biases.
usage: python3 bias_correction.py ONNXQ_EXE SOURCE_DIR WORKDIR   (exit 77: modules or
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
rng = np.random.default_rng(5)

w1 = np.zeros((16, 8, 3, 3), np.float32)
for o in range(16):
    w1[o] = rng.uniform(0.45, 0.49, (8, 3, 3)) / 127.0
    w1[o, o % 8, 1, 1] = 1.0
b1 = rng.normal(0, 0.05, 16).astype(np.float32)
w2 = rng.normal(0, 0.3, (16, 16, 1, 1)).astype(np.float32)
b2 = rng.normal(0, 0.1, 16).astype(np.float32)
w3 = rng.normal(0, 0.3, (4, 16, 1, 1)).astype(np.float32)
b3 = rng.normal(0, 0.1, 4).astype(np.float32)
nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2"),
    helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
    helper.make_node("Conv", ["r2", "w3", "b3"], ["y"], name="conv3"),
]
inits = [numpy_helper.from_array(a, n) for a, n in [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"), (w3, "w3"),
                                                     (b3, "b3")]]
g = helper.make_graph(nodes, "biased", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, 12, 12])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 12, 12])], inits)
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 7
onnx.checker.check_model(model)
fp = os.path.join(work, "float.onnx")
onnx.save(model, fp)


def samples(name, n, seed, held_scale=1.0):
    d = os.path.join(work, name)
    r = np.random.default_rng(seed)
    xs = []
    for k in range(n):
        os.makedirs(os.path.join(d, "%02d" % k), exist_ok=True)
        x = r.uniform(0, 1, (1, 8, 12, 12)).astype(np.float32) * (held_scale if k % 4 == 3 else 1.0)
        np.save(os.path.join(d, "%02d" % k, "x.npy"), x)
        xs.append(x)
    batch = os.path.join(work, name + "_batch.npy")
    np.save(batch, np.concatenate(xs))
    return d, batch


calib, calib_batch = samples("calib", 16, 21)
FIT = [k for k in range(16) if k % 4 != 3]  # the samples bias correction fits on
evald, eval_batch = samples("eval", 16, 22)


def run(args, want=0):
    return e2e.run(exe, args, want)


def ort(path, batch, level, outputs=()):
    """Run path in onnxruntime-node on the batch; extra value names become graph outputs."""
    return e2e.ort(src, path, batch, level, outputs)


sqnr = e2e.sqnr


def layers(path):
    """quantized conv node name -> (its output name, int32 bias initializer name, bias steps[C])."""
    m = onnx.load(path)
    prod = {o: n for n in m.graph.node for o in n.output}
    init = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    out = {}
    for n in m.graph.node:
        if n.op_type == "Conv" and n.input[2] in prod:  # a float Conv reads its bias as is
            dq = prod[n.input[2]]
            out[n.name] = (n.output[0], dq.input[0], init[dq.input[1]].astype(np.float64) * np.ones(1), init)
    return out


fails = 0
plain = os.path.join(work, "plain.onnx")
corr = os.path.join(work, "corrected.onnx")
rep = os.path.join(work, "corrected.json")
run(["quantize", fp, "-o", plain, "--calib", calib, "--no-bias-correction", "--quiet"])
run(["quantize", fp, "-o", corr, "--calib", calib, "--quiet", "--json", rep])
fnames = {"conv1": "c1", "conv2": "c2", "conv3": "y"}
fref = ort(fp, calib_batch, "disabled", ["c1", "c2"])
lp, lc = layers(plain), layers(corr)
if sorted(lc) != ["conv1", "conv2", "conv3"]:
    print("FAIL: expected three quantized Convs, got", sorted(lc))
    sys.exit(1)
qp = ort(plain, calib_batch, "disabled", [lp[k][0] for k in sorted(lp) if lp[k][0] != "y"])
qc = ort(corr, calib_batch, "disabled", [lc[k][0] for k in sorted(lc) if lc[k][0] != "y"])


def mean_err(fo, qo, conv, lay):
    """Per fit sample and channel mean error [len(FIT), C], and the float output's RMS."""
    f = fo[fnames[conv]].astype(np.float64)[FIT]
    q = qo[lay[conv][0]].astype(np.float64)[FIT]
    return (f - q).mean(axis=(2, 3)), np.sqrt(np.mean(f * f))


def shrunk(per_sample):
    """The mean over samples shrunk by (1 - se^2 / mean^2)+, per channel."""
    d = per_sample.mean(axis=0)
    se2 = per_sample.var(axis=0, ddof=1) / per_sample.shape[0]
    f = np.where(d * d > 0, 1 - se2 / np.where(d * d > 0, d * d, 1), 0)
    return d * np.clip(f, 0, None)


def moved_steps(conv):
    name = lp[conv][1]
    return lc[conv][3][name].astype(np.int64) - lp[conv][3][name].astype(np.int64)


# 1. the planted shift is there without correction
e1, _ = mean_err(fref, qp, "conv1", lp)
steps = lp["conv1"][2]
print("conv1 without correction: mean error up to %.1f bias steps" % np.max(np.abs(e1.mean(axis=0)) / steps))
if not np.max(np.abs(e1.mean(axis=0)) / steps) > 10:
    print("FAIL: the uncorrected conv1 should be off by more than 10 steps")
    fails += 1
# 2. every corrected layer moved by its shrunk error to within half a step (onnxruntime,
#    optimizations off): the error before the move is the error left plus the move
for conv in ("conv1", "conv2", "conv3"):
    e, rms = mean_err(fref, qc, conv, lc)
    s = lc[conv][2]
    mv = moved_steps(conv) * s
    target = shrunk(e + mv)
    worst = np.max(np.abs(mv - target) / s)
    print("%s corrected: moved %.1f steps at most, within %.3f steps of the shrunk mean error (step %.3g, output RMS %.3g)"
          % (conv, np.max(np.abs(mv) / s), worst, s.max(), rms))
    if not np.all(np.abs(mv - target) <= 0.5 * s + 1e-5 * rms):
        print("FAIL: %s: a channel's correction is over half a bias step from the shrunk mean error" % conv)
        fails += 1
# 3. conv1's bias moved by the rounded shrunk mean error of the uncorrected model
moved = moved_steps("conv1")
want = np.rint(shrunk(e1) / steps).astype(np.int64)
print("conv1 bias moved by %s steps (expected %s)" % (moved.tolist(), want.tolist()))
if not np.all(np.abs(moved - want) <= 1) or np.sum(moved != want) > 2:
    print("FAIL: conv1's bias correction is not round(shrunk mean error / step)")
    fails += 1
# 4. held-out samples, onnxruntime optimized
fe = ort(fp, eval_batch, "all")["y"]
gp, gc = sqnr(fe, ort(plain, eval_batch, "all")["y"]), sqnr(fe, ort(corr, eval_batch, "all")["y"])
print("held-out SQNR in onnxruntime optimized: %.2f dB without, %.2f dB with bias correction" % (gp, gc))
if not gc >= gp + 6:
    print("FAIL: bias correction should gain at least 6 dB here")
    fails += 1
# 5. the report
bc = json.load(open(rep)).get("bias_correction")
if (not bc or bc["layers"] != 3 or bc["samples"] != len(FIT) or bc["changed"] < 1 or bc["skipped"] != 0
        or bc["kept"] is not True or bc["held_out_samples"] != 4
        or not bc["held_out_worst_db_with"] >= bc["held_out_worst_db_without"]):
    print("FAIL: report bias_correction:", bc)
    fails += 1
# 5b. the check's noise: the standard error of the held-out difference (with - without), a
#     jackknife over the held-out samples computed here from onnxruntime's outputs (each
#     sample left out in turn, both SQNRs over the rest); the step is dropped only when it
#     loses more than 0.1 dB and more than two standard errors
HELD = [k for k in range(16) if k % 4 == 3]
fh = ort(fp, calib_batch, "all")["y"].astype(np.float64)[HELD]
yw = ort(corr, calib_batch, "all")["y"].astype(np.float64)[HELD]
yo = ort(plain, calib_batch, "all")["y"].astype(np.float64)[HELD]


def db_without(q, skip):
    keep = [i for i in range(len(HELD)) if i != skip]
    return 10 * np.log10(np.sum(fh[keep] ** 2) / np.sum((fh[keep] - q[keep]) ** 2))


dk = np.array([db_without(yw, k) - db_without(yo, k) for k in range(len(HELD))])
se = np.sqrt((len(dk) - 1) / len(dk) * np.sum((dk - dk.mean()) ** 2))
loss = bc["held_out_worst_db_without"] - bc["held_out_worst_db_with"] if bc else 0
print("held-out difference: %+.3f dB, standard error: job %s dB, by hand %.4f dB" % (
    -loss, bc and bc.get("held_out_se_db"), se))
if not bc or bc.get("held_out_se_db") is None or abs(bc["held_out_se_db"] - se) > 0.01 + 0.05 * se:
    print("FAIL: the job's standard error of the held-out difference is not the jackknife computed here")
    fails += 1
if bc and bc["kept"] != (not (loss > 0.1 and loss > 2 * bc["held_out_se_db"])):
    print("FAIL: kept should be true unless the held-out loss is over 0.1 dB and two standard errors")
    fails += 1
if json.load(open(os.path.join(work, "corrected.json")))["config"]["resolved"]["bias_correction"] is not True:
    print("FAIL: the report's resolved config does not say bias_correction true")
    fails += 1
# 6. held-out samples that the correction makes worse: not kept
gcal, _ = samples("calib_guard", 16, 23, held_scale=0.01)
gq, gj = os.path.join(work, "guard.onnx"), os.path.join(work, "guard.json")
gplain = os.path.join(work, "guard_plain.onnx")
p = run(["quantize", fp, "-o", gq, "--calib", gcal, "--json", gj])
run(["quantize", fp, "-o", gplain, "--calib", gcal, "--no-bias-correction", "--quiet"])
gb = json.load(open(gj)).get("bias_correction")
line = [l for l in p.stderr.splitlines() if "bias correction:" in l]
print("held-out inputs near 0:", line[0] if line else "(no bias correction line)")
if not gb or gb["kept"] is not False or gb["changed"] < 1 or not gb["held_out_worst_db_with"] < gb["held_out_worst_db_without"]:
    print("FAIL: the correction should be measured worse on the held-out samples and dropped:", gb)
    fails += 1
if not line or "NOT kept" not in line[0]:
    print("FAIL: the summary line should say the correction was not kept")
    fails += 1
lg, lgp = layers(gq), layers(gplain)
for conv in sorted(lg):
    if not np.array_equal(lg[conv][3][lg[conv][1]], lgp[conv][3][lgp[conv][1]]):
        print("FAIL: %s: the dropped correction left a bias different from the uncorrected model's" % conv)
        fails += 1
# 7. the fallback redoes bias correction after each layer it returns to float: the
#    corrections after that layer were fitted to the error it had quantized. --target-sqnr
#    200 --max-fallback 1 --bias-correction returns one Conv; every Conv that still reads a
#    quantized activation (a Conv after it reads the float tensor, its weights int8: not a
#    layer bias correction corrects) is then corrected again, so on the fit samples
#    (onnxruntime, optimizations off) each
#    channel's mean error left is what shrinkage leaves of a correction from that state:
#    at most one standard error of the per-sample means (d - shrunk(d) = se^2 / d when
#    |d| > se, d otherwise) plus half a bias step of rounding.
fq, fj = os.path.join(work, "fallback.onnx"), os.path.join(work, "fallback.json")
p = run(["quantize", fp, "-o", fq, "--calib", calib, "--target-sqnr", "200", "--max-fallback", "1",
         "--bias-correction", "--json", fj], want=1)
fb = json.load(open(fj))["fallback"]
back = {x.key: x.value for x in onnx.load(fq).metadata_props}.get("onnxq.fallback.layers", "")
lf = layers(fq)
print("fallback: %s back to float, bias correction redone %s time(s)" % (back, fb.get("bias_corrections_again")))
fmod = onnx.load(fq)
fprod = {o: n.op_type for n in fmod.graph.node for o in n.output}
lf = {k: v for k, v in lf.items() if [fprod.get(n.input[0]) for n in fmod.graph.node if n.name == k] == ["DequantizeLinear"]}
if back not in ("conv1", "conv2", "conv3") or back in lf or not lf or fb.get("bias_corrections_again") != 1:
    print("FAIL: expected one Conv back in float, one reading a quantized activation, bias correction redone once:",
          back, sorted(lf), fb)
    fails += 1
else:
    qf = ort(fq, calib_batch, "disabled", [lf[k][0] for k in sorted(lf) if lf[k][0] != "y"])
    for conv in sorted(lf):
        e, rms = mean_err(fref, qf, conv, lf)
        d = e.mean(axis=0)
        se = np.sqrt(e.var(axis=0, ddof=1) / e.shape[0])
        s = lf[conv][2]
        print("%s after the fallback: mean error left up to %.2f bias steps (one standard error: up to %.2f)"
              % (conv, np.max(np.abs(d) / s), np.max(se / s)))
        if not np.all(np.abs(d) <= se + 0.5 * s + 1e-5 * rms):
            print("FAIL: %s: a channel's mean error after the fallback is over one standard error and half a "
                  "bias step (its correction was not redone)" % conv)
            fails += 1
sys.exit(1 if fails else 0)
