#!/usr/bin/python3
"""`onnxq quantize --mode dynamic` on hand-built models whose right answer is computed here.

Usage: quantize_dynamic.py ONNXQ_EXE WORKDIR

Models (onnx.helper, opset 13):
  main: x [3, 8] -> MatMul(W1 [8, 6])                                   -> y1
        x        -> Gemm(W2 [5, 8], C2 [5], transB=1, alpha=0.75, beta=1.5) -> y2
        x        -> Gemm(W3 [8, 4], C3 [4])                             -> y3
        xc [1, 2, 5, 5] -> Conv(Wc [3, 2, 3, 3], Bc [3], pads 1)        -> yc (only with
                                                                            --op-types ...,Conv)
  sat:  x [1, 2] = [2, 2] -> MatMul(W [[1], [1]]) -> y: the hand-computed case. x quantizes
        to 255, 255 (scale 2/255, zero point 0), an int8 weight to 127, 127 (scale 1/127):
        the exact int32 sum is 2 * 255 * 127 = 64770, y = 4.0; onnxruntime's u8 x s8
        kernels on a CPU without VNNI add the pair in a saturating int16 (vpmaddubsw):
        32767, y = 2.0236. uint8 weights (zero point 128: U8U8) and the pair limit
        (int8 weights on target ort-x86: 64, 64, scale 1/64, sum 32640) give 4.0 on both.
Configurations: --target ort-x86 --weight-dtype uint8, --target ort-x86-vnni (int8 weights),
--target ort-x86 (its default: int8 with the pair limit), --per-tensor, ort-x86 with Conv
(uint8 and the default), and
--weight-asymmetric (uint8 with a zero point per column: MatMulInteger's 1-D b_zero_point).

Checks, for each configuration:
  - the graph: per node DynamicQuantizeLinear -> MatMulInteger/ConvInteger -> Cast ->
    Mul(., Mul(x_scale, W_scale)) [-> Add(., bias)], no float MatMul/Gemm left;
  - the weights: W_q, W_scale, W_zero_point equal an independent numpy quantization
    (symmetric, scale = max|w| / 127 per output column, Gemm: alpha * W transposed, uint8 with
    zero point 128); with the pair limit: every same-sign adjacent pair along K has
    |a| + |b| <= 128 and the squared weight error is at most that of raising the column's
    scale until every pair fits (raised_error); ConvInteger's weights uint8 (zero point 128);
  - the expected output, computed here from the float input: DynamicQuantizeLinear as
    the ONNX spec defines it (float32 scale (max(0, max x) - min(0, min x)) / 255, zero
    point round(-min / scale), ties to even), the integer product of the model's W_q in
    int64, rescaled by float32(x_scale * W_scale), plus beta * C. For int8 weights on a
    CPU without VNNI the product is the one onnxruntime's AVX2 kernels compute (pairs
    of adjacent products summed into saturating int16, then the zero point correction
    - x_zp * sum(W_q)).
  - `onnxq run` equals the exact expectation (its executor computes MatMulInteger
    exactly), and `onnxq run --target avx2` the AVX2 one, bit for bit;
  - onnxruntime-node, graph optimizations on and off, equals the expectation for its CPU
    (ONNXQ_ORT_CPU=haswell: AVX2; else VNNI when /proc/cpuinfo has avx512_vnni or
    avx_vnni), within 2e-6 of the output's largest magnitude: the fused kernel adds the
    bias in its own float order (measured: a few float32 ulps); a saturated pair is off by
    far more;
  - with optimizations on, onnxruntime fused every MatMul/Gemm chain into one
    DynamicQuantizeMatMul (its optimized model, written with optimizedModelFilePath, has
    no MatMulInteger, DynamicQuantizeLinear or Cast left).
Exit 0 = ok, 1 = failure, 77 = onnx/numpy/onnxruntime-node not available.
"""
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

F32 = np.float32
rng = np.random.default_rng(12)
fails = []
sys.stdout.reconfigure(line_buffering=True)  # progress in a log while onnxruntime runs under qemu


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)
    return ok


