#!/usr/bin/python3
"""Calibrate and quantize a MatMul whose weight has more than 2^31 elements.

usage: big_tensor.py make DIR          writes DIR/big.onnx (+ big.bin, sparse) and DIR/calib
       big_tensor.py check DIR Q.onnx MODE
           MODE per-channel | per-tensor | int4-block32: checks the scales and the
           quantized weight at the planted elements and at zero elements on both sides of
           element 2^31

The weight W [K, N] = [65536, 32769] float32 (2,147,549,184 elements, 8.6 GB) lives in
a sparse external data file: every element is 0 except a few planted at known places,
most of them past element 2^31, so a 32-bit count, index or loop bound anywhere on the
calibrate -> quantize -> write path shows up as a wrong scale or a wrong quantized
value. The expected values are computed here from the quantization rules (symmetric,
scale = max|w| / qmax over the channel, the tensor or the block; round half to even),
independently of onnxq.
"""
import os
import sys

import numpy as np

K, N = 65536, 32769
UINT4, INT4 = 21, 22   # TensorProto values (Debian's onnx 1.12 predates them)
NUMEL = K * N
assert NUMEL > 2**31
# (row, col) -> value; flat index row * N + col
PLANT = {
    (0, 0): 1.0,
    (K - 1, 0): 2.5,                               # column 0's max, index > 2^31
    (K - 1, N - 1): -3.0,                           # the last element: the tensor's max |w|
    ((2**31 + 7) // N, (2**31 + 7) % N): 0.75,      # just past 2^31
    ((2**31 - 3) // N, (2**31 - 3) % N): -0.5,      # just before 2^31
    (40000, 5): 0.3,
    (40000 + 17, 5): -1.2,                          # column 5's max |w|, same int4 block
}
ZEROS = [(2**31 // N, 2**31 % N), ((2**31 + 100) // N, (2**31 + 100) % N), (K - 1, N - 2)]


def make(d):
    import onnx
    from onnx import TensorProto, helper
    os.makedirs(d, exist_ok=True)
    binp = os.path.join(d, "big.bin")
    with open(binp, "wb") as f:
        f.truncate(NUMEL * 4)
        for (r, c), v in PLANT.items():
            f.seek((r * N + c) * 4)
            f.write(np.float32(v).tobytes())
    w = helper.make_tensor_value_info("W", TensorProto.FLOAT, [K, N])
    t = onnx.TensorProto()
    t.name = "W"
    t.data_type = TensorProto.FLOAT
    t.dims.extend([K, N])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "big.bin"), ("offset", "0"), ("length", str(NUMEL * 4))):
        e = t.external_data.add()
        e.key, e.value = k, v
    del w
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"], name="big_matmul")],
                          "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, N])],
                          initializer=[t])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(d, "big.onnx"))
    rng = np.random.default_rng(31)
    for i in range(2):
        sd = os.path.join(d, "calib", f"{i:03d}")
        os.makedirs(sd, exist_ok=True)
        np.save(os.path.join(sd, "x.npy"), rng.uniform(-1, 1, (1, K)).astype(np.float32))


def load_tensor(model_dir, t):
    """numpy view of an initializer (external data memory-mapped)."""
    from onnx import numpy_helper, TensorProto
    if t.data_location != TensorProto.EXTERNAL:
        if t.data_type in (INT4, UINT4):   # packed nibbles in raw_data
            return np.frombuffer(t.raw_data, dtype=np.uint8)
        return numpy_helper.to_array(t)
    info = {e.key: e.value for e in t.external_data}
    dt = {TensorProto.INT8: np.int8, TensorProto.UINT8: np.uint8, TensorProto.FLOAT: np.float32,
          INT4: np.uint8, UINT4: np.uint8}[t.data_type]
    off = int(info.get("offset", 0))
    n = int(np.prod(t.dims))
    count = (n + 1) // 2 if t.data_type in (INT4, UINT4) else n
    return np.memmap(os.path.join(model_dir, info["location"]), dtype=dt, mode="r", offset=off,
                     shape=(count,))


