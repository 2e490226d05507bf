#!/usr/bin/python3
"""Independent check of `onnxq verify --json` numbers with numpy.

    verify_check.py REPORT.json FLOAT_DUMPS QUANT_DUMPS [--iso-gemm TENSOR QMODEL]

FLOAT_DUMPS / QUANT_DUMPS hold one folder per sample with every tensor of the float /
quantized model as <name>.pb (`onnxq run --dump-all` plus the outputs), in the same
sample order. Recomputes, per output, SQNR, cosine, max and mean |err| and top-1
agreement, and per layer the accumulated SQNR; with --iso-gemm, the isolated SQNR of
the Gemm producing TENSOR: QDQ(Gemm(QDQ(float input), DQ(W), DQ(B))) from the
quantized model's initializers, in numpy.
"""
import json
import math
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def load(d, name):
    p = os.path.join(d, name.replace("/", "_") + ".pb")
    if not os.path.exists(p):
        return None
    t = onnx.TensorProto()
    with open(p, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t).astype(np.float64)


class Acc:
    def __init__(self):
        self.xx = self.dd = self.xy = self.yy = self.ad = 0.0
        self.mx = 0.0
        self.n = 0

    def add(self, x, y):
        x = x.ravel(); y = y.ravel()
        d = x - y
        self.xx += float(x @ x); self.yy += float(y @ y); self.xy += float(x @ y)
        self.dd += float(d @ d); self.ad += float(np.abs(d).sum())
        self.mx = max(self.mx, float(np.abs(d).max()) if d.size else 0.0)
        self.n += x.size

    def sqnr(self):
        if self.dd == 0:
            return math.inf
        return 10 * math.log10(self.xx / self.dd)


def num(v):
    if isinstance(v, str):
        return {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}[v]
    return v


def close(a, b, rel=1e-6, ab=1e-9, what=""):
    a, b = num(a), num(b)
    ok = (a == b) or abs(a - b) <= ab + rel * abs(b)
    if not ok:
        print("MISMATCH %s: report %r, numpy %r" % (what, a, b))
    return ok


def qdq(x, s, zp, lo=0, hi=255):
    q = np.clip(np.round(np.float32(x) / np.float32(s)) + zp, lo, hi)  # np.round: half to even
    return ((q - zp) * np.float32(s)).astype(np.float32)


def main():
    rep = json.load(open(sys.argv[1]))
    fd, qd = sys.argv[2], sys.argv[3]
    samples = sorted(os.listdir(fd))
    assert samples == sorted(os.listdir(qd)) and len(samples) == rep["samples"], "sample sets"
    ok = True
    for out in rep["outputs"]:
        a = Acc(); top1 = 0; rows = 0
        for s in samples:
            x = load(os.path.join(fd, s), out["name"]); y = load(os.path.join(qd, s), out["name"])
            a.add(x, y)
            if x.ndim == 2 and x.shape[1] >= 2:
                top1 += int((x.argmax(1) == y.argmax(1)).sum()); rows += x.shape[0]
        e = out["error"]
        ok &= close(e["sqnr_db"], a.sqnr(), what=out["name"] + " sqnr")
        cos = a.xy / math.sqrt(a.xx * a.yy)
        ok &= close(e["cosine"], cos, what=out["name"] + " cosine")
        ok &= close(e["max_abs_err"], a.mx, what=out["name"] + " max")
        ok &= close(e["mean_abs_err"], a.ad / a.n, what=out["name"] + " mean")
        if out.get("class_scores"):
            ok &= close(out["top1_agreement"], top1 / rows, what=out["name"] + " top1")
    checked = 0
    for L in rep["layers"]:
        if L["op_type"] == "input":
            continue
        a = Acc()
        for s in samples:
            x = load(os.path.join(fd, s), L["tensor"]); y = load(os.path.join(qd, s), L["tensor"])
            if x is None or y is None:
                break
            a.add(x, y)
        else:
            ok &= close(L["accumulated"]["sqnr_db"], a.sqnr(), what=L["tensor"] + " accumulated")
            checked += 1
    if "--iso-gemm" in sys.argv:
        i = sys.argv.index("--iso-gemm")
        tname, qpath = sys.argv[i + 1], sys.argv[i + 2]
        m = onnx.load(qpath)
        init = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
        node = [n for n in m.graph.node if n.op_type == "Gemm" and n.output[0] == tname + "_prequant"][0]
        tb = [x.i for x in node.attribute if x.name == "transB"]
        xin, wn, bn = node.input

        def dq(name, axis_len_shape=None):
            q = init[name + "_quantized"].astype(np.float64)
            s = init[name + "_scale"].astype(np.float32); z = init[name + "_zero_point"].astype(np.float64)
            if s.ndim == 1 and q.ndim == 2:
                ax = [x.i for x in [n for n in m.graph.node if n.output[0] == name][0].attribute if x.name == "axis"]
                ax = ax[0] if ax else 1
                shp = [1, 1]; shp[ax] = -1
                s = s.reshape(shp); z = z.reshape(shp)
            return ((q - z) * s).astype(np.float32)
        W = dq(wn); B = dq(bn)
        a = Acc()
        for s in samples:
            xf = load(os.path.join(fd, s), xin).astype(np.float32)
            xq = qdq(xf, init[xin + "_scale"], int(init[xin + "_zero_point"]))
            y = (xq.astype(np.float64) @ (W.T if tb and tb[0] else W).astype(np.float64) + B).astype(np.float32)
            y = qdq(y, init[tname + "_scale"], int(init[tname + "_zero_point"]))
            a.add(load(os.path.join(fd, s), tname), y.astype(np.float64))
        L = [L for L in rep["layers"] if L["tensor"] == tname][0]
        # the Gemm is summed in float32 by onnxq and in float64 here: allow a little
        ok &= close(L["isolated"]["sqnr_db"], a.sqnr(), rel=2e-3, what=tname + " isolated")
        print("isolated %s: report %.4f dB, numpy %.4f dB" % (tname, num(L["isolated"]["sqnr_db"]), a.sqnr()))
    print("checked %d outputs, %d layers: %s" % (len(rep["outputs"]), checked, "ok" if ok else "FAILED"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
