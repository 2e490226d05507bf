#!/usr/bin/env python3
"""int8 embedding tables (passes/quantize_gather.c) end to end, in onnxruntime.

Usage: quantize_gather.py ONNXQ_EXE WORKDIR   (the venv python: onnx, numpy, onnxruntime)

Model (onnx.helper, opset 13): input_ids int64 [1, L] -> Gather(table [1000, 64], random
rows of different ranges) -> e -> MatMul(W [64, 16]) -> Add(b) -> y; outputs e and y.
For `onnxq quantize --mode dynamic` and static mode (--calib on 4 id samples), default
--embedding-dtype int8 and float:
  - the graph: the table is gone, an int8 [1000, 64] table and [1000, 1] float scales read
    by two Gathers, Cast, Mul; the file is > 3.5x smaller than with --embedding-dtype float
    minus the MatMul weight's share (the table is 94 % of the float file);
  - the scales equal numpy's max |row| / 127, the int8 values round(row / scale);
  - e (the Mul's output: in static mode e then goes through its activation Q/DQ) in onnxruntime (optimizations on and off, 1 thread) equals numpy's int8 * scale
    bit for bit and the float table within half a step per row; `onnxq run` gives the same
    e bit for bit;
  - --embedding-dtype float leaves the table float (dynamic: e exact).
Exit 0 = ok, 1 = failure, 77 = a module missing.
"""
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    print("SKIP:", e)
    sys.exit(77)

exe, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
V, D, H = 1000, 64, 16
rng = np.random.default_rng(7)
table = (rng.standard_normal((V, D)) * rng.uniform(0.05, 2.0, (V, 1))).astype(np.float32)
table[3] = 0
table[5, 7] = 40.0
W = (rng.standard_normal((D, H)) * 0.1).astype(np.float32)
b = (rng.standard_normal(H) * 0.1).astype(np.float32)
g = helper.make_graph(
    [helper.make_node("Gather", ["table", "input_ids"], ["e"], name="word_embeddings", axis=0),
     helper.make_node("MatMul", ["e", "W"], ["mm"], name="proj"),
     helper.make_node("Add", ["mm", "b"], ["y"], name="proj_bias")],
    "emb", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "L"])],
    [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, "L", D]),
     helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "L", H])],
    [numpy_helper.from_array(table, "table"), numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
model = os.path.join(work, "emb.onnx")
onnx.save(m, model)
calib = os.path.join(work, "calib")
for i in range(4):
    d = os.path.join(calib, "s%d" % i)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "input_ids.npy"), rng.integers(0, V, (1, 12)).astype(np.int64))
ids = np.array([[0, 3, 5, 999, 17, 5, 250, 3]], np.int64)
ids_path = os.path.join(work, "ids.npy")
np.save(ids_path, ids)

fails = 0


def bad(msg):
    global fails
    fails += 1
    print("FAIL:", msg)


def ort_run(path, level, out="e"):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = level
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return s.run([out], {"input_ids": ids})[0]


def onnxq_run(path, outdir, out="e"):
    r = subprocess.run([exe, "run", path, "--output-dir", outdir, "--npy", "--input", "input_ids=" + ids_path],
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr)
    return np.load(os.path.join(outdir, "".join(c if c.isalnum() or c in "._-" else "_" for c in out) + ".npy"))


def rows_output(qm, path):
    """The output of the Mul after Cast (the dequantized rows) as a graph output (in static
    mode e itself goes through the activation's Q/DQ before the MatMul): its name."""
    prod = {o: n for n in qm.graph.node for o in n.output}
    for n in qm.graph.node:
        if n.op_type == "Mul" and any(prod.get(i) is not None and prod[i].op_type == "Cast" for i in n.input):
            if n.output[0] not in [o.name for o in qm.graph.output]:
                qm.graph.output.append(helper.make_tensor_value_info(n.output[0], TensorProto.FLOAT, None))
            onnx.save(qm, path)
            return n.output[0]
    return None


