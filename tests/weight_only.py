"""Independent references for tests/weight_only.sh (onnxq quantize --mode weight-only).

  weight_only.py make DIR        float models, inputs and GPTQ calibration samples
  weight_only.py check DIR       every quantized model against numpy: exact integers,
                                 scales and zero points (RTN by the rule of docs/quantize.md,
                                 GPTQ by a plain unbatched numpy GPTQ), the packing of both
                                 formats, the hand-computed blocks, and GPTQ's output error
                                 <= RTN's on the calibration inputs
  weight_only.py outputs DIR     onnxq's and onnxruntime's outputs against x @ dequant(W)

Written with numpy and onnx (1.12 has no int4: 4-bit raw data is unpacked here)."""
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

INT4, UINT4 = 22, 21
RANGES = {INT4: (-8, 7), UINT4: (0, 15), TensorProto.INT8: (-128, 127), TensorProto.UINT8: (0, 255)}
DTYPE = {'int4': INT4, 'uint4': UINT4, 'int8': TensorProto.INT8, 'uint8': TensorProto.UINT8}


def save(model, path):
    model.ir_version = 10
    onnx.save(model, path)


def matmul_model(w, name, opset=21, gemm_bias=None):
    """y = x @ w (MatMul), or Gemm(x, w^T, bias, transB=1) when gemm_bias is given."""
    k = w.shape[0]
    n = w.shape[1]
    x = helper.make_tensor_value_info('x', TensorProto.FLOAT, ['m', k])
    y = helper.make_tensor_value_info('y', TensorProto.FLOAT, ['m', n])
    if gemm_bias is None:
        inits = [numpy_helper.from_array(w, 'W')]
        nodes = [helper.make_node('MatMul', ['x', 'W'], ['y'], name='mm')]
    else:
        inits = [numpy_helper.from_array(np.ascontiguousarray(w.T), 'W'), numpy_helper.from_array(gemm_bias, 'C')]
        nodes = [helper.make_node('Gemm', ['x', 'W', 'C'], ['y'], name='gemm', transB=1)]
    g = helper.make_graph(nodes, name, [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid('', opset)])


def two_layer_model(w1, w2):
    """x [m, K1] -> MatMul W1 -> Relu -> MatMul W2: GPTQ's second layer sees the first's
    quantized output (sequential)."""
    x = helper.make_tensor_value_info('x', TensorProto.FLOAT, ['m', w1.shape[0]])
    y = helper.make_tensor_value_info('y', TensorProto.FLOAT, ['m', w2.shape[1]])
    nodes = [helper.make_node('MatMul', ['x', 'W1'], ['h'], name='mm1'),
             helper.make_node('Relu', ['h'], ['r'], name='relu'),
             helper.make_node('MatMul', ['r', 'W2'], ['y'], name='mm2')]
    g = helper.make_graph(nodes, 'two', [x], [y], [numpy_helper.from_array(w1, 'W1'), numpy_helper.from_array(w2, 'W2')])
    return helper.make_model(g, opset_imports=[helper.make_opsetid('', 21)])


def make(d):
    rng = np.random.default_rng(7)
    os.makedirs(d, exist_ok=True)
    # K = 40: two full blocks of 16 and a partial one of 8
    w = (rng.standard_normal((40, 12)) * 0.3).astype(np.float32)
    w[:, 3] *= 20  # a column of large weights
    save(matmul_model(w, 'mm'), f'{d}/mm.onnx')
    wg = (rng.standard_normal((48, 10)) * 0.2).astype(np.float32)
    save(matmul_model(wg, 'gemm', gemm_bias=rng.standard_normal(10).astype(np.float32)), f'{d}/gemm.onnx')
    # hand-computable: column 0 = -4, -3.5, ..., 3.5; column 1 = ones with one -2
    hand = np.stack([np.arange(-8, 8) * 0.5, np.where(np.arange(16) == 5, -2.0, 1.0)], axis=1).astype(np.float32)
    save(matmul_model(hand, 'hand'), f'{d}/hand.onnx')
    np.save(f'{d}/x_mm.npy', rng.standard_normal((5, 40)).astype(np.float32))
    np.save(f'{d}/x_gemm.npy', rng.standard_normal((3, 48)).astype(np.float32))
    np.save(f'{d}/x_hand.npy', rng.standard_normal((2, 16)).astype(np.float32))
    # GPTQ: correlated inputs (a random mixing of 64 features), 12 samples of 8 rows
    mix = rng.standard_normal((64, 64)).astype(np.float32) * 0.3 + np.eye(64, dtype=np.float32)
    w1 = (rng.standard_normal((64, 48)) * 0.2).astype(np.float32)
    w2 = (rng.standard_normal((48, 16)) * 0.2).astype(np.float32)
    save(two_layer_model(w1, w2), f'{d}/two.onnx')
    for s in range(12):
        os.makedirs(f'{d}/calib/s{s:02d}', exist_ok=True)
        np.save(f'{d}/calib/s{s:02d}/x.npy', (rng.standard_normal((8, 64)).astype(np.float32) @ mix).astype(np.float32))
    np.save(f'{d}/x_two.npy', (rng.standard_normal((6, 64)).astype(np.float32) @ mix).astype(np.float32))


