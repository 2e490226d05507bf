#!/usr/bin/python3
"""Small QDQ models whose Conv / Gemm / MatMul groups onnxruntime fuses into QLinearConv,
QGemm and QLinearMatMul, with inputs chosen so that the int16 pair saturation of
onnxruntime's AVX2 u8 x s8 kernels matters, and the outputs an independent numpy
emulation of the two integer arithmetics expects (docs/run.md "Arithmetic targets").

usage: qlinear_models.py OUTDIR
writes OUTDIR/<case>.onnx, <case>.x.npy (float input, exact multiples of the input
scale), <case>.avx2.npy and <case>.exact.npy (expected float outputs), and cases.txt.
Used by tests/qlinear_ort.sh."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(20261123)
F32 = np.float32


def npdt(t):
    return {TensorProto.UINT8: np.uint8, TensorProto.INT8: np.int8}[t]


def qrange(t):
    return (-128, 127) if t == TensorProto.INT8 else (0, 255)


# ---- the arithmetic, written independently of src/exec/kernels/qlinear.c ----------------

def pair_dot(a, w, sat):
    """a: [R, K] raw uint8 as int64, w: [N, K] raw weights as int64 -> [R, N] int64."""
    K = a.shape[1]
    if K % 2:
        a = np.concatenate([a, np.zeros((a.shape[0], 1), np.int64)], 1)
        w = np.concatenate([w, np.zeros((w.shape[0], 1), np.int64)], 1)
    prod = a[:, None, :] * w[None, :, :]              # [R, N, K]
    pairs = prod[:, :, 0::2] + prod[:, :, 1::2]
    if sat:
        pairs = np.clip(pairs, -32768, 32767)
    return pairs.sum(-1)


def requant(acc, scale, yzp, ydt):
    lo, hi = qrange(ydt)
    acc32 = ((acc + 2**31) % 2**32 - 2**31).astype(np.int32)
    f = acc32.astype(F32) * scale.astype(F32)
    f = np.minimum(np.maximum(f, F32(lo - yzp)), F32(hi - yzp))
    return np.rint(f).astype(np.int64) + yzp


def integer_out(a_raw, xzp_raw, w_raw, wzp, bias, scale, yzp, ydt, sat):
    """a_raw [R,K], w_raw [N,K] -> quantized outputs [R,N]"""
    K = a_raw.shape[1]
    dot = pair_dot(a_raw, w_raw, sat)
    acc = dot - wzp[None, :] * a_raw.sum(1)[:, None] - xzp_raw * w_raw.sum(1)[None, :] \
        + K * xzp_raw * wzp[None, :]
    if bias is not None:
        acc = acc + bias[None, :]
    return requant(acc, scale, yzp, ydt)


def im2col(xq_raw, xzp_raw, kshape, strides, pads, group):
    """xq_raw [C, H, W] -> per group [P, K] rows in (kh, kw, c) order"""
    C, H, W = xq_raw.shape
    kh, kw = kshape
    cg = C // group
    pt, pl, pb, pr = pads
    xp = np.full((C, H + pt + pb, W + pl + pr), xzp_raw, np.int64)
    xp[:, pt:pt + H, pl:pl + W] = xq_raw
    OH = (H + pt + pb - kh) // strides[0] + 1
    OW = (W + pl + pr - kw) // strides[1] + 1
    rows = []
    for g in range(group):
        r = np.zeros((OH * OW, kh * kw * cg), np.int64)
        for oy in range(OH):
            for ox in range(OW):
                patch = xp[g * cg:(g + 1) * cg, oy * strides[0]:oy * strides[0] + kh,
                           ox * strides[1]:ox * strides[1] + kw]      # [cg, kh, kw]
                r[oy * OW + ox] = patch.transpose(1, 2, 0).reshape(-1)
        rows.append(r)
    return rows, OH, OW


# ---- model building -------------------------------------------------------------------

class Case:
    def __init__(self, name):
        self.name, self.nodes, self.inits = name, [], []

    def init(self, name, arr, dt=None):
        t = numpy_helper.from_array(np.asarray(arr), name)
        if dt is not None:
            t.data_type = dt
        self.inits.append(t)
        return name

    def qdq_in(self, xdt, xs, xzp):
        self.init('xs', np.array(xs, F32))
        self.init('xz', np.array(xzp, npdt(xdt)))
        self.nodes += [helper.make_node('QuantizeLinear', ['x', 'xs', 'xz'], ['xq']),
                       helper.make_node('DequantizeLinear', ['xq', 'xs', 'xz'], ['xd'])]

    def weight(self, wq, ws, wzp, axis):
        self.init('wq', wq)
        self.init('ws', np.asarray(ws, F32))
        self.init('wz', np.asarray(wzp, wq.dtype))
        self.nodes.append(helper.make_node('DequantizeLinear', ['wq', 'ws', 'wz'], ['wd'], axis=axis))

    def bias(self, b, scale):
        # onnxruntime ignores the bias scale (it assumes x_scale * w_scale, as here)
        self.init('bq', b.astype(np.int32))
        self.init('bs', np.asarray(scale, F32))
        self.nodes.append(helper.make_node('DequantizeLinear', ['bq', 'bs'], ['bd'], axis=0))

    def out(self, src, ydt, ys, yzp, post=None):
        self.init('ys', np.array(ys, F32))
        self.init('yz', np.array(yzp, npdt(ydt)))
        if post == 'relu':
            self.nodes.append(helper.make_node('Relu', [src], ['pr']))
            src = 'pr'
        elif post == 'clip':
            self.init('cmin', np.array(0.0, F32))
            self.init('cmax', np.array(1e6, F32))
            self.nodes.append(helper.make_node('Clip', [src, 'cmin', 'cmax'], ['pr']))
            src = 'pr'
        self.nodes += [helper.make_node('QuantizeLinear', [src, 'ys', 'yz'], ['yq']),
                       helper.make_node('DequantizeLinear', ['yq', 'ys', 'yz'], ['y'])]

    def save(self, outdir, xshape, yshape, x, y_avx2, y_exact, opset=13):
        g = helper.make_graph(self.nodes, self.name,
                              [helper.make_tensor_value_info('x', TensorProto.FLOAT, xshape)],
                              [helper.make_tensor_value_info('y', TensorProto.FLOAT, yshape)],
                              self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid('', opset)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(outdir, self.name + '.onnx'))
        np.save(os.path.join(outdir, self.name + '.x.npy'), x.astype(F32))
        if y_avx2 is not None:
            np.save(os.path.join(outdir, self.name + '.avx2.npy'), y_avx2.astype(F32))
            np.save(os.path.join(outdir, self.name + '.exact.npy'), y_exact.astype(F32))


def pick_out_scale(acc_f):
    lo, hi = float(acc_f.min()), float(acc_f.max())
    ys = max(hi - lo, 1e-3) / 255.0
    return F32(ys)


def xs_of(xdt):
    return F32(0.25)


def gen_matmul(outdir, name, xq, wq, xzp, wzp, ys, yzp, xdt=TensorProto.UINT8, ws=1.0):
    """MatMul x [M,K] u8 x W [K,N]: all parameters given (hand-computed cases)."""
    c = Case(name)
    xs = F32(1.0)
    c.qdq_in(xdt, xs, xzp)
    c.weight(wq, ws, wzp, 1)
    c.nodes.append(helper.make_node('MatMul', ['xd', 'wd'], ['mm']))
    c.out('mm', xdt, ys, yzp)
    shift = 128 if xdt == TensorProto.INT8 else 0
    a_raw = xq.astype(np.int64) + shift
    w_raw = wq.astype(np.int64).T
    N = wq.shape[1]
    scale = np.full(N, F32(xs * F32(ws)) / F32(ys), F32)
    wz = np.full(N, int(wzp), np.int64)
    outs = []
    for sat in (True, False):
        yq = integer_out(a_raw, xzp + shift, w_raw, wz, None, scale, yzp, xdt,
                         sat and wq.dtype == np.int8)
        outs.append((yq - yzp).astype(F32) * F32(ys))
    x = (xq.astype(np.int64) - xzp).astype(F32) * xs
    c.save(outdir, list(xq.shape), [xq.shape[0], N], x, *outs)
    return name


def rand_x(shape, xdt, hi_bias=True):
    lo, hi = qrange(xdt)
    if hi_bias:  # mostly large activations: pairs of large products saturate
        v = rng.integers(hi - 60, hi + 1, size=shape)
        mask = rng.random(shape) < 0.2
        v[mask] = rng.integers(lo, hi + 1, size=int(mask.sum()))
        return v.astype(npdt(xdt))
    return rng.integers(lo, hi + 1, size=shape).astype(npdt(xdt))


def rand_w(shape, wdt, symmetric):
    if wdt == np.int8:
        v = rng.integers(60, 128, size=shape) * rng.choice([-1, 1], size=shape, p=[0.3, 0.7])
        v = np.clip(v, -128 if not symmetric else -127, 127)
        return v.astype(np.int8)
    return rng.integers(0, 256, size=shape).astype(np.uint8)


def gen_conv(outdir, name, C, M, H, W, k, strides, pads, group, xdt=TensorProto.UINT8,
             wdt=np.int8, per_channel=True, wzp=0, xzp=7, yzp=100, use_bias=True, post=None):
    c = Case(name)
    xs = F32(0.25)
    shift = 128 if xdt == TensorProto.INT8 else 0
    if xdt == TensorProto.INT8:
        xzp = xzp - 128 if xzp > 127 else xzp
        yzp = yzp - 128
    if post == 'relu':
        yzp = qrange(xdt)[0]
    xq = rand_x((1, C, H, W), xdt)
    cg = C // group
    wq = rand_w((M, cg, k, k), wdt, wzp == 0)
    ws = (rng.random(M).astype(F32) * F32(0.01) + F32(0.005)) if per_channel else F32(0.008)
    wsv = np.broadcast_to(np.asarray(ws, F32), (M,))
    b = rng.integers(-20000, 20000, size=M) if use_bias else None
    # accumulators (exact) to size the output scale
    rows, OH, OW = im2col(xq[0].astype(np.int64) + shift, xzp + shift, (k, k), strides, pads, group)
    npg = M // group
    wraw = wq.astype(np.int64).transpose(0, 2, 3, 1).reshape(M, -1)     # (kh, kw, c)
    wz = np.full(M, int(wzp), np.int64)
    exact_acc = np.concatenate([
        (rows[g] - (xzp + shift)) @ (wraw[g * npg:(g + 1) * npg] - wz[g * npg:(g + 1) * npg, None]).T
        for g in range(group)], 1)
    if b is not None:
        exact_acc = exact_acc + b[None, :]
    accf = exact_acc.astype(F32) * (xs * wsv)[None, :]
    ys = pick_out_scale(accf) if post is None else pick_out_scale(np.maximum(accf, 0))
    scale = ((xs * wsv).astype(F32) / F32(ys)).astype(F32)
    outs = []
    for sat in (True, False):
        yq = np.concatenate([
            integer_out(rows[g], xzp + shift, wraw[g * npg:(g + 1) * npg], wz[g * npg:(g + 1) * npg],
                        None if b is None else b[g * npg:(g + 1) * npg],
                        scale[g * npg:(g + 1) * npg], yzp, xdt,
                        sat and wdt == np.int8 and not (cg == 1 and npg == 1))
            for g in range(group)], 1)                                  # [P, M]
        y = (yq - yzp).astype(F32) * F32(ys)
        outs.append(y.T.reshape(1, M, OH, OW))
    c.qdq_in(xdt, xs, xzp)
    c.weight(wq, ws if per_channel else np.array(ws, F32), np.full(M, wzp, wdt) if per_channel
             else np.array(wzp, wdt), 0)
    ins = ['xd', 'wd']
    if b is not None:
        c.bias(b, (xs * wsv).astype(F32))
        ins.append('bd')
    c.nodes.append(helper.make_node('Conv', ins, ['cv'], kernel_shape=[k, k], strides=list(strides),
                                    pads=list(pads), group=group))
    c.out('cv', xdt, ys, yzp, post)
    x = (xq.astype(np.int64) - xzp).astype(F32) * xs
    c.save(outdir, [1, C, H, W], [1, M, OH, OW], x, *outs)
    return name


def gen_gemm(outdir, name, Mr, K, N, trans_b, wdt=np.int8, use_bias=True, xzp=3, yzp=120,
             xdt=TensorProto.UINT8):
    c = Case(name)
    xs = F32(0.5)
    shift = 128 if xdt == TensorProto.INT8 else 0
    if xdt == TensorProto.INT8:
        yzp -= 128
    xq = rand_x((Mr, K), xdt)
    w = rand_w((K, N), wdt, True)
    wzp = 0 if wdt == np.int8 else 128
    ws = rng.random(N).astype(F32) * F32(0.01) + F32(0.002)
    b = rng.integers(-30000, 30000, size=N) if use_bias else None
    a_raw = xq.astype(np.int64) + shift
    w_raw = w.astype(np.int64).T                                       # [N, K]
    wz = np.full(N, wzp, np.int64)
    acc = (a_raw - xzp - shift) @ (w_raw - wz[:, None]).T + (b[None, :] if b is not None else 0)
    accf = acc.astype(F32) * (xs * ws)[None, :]
    ys = pick_out_scale(accf)
    scale = ((F32(1.0) * xs * ws).astype(F32) / F32(ys)).astype(F32)
    outs = []
    for sat in (True, False):
        yq = integer_out(a_raw, xzp + shift, w_raw, wz, b, scale, yzp, xdt, sat and wdt == np.int8)
        outs.append((yq - yzp).astype(F32) * F32(ys))
    c.qdq_in(xdt, xs, xzp)
    wstore = w.T.copy() if trans_b else w
    c.weight(wstore, ws, np.full(N, wzp, wdt), 0 if trans_b else 1)
    ins = ['xd', 'wd']
    if b is not None:
        c.bias(b, (xs * ws).astype(F32))
        ins.append('bd')
    c.nodes.append(helper.make_node('Gemm', ins, ['gm'], transB=int(trans_b)))
    c.out('gm', xdt, ys, yzp)
    x = (xq.astype(np.int64) - xzp).astype(F32) * xs
    c.save(outdir, [Mr, K], [Mr, N], x, *outs)
    return name


def gen_matmul3d(outdir, name, B, Mr, K, N, wdt=np.int8):
    c = Case(name)
    xs, xzp, yzp = F32(0.125), 11, 90
    xq = rand_x((B, Mr, K), TensorProto.UINT8)
    w = rand_w((K, N), wdt, True)
    wzp = 0 if wdt == np.int8 else 128
    ws = F32(0.004)
    a_raw = xq.reshape(-1, K).astype(np.int64)
    w_raw = w.astype(np.int64).T
    wz = np.full(N, wzp, np.int64)
    acc = (a_raw - xzp) @ (w_raw - wzp).T
    ys = pick_out_scale(acc.astype(F32) * (xs * ws))
    scale = np.full(N, (xs * ws) / F32(ys), F32)
    outs = []
    for sat in (True, False):
        yq = integer_out(a_raw, xzp, w_raw, wz, None, scale, yzp, TensorProto.UINT8,
                         sat and wdt == np.int8)
        outs.append(((yq - yzp).astype(F32) * F32(ys)).reshape(B, Mr, N))
    c.qdq_in(TensorProto.UINT8, xs, xzp)
    c.weight(w, np.array(ws, F32), np.array(wzp, wdt), 1)
    c.nodes.append(helper.make_node('MatMul', ['xd', 'wd'], ['mm']))
    c.out('mm', TensorProto.UINT8, ys, yzp)
    x = (xq.astype(np.int64) - xzp).astype(F32) * xs
    c.save(outdir, [B, Mr, K], [B, Mr, N], x, *outs)
    return name


def gen_matmul_dyn(outdir, name, shape):
    """MatMul of two activations (QLinearMatMul with a run-time B, U8U8: exact):
    y = x @ transpose(x), B through Transpose and its own Q/DQ pair"""
    c = Case(name)
    xs, xzp, yzp = F32(0.0625), 40, 60
    xq = rand_x(shape, TensorProto.UINT8, hi_bias=False)
    xq = np.clip(xq, 0, 200).astype(np.uint8)
    c.qdq_in(TensorProto.UINT8, xs, xzp)
    perm = list(range(len(shape) - 2)) + [len(shape) - 1, len(shape) - 2]
    c.init('ts', np.array(xs, F32))
    c.init('tz', np.array(xzp, np.uint8))
    c.nodes += [helper.make_node('Transpose', ['xd'], ['t'], perm=perm),
                helper.make_node('QuantizeLinear', ['t', 'ts', 'tz'], ['tq']),
                helper.make_node('DequantizeLinear', ['tq', 'ts', 'tz'], ['td']),
                helper.make_node('MatMul', ['xd', 'td'], ['mm'])]
    a = xq.astype(np.int64) - xzp
    acc = a @ np.swapaxes(a, -1, -2)
    ys = pick_out_scale(acc.astype(F32) * (xs * xs))
    scale = F32(xs * xs) / F32(ys)
    yq = requant(acc, np.full(acc.shape, scale, F32), yzp, TensorProto.UINT8)
    y = (yq - yzp).astype(F32) * F32(ys)
    c.out('mm', TensorProto.UINT8, ys, yzp)
    x = (xq.astype(np.int64) - xzp).astype(F32) * xs
    c.save(outdir, list(shape), list(y.shape), x, y, y)
    return name


def softmax_ref(xraw, axis, xs, ys, yzp, signed):
    """QLinearSoftmax as qlinear_softmax.cc computes it, on raw values (int8 or uint8)"""
    xm = np.moveaxis(xraw.astype(np.int64), axis, -1)
    D = xm.shape[-1]
    shift = np.log(np.float64(np.float32(np.finfo(np.float32).max) / np.float32(D)))
    shift = max(0.0, shift - 5) / np.float64(xs)
    table = np.zeros(256, F32)
    for i in range(256):
        table[(i - 128) % 256 if signed else i] = F32(np.exp((i - 255 + shift) * np.float64(xs)))
    ysc = F32(np.floor(F32(1.0) / F32(ys)))
    flat = xm.reshape(-1, D)
    out = np.zeros_like(flat)
    for r in range(flat.shape[0]):
        row = flat[r]
        adj = (127 if signed else 255) - row.max()
        e = table[(row + adj) % 256]
        tot = F32(0)
        for v in e:
            tot = F32(tot + v)
        q = np.rint((e * ysc).astype(F32) / tot).astype(np.int64) + yzp
        out[r] = np.minimum(q, 255)
    return np.moveaxis(out.reshape(xm.shape), -1, axis)


def gen_softmax(outdir, name, shape, axis, xdt):
    c = Case(name)
    xs, xzp = F32(0.0625), (10 if xdt == TensorProto.INT8 else 130)
    # 1 / y_scale = 100.9: QLinearSoftmax scales by floor(1 / y_scale) = 100
    ys, yzp = F32(0.00991), (-128 if xdt == TensorProto.INT8 else 0)
    xq = rand_x(shape, xdt, hi_bias=False)
    c.qdq_in(xdt, xs, xzp)
    c.nodes.append(helper.make_node('Softmax', ['xd'], ['sm'], axis=axis))
    c.out('sm', xdt, ys, yzp)
    if xdt == TensorProto.INT8:   # the Q/DQ pairs are converted to uint8 (+128)
        yq = softmax_ref(xq.astype(np.int64) + 128, axis, xs, ys, yzp + 128, False) - 128
    else:
        yq = softmax_ref(xq, axis, xs, ys, yzp, False)
    y = (yq - yzp).astype(F32) * ys
    x = (xq.astype(np.int64) - xzp).astype(F32) * xs
    c.save(outdir, list(shape), list(shape), x, y, y)
    return name


def gen_float_out(outdir, name, form, xshape, N, wdt=np.int8, per_channel=True):
    """No Q after the Gemm / MatMul: onnxruntime runs QGemm without y_scale ("gemm",
    "matmul_add": MatMulAddFusion first) or MatMulIntegerToFloat ("matmul"), and
    y = float32(int32 acc [+ raw int32 bias]) * float32(x_scale * w_scale[n])."""
    c = Case(name)
    xs, xzp = F32(0.25), 7
    K = xshape[-1]
    xq = rand_x(tuple(xshape), TensorProto.UINT8)
    w = rand_w((K, N), wdt, True)
    wzp = 0 if wdt == np.int8 else 128
    ws = (rng.random(N).astype(F32) * F32(0.01) + F32(0.002)) if per_channel else \
        np.full(N, F32(0.006), F32)
    b = rng.integers(-30000, 30000, size=N) if form in ('gemm', 'matmul_add') else None
    a_raw = xq.reshape(-1, K).astype(np.int64)
    w_raw = w.astype(np.int64).T
    wz = np.full(N, wzp, np.int64)
    scale = (xs * ws).astype(F32)
    outs = []
    for sat in (True, False):
        acc = pair_dot(a_raw, w_raw, sat and wdt == np.int8) - wz[None, :] * a_raw.sum(1)[:, None] \
            - xzp * w_raw.sum(1)[None, :] + K * xzp * wz[None, :]
        if b is not None:
            acc = acc + b[None, :]
        acc32 = ((acc + 2**31) % 2**32 - 2**31).astype(np.int32)
        outs.append((acc32.astype(F32) * scale[None, :]).reshape(list(xshape[:-1]) + [N]))
    c.qdq_in(TensorProto.UINT8, xs, xzp)
    c.weight(w, ws if per_channel else np.array(ws[0], F32),
             np.full(N, wzp, wdt) if per_channel else np.array(wzp, wdt), 1)
    if form == 'gemm':
        c.bias(b, scale)
        c.nodes.append(helper.make_node('Gemm', ['xd', 'wd', 'bd'], ['y']))
    elif form == 'matmul_add':
        c.bias(b, scale)
        c.nodes.append(helper.make_node('MatMul', ['xd', 'wd'], ['mm']))
        c.nodes.append(helper.make_node('Add', ['mm', 'bd'], ['y']))
    else:
        c.nodes.append(helper.make_node('MatMul', ['xd', 'wd'], ['y']))
    x = (xq.astype(np.int64) - xzp).astype(F32) * xs
    c.save(outdir, list(xshape), list(xshape[:-1]) + [N], x, *outs)
    return name


def gen_lut_chain(outdir, name, xdt):
    """DQ -> HardSigmoid, Mul (x * HardSigmoid(x)), Add 0.25 -> Q over all 256 input values:
    onnxq runs the chain as a table (--target host/avx2); numpy float32 gives the
    expectation up to float rounding (returned separately: <name>.ref.npy)."""
    c = Case(name)
    xs, ys = F32(0.05), F32(0.03)
    xzp = 128 if xdt == TensorProto.UINT8 else 0
    yzp = 20 if xdt == TensorProto.UINT8 else -108
    raw = np.arange(256) - (0 if xdt == TensorProto.UINT8 else 128)   # every stored value
    x = ((raw - xzp).astype(F32) * xs).reshape(1, 2, 8, 16)
    c.qdq_in(xdt, xs, xzp)
    c.init('beta_add', np.array(0.25, F32))
    c.nodes += [helper.make_node('HardSigmoid', ['xd'], ['hs'], alpha=1.0 / 6, beta=0.5),
                helper.make_node('Mul', ['xd', 'hs'], ['hw']),
                helper.make_node('Add', ['hw', 'beta_add'], ['cv'])]
    c.out('cv', xdt, ys, yzp)
    xd = x.astype(F32)
    hs = np.clip(F32(1.0 / 6) * xd + F32(0.5), F32(0), F32(1)).astype(F32)
    v = (xd * hs + F32(0.25)).astype(F32)
    lo, hi = qrange(xdt)
    yq = np.clip(np.rint(v / ys) + yzp, lo, hi)
    y = ((yq - yzp) * ys).astype(F32)
    c.save(outdir, [1, 2, 8, 16], [1, 2, 8, 16], x, y, y)
    return name


def gen_float_dw(outdir, name, C, H, W, k, strides, pads, act=None, dil=1):
    """DQ(x) -> float depthwise Conv [-> HardSwish] -> y in float: the float island of
    today's default OCR models, with a float output so that any rounding difference shows.
    With graph optimizations onnxruntime 1.30 runs the Conv with its NCHWc kernel when C
    is a multiple of 4 (padded to its channel block, 16 with AVX-512, 8 with AVX2), else
    with its Conv kernel (MLAS' one-row SGEMM), and HardSwish as
    x * clip(x * (1/6) + 1/2, 0, 1); onnxq's integer targets must give the same bits. No
    numpy expectation: compared with onnxruntime (tests/qlinear_ort.sh)."""
    c = Case(name)
    rng = np.random.default_rng(sum(map(ord, name)))
    xs, xzp = F32(0.0371), 119
    c.qdq_in(TensorProto.UINT8, xs, xzp)
    c.init('w', (rng.standard_normal((C, 1, k, k)) * 0.4).astype(F32))
    c.init('b', (rng.standard_normal(C) * 0.3).astype(F32))
    c.nodes.append(helper.make_node('Conv', ['xd', 'w', 'b'], ['y' if act is None else 'cv'],
                                    group=C, kernel_shape=[k, k], strides=list(strides),
                                    pads=list(pads), dilations=[dil, dil]))
    if act == 'hardswish':
        c.nodes.append(helper.make_node('HardSwish', ['cv'], ['y']))
    x = (rng.integers(0, 256, (1, C, H, W)) - xzp).astype(F32) * xs
    OH = (H + pads[0] + pads[2] - dil * (k - 1) - 1) // strides[0] + 1
    OW = (W + pads[1] + pads[3] - dil * (k - 1) - 1) // strides[1] + 1
    c.save(outdir, [1, C, H, W], [1, C, OH, OW], x, None, None, opset=14)
    return name


def gen_float_conv(outdir, name, C, M, H, W, k, strides, pads, act=None, dil=1, bias=True):
    """DQ(x) -> float Conv with one group [-> HardSwish] -> y in float: a layer that onnxq
    quantize --min-intensity leaves float between 8-bit neighbours. onnxruntime 1.30 runs it
    with its NCHWc kernels (C below the channel block: the NCHW-input kernel of a stem; a
    1x1 kernel without padding: the pointwise kernel, in batches of 128 input channels; else
    per block of input channels); onnxq's integer targets emulate the AVX2 block of 8 only,
    so these cases are compared under qemu Haswell (tests/qlinear_ort.sh)."""
    c = Case(name)
    rng = np.random.default_rng(sum(map(ord, name)))
    xs, xzp = F32(0.0371), 119
    c.qdq_in(TensorProto.UINT8, xs, xzp)
    c.init('w', (rng.standard_normal((M, C, k, k)) * (0.8 / np.sqrt(C * k * k))).astype(F32))
    ins = ['xd', 'w']
    if bias:
        c.init('b', (rng.standard_normal(M) * 0.3).astype(F32))
        ins.append('b')
    c.nodes.append(helper.make_node('Conv', ins, ['y' if act is None else 'cv'], kernel_shape=[k, k],
                                    strides=list(strides), pads=list(pads), dilations=[dil, dil]))
    if act == 'hardswish':
        c.nodes.append(helper.make_node('HardSwish', ['cv'], ['y']))
    x = (rng.integers(0, 256, (1, C, H, W)) - xzp).astype(F32) * xs
    OH = (H + pads[0] + pads[2] - dil * (k - 1) - 1) // strides[0] + 1
    OW = (W + pads[1] + pads[3] - dil * (k - 1) - 1) // strides[1] + 1
    c.save(outdir, [1, C, H, W], [1, M, OH, OW], x, None, None, opset=14)
    return name


def gen_float_gap(outdir, name, C, H, W, form='dq'):
    """GlobalAveragePool -> y in float (a squeeze-excitation block's pooling) of DQ(x)
    ('dq'), of the graph input ('input') or of a float depthwise Conv + HardSwish of DQ(x)
    ('dwconv'): onnxruntime sums with MLAS' global pooling kernel (four running sums) or,
    when its input is NCHWc (a graph input, such a Conv) and C is a multiple of its block
    (16 with AVX-512, 8 with AVX2), one sum per channel in order; onnxq's integer targets
    must give the same bits. Compared with onnxruntime."""
    c = Case(name)
    rng_l = np.random.default_rng(sum(map(ord, name)))
    xs, xzp = F32(0.0173), 77
    c.qdq_in(TensorProto.UINT8, xs, xzp)
    src = 'xd'
    if form == 'input':
        src = 'x'
    elif form == 'dwconv':
        c.init('w', (rng_l.standard_normal((C, 1, 3, 3)) * 0.4).astype(F32))
        c.init('b', (rng_l.standard_normal(C) * 0.3).astype(F32))
        c.nodes += [helper.make_node('Conv', ['xd', 'w', 'b'], ['cv'], group=C, kernel_shape=[3, 3],
                                     pads=[1, 1, 1, 1]),
                    helper.make_node('HardSwish', ['cv'], ['hs'])]
        src = 'hs'
    c.nodes.append(helper.make_node('GlobalAveragePool', [src], ['y']))
    x = (rng_l.integers(0, 256, (1, C, H, W)) - xzp).astype(F32) * xs
    c.save(outdir, [1, C, H, W], [1, C, 1, 1], x, None, None, opset=14 if form == 'dwconv' else 13)
    return name


def mlas_logistic(x):
    """onnxruntime's logistic (MLAS logistic.cpp constants, FMA3 kernel), for choosing a
    test's scale only; a fused multiply-add as float64 a * b + c rounded to float32."""
    def fma(a, b, c):
        return (np.float64(a) * np.float64(b) + np.float64(c)).astype(F32)
    v = np.clip(x, F32(-18), F32(18)).astype(F32)
    v2 = (v * v).astype(F32)
    a = [4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05, 8.51377133304701e-03,
         2.48287947061529e-01]
    b = [6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06, 1.70198817374094e-03,
         1.16817656904453e-01, 9.93151921023180e-01]
    p = fma(v2, F32(a[0]), F32(a[1]))
    for k in a[2:]:
        p = fma(p, v2, F32(k))
    p = (p * v).astype(F32)
    q = fma(v2, F32(b[0]), F32(b[1]))
    for k in b[2:]:
        q = fma(q, v2, F32(k))
    return np.clip(((p / q).astype(F32) + F32(0.5)).astype(F32), 0, 1)


def gen_float_sigmoid(outdir, name, form):
    """DQ(x) -> Sigmoid in float: 'sigmoid' (the float output), 'swish' (x * Sigmoid(x),
    which onnxruntime fuses into QuickGelu) or 'lut' (-> Q -> DQ: onnxq's table of the
    group). onnxruntime computes the logistic with MLAS' rational approximation, with and
    without optimizations; onnxq's integer targets must give the same bits. Compared with
    onnxruntime only (tests/qlinear_ort.sh)."""
    c = Case(name)
    rng = np.random.default_rng(sum(map(ord, name)))
    xs, xzp = F32(0.0731), 121
    c.qdq_in(TensorProto.UINT8, xs, xzp)
    if form == 'sigmoid':
        c.nodes.append(helper.make_node('Sigmoid', ['xd'], ['y']))
    elif form == 'swish':
        c.nodes += [helper.make_node('Sigmoid', ['xd'], ['sg']),
                    helper.make_node('Mul', ['xd', 'sg'], ['y'])]
    else:
        # an output scale at which the exact logistic and MLAS' give different tables, so
        # the case tells them apart
        c.nodes.append(helper.make_node('Sigmoid', ['xd'], ['sg']))
        xv = ((np.arange(256) - xzp).astype(F32) * xs).astype(F32)
        exact = (1.0 / (1.0 + np.exp(-xv.astype(np.float64)))).astype(F32)
        mlas = mlas_logistic(xv)
        ys = F32(1.0 / 255)
        for k in range(1, 20000):
            ys = F32(1.0 / 255 * (1 + k * 1e-5))
            if np.any(np.rint(exact / ys) != np.rint(mlas / ys)):
                break
        c.out('sg', TensorProto.UINT8, ys, 0)
    shape = [1, 3, 17, 29]
    x = (rng.integers(0, 256, shape) - xzp).astype(F32) * xs
    x.ravel()[:256] = (np.arange(256) - xzp).astype(F32) * xs    # every stored value
    c.save(outdir, shape, shape, x, None, None, opset=14)
    return name


def gen_bin(outdir, name, mode):
    """DQ(a), b -> Add | Mul -> Q (onnxq runs it in one pass: same numbers as the
    nodes): a = Q/DQ(x); b = another Q/DQ of x ('add_same'), a Q/DQ of GlobalAveragePool(x)
    broadcast per channel ('mul_chan'), or the float Sigmoid(GlobalAveragePool(x))
    ('mul_float', a squeeze-excitation gate). Only 'mul_float' is a same-number group
    under an integer target: with two DequantizeLinear operands onnxruntime runs
    QLinearAdd / QLinearMul, whose arithmetic onnxq emulates (gen_qbin)."""
    c = Case(name)
    shape = (1, 5, 7, 9)
    x = (rng.standard_normal(shape) * 2).astype(F32)
    xs, xzp, ys, yzp = F32(0.04), 120, F32(0.03), 110
    c.qdq_in(TensorProto.UINT8, xs, xzp)
    c.init('bs', np.array(0.025, F32))
    c.init('bz', np.array(100, np.uint8))
    def qdq(v, s, z):
        return ((np.clip(np.rint(v / s) + z, 0, 255) - z).astype(F32) * s).astype(F32)
    a = qdq(x, xs, xzp)
    if mode == 'add_same':
        c.nodes += [helper.make_node('QuantizeLinear', ['x', 'bs', 'bz'], ['bq']),
                    helper.make_node('DequantizeLinear', ['bq', 'bs', 'bz'], ['bd']),
                    helper.make_node('Add', ['xd', 'bd'], ['cv'])]
        v = (a + qdq(x, F32(0.025), 100)).astype(F32)
    else:
        c.nodes.append(helper.make_node('GlobalAveragePool', ['x'], ['gp']))
        gp = x.astype(np.float64).mean(axis=(2, 3), keepdims=True).astype(F32)
        if mode == 'mul_chan':
            c.nodes += [helper.make_node('QuantizeLinear', ['gp', 'bs', 'bz'], ['bq']),
                        helper.make_node('DequantizeLinear', ['bq', 'bs', 'bz'], ['bd'])]
            g = qdq(gp, F32(0.025), 100)
        else:
            c.nodes.append(helper.make_node('Sigmoid', ['gp'], ['bd']))
            g = (1 / (1 + np.exp(-gp.astype(np.float64)))).astype(F32)
        c.nodes.append(helper.make_node('Mul', ['xd', 'bd'], ['cv']))
        v = (a * g).astype(F32)
    c.out('cv', TensorProto.UINT8, ys, yzp)
    y = ((np.clip(np.rint(v / ys) + yzp, 0, 255) - yzp) * ys).astype(F32)
    c.save(outdir, list(shape), list(shape), x, y, y)
    return name


def fma32(x, y, z):
    """float32 fused multiply-add (exact in float64 for float32 operands of these sizes)"""
    return (np.asarray(x, np.float64) * np.float64(y) + np.asarray(z, np.float64)).astype(F32)


def mlas_qlinear_bin(op, a, za, sa, b, zb, sb, zc, sc, lo, hi):
    """onnxruntime's QLinearAdd / QLinearMul on x86 with AVX2 on raw values a (MLAS' A),
    b (its B: the broadcast operand of a span) of the run type, float32 steps:
    Add (qladd_avx2.cpp, contracted by the compiler): fixed = zc - fma(ra, za, rb * zb),
    y = fma(a, ra, fma(b, rb, fixed)) with ra = sa / sc, rb = sb / sc;
    Mul (qlmul.cpp, SSE2): (a - za) * (b - zb) * (sa * sb / sc) + zc; rounded half to
    even, saturated."""
    f = F32
    if op == 'Add':
        ra, rb = f(f(sa) / f(sc)), f(f(sb) / f(sc))
        fixed = f(f(zc) - fma32(ra, f(za), f(rb * f(zb))))
        t = fma32(a.astype(F32), ra, fma32(b.astype(F32), rb, fixed))
    else:
        ratio = f(f(f(sa) * f(sb)) / f(sc))
        p = ((a.astype(np.int64) - za) * (b.astype(np.int64) - zb)).astype(F32)
        t = ((p * ratio).astype(F32) + f(zc)).astype(F32)
    return np.clip(np.rint(t), lo, hi).astype(np.int64)


def gen_qbin(outdir, name, op, xdt, form):
    """DQ(a), DQ(b) -> Add | Mul -> Q: onnxruntime's QLinearAdd / QLinearMul, whose MLAS
    arithmetic onnxq's integer targets emulate (mlas_qlinear_bin). a = Q/DQ(x) [1,5,7,9];
    form 'same': b = another Q/DQ of x; 'bcast_b': b = Q/DQ(GlobalAveragePool(x)), one
    value per channel (b first in MLAS' sum); 'bcast_a': the same as the first operand;
    'const': b a constant DequantizeLinear [1,5,1,1] (onnxruntime does not fold it).
    int8: every pair is converted to uint8 by onnxruntime (values and zero points + 128)."""
    c = Case(name)
    shape = (1, 5, 7, 9)
    rng_l = np.random.default_rng(sum(map(ord, name)))
    x = (rng_l.standard_normal(shape) * 2).astype(F32)
    s8 = xdt == TensorProto.INT8
    lo, hi = qrange(xdt)
    xs, xzp = F32(0.04), (-8 if s8 else 120)
    bs, bzp = F32(0.025), (-28 if s8 else 100)
    ys, yzp = (F32(0.03), -18 if s8 else 110) if op == 'Add' else (F32(0.05), 3 if s8 else 131)
    c.qdq_in(xdt, xs, xzp)
    c.init('bs', np.array(bs, F32))
    c.init('bz', np.array(bzp, npdt(xdt)))

    def q(v, s_, z):
        return np.clip(np.rint(v / s_) + z, lo, hi).astype(np.int64)
    xq = q(x, xs, xzp)
    if form == 'same':
        c.nodes += [helper.make_node('QuantizeLinear', ['x', 'bs', 'bz'], ['bq']),
                    helper.make_node('DequantizeLinear', ['bq', 'bs', 'bz'], ['bd'])]
        bq = q(x, bs, bzp)
    elif form == 'const':
        bq = rng_l.integers(lo, hi + 1, (1, 5, 1, 1))
        c.init('bq', bq.astype(npdt(xdt)))
        c.nodes.append(helper.make_node('DequantizeLinear', ['bq', 'bs', 'bz'], ['bd']))
    else:
        c.nodes += [helper.make_node('GlobalAveragePool', ['x'], ['gp']),
                    helper.make_node('QuantizeLinear', ['gp', 'bs', 'bz'], ['bq']),
                    helper.make_node('DequantizeLinear', ['bq', 'bs', 'bz'], ['bd'])]
        gp = x.astype(np.float64).mean(axis=(2, 3), keepdims=True).astype(F32)
        bq = q(gp, bs, bzp)
    ins = ['bd', 'xd'] if form == 'bcast_a' else ['xd', 'bd']
    c.nodes.append(helper.make_node(op, ins, ['cv']))
    c.out('cv', xdt, ys, yzp)
    sh = 128 if s8 else 0   # int8 pairs run as uint8
    a_raw, b_raw = np.broadcast_arrays(xq + sh, bq + sh)
    # the broadcast operand is MLAS' "B" (for 'bcast_a' onnxruntime swaps the operands);
    # with two full operands B is the second (b)
    r = mlas_qlinear_bin(op, a_raw, xzp + sh, xs, b_raw, bzp + sh, bs, yzp + sh, ys,
                         0 if s8 else lo, 255 if s8 else hi)
    y = ((r - sh - yzp).astype(F32) * ys).astype(F32)
    c.save(outdir, list(shape), list(shape), x, y, y)
    return name


def gen_se_block(outdir, name, xdt, mode):
    """The float islands of a squeeze-excitation block (PaddleOCR cls): a = Q/DQ(x),
    h = a * HardSigmoid(a) (onnxq: a table of 256 floats, read by two nodes), then
    'mul': Mul(h, Sigmoid(GlobalAveragePool(h))) -> Q (a float activation times a float
    gate, in one pass); 'add': Add(h, Relu(GlobalAveragePool(h))) -> Q; 'out': h + 0.25
    is the graph output (no Q after the table)."""
    c = Case(name)
    shape = (1, 6, 5, 11)
    xs = F32(0.05)
    xzp = 128 if xdt == TensorProto.UINT8 else 0
    lo, hi = qrange(xdt)
    # every stored value at least once, the rest random
    raw = np.concatenate([np.arange(lo, hi + 1), rng.integers(lo, hi + 1, int(np.prod(shape)) - 256)])
    raw = rng.permutation(raw).reshape(shape)
    x = ((raw - xzp).astype(F32) * xs).astype(F32)
    c.qdq_in(xdt, xs, xzp)
    c.nodes += [helper.make_node('HardSigmoid', ['xd'], ['hs'], alpha=1.0 / 6, beta=0.5),
                helper.make_node('Mul', ['xd', 'hs'], ['h'])]
    xd = x.astype(F32)
    h = (xd * np.clip(F32(1.0 / 6) * xd + F32(0.5), F32(0), F32(1)).astype(F32)).astype(F32)
    ys, yzp = F32(0.03), 20 if xdt == TensorProto.UINT8 else -108
    if mode == 'out':
        c.init('quarter', np.array(0.25, F32))
        c.nodes.append(helper.make_node('Add', ['h', 'quarter'], ['y']))
        y = (h + F32(0.25)).astype(F32)
        g = helper.make_graph(c.nodes, c.name,
                              [helper.make_tensor_value_info('x', TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info('y', TensorProto.FLOAT, list(shape))],
                              c.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(outdir, c.name + '.onnx'))
        np.save(os.path.join(outdir, c.name + '.x.npy'), x)
        np.save(os.path.join(outdir, c.name + '.avx2.npy'), y)
        np.save(os.path.join(outdir, c.name + '.exact.npy'), y)
        return name
    c.nodes.append(helper.make_node('GlobalAveragePool', ['h'], ['gp']))
    gp = h.astype(np.float64).mean(axis=(2, 3), keepdims=True).astype(F32)
    if mode == 'mul':
        c.nodes += [helper.make_node('Sigmoid', ['gp'], ['gate']),
                    helper.make_node('Mul', ['h', 'gate'], ['cv'])]
        v = (h * (1 / (1 + np.exp(-gp.astype(np.float64)))).astype(F32)).astype(F32)
    else:
        c.nodes += [helper.make_node('Relu', ['gp'], ['gate']),
                    helper.make_node('Add', ['gate', 'h'], ['cv'])]
        v = (np.maximum(gp, F32(0)) + h).astype(F32)
    c.out('cv', xdt, ys, yzp)
    yq = np.clip(np.rint(v / ys) + yzp, lo, hi)
    y = ((yq - yzp) * ys).astype(F32)
    c.save(outdir, list(shape), list(shape), x, y, y)
    return name


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    cases = []
    # hand-computed: 255*127 + 255*127 = 64770 saturates to 32767 in int16
    cases.append(gen_matmul(outdir, 'mm_hand_u8s8', np.array([[255, 255]], np.uint8),
                            np.array([[127], [127]], np.int8), 0, 0, 256.0, 0))
    # U8U8 never saturates: 255*255 + 255*255 = 130050
    cases.append(gen_matmul(outdir, 'mm_hand_u8u8', np.array([[255, 255]], np.uint8),
                            np.array([[255], [255]], np.uint8), 0, 0, 1024.0, 0))
    cases.append(gen_conv(outdir, 'conv3x3_pad_stride_cin3', 3, 16, 9, 9, 3, (2, 2), (1, 1, 1, 1), 1))
    cases.append(gen_conv(outdir, 'conv3x3_cin16_sym', 16, 16, 6, 6, 3, (1, 1), (1, 1, 1, 1), 1))
    cases.append(gen_conv(outdir, 'conv1x1', 16, 32, 5, 5, 1, (1, 1), (0, 0, 0, 0), 1))
    cases.append(gen_conv(outdir, 'conv_grouped', 8, 8, 7, 7, 3, (1, 1), (1, 1, 1, 1), 2))
    cases.append(gen_conv(outdir, 'conv_depthwise16', 16, 16, 7, 7, 3, (1, 1), (1, 1, 1, 1), 16))
    cases.append(gen_conv(outdir, 'conv_depthwise8', 8, 8, 7, 7, 3, (2, 2), (1, 0, 1, 0), 8))
    cases.append(gen_conv(outdir, 'conv_dwmult2', 4, 8, 6, 6, 3, (1, 1), (1, 1, 1, 1), 4))
    cases.append(gen_conv(outdir, 'conv_asym_w', 6, 8, 6, 6, 3, (1, 1), (0, 0, 0, 0), 1, wzp=5))
    cases.append(gen_conv(outdir, 'conv_u8u8', 5, 8, 6, 6, 3, (1, 1), (1, 1, 1, 1), 1, wdt=np.uint8,
                          wzp=128))
    cases.append(gen_conv(outdir, 'conv_per_tensor_nobias', 4, 8, 6, 6, 3, (1, 1), (1, 1, 1, 1), 1,
                          per_channel=False, use_bias=False))
    cases.append(gen_conv(outdir, 'conv_relu', 8, 16, 6, 6, 3, (1, 1), (1, 1, 1, 1), 1, post='relu'))
    cases.append(gen_conv(outdir, 'conv_s8s8', 8, 16, 6, 6, 3, (1, 1), (1, 1, 1, 1), 1,
                          xdt=TensorProto.INT8))
    # past one micro-kernel tile (8 rows x 16 columns, 32-pixel blocks, src/exec/qgemm8.h):
    # a 1x1 convolution that reads the image rows directly, a 3x3 one with 40 channels
    cases.append(gen_conv(outdir, 'conv1x1_big', 32, 40, 13, 13, 1, (1, 1), (0, 0, 0, 0), 1))
    cases.append(gen_conv(outdir, 'conv3x3_big', 12, 40, 11, 11, 3, (1, 1), (1, 1, 1, 1), 1))
    cases.append(gen_conv(outdir, 'conv3x3_big_u8u8', 12, 24, 9, 9, 3, (1, 1), (1, 1, 1, 1), 1,
                          wdt=np.uint8, wzp=128))
    cases.append(gen_gemm(outdir, 'gemm_big', 21, 64, 37, True))
    # channels-last copy in 16x16 blocks plus the rest (35 = 2 x 16 + 3 channels, 81 pixels)
    # depthwise rows past one 16-output block, stride 2 (even/odd phase rows), 5x5
    cases.append(gen_conv(outdir, 'conv_dw3x3_w40', 8, 8, 5, 40, 3, (1, 1), (1, 1, 1, 1), 8))
    cases.append(gen_conv(outdir, 'conv_dw5x5_s2', 16, 16, 11, 41, 5, (2, 2), (2, 2, 2, 2), 16,
                          xdt=TensorProto.INT8))
    cases.append(gen_conv(outdir, 'conv3x3_c35', 35, 24, 9, 9, 3, (1, 1), (1, 1, 1, 1), 1))
    cases.append(gen_conv(outdir, 'conv3x3_c32_8x8_s8s8', 32, 16, 8, 8, 3, (1, 1), (1, 1, 1, 1), 1,
                          xdt=TensorProto.INT8))
    # few input channels (a first convolution): im2col rows from whole kernel-row runs
    # (16- and 32-byte copies, per-tap at the left / right padding), the channels-last copy
    # by byte shuffles (C <= 4, 16 pixels at a time plus the rest) or by 16x16 transposes
    # whose rows spill into the next pixel (C % 16 channels)
    cases.append(gen_conv(outdir, 'conv_c1_k3_s1', 1, 8, 7, 37, 3, (1, 1), (1, 1, 1, 1), 1))
    cases.append(gen_conv(outdir, 'conv_c2_k5_s2', 2, 16, 11, 35, 5, (2, 2), (2, 2, 2, 2), 1,
                          xdt=TensorProto.INT8))
    cases.append(gen_conv(outdir, 'conv_c3_k3_s2', 3, 8, 12, 50, 3, (2, 2), (1, 1, 1, 1), 1))
    cases.append(gen_conv(outdir, 'conv_c3_k3_s2_s8', 3, 24, 13, 47, 3, (2, 2), (0, 1, 1, 0), 1,
                          xdt=TensorProto.INT8))
    cases.append(gen_conv(outdir, 'conv_c3_k3_s1_nopad', 3, 16, 6, 21, 3, (1, 1), (0, 0, 0, 0), 1))
    cases.append(gen_conv(outdir, 'conv_c4_k3_s1', 4, 16, 9, 33, 3, (1, 1), (2, 1, 0, 2), 1,
                          xdt=TensorProto.INT8))
    cases.append(gen_conv(outdir, 'conv_c4_k3_s2', 4, 8, 10, 31, 3, (2, 2), (1, 1, 1, 1), 1,
                          wdt=np.uint8, wzp=128))
    cases.append(gen_conv(outdir, 'conv_c7_k3_s1', 7, 8, 9, 21, 3, (1, 1), (1, 1, 1, 1), 1))
    cases.append(gen_conv(outdir, 'conv1x1_c8', 8, 16, 6, 11, 1, (1, 1), (0, 0, 0, 0), 1,
                          xdt=TensorProto.INT8))
    cases.append(gen_conv(outdir, 'conv1x1_c24', 24, 16, 7, 9, 1, (1, 1), (0, 0, 0, 0), 1))
    cases.append(gen_gemm(outdir, 'gemm_transb0', 3, 37, 10, False))
    cases.append(gen_gemm(outdir, 'gemm_transb1', 3, 64, 12, True))
    cases.append(gen_gemm(outdir, 'gemm_u8u8', 2, 33, 7, True, wdt=np.uint8))
    cases.append(gen_gemm(outdir, 'gemm_s8s8', 2, 40, 6, True, xdt=TensorProto.INT8))
    cases.append(gen_matmul3d(outdir, 'matmul3d', 2, 5, 48, 20))
    cases.append(gen_matmul_dyn(outdir, 'matmul_two_activations', (2, 3, 5, 17)))
    cases.append(gen_softmax(outdir, 'softmax_u8_last', (3, 4, 40), -1, TensorProto.UINT8))
    cases.append(gen_softmax(outdir, 'softmax_u8_axis1', (2, 25, 3), 1, TensorProto.UINT8))
    cases.append(gen_softmax(outdir, 'softmax_s8', (4, 33), -1, TensorProto.INT8))
    # float outputs (no Q after the layer)
    cases.append(gen_float_out(outdir, 'float_gemm', 'gemm', (3, 40), 9))
    cases.append(gen_float_out(outdir, 'float_matmul', 'matmul', (4, 33), 10))
    cases.append(gen_float_out(outdir, 'float_matmul3d_per_tensor', 'matmul', (2, 3, 32), 6,
                               per_channel=False))
    cases.append(gen_float_out(outdir, 'float_matmul_add', 'matmul_add', (3, 48), 8))
    cases.append(gen_float_out(outdir, 'float_matmul3d_add', 'matmul_add', (2, 4, 24), 5))
    cases.append(gen_float_out(outdir, 'float_matmul_u8u8', 'matmul', (3, 30), 7, wdt=np.uint8))
    # onnxruntime's QLinearAdd / QLinearMul (MLAS' SSE2 arithmetic, not the nodes')
    for op in ('Add', 'Mul'):
        for form in ('same', 'bcast_b', 'bcast_a', 'const'):
            cases.append(gen_qbin(outdir, f'qlinear_{op.lower()}_{form}', op, TensorProto.UINT8, form))
        cases.append(gen_qbin(outdir, f'qlinear_{op.lower()}_bcast_b_s8', op, TensorProto.INT8, 'bcast_b'))
        cases.append(gen_qbin(outdir, f'qlinear_{op.lower()}_same_s8', op, TensorProto.INT8, 'same'))
    with open(os.path.join(outdir, 'cases.txt'), 'w') as f:
        f.write('\n'.join(cases) + '\n')
    luts = [gen_lut_chain(outdir, 'lut_chain_u8', TensorProto.UINT8),
            gen_lut_chain(outdir, 'lut_chain_s8', TensorProto.INT8),
            gen_bin(outdir, 'bin_mul_float', 'mul_float'),
            gen_se_block(outdir, 'se_mul_u8', TensorProto.UINT8, 'mul'),
            gen_se_block(outdir, 'se_add_s8', TensorProto.INT8, 'add'),
            gen_se_block(outdir, 'table_float_out_s8', TensorProto.INT8, 'out')]
    with open(os.path.join(outdir, 'lut_cases.txt'), 'w') as f:
        f.write('\n'.join(luts) + '\n')
    # float depthwise convolutions and Sigmoid under an integer target (onnxruntime's NCHWc
    # arithmetic, its Conv kernel's one-row SGEMM, MLAS logistic);
    # dw24: a multiple of 8 (and of 4), compared under qemu Haswell too
    fdw = [gen_float_dw(outdir, 'fdw3x3_hswish', 32, 13, 45, 3, (1, 1), (1, 1, 1, 1), 'hardswish'),
           gen_float_dw(outdir, 'fdw5x5_s21', 16, 12, 37, 5, (2, 1), (2, 2, 2, 2), 'hardswish'),
           gen_float_dw(outdir, 'fdw3x3_s12', 16, 7, 70, 3, (1, 2), (1, 1, 1, 1)),
           gen_float_dw(outdir, 'fdw3x3_s2_asym', 16, 9, 20, 3, (2, 2), (0, 1, 1, 0)),
           gen_float_dw(outdir, 'fdw3x3_dil2', 16, 10, 33, 3, (1, 1), (2, 2, 2, 2), dil=2),
           gen_float_dw(outdir, 'fdw5x5_wide', 16, 6, 131, 5, (1, 1), (2, 2, 2, 2), 'hardswish'),
           # C a multiple of 4 but not of the block: NCHWc all the same (channels padded)
           gen_float_dw(outdir, 'fdw12', 12, 9, 29, 3, (1, 1), (1, 1, 1, 1), 'hardswish'),
           gen_float_dw(outdir, 'fdw88_5x5', 88, 6, 40, 5, (1, 1), (2, 2, 2, 2), 'hardswish'),
           # other C: onnxruntime's Conv kernel, MLAS' one-row SGEMM (groups of 4 products,
           # reduction slices past 128 taps; B transposed for a kernel as wide as the input)
           gen_float_dw(outdir, 'fdw6', 6, 12, 40, 5, (1, 1), (2, 2, 2, 2), 'hardswish'),
           gen_float_dw(outdir, 'fdw5_s2', 5, 9, 29, 3, (2, 2), (1, 1, 1, 1)),
           gen_float_dw(outdir, 'fdw7_dil2', 7, 10, 33, 3, (1, 1), (2, 2, 2, 2), dil=2),
           gen_float_dw(outdir, 'fdw10_asym', 10, 9, 29, 3, (2, 1), (0, 1, 1, 0)),
           gen_float_dw(outdir, 'fdw3_13x13', 3, 30, 30, 13, (1, 1), (6, 6, 6, 6)),
           gen_float_dw(outdir, 'fdw6_full_width', 6, 9, 3, 3, (1, 1), (0, 0, 0, 0)),
           gen_float_dw(outdir, 'fdw5_full_width', 5, 14, 5, 5, (1, 1), (0, 0, 0, 0), 'hardswish'),
           # GlobalAveragePool: 104 = 6.5 AVX-512 blocks (MLAS' four sums natively, NCHWc on
           # AVX2), 96 (NCHWc), 12 and 5 channels, odd pixel counts
           gen_float_gap(outdir, 'fgap104', 104, 3, 23), gen_float_gap(outdir, 'fgap96', 96, 3, 23),
           gen_float_gap(outdir, 'fgap12', 12, 5, 7), gen_float_gap(outdir, 'fgap5', 5, 1, 37),
           gen_float_gap(outdir, 'fgap96_input', 96, 3, 23, 'input'),
           gen_float_gap(outdir, 'fgap48_dwconv', 48, 3, 23, 'dwconv'),
           gen_float_gap(outdir, 'fgap40_dwconv', 40, 5, 13, 'dwconv'),
           gen_float_sigmoid(outdir, 'fsig', 'sigmoid'), gen_float_sigmoid(outdir, 'fswish', 'swish'),
           gen_float_sigmoid(outdir, 'fsig_lut', 'lut')]
    with open(os.path.join(outdir, 'fdw_cases.txt'), 'w') as f:
        f.write('\n'.join(fdw) + '\n')
    with open(os.path.join(outdir, 'fdw_avx2_cases.txt'), 'w') as f:
        f.write('\n'.join(fdw + [gen_float_dw(outdir, 'fdw24', 24, 9, 29, 3, (1, 1),
                                               (1, 1, 1, 1), 'hardswish'),
                                  gen_float_conv(outdir, 'fconv_stem', 3, 16, 23, 31, 3, (2, 2), (1, 1, 1, 1),
                                                 'hardswish'),
                                  gen_float_conv(outdir, 'fconv_pw64', 64, 32, 9, 13, 1, (1, 1), (0, 0, 0, 0),
                                                 'hardswish'),
                                  gen_float_conv(outdir, 'fconv_pw264', 264, 16, 5, 7, 1, (1, 1), (0, 0, 0, 0)),
                                  gen_float_conv(outdir, 'fconv_pw_s2', 32, 24, 9, 13, 1, (2, 2), (0, 0, 0, 0)),
                                  gen_float_conv(outdir, 'fconv3x3', 16, 32, 9, 17, 3, (1, 1), (1, 1, 1, 1),
                                                 'hardswish'),
                                  gen_float_conv(outdir, 'fconv5x5_s2', 24, 20, 11, 15, 5, (2, 1), (2, 2, 2, 2)),
                                  gen_float_conv(outdir, 'fconv3x3_dil2_nobias', 16, 16, 10, 12, 3, (1, 1),
                                                 (2, 2, 2, 2), dil=2, bias=False)]) + '\n')


if __name__ == '__main__':
    main()
