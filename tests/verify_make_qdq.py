#!/usr/bin/python3
"""Make a QDQ model from a float model, following docs/qdq-conventions (the names
`onnxq verify` matches), for testing `onnxq verify` independently of `onnxq quantize`.

    verify_make_qdq.py FLOAT OUT --dump DIR... [--input NAME=FILE.npy...]
                       [--shrink TENSOR=F] [--per-tensor-weights]

Ranges: min/max over the tensors in the --dump folders (`onnxq run --dump-all DIR`
output, one folder per sample) and the --input files for graph inputs.
Activations uint8 asymmetric per tensor; weights of Conv/Gemm/MatMul int8 symmetric
per output channel; Conv/Gemm bias int32 with scale s_in * s_w, zero point 0.
--shrink T=F multiplies the range of activation T by F (a layer made bad on purpose).
"""
import argparse
import glob
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto


def qparams_u8(lo, hi):
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = np.float32((hi - lo) / 255.0) if hi > lo else np.float32(1.0)
    zp = int(np.clip(np.round(-lo / scale), 0, 255))
    return scale, zp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("float_model")
    ap.add_argument("out")
    ap.add_argument("--dump", action="append", default=[])
    ap.add_argument("--input", action="append", default=[])
    ap.add_argument("--shrink", action="append", default=[])
    ap.add_argument("--per-tensor-weights", action="store_true")
    ap.add_argument("--no-input-q", action="store_true")
    a = ap.parse_args()
    m = onnx.load(a.float_model)
    g = m.graph
    ranges = {}

    def see(name, arr):
        if arr.dtype != np.float32 or arr.size == 0:
            return
        lo, hi = float(arr.min()), float(arr.max())
        if name in ranges:
            lo, hi = min(lo, ranges[name][0]), max(hi, ranges[name][1])
        ranges[name] = (lo, hi)

    for d in a.dump:
        for f in glob.glob(os.path.join(d, "*.pb")):
            t = onnx.TensorProto()
            with open(f, "rb") as fh:
                t.ParseFromString(fh.read())
            see(t.name, numpy_helper.to_array(t))
    for kv in a.input:
        name, f = kv.split("=", 1)
        see(name, np.load(f))
    for kv in a.shrink:
        name, f = kv.split("=", 1)
        lo, hi = ranges[name]
        ranges[name] = (lo * float(f), hi * float(f))

    # activations: outputs of computing nodes (not Constant) and graph inputs
    produced = {o for n in g.node if n.op_type != "Constant" for o in n.output}
    produced |= {i.name for i in g.input}
    ranges = {k: v for k, v in ranges.items() if k in produced}
    inits = {t.name: t for t in g.initializer}
    new_inits, new_nodes = [], []
    act_scale = {}
    for name, (lo, hi) in ranges.items():
        act_scale[name] = qparams_u8(lo, hi)

    # weights and biases
    wq = {}  # weight name -> per-channel scales
    for n in g.node:
        if n.op_type not in ("Conv", "Gemm", "MatMul") or len(n.input) < 2:
            continue
        wn = n.input[1]
        if wn not in inits or wn in wq:
            continue
        w = numpy_helper.to_array(inits[wn]).astype(np.float32)
        if n.op_type == "Conv":
            axis = 0
        elif n.op_type == "Gemm":
            tb = [x.i for x in n.attribute if x.name == "transB"]
            axis = 0 if tb and tb[0] else 1
        else:
            axis = w.ndim - 1
        if a.per_tensor_weights:
            s = np.array(max(np.abs(w).max(), 1e-12) / 127.0, dtype=np.float32)
            q = np.clip(np.round(w / s), -127, 127).astype(np.int8)
            zp = np.array(0, dtype=np.int8)
            attrs = {}
        else:
            red = tuple(i for i in range(w.ndim) if i != axis)
            s = (np.maximum(np.abs(w).max(axis=red), 1e-12) / 127.0).astype(np.float32)
            shp = [1] * w.ndim
            shp[axis] = -1
            q = np.clip(np.round(w / s.reshape(shp)), -127, 127).astype(np.int8)
            zp = np.zeros(s.shape, dtype=np.int8)
            attrs = {"axis": axis}
        new_inits += [numpy_helper.from_array(q, wn + "_quantized"),
                      numpy_helper.from_array(s, wn + "_scale"),
                      numpy_helper.from_array(zp, wn + "_zero_point")]
        new_nodes.append(helper.make_node("DequantizeLinear",
                                          [wn + "_quantized", wn + "_scale", wn + "_zero_point"],
                                          [wn], name=wn + "_DequantizeLinear", **attrs))
        wq[wn] = (s, attrs)
        inits.pop(wn)
        # bias
        if n.op_type in ("Conv", "Gemm") and len(n.input) > 2 and n.input[2] in inits \
                and n.input[0] in act_scale:
            bn = n.input[2]
            b = numpy_helper.to_array(inits[bn]).astype(np.float32)
            bs = (np.float32(act_scale[n.input[0]][0]) * s).astype(np.float32)
            if bs.ndim == 0:
                bs = np.full(b.shape, bs, dtype=np.float32)
            bq = np.round(b / bs).astype(np.int32)
            new_inits += [numpy_helper.from_array(bq, bn + "_quantized"),
                          numpy_helper.from_array(bs, bn + "_scale"),
                          numpy_helper.from_array(np.zeros(bs.shape, np.int32), bn + "_zero_point")]
            new_nodes.append(helper.make_node("DequantizeLinear",
                                              [bn + "_quantized", bn + "_scale", bn + "_zero_point"],
                                              [bn], name=bn + "_DequantizeLinear", axis=0))
            inits.pop(bn)

    graph_inputs = {i.name for i in g.input}
    nodes = []
    for n in g.node:
        outs = list(n.output)
        for k, o in enumerate(outs):
            if o in act_scale and o not in graph_inputs and n.op_type not in ("Shape", "Constant"):
                n.output[k] = o + "_prequant"
        nodes.append(n)
    qdq = []
    for name, (s, zp) in act_scale.items():
        new_inits += [numpy_helper.from_array(np.array(s, np.float32), name + "_scale"),
                      numpy_helper.from_array(np.array(zp, np.uint8), name + "_zero_point")]
        if name in graph_inputs:
            if a.no_input_q:
                continue
            src, dst = name, name + "_dequant"
            for n in nodes:
                for k, i in enumerate(n.input):
                    if i == name:
                        n.input[k] = dst
        else:
            src, dst = name + "_prequant", name
        qdq.append(helper.make_node("QuantizeLinear", [src, name + "_scale", name + "_zero_point"],
                                    [name + "_quantized"], name=name + "_QuantizeLinear"))
        qdq.append(helper.make_node("DequantizeLinear",
                                    [name + "_quantized", name + "_scale", name + "_zero_point"],
                                    [dst], name=name + "_DequantizeLinear"))
    # order: weight DQs, then each Q/DQ right after its producer
    prod = {}
    for i, n in enumerate(nodes):
        for o in n.output:
            prod[o] = i
    after = {}
    head = list(new_nodes)
    for i in range(0, len(qdq), 2):
        src = qdq[i].input[0]
        if src in prod:
            after.setdefault(prod[src], []).extend(qdq[i:i + 2])
        else:
            head.extend(qdq[i:i + 2])
    ordered = list(head)
    for i, n in enumerate(nodes):
        ordered.append(n)
        ordered.extend(after.get(i, []))
    del g.node[:]
    g.node.extend(ordered)
    del g.initializer[:]
    g.initializer.extend(list(inits.values()) + new_inits)
    del g.value_info[:]
    if max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")) < 13:
        sys.exit("per-axis QDQ needs opset >= 13; upgrade the model first")
    onnx.checker.check_model(m)
    onnx.save(m, a.out)
    print("%s: %d weights, %d activations quantized" % (a.out, len(wq), len(act_scale)))


if __name__ == "__main__":
    main()
