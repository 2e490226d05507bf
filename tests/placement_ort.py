#!/usr/bin/env python3
"""What onnxruntime makes of a quantized model (placement by value, docs/passes/insert-qdq.md).

  python placement_ort.py FLOAT.onnx QUANT.onnx TENSORS_DIR [--max N] [--optimized OUT.onnx]
        [--slice OUTPUT:AXIS:START:END ...] [--json]

Runs FLOAT and QUANT in onnxruntime (graph optimizations on, 1 thread) on every
TENSORS_DIR/NNN/<input>.npy (or TENSORS_DIR/NNN/x.npy for a one-input model), and prints

  - the node types of onnxruntime's optimized QUANT graph: integer kernels (QLinear*, QGemm,
    MatMulIntegerToFloat, ...) and the QuantizeLinear / DequantizeLinear left over;
  - the SQNR of each output over all samples together, 20 log10(||f|| / ||f - q||), and of
    each --slice (a part of an output along AXIS, [START, END)), e.g. the class scores of a
    detection head.
Needs onnxruntime, onnx and numpy (bash .ci/venv.sh)."""
import argparse
import collections
import json
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort


def session(path, optimized=None):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    if optimized:
        so.optimized_model_filepath = optimized
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def sqnr(f, e):
    return float("inf") if e == 0 else 10 * np.log10(f / e)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("float_model")
    ap.add_argument("quant_model")
    ap.add_argument("tensors")
    ap.add_argument("--max", type=int, default=1 << 30)
    ap.add_argument("--optimized")
    ap.add_argument("--slice", action="append", default=[])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    opt = a.optimized or os.path.join(tempfile.mkdtemp(), "opt.onnx")
    fs, qs = session(a.float_model), session(a.quant_model, opt)
    g = onnx.load(opt).graph
    ops = collections.Counter(n.op_type for n in g.node)
    integer = {k: v for k, v in ops.items()
               if k.startswith("QLinear") or k in ("QGemm", "MatMulIntegerToFloat", "DynamicQuantizeMatMul",
                                                   "ConvInteger", "MatMulInteger", "QAttention")}
    names = [i.name for i in fs.get_inputs()]
    samples = sorted(d for d in os.listdir(a.tensors) if os.path.isdir(os.path.join(a.tensors, d)))[: a.max]
    outs = [o.name for o in fs.get_outputs()]
    slices = []
    for s in a.slice:
        o, ax, b, e = s.split(":")
        slices.append((s, o, int(ax), int(b), int(e)))
    acc = collections.defaultdict(lambda: [0.0, 0.0])
    for d in samples:
        feed = {}
        for n in names:
            p = os.path.join(a.tensors, d, n + ".npy")
            if not os.path.exists(p) and len(names) == 1:
                p = os.path.join(a.tensors, d, "x.npy")
            feed[n] = np.load(p)
        fo = dict(zip(outs, fs.run(None, feed)))
        qo = dict(zip(outs, qs.run(outs, feed)))
        for o in outs:
            f, q = fo[o].astype(np.float64), qo[o].astype(np.float64)
            acc[o][0] += float((f * f).sum())
            acc[o][1] += float(((f - q) ** 2).sum())
        for s, o, ax, b, e in slices:
            f = np.take(fo[o].astype(np.float64), range(b, e), axis=ax)
            q = np.take(qo[o].astype(np.float64), range(b, e), axis=ax)
            acc[s][0] += float((f * f).sum())
            acc[s][1] += float(((f - q) ** 2).sum())
    res = {
        "samples": len(samples),
        "integer_kernels": dict(sorted(integer.items())),
        "integer_total": sum(integer.values()),
        "quantize_linear": ops.get("QuantizeLinear", 0),
        "dequantize_linear": ops.get("DequantizeLinear", 0),
        "sqnr_db": {k: round(sqnr(*v), 2) for k, v in acc.items()},
    }
    if a.json:
        print(json.dumps(res))
    else:
        print("%s: %d samples" % (a.quant_model, len(samples)))
        print("  integer kernels (%d): %s" % (res["integer_total"],
                                            ", ".join("%s %d" % kv for kv in res["integer_kernels"].items())))
        print("  QuantizeLinear %d, DequantizeLinear %d left" % (res["quantize_linear"], res["dequantize_linear"]))
        for k, v in res["sqnr_db"].items():
            print("  SQNR %-40s %7.2f dB" % (k, v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