def init(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def main_model(path):
    W1 = rng.normal(0, 0.5, (8, 6)).astype(F32)
    W2 = rng.normal(0, 0.3, (5, 8)).astype(F32)
    C2 = rng.normal(0, 1, (5,)).astype(F32)
    W3 = rng.normal(0, 0.4, (8, 4)).astype(F32)
    C3 = rng.normal(0, 1, (4,)).astype(F32)
    Wc = rng.normal(0, 0.3, (3, 2, 3, 3)).astype(F32)
    Bc = rng.normal(0, 0.5, (3,)).astype(F32)
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["y1"], name="mm1"),
             helper.make_node("Gemm", ["x", "W2", "C2"], ["y2"], name="gemm2", transB=1, alpha=0.75, beta=1.5),
             helper.make_node("Gemm", ["x", "W3", "C3"], ["y3"], name="gemm3"),
             helper.make_node("Conv", ["xc", "Wc", "Bc"], ["yc"], name="conv", pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "dyn",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8]),
                           helper.make_tensor_value_info("xc", TensorProto.FLOAT, [1, 2, 5, 5])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y1", "y2", "y3", "yc")],
                          [init(k, v) for k, v in (("W1", W1), ("W2", W2), ("C2", C2), ("W3", W3), ("C3", C3),
                                                   ("Wc", Wc), ("Bc", Bc))])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return {"W1": W1, "W2": W2, "C2": C2, "W3": W3, "C3": C3, "Wc": Wc, "Bc": Bc}