# the answer, from numpy
mx = np.abs(table).max(1)
scale = np.where(mx > 0, mx / np.float32(127), np.float32(1)).astype(np.float32)
q_want = np.clip(np.rint(table / scale[:, None]), -127, 127).astype(np.int8)
e_want = (q_want[ids[0]].astype(np.float32) * scale[ids[0]][:, None])[None]
half = 0.5 * scale[ids[0]][None, :, None]

for mode, extra in (("dynamic", ["--mode", "dynamic"]), ("static", ["--calib", calib])):
    sizes = {}
    for emb in ("int8", "float"):
        q = os.path.join(work, "%s-%s.onnx" % (mode, emb))
        r = subprocess.run([exe, "quantize", model, "-o", q, "--quiet", "--embedding-dtype", emb] + extra,
                           capture_output=True, text=True)
        if r.returncode:
            bad("%s %s: quantize exit %d: %s" % (mode, emb, r.returncode, r.stderr))
            continue
        sizes[emb] = os.path.getsize(q)
        qm = onnx.load(q)
        inits = {i.name: numpy_helper.to_array(i) for i in qm.graph.initializer}
        if emb == "float":
            if "table" not in inits:
                bad("%s float: table not kept" % mode)
            e = ort_run(q, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
            if mode == "dynamic" and not np.array_equal(e, table[ids[0]][None]):
                bad("%s float: e differs from the table" % mode)
            continue
        big = [k for k, v in inits.items() if v.dtype == np.float32 and v.size >= V * D]
        i8 = [k for k, v in inits.items() if v.dtype == np.int8 and v.shape == (V, D)]
        sc = [k for k, v in inits.items() if v.dtype == np.float32 and v.shape == (V, 1)]
        if big or len(i8) != 1 or len(sc) != 1:
            bad("%s: initializers float %s int8 %s scales %s" % (mode, big, i8, sc))
            continue
        if not np.array_equal(inits[i8[0]], q_want):
            bad("%s: int8 table differs from numpy's (%d values)" % (mode, int((inits[i8[0]] != q_want).sum())))
        if not np.array_equal(inits[sc[0]][:, 0], scale):
            bad("%s: scales differ from max|row|/127" % mode)
        ops = [n.op_type for n in qm.graph.node]
        if ops.count("Gather") != 2 or "Cast" not in ops:
            bad("%s: graph %s" % (mode, ops))
        f0 = fails
        qr = q[:-5] + "-rows.onnx"
        out = rows_output(qm, qr)
        if out is None:
            bad("%s: no Cast -> Mul" % mode)
            continue
        for lvl, name in ((ort.GraphOptimizationLevel.ORT_ENABLE_ALL, "optimized"),
                          (ort.GraphOptimizationLevel.ORT_DISABLE_ALL, "not optimized")):
            e = ort_run(qr, lvl, out)
            if not np.array_equal(e, e_want):
                bad("%s: onnxruntime %s: e differs from int8 * scale (max %g)" % (mode, name, np.abs(e - e_want).max()))
            err = np.abs(e - table[ids[0]][None])
            if not (err <= half * 1.0001).all():
                bad("%s: onnxruntime %s: e more than half a step from the table" % (mode, name))
        eo = onnxq_run(qr, os.path.join(work, "run-" + mode), out)
        if not np.array_equal(eo, e_want):
            bad("%s: onnxq run: e differs from onnxruntime's" % mode)
        if fails == f0:
            print("ok   %s: int8 table, e = int8 * scale in onnxruntime (optimized and not) and onnxq run, within "
                  "half a step per row (max err %.3g)" % (mode, float(np.abs(e_want - table[ids[0]][None]).max())))
    if len(sizes) == 2:
        other = W.nbytes + b.nbytes + 1000  # the MatMul weight (quantized or not) and the graph
        ratio = (sizes["float"] - other) / max(sizes["int8"] - other, 1)
        print("     %s file: %d -> %d bytes (table part %.2fx smaller)" % (mode, sizes["float"], sizes["int8"], ratio))
        if not ratio > 3.5:
            bad("%s: file %d -> %d bytes: the table did not shrink ~4x" % (mode, sizes["float"], sizes["int8"]))
print("quantize_gather.py:", "ok" if fails == 0 else "%d failures" % fails)
sys.exit(1 if fails else 0)