# ------------------------------------------------------------------ reading

def raw_ints(t):
    """Integers of an initializer (4-bit unpacked low nibble first)."""
    n = int(np.prod(t.dims)) if len(t.dims) else 1
    if t.data_type in (INT4, UINT4):
        b = np.frombuffer(t.raw_data, np.uint8)
        v = np.stack([b & 15, b >> 4], axis=1).reshape(-1)[:n].astype(np.int64)
        if t.data_type == INT4:
            v = np.where(v >= 8, v - 16, v)
        return v.reshape(t.dims)
    return numpy_helper.to_array(t).astype(np.int64)


def inits(m):
    return {t.name: t for t in m.graph.initializer}


def float_of(t):
    if t.data_type == TensorProto.FLOAT16:
        return np.frombuffer(t.raw_data, np.float16).astype(np.float32).reshape(t.dims)
    return numpy_helper.to_array(t).astype(np.float32)


# ------------------------------------------------------------------ references

def storable(s, half):
    s = np.float32(s)
    if not (s > 0) or not np.isfinite(s):
        s = np.float32(1)
    if not half:
        return max(s, np.float32(np.finfo(np.float32).tiny))
    h = np.float32(np.float16(min(s, np.float32(65504))))
    return h if h > 0 else np.float32(2.0 ** -24)


def params(v, dt, sym, half):
    """The rule of docs/weight-only.md: v float64 values of one block."""
    lo, hi = RANGES[dt]
    mn, mx = float(v.min()), float(v.max())
    if sym:
        # the value of largest magnitude maps to the lowest level (int4: -8): a negative
        # scale when it is positive
        mid = 0 if lo < 0 else (lo + hi + 1) // 2
        ext = mn if -mn >= mx else mx
        a = storable(abs(ext / (lo - mid)), half)
        return (-a if ext > 0 else a), mid
    l, h = min(mn, 0.0), max(mx, 0.0)
    s = storable((h - l) / (hi - lo), half)
    z = lo - np.rint(l / np.float64(s))
    return s, int(min(max(z, lo), hi))


def quant(x, s, z, dt):
    lo, hi = RANGES[dt]
    return int(min(max(np.rint(np.float32(x) / np.float32(s)) + z, lo), hi))