def sat_model(path):
    W = np.array([[1.0], [1.0]], F32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], "sat",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])], [init("W", W)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


# ---------------------------------------------------------------- the definitions

def dql(x):
    """DynamicQuantizeLinear (ONNX): uint8, float32 arithmetic, ties to even."""
    mx, mn = max(F32(0), F32(x.max())), min(F32(0), F32(x.min()))
    s = F32(1) if mx == mn else F32((mx - mn) / F32(255))
    zp = int(np.clip(np.rint(F32(F32(0) - mn / s)), 0, 255))
    q = np.clip(np.rint(x.astype(F32) / s) + zp, 0, 255).astype(np.int64)
    return q, s, zp


def qweight(w, dtype, per_channel, asym=False):
    """symmetric weights, one scale per column of a [K, N] weight (or one); asym: uint8
    scale (hi - lo) / 255 over the range widened to 0, zero point -round(lo / scale)"""
    if asym:
        lo = np.minimum(w.min(axis=0), 0).astype(np.float64)
        hi = np.maximum(w.max(axis=0), 0).astype(np.float64)
        s = ((hi - lo) / 255).astype(F32)
        s = np.where(hi > lo, s, F32(1)).astype(F32)
        zp = np.clip(0 - np.rint(lo / s.astype(np.float64)), 0, 255).astype(np.int64)
        q = np.clip(np.rint(w / s) + zp, 0, 255).astype(np.int64)
        return q, s, zp
    t = np.abs(w).max(axis=0) if per_channel else np.abs(w).max()
    s = (t.astype(np.float64) / 127).astype(F32)
    s = np.where(s > 0, s, F32(1)).astype(F32)
    zp = 128 if dtype == "uint8" else 0
    q = np.clip(np.rint(w / s) + zp, 0 if zp else -128, 255 if zp else 127).astype(np.int64)
    return q, s, zp



def raised_error(wa):
    """Squared error of the simple way to make every same-sign pair along K fit in 128
    steps: per column, scale = max(max|w| / 127, max over same-sign pairs (|a| + |b|) / 128),
    round, and where rounding makes a pair 129, the member closer to rounding down loses a
    step. The pair limit must never be worse than this."""
    tot = 0.0
    for col in wa.T.astype(np.float64):
        pairs = [(col[k], col[k + 1]) for k in range(0, len(col) - 1, 2) if col[k] * col[k + 1] > 0]
        s = max(np.abs(col).max() / 127, max((abs(a) + abs(b) for a, b in pairs), default=0) / 128)
        s = float(F32(s)) if s > 0 else 1.0
        q = np.clip(np.rint(col / s), -127, 127)
        for k in range(0, len(col) - 1, 2):
            if q[k] * q[k + 1] > 0 and abs(q[k]) + abs(q[k + 1]) > 128:
                ea, eb = abs(col[k] / s) - abs(q[k]), abs(col[k + 1] / s) - abs(q[k + 1])
                if ea <= eb:
                    q[k] -= np.sign(q[k])
                else:
                    q[k + 1] -= np.sign(q[k + 1])
        tot += float(((q * s - col) ** 2).sum())
    return tot

def int_mm(xq, xz, wq, wz, arith):
    """int32 products of [M, K] x [K, N]: exact, or onnxruntime's AVX2 u8 x s8 arithmetic"""
    if arith == "exact":
        return (xq - xz) @ (wq - wz)
    K = xq.shape[1]
    if K % 2:
        xq = np.concatenate([xq, np.zeros((xq.shape[0], 1), np.int64)], axis=1)
        wq = np.concatenate([wq, np.zeros((1, wq.shape[1]), np.int64)], axis=0)
    acc = np.zeros((xq.shape[0], wq.shape[1]), np.int64)
    for k in range(0, xq.shape[1], 2):
        pair = np.outer(xq[:, k], wq[k]) + np.outer(xq[:, k + 1], wq[k + 1])
        acc += np.clip(pair, -32768, 32767)
    return acc - xz * wq.sum(axis=0)


def im2col(x, kh, kw):
    """[1, C, H, W] (already padded) -> [C*kh*kw, OH*OW], stride 1, (c, kh, kw) order"""
    _, C, H, W = x.shape
    oh, ow = H - kh + 1, W - kw + 1
    cols = np.zeros((C, kh, kw, oh, ow), x.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, i, j] = x[0, :, i:i + oh, j:j + ow]
    return cols.reshape(C * kh * kw, oh * ow)


# ---------------------------------------------------------------- reading the output

def tensors(m):
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


def chain_of(m, out):
    """the nodes from the DynamicQuantizeLinear to `out`, checked for the fused form"""
    prod = {o: n for n in m.graph.node for o in n.output}
    n = prod[out]
    bias = None
    if n.op_type == "Add":
        bias = n.input[1]
        n = prod[n.input[0]]
    assert n.op_type == "Mul", f"{out}: {n.op_type}"
    cast, smul = prod[n.input[0]], prod[n.input[1]]
    assert cast.op_type == "Cast" and smul.op_type == "Mul", f"{out}: {cast.op_type} {smul.op_type}"
    integer = prod[cast.input[0]]
    dq = prod[integer.input[0]]
    assert dq.op_type == "DynamicQuantizeLinear" and integer.input[0] == dq.output[0]
    assert integer.input[2] == dq.output[2] and smul.input[0] == dq.output[1]
    return integer, smul.input[1], bias


def run_onnxq(exe, model, feeds, outdir, target=None):
    args = [exe, "run", model, "--output-dir", outdir, "--npy"] + (["--target", target] if target else [])
    for k, v in feeds.items():
        args += ["--input", f"{k}={v}"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"onnxq run {model}: {r.stderr.strip()}")


def run_ort(model, feeds, outdir, level, optimized=None):
    js = os.path.join(os.path.dirname(os.path.abspath(__file__)), "quantize_ort.js")
    env = dict(os.environ, ONNXQ_ORT_OPT=level)
    if optimized:
        env["ONNXQ_ORT_OPTIMIZED"] = optimized
    r = subprocess.run(node_cmd() + [js, model, outdir] + [f"{k}={v}" for k, v in feeds.items()],
                       capture_output=True, text=True, env=env)
    if r.returncode == 77:
        sys.exit(77)
    if r.returncode:
        raise RuntimeError(f"onnxruntime {model}: {r.stderr.strip()}")


def host_arith():
    if os.environ.get("ONNXQ_ORT_CPU", "") in ("haswell", "Haswell"):
        return "avx2", "ONNXQ_ORT_CPU=haswell (qemu)"
    flags = open("/proc/cpuinfo").read()
    for f in ("avx512_vnni", "avx_vnni"):
        if f" {f}" in flags:
            return "exact", f"/proc/cpuinfo has {f}"
    return "avx2", "/proc/cpuinfo: no VNNI"


def main():
    exe, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    if not find_ort():
        sys.exit(77)
    arith, why = host_arith()
    print(f"onnxruntime's CPU arithmetic for u8 x s8: {arith} ({why})")
    fm, sm = os.path.join(work, "main.onnx"), os.path.join(work, "sat.onnx")
    w = main_model(fm)
    sat_model(sm)
    x = rng.normal(0.3, 1.0, (3, 8)).astype(F32)
    xc = rng.uniform(-1, 2, (1, 2, 5, 5)).astype(F32)
    xs = np.array([[2.0, 2.0]], F32)
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "xc.npy"), xc)
    np.save(os.path.join(work, "xs.npy"), xs)
    configs = [("u8", ["--target", "ort-x86", "--weight-dtype", "uint8"], "uint8", True, False),
               ("s8", ["--target", "ort-x86-vnni"], "int8", True, False),
               ("s8pl", ["--target", "ort-x86"], "int8", True, True),
               ("u8pt", ["--target", "ort-x86", "--weight-dtype", "uint8", "--per-tensor"], "uint8", False, False),
               ("u8conv", ["--target", "ort-x86", "--weight-dtype", "uint8", "--op-types", "MatMul,Gemm,Conv"],
                "uint8", True, False),
               ("s8plconv", ["--target", "ort-x86", "--op-types", "MatMul,Gemm,Conv"], "int8", True, True),
               ("u8asym", ["--target", "ort-x86", "--weight-dtype", "uint8", "--weight-asymmetric"], "uint8", True,
                False)]
    for name, opts, dtype, per_channel, pair_limit in configs:
        asym = "--weight-asymmetric" in opts  # a zero point per column (MatMulInteger's 1-D b_zero_point)
        conv = "Conv" in " ".join(opts)
        for model, feeds in ((fm, {"x": "x.npy", "xc": "xc.npy"}), (sm, {"x": "xs.npy"})):
            tag = f"{name}/{os.path.basename(model)[:-5]}"
            qm = os.path.join(work, f"{name}_{os.path.basename(model)}")
            r = subprocess.run([exe, "quantize", "--mode", "dynamic", model, "-o", qm, "--quiet"] + opts,
                               capture_output=True, text=True)
            if not check(r.returncode == 0, f"{tag}: onnxq quantize --mode dynamic {' '.join(opts)} {r.stderr.strip()}"):
                continue
            q = onnx.load(qm)
            T = tensors(q)
            left = [n.op_type for n in q.graph.node if n.op_type in ("MatMul", "Gemm") or (conv and n.op_type == "Conv")]
            check(not left, f"{tag}: no float MatMul/Gemm{'/Conv' if conv else ''} left ({left})")
            feeds_abs = {k: os.path.join(work, v) for k, v in feeds.items()}
            X = {"x": np.load(feeds_abs["x"])}
            if "xc" in feeds:
                X["xc"] = np.load(feeds_abs["xc"])
            if model == fm:
                cases = [("y1", "x", w["W1"], None, 1.0), ("y2", "x", w["W2"].T, w["C2"] * F32(1.5), 0.75),
                         ("y3", "x", w["W3"], w["C3"], 1.0)]
                if conv:
                    cases.append(("yc", "xc", w["Wc"].reshape(3, -1).T, w["Bc"], 1.0))
            else:
                cases = [("y", "x", np.array([[1.0], [1.0]], F32), None, 1.0)]
            want = {"exact": {}, "avx2": {}}
            for out, xin, wf, bias, alpha in cases:
                try:
                    integer, sname, bname = chain_of(q, out)
                except (AssertionError, KeyError) as e:
                    check(False, f"{tag} {out}: not the DynamicQuantizeLinear/Integer/Cast/Mul chain: {e}")
                    continue
                wq, ws, wz = T[integer.input[1]].astype(np.int64), T[sname], T[integer.input[3]].astype(np.int64)
                if out == "yc":
                    wq = wq.reshape(3, -1).T
                    ws = ws.reshape(-1)
                wa = (F32(alpha) * wf).astype(F32)
                eq, es, ez = qweight(wa, dtype, per_channel, asym)
                zp_ok = np.array_equal(np.broadcast_to(wz, np.shape(ez)), ez) and str(T[integer.input[3]].dtype) == dtype
                if asym:  # one zero point per column, or one when they are all equal
                    zp_ok = zp_ok and (wz.shape == (wq.shape[1],) or (wz.shape == () and np.unique(ez).size == 1))
                if pair_limit and out == "yc":  # ConvInteger: uint8 weights, zero point 128
                    eq, es, ez = qweight(wa, "uint8", per_channel, asym)
                    zp_ok = np.array_equal(np.broadcast_to(wz, np.shape(ez)), ez) and str(T[integer.input[3]].dtype) == "uint8"
                    check(np.array_equal(wq, eq) and np.array_equal(ws.reshape(-1), np.ravel(es)) and zp_ok,
                          f"{tag} {out}: pair limit: ConvInteger's weight is numpy's symmetric uint8 quantization")
                elif pair_limit:
                    d = wq.astype(np.int64)
                    same = np.sign(d[0:-1:2]) == np.sign(d[1::2])
                    worst = int((np.abs(d[0:-1:2]) + np.abs(d[1::2]))[same].max(initial=0))
                    err = float((((wq - wz) * ws - wa) ** 2).sum())
                    ref = raised_error(wa)
                    check(worst <= 128 and err <= ref * (1 + 1e-5) + 1e-12 and zp_ok,
                          f"{tag} {out}: pair limit: largest same-sign pair {worst} (<= 128), squared error "
                          f"{err:.3g} <= {ref:.3g} (the scale raised until every pair fits)")
                else:
                    check(np.array_equal(wq, eq) and np.array_equal(ws.reshape(-1), np.ravel(es)) and zp_ok,
                          f"{tag} {out}: weight {integer.input[1]} = numpy's {'asymmetric' if asym else 'symmetric'} {dtype} "
                          f"{'per column' if per_channel else 'per tensor'} quantization of "
                          f"{'alpha * W^T' if alpha != 1.0 else 'W'}")
                b = None if bname is None else T.get(bname)
                if bias is not None:
                    check(b is not None and np.array_equal(np.ravel(b), np.ravel(bias)),
                          f"{tag} {out}: bias input is beta * C")
                if out == "yc":  # im2col of the quantized input, padded with its zero point
                    xq, xsc, xz = dql(X["xc"])
                    xqp = np.pad(xq[0], ((0, 0), (1, 1), (1, 1)), constant_values=xz)[None]
                    acc = int_mm(im2col(xqp, 3, 3).T, xz, wq, int(np.ravel(wz)[0]), "exact")  # U8U8: exact
                    y = (acc.astype(F32) * (F32(xsc) * ws.astype(F32)) + bias.astype(F32)).astype(F32)
                    want["exact"][out] = want["avx2"][out] = y.T.reshape(1, 3, 5, 5)
                    continue
                xq, xsc, xz = dql(X[xin])
                for a in ("exact", "avx2"):
                    # uint8 weights run U8U8, which widens to 16 bits: exact on every CPU
                    acc = int_mm(xq, xz, wq, int(np.ravel(wz)[0]) if wz.size == 1 else wz[None, :],
                                 "exact" if dtype == "uint8" else a)
                    y = acc.astype(F32) * (F32(xsc) * ws.astype(F32))
                    if bias is not None:
                        y = y + bias.astype(F32)
                    want[a][out] = y.astype(F32)
            if model == sm and "y" in want["exact"]:
                e, a = float(want["exact"]["y"][0, 0]), float(want["avx2"]["y"][0, 0])
                if dtype == "int8" and not pair_limit:
                    check(abs(e - 4.0) < 1e-5 and abs(a - 32767 * F32(F32(2) / F32(255)) * F32(1 / 127)) < 1e-5,
                          f"{tag}: hand-computed: exact {e:.4f} (4.0), AVX2 {a:.4f} (32767 * 2/255 / 127 = 2.0236)")
                else:
                    check(abs(e - 4.0) < 1e-5 and e == a, f"{tag}: hand-computed: {e:.4f} on every CPU (4.0)")
            # the executors
            od = os.path.join(work, f"{name}_{os.path.basename(model)[:-5]}")
            try:
                run_onnxq(exe, qm, feeds_abs, od + "_onnxq")
                run_onnxq(exe, qm, feeds_abs, od + "_onnxq_avx2", "avx2")
                run_ort(qm, feeds_abs, od + "_ort_on", "all", od + "_ort_opt.onnx")
                run_ort(qm, feeds_abs, od + "_ort_off", "disabled")
            except RuntimeError as e:
                check(False, f"{tag}: {e}")
                continue
            for out in want["exact"]:
                y = np.load(os.path.join(od + "_onnxq", out + ".npy"))
                check(np.array_equal(y.view(np.uint32), want["exact"][out].view(np.uint32)),
                      f"{tag} {out}: onnxq run == exact expectation bit for bit (max |diff| "
                      f"{float(np.abs(y - want['exact'][out]).max()):.3g})")
                y = np.load(os.path.join(od + "_onnxq_avx2", out + ".npy"))
                check(np.array_equal(y.view(np.uint32), want["avx2"][out].view(np.uint32)),
                      f"{tag} {out}: onnxq run --target avx2 == AVX2 expectation bit for bit (max |diff| "
                      f"{float(np.abs(y - want['avx2'][out]).max()):.3g})")
                # ConvInteger with uint8 weights runs U8U8: exact on every CPU
                exp = want[arith][out]
                tol = 2e-6 * float(np.abs(exp).max())
                for lv in ("on", "off"):
                    y = np.load(os.path.join(od + f"_ort_{lv}", out + ".npy"))
                    d = float(np.abs(y - exp).max())
                    check(d <= tol, f"{tag} {out}: onnxruntime (optimizations {lv}) == {arith} expectation "
                                    f"(max |diff| {d:.3g} <= {tol:.3g})")
            opt = onnx.load(od + "_ort_opt.onnx")
            ops = [n.op_type for n in opt.graph.node]
            nmm = len([c for c in want["exact"] if c != "yc"])
            nconv = 1 if conv and model == fm else 0  # ConvInteger's chain stays as it is
            fused = ops.count("DynamicQuantizeMatMul") + ops.count("MatMulIntegerToFloat")
            left = [o for o in ops if o == "MatMulInteger"] + ["Cast"] * (ops.count("Cast") - nconv)
            ndq = ops.count("DynamicQuantizeLinear") - nconv
            # main: x feeds three chains (one DynamicQuantizeLinear, a MatMulIntegerToFloat
            # each); sat: one chain, fused with its DynamicQuantizeLinear
            want_dq, want_dqmm = (1, 0) if model == fm else (0, 1)
            check(fused == nmm and not left and ndq == want_dq and ops.count("DynamicQuantizeMatMul") == want_dqmm,
                  f"{tag}: onnxruntime fused the {nmm} chain(s): {ops.count('DynamicQuantizeMatMul')} "
                  f"DynamicQuantizeMatMul (want {want_dqmm}), {ops.count('MatMulIntegerToFloat')} "
                  f"MatMulIntegerToFloat, {ndq} DynamicQuantizeLinear (want {want_dq}), unfused: {left}")
    print(f"quantize_dynamic: {'FAILED: ' + str(len(fails)) if fails else 'all ok'}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