def nibble(packed, i, signed):
    b = int(packed[i // 2])
    v = (b >> 4) & 15 if i % 2 else b & 15
    return v - 16 if signed and v > 7 else v


def check(d, qpath, mode):
    import onnx
    m = onnx.load(qpath, load_external_data=False)
    inits = {t.name: t for t in m.graph.initializer}
    dq = [n for n in m.graph.node if n.op_type == "DequantizeLinear" and n.output[0] == "W"]
    if len(dq) != 1:
        print("FAIL: no DequantizeLinear producing W")
        return 1
    dq = dq[0]
    wq_t, ws_t = inits[dq.input[0]], inits[dq.input[1]]
    wz_t = inits[dq.input[2]] if len(dq.input) > 2 and dq.input[2] else None
    qdir = os.path.dirname(os.path.abspath(qpath))
    wq = load_tensor(qdir, wq_t)
    ws = load_tensor(qdir, ws_t).reshape(-1)
    from onnx import TensorProto
    signed = wq_t.data_type in (TensorProto.INT8, INT4)
    four = wq_t.data_type in (INT4, UINT4)
    zp_arr = load_tensor(qdir, wz_t).reshape(-1) if wz_t is not None else None
    qmax = 7 if four else 127
    fails = []
    if list(wq_t.dims) != [K, N]:
        fails.append(f"quantized W dims {list(wq_t.dims)}")
    # expected scale per group of elements
    if mode == "per-channel":
        def group(r, c): return c
        absmax = {}
        for (r, c), v in PLANT.items():
            absmax[c] = max(absmax.get(c, 0.0), abs(v))
        if ws.shape[0] != N:
            fails.append(f"{ws.shape[0]} scales, want {N}")
    elif mode == "per-tensor":
        def group(r, c): return 0
        absmax = {0: max(abs(v) for v in PLANT.values())}
        if ws.shape[0] != 1:
            fails.append(f"{ws.shape[0]} scales, want 1")
    else:  # int4, blocks of 32 along K (axis 0): scale [K/32, N]
        def group(r, c): return (r // 32) * N + c
        absmax = {}
        for (r, c), v in PLANT.items():
            g = group(r, c)
            absmax[g] = max(absmax.get(g, 0.0), abs(v))
        if ws.shape[0] != (K // 32) * N:
            fails.append(f"{ws.shape[0]} scales, want {(K // 32) * N}")
    if fails:
        return report(fails)

    def zp_of(g):
        if zp_arr is None:
            return 0
        if four:
            return nibble(zp_arr, g, signed)
        return int(zp_arr[g if zp_arr.shape[0] > 1 else 0])

    for g, am in absmax.items():
        want = np.float32(np.float32(am) / np.float32(qmax))
        if not np.isclose(ws[g], want, rtol=2e-7, atol=0):
            fails.append(f"scale of group {g} = {ws[g]!r}, want {want!r}")
    for (r, c), v in list(PLANT.items()) + [(z, 0.0) for z in ZEROS]:
        i = r * N + c
        g = group(r, c)
        zp = zp_of(g)
        s = np.float32(ws[g]) if g < ws.shape[0] else None
        want = zp + int(np.clip(np.rint(np.float32(v) / s), -qmax, qmax)) if v != 0 else zp
        got = nibble(wq, i, signed) if four else int(wq[i])
        if got != want:
            fails.append(f"W[{r},{c}] (element {i}) quantized to {got}, want {want}")
    print(f"big_tensor {mode}: {len(PLANT)} planted + {len(ZEROS)} zero elements checked, "
          f"{len(absmax)} scales; element count {NUMEL} = 2^31 + {NUMEL - 2**31}")
    return report(fails)


def report(fails):
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
        sys.exit(0)
    sys.exit(check(sys.argv[2], sys.argv[3], sys.argv[4]))