def rtn(w, dt, sym, block, half):
    K, N = w.shape
    nb = -(-K // block)
    q = np.zeros((K, N), np.int64)
    sc = np.zeros((nb, N), np.float32)
    zp = np.zeros((nb, N), np.int64)
    for b in range(nb):
        for n in range(N):
            blk = w[b * block:(b + 1) * block, n].astype(np.float64)
            s, z = params(blk, dt, sym, half)
            sc[b, n], zp[b, n] = s, z
            for i, x in enumerate(blk):
                q[b * block + i, n] = quant(x, s, z, dt)
    return q, sc, zp


def gptq(w, X, dt, sym, block, half, damp=0.01):
    """GPTQ as the paper writes it, without lazy batches: after each row k of W [K, N]
    (input feature k), the rows after it take the error times U[k, j] / U[k, k]."""
    K, N = w.shape
    H = 2.0 / X.shape[0] * (X.astype(np.float64).T @ X.astype(np.float64))
    dead = np.diag(H) == 0
    H[dead, dead] = 1
    H += damp * np.mean(np.diag(H)) * np.eye(K)
    U = np.linalg.cholesky(np.linalg.inv(H)).T
    W = w.astype(np.float64).copy()
    nb = -(-K // block)
    q = np.zeros((K, N), np.int64)
    sc = np.zeros((nb, N), np.float32)
    zp = np.zeros((nb, N), np.int64)
    for k in range(K):
        b = k // block
        if k % block == 0:
            for n in range(N):
                sc[b, n], zp[b, n] = params(W[k:k + block, n], dt, sym, half)
        err = np.zeros(N)
        for n in range(N):
            q[k, n] = quant(W[k, n], sc[b, n], zp[b, n], dt)
            deq = np.float32(q[k, n] - zp[b, n]) * sc[b, n]
            if half:  # the float16 output of DequantizeLinear with float16 scales
                deq = np.float32(np.float16(deq))
            err[n] = (W[k, n] - np.float64(deq)) / U[k, k]
        W[k + 1:, :] -= np.outer(U[k, k + 1:], err)
    return q, sc, zp


def dequant(q, sc, zp, block, half=False):
    """DequantizeLinear: (q - zp) * scale, in float16 (its output type) for float16 scales."""
    K = q.shape[0]
    idx = np.arange(K) // block
    w = ((q - zp[idx]).astype(np.float32) * sc[idx]).astype(np.float32)
    return w.astype(np.float16).astype(np.float32) if half else w


# ------------------------------------------------------------------ checks

fails = 0


def expect(ok, what):
    global fails
    if not ok:
        fails += 1
        print('FAIL', what)


def read_qdq(m, wname, trans):
    """(q [K, N], scales [nb, N], zp [nb, N], block, scale dtype) of a weight-only QDQ model."""
    it = inits(m)
    dq = next(n for n in m.graph.node if n.op_type == 'DequantizeLinear')
    att = {a.name: a.i for a in dq.attribute}
    q = raw_ints(it[dq.input[0]])
    s = float_of(it[dq.input[1]])
    z = raw_ints(it[dq.input[2]]) if len(dq.input) > 2 and dq.input[2] else np.zeros(s.shape, np.int64)
    expect(att.get('axis') == (1 if trans else 0), f'{wname}: DequantizeLinear axis {att.get("axis")}')
    if trans:
        q, s, z = q.T, s.T, z.T
    return q, s, z, att['block_size'], it[dq.input[1]].data_type, it[dq.input[0]].data_type


def read_nbits(m):
    """(q [K, N] in the stored unsigned form, scales [nb, N], zp [nb, N], block, bits) of a
    MatMulNBits model, unpacked from onnxruntime's layout; checks the padding."""
    it = inits(m)
    node = next(n for n in m.graph.node if n.op_type == 'MatMulNBits')
    expect(node.domain == 'com.microsoft', 'MatMulNBits domain')
    att = {a.name: a.i for a in node.attribute}
    K, N, bits, B = att['K'], att['N'], att['bits'], att['block_size']
    nb = -(-K // B)
    blob = B * bits // 8
    packed = numpy_helper.to_array(it[node.input[1]])
    expect(list(packed.shape) == [N, nb, blob], f'B shape {packed.shape} != [{N}, {nb}, {blob}]')
    scales = numpy_helper.to_array(it[node.input[2]])
    expect(scales.shape == (N * nb,) and scales.dtype == np.float32, f'scales shape {scales.shape} {scales.dtype}')
    bitsarr = np.unpackbits(packed.reshape(N, nb, blob), axis=2, bitorder='little').reshape(N, nb, B, bits)
    vals = (bitsarr * (1 << np.arange(bits))).sum(axis=3)  # [N, nb, B], LSB-first
    zrow = (nb * bits + 7) // 8
    if len(node.input) > 3 and node.input[3]:
        zb = numpy_helper.to_array(it[node.input[3]])
        expect(zb.shape == (N * zrow,), f'zero_points shape {zb.shape} != ({N * zrow},)')
        zbits = np.unpackbits(zb.reshape(N, zrow), axis=1, bitorder='little')[:, :nb * bits].reshape(N, nb, bits)
        zp = (zbits * (1 << np.arange(bits))).sum(axis=2)
    else:
        zp = np.full((N, nb), 1 << (bits - 1))
    flat = vals.reshape(N, nb * B)
    pad = flat[:, K:]
    expect((pad == np.repeat(zp[:, -1:], pad.shape[1], axis=1)).all(), 'padding of the last block is not the zero point')
    return flat[:, :K].T, scales.reshape(N, nb).T, zp.T, B, bits, att.get('accuracy_level', 0)


def check(d):
    cases = [l.split() for l in open(f'{d}/cases.txt').read().splitlines() if l.strip()]
    for name, base, fmt, dts, sym, block, algo in cases:
        m = onnx.load(f'{d}/{name}.onnx')
        fm = onnx.load(f'{d}/{base}.onnx')
        dt, sym, block = DTYPE[dts], sym == 'sym', int(block)
        trans = base == 'gemm'
        wf = {t.name: numpy_helper.to_array(t) for t in fm.graph.initializer}
        if base == 'two':
            continue  # checked by check_gptq
        w = wf['W'].T if trans else wf['W']
        half = fmt == 'qdq'
        eq, es, ez = rtn(w, dt, sym, block, half)
        if fmt == 'qdq':
            q, s, z, blk, sdt, qdt = read_qdq(m, name, trans)
            expect(qdt == dt, f'{name}: weight type {qdt} != {dt}')
            expect(sdt == TensorProto.FLOAT16, f'{name}: scale type {sdt} != float16')
        else:
            q, s, z, blk, bits, _ = read_nbits(m)
            off = (1 << (bits - 1)) if dt in (INT4, TensorProto.INT8) else 0
            q, z = q - off, z - off  # back to the signed form
            expect(bits == (4 if dt in (INT4, UINT4) else 8), f'{name}: bits {bits}')
            if trans:
                node = next(n for n in m.graph.node if n.op_type == 'MatMulNBits')
                expect(len(node.input) == 6 and node.input[5] == 'C', f'{name}: Gemm bias not MatMulNBits input 5')
        expect(blk == block, f'{name}: block {blk}')
        expect(np.array_equal(q, eq), f'{name}: {int((q != eq).sum())} of {q.size} integers differ from numpy')
        expect(np.array_equal(s.astype(np.float32).view(np.uint32), es.view(np.uint32)),
               f'{name}: scales differ from numpy ({s.ravel()[:4]} vs {es.ravel()[:4]})')
        expect(np.array_equal(z, ez), f'{name}: zero points differ from numpy')
        print(f'ok {name}: {q.size} weights, {s.size} blocks match the numpy reference')
    # the hand-computed blocks (docs/quantize.md rule; no numpy)
    q, s, z, _, _, _ = read_qdq(onnx.load(f'{d}/hand_qdq_int4.onnx'), 'hand', False)
    expect(list(q[:, 0]) == list(range(-8, 8)) and s[0, 0] == 0.5, f'hand int4 column 0: {q[:, 0]} scale {s[0, 0]}')
    expect(s[0, 1] == 0.25 and q[5, 1] == -8 and q[0, 1] == 4 and z[0, 1] == 0, f'hand int4 column 1: {q[:, 1]} {s[0, 1]}')
    q, s, z, _, _, _ = read_nbits(onnx.load(f'{d}/hand_nbits_uint4_asym.onnx'))
    expect(abs(s[0, 1] - 0.2) < 1e-7 and z[0, 1] == 10 and q[5, 1] == 0 and q[0, 1] == 15,
           f'hand uint4 asymmetric column 1: q {q[:, 1]} scale {s[0, 1]} zp {z[0, 1]}')
    expect(z[0, 0] == 8 and s[0, 0] == np.float32(7.5 / 15) and q[0, 0] == 0, f'hand uint4 asym column 0: {q[:, 0]} {z[0, 0]}')
    # byte 0 of column 1 holds q[0] | q[1] << 4 = 15 | 15 << 4; its zero-point byte 10 (block 0, low nibble)
    it = inits(onnx.load(f'{d}/hand_nbits_uint4_asym.onnx'))
    node = next(n for n in onnx.load(f'{d}/hand_nbits_uint4_asym.onnx').graph.node if n.op_type == 'MatMulNBits')
    pb = numpy_helper.to_array(it[node.input[1]])
    zb = numpy_helper.to_array(it[node.input[3]])
    expect(pb[1, 0, 0] == 0xFF and pb[1, 0, 2] == 0x0F, f'hand packed bytes of column 1: {pb[1, 0, :4]}')
    expect(list(zb) == [8, 10], f'hand packed zero points {list(zb)} != [8, 10]')
    check_gptq(d)
    print(f'{fails} failed' if fails else 'all checks passed')
    return fails == 0


def check_gptq(d):
    """The GPTQ model against the numpy GPTQ (sequential: the second layer's statistics
    come from the first layer quantized), and its output error against RTN's."""
    fm = onnx.load(f'{d}/two.onnx')
    wf = {t.name: numpy_helper.to_array(t) for t in fm.graph.initializer}
    X = np.concatenate([np.load(f'{d}/calib/{s}/x.npy') for s in sorted(os.listdir(f'{d}/calib'))])
    m = onnx.load(f'{d}/two_gptq.onnx')
    it = inits(m)
    dqs = {n.output[0]: n for n in m.graph.node if n.op_type == 'DequantizeLinear'}
    casts = {n.output[0]: n.input[0] for n in m.graph.node if n.op_type == 'Cast'}
    mm = [n for n in m.graph.node if n.op_type == 'MatMul']
    got = []
    for n in mm:
        dq = dqs[casts.get(n.input[1], n.input[1])]
        s = float_of(it[dq.input[1]])
        z = raw_ints(it[dq.input[2]]) if len(dq.input) > 2 and dq.input[2] else np.zeros(s.shape, np.int64)
        got.append((raw_ints(it[dq.input[0]]), s, z))
    q1, s1, z1 = gptq(wf['W1'], X, INT4, True, 16, True)
    w1q = dequant(q1, s1, z1, 16, half=True)  # the model's float16 DequantizeLinear output
    H1 = np.maximum(X @ w1q, 0).astype(np.float32)
    q2, s2, z2 = gptq(wf['W2'], H1, INT4, True, 16, True)
    for i, (q, s, z) in enumerate([(q1, s1, z1), (q2, s2, z2)]):
        gq, gs, gz = got[i]
        expect(np.array_equal(gq, q), f'gptq layer {i + 1}: {int((gq != q).sum())} of {q.size} integers differ from numpy')
        expect(np.array_equal(gs, s), f'gptq layer {i + 1}: scales differ from numpy')
        expect(np.array_equal(gz, z), f'gptq layer {i + 1}: zero points differ')
    # the property GPTQ is for: a smaller layer output error than RTN on its inputs
    for i, (w, Xi, q, s, z) in enumerate([(wf['W1'], X, q1, s1, z1), (wf['W2'], H1, q2, s2, z2)]):
        rq, rs, rz = rtn(w, INT4, True, 16, True)
        e_g = np.sum((Xi @ (dequant(q, s, z, 16) - w)) ** 2)
        e_r = np.sum((Xi @ (dequant(rq, rs, rz, 16) - w)) ** 2)
        expect(e_g < e_r, f'gptq layer {i + 1}: output error {e_g:.4g} not below RTN {e_r:.4g}')
        print(f'ok gptq layer {i + 1}: output error {e_g:.4g} vs RTN {e_r:.4g} ({10 * np.log10(e_r / e_g):.2f} dB better)')


def outputs(d):
    """onnxq and onnxruntime outputs vs x @ dequant(W) computed here in float64."""
    cases = [l.split() for l in open(f'{d}/cases.txt').read().splitlines() if l.strip()]
    for name, base, fmt, dts, sym, block, algo in cases:
        m = onnx.load(f'{d}/{name}.onnx')
        x = np.load(f'{d}/x_{base}.npy')
        if fmt == 'qdq':
            q, s, z, blk, _, _ = read_qdq(m, name, base == 'gemm')
            w = dequant(q, s, z, blk, half=True)
        else:
            q, s, z, blk, _, _ = read_nbits(m)
            w = dequant(q, s, z, blk)
        if base == 'two':
            dqs = [n for n in m.graph.node if n.op_type == 'DequantizeLinear']
            it = inits(m)
            ws = []
            for dq in dqs:
                s = float_of(it[dq.input[1]])
                z = raw_ints(it[dq.input[2]]) if len(dq.input) > 2 and dq.input[2] else np.zeros(s.shape, np.int64)
                ws.append(dequant(raw_ints(it[dq.input[0]]), s, z, 16, half=True).astype(np.float64))
            ref = np.maximum(x.astype(np.float64) @ ws[0], 0) @ ws[1]
        else:
            ref = x.astype(np.float64) @ w.astype(np.float64)
            if base == 'gemm':
                ref = ref + numpy_helper.to_array(inits(onnx.load(f'{d}/gemm.onnx'))['C'])
        tol = 1e-5 * (np.abs(ref).max() + 1)
        for who in ('onnxq', 'ort'):
            y = np.load(f'{d}/{who}_{name}.npy')
            err = np.abs(y - ref).max()
            expect(y.shape == ref.shape and err <= tol, f'{name}: {who} output differs from x @ dequant(W) by {err:.3g} '
                   f'(tolerance {tol:.3g}: float32 sums)')
        yq, yo = np.load(f'{d}/onnxq_{name}.npy'), np.load(f'{d}/ort_{name}.npy')
        print(f'ok {name}: onnxq and onnxruntime equal x @ dequant(W) (max |onnxq - ort| {np.abs(yq - yo).max():.3g})')
    print(f'{fails} failed' if fails else 'all outputs match')
    return fails == 0


if __name__ == '__main__':
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd == 'make':
        make(d)
        ok = True
    elif cmd == 'check':
        ok = check(d)
    else:
        ok = outputs(d)
    sys.exit(0 if ok else 1)
