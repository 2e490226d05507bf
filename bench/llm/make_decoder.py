#!/usr/bin/env python3
"""Write a Llama/Qwen-style decoder-only ONNX graph with random weights, as external data.

    python bench/llm/make_decoder.py --preset tiny -o /tmp/tiny.onnx [--dtype float16] [--tie]

Needs numpy and onnx only (no torch). The weights go straight to OUT.data, one tensor at a
time and in chunks (never the whole model in memory), 64-byte aligned; the graph
(OUT) holds only references to them.

The graph (opset 17, standard operators only, so that onnxruntime's CPU provider and onnxq's
executor both run it):
  inputs   input_ids [B, S] int64, attention_mask [B, P+S] int64, position_ids [B, S] int64,
           past_key_values.N.key / .value [B, kv_heads, P, head_dim] (N = 0..layers-1)
  outputs  logits [B, S, vocab], present.N.key / .value [B, kv_heads, P+S, head_dim]
  token embedding Gather -> per layer: RMSNorm (ReduceMean of x^2, Sqrt, Div, Mul),
  q/k/v projections (MatMul, B stored [in, out]), rotary position embedding (rotate-half,
  cos/sin tables gathered by position_ids), grouped-query attention over past + current
  keys (query heads grouped [B, kv, group, S, D] so K/V broadcast), causal + padding mask,
  softmax, o_proj, residual; RMSNorm, SwiGLU MLP (silu(gate) * up -> down), residual ->
  final RMSNorm -> LM head (its own [hidden, vocab] weight, or with --tie the embedding
  table through Transpose: MatMul(x, Transpose(embed)) -> logits.
The compute type is the weight type (float32, float16; bfloat16 graphs are written but
onnxruntime's CPU provider has no bfloat16 MatMul).

Weights: N(0, 1) for the embedding table, N(0, 1/fan_in) for projections (o_proj and
down_proj further / sqrt(2 * layers) so the residual stream stays near unit size), norms
1 + N(0, 0.02); seeded per tensor (--seed + index), so a tensor's values do not depend on
the chunk size.
"""
import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

PRESETS = {
    # name: hidden, layers, heads, kv_heads, intermediate, vocab, max_positions
    "tiny": dict(hidden=128, layers=2, heads=4, kv_heads=2, inter=352, vocab=1000, max_pos=256),
    "small": dict(hidden=512, layers=4, heads=8, kv_heads=2, inter=1408, vocab=8000, max_pos=512),
    "1b": dict(hidden=2048, layers=22, heads=32, kv_heads=4, inter=5632, vocab=32000, max_pos=2048),
    "7b": dict(hidden=4096, layers=32, heads=32, kv_heads=32, inter=11008, vocab=32000, max_pos=4096),
}

ONNX_DT = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}
CHUNK = 1 << 24  # elements generated at a time


def to_dtype(a, dtype):
    """float32 array -> bytes of dtype (bfloat16: round to nearest even)."""
    if dtype == "float32":
        return a.astype(np.float32).tobytes()
    if dtype == "float16":
        return a.astype(np.float16).tobytes()
    u = a.astype(np.float32).view(np.uint32)
    r = ((u.astype(np.uint64) + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return r.tobytes()


class DataWriter:
    """Appends tensors to the external data file, 64-byte aligned, chunk by chunk."""

    def __init__(self, path, location):
        self.f = open(path, "wb")
        self.location = location
        self.off = 0
        self.index = 0
        self.total = 0

    def _ref(self, name, dt, dims, length, off):
        t = TensorProto()
        t.name = name
        t.data_type = dt
        t.dims.extend(dims)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", self.location), ("offset", str(off)), ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, v
        return t

    def _align(self):
        pad = (-self.off) % 64
        if pad:
            self.f.write(b"\0" * pad)
            self.off += pad

    def random(self, name, dims, dtype, std, mean=0.0, seed=0):
        """A tensor of N(mean, std^2) values, generated and written in chunks."""
        self._align()
        off = self.off
        n = int(np.prod(dims))
        rng = np.random.default_rng([seed, self.index])
        self.index += 1
        done = 0
        while done < n:
            k = min(CHUNK, n - done)
            a = rng.standard_normal(k, dtype=np.float32)
            if std != 1.0:
                a *= np.float32(std)
            if mean:
                a += np.float32(mean)
            b = to_dtype(a, dtype)
            self.f.write(b)
            done += k
        length = n * ITEMSIZE[dtype]
        self.off += length
        self.total += length
        return self._ref(name, ONNX_DT[dtype], dims, length, off)

    def array(self, name, a, dtype):
        self._align()
        off = self.off
        b = to_dtype(a, dtype) if dtype in ITEMSIZE else np.ascontiguousarray(a).tobytes()
        self.f.write(b)
        self.off += len(b)
        self.total += len(b)
        dt = ONNX_DT[dtype] if dtype in ONNX_DT else helper.np_dtype_to_tensor_dtype(a.dtype)
        return self._ref(name, dt, list(a.shape), len(b), off)

    def close(self):
        self.f.close()


def build(cfg, dtype, tie, out, seed, quiet):
    H, L, NH, KV, I, V, MP = (cfg[k] for k in ("hidden", "layers", "heads", "kv_heads", "inter", "vocab", "max_pos"))
    if H % NH or NH % KV:
        sys.exit("make_decoder: hidden must be a multiple of heads, heads a multiple of kv_heads")
    D = H // NH
    G = NH // KV
    if D % 2:
        sys.exit("make_decoder: head_dim must be even (rotary embedding)")
    T = ONNX_DT[dtype]
    data_name = os.path.basename(out) + ".data"
    dw = DataWriter(os.path.join(os.path.dirname(os.path.abspath(out)), data_name), data_name)
    inits, nodes = [], []
    uid = [0]

    def nm(base):
        uid[0] += 1
        return f"{base}_{uid[0]}"

    def node(op, ins, outs=None, name=None, **attrs):
        outs = outs if outs is not None else [nm(op.lower())]
        nodes.append(helper.make_node(op, ins, outs, name=name or nm("/" + op), **attrs))
        return outs[0] if len(outs) == 1 else outs

    def const(name, arr):
        inits.append(helper.make_tensor(name, helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape,
                                        arr.flatten().tolist()))
        return name

    def cval(name, value):  # a scalar of the compute type
        inits.append(helper.make_tensor(name, T, [], [float(value)]))
        return name

    eps = cval("rms_eps", 1e-5)
    two = cval("two", 2.0)
    one = cval("one", 1.0)
    neg = cval("mask_neg", -30000.0 if dtype == "float16" else -1e9)
    zero = cval("zero", 0.0)
    qscale = cval("attn_scale", 1.0 / math.sqrt(D))
    ax_last = const("axes_last", np.array([-1], dtype=np.int64))
    shp_q = const("shape_q", np.array([0, 0, KV, G, D], dtype=np.int64))
    shp_kv = const("shape_kv", np.array([0, 0, KV, D], dtype=np.int64))
    shp_out = const("shape_attn_out", np.array([0, 0, H], dtype=np.int64))

    def rmsnorm(x, wname, prefix):
        inits.append(dw.random(wname, [H], dtype, 0.02, mean=1.0, seed=seed))
        sq = node("Pow", [x, two], name=prefix + "/Pow")
        ms = node("ReduceMean", [sq], name=prefix + "/ReduceMean", axes=[-1], keepdims=1)
        r = node("Sqrt", [node("Add", [ms, eps], name=prefix + "/Add")], name=prefix + "/Sqrt")
        y = node("Div", [x, r], name=prefix + "/Div")
        return node("Mul", [y, wname], name=prefix + "/Mul")

    def linear(x, wname, k, n, std, prefix):
        inits.append(dw.random(wname, [k, n], dtype, std, seed=seed))
        return node("MatMul", [x, wname], name=prefix + "/MatMul")

    # rotary tables [max_pos, D/2] (float32 math, stored in the compute type)
    inv = 1.0 / (10000.0 ** (np.arange(0, D, 2, dtype=np.float64) / D))
    ang = np.arange(MP, dtype=np.float64)[:, None] * inv[None, :]
    inits.append(dw.array("rope_cos", np.cos(ang).astype(np.float32), dtype))
    inits.append(dw.array("rope_sin", np.sin(ang).astype(np.float32), dtype))

    emb = "model.embed_tokens.weight"
    inits.append(dw.random(emb, [V, H], dtype, 1.0, seed=seed))
    x = node("Gather", [emb, "input_ids"], name="/model/embed_tokens/Gather", axis=0)

    # position tables: cos/sin [B, S, D/2] -> [B, 1, S, D/2] (keys) and [B, 1, 1, S, D/2] (queries)
    cos = node("Gather", ["rope_cos", "position_ids"], name="/model/rotary/Gather_cos", axis=0)
    sin = node("Gather", ["rope_sin", "position_ids"], name="/model/rotary/Gather_sin", axis=0)
    ax1 = const("axes_1", np.array([1], dtype=np.int64))
    ax12 = const("axes_1_2", np.array([1, 2], dtype=np.int64))
    cos_k = node("Unsqueeze", [cos, ax1], name="/model/rotary/cos_k")
    sin_k = node("Unsqueeze", [sin, ax1], name="/model/rotary/sin_k")
    cos_q = node("Unsqueeze", [cos, ax12], name="/model/rotary/cos_q")
    sin_q = node("Unsqueeze", [sin, ax12], name="/model/rotary/sin_q")

    # mask [B, 1, 1, S, P+S]: causal (key j visible from query i when j <= P + i) and padding
    c0 = const("i64_0", np.array(0, dtype=np.int64))
    c1 = const("i64_1", np.array(1, dtype=np.int64))
    c2 = const("i64_2", np.array([2], dtype=np.int64))
    s_ids = node("Shape", ["input_ids"], name="/model/mask/Shape_ids")
    S = node("Squeeze", [node("Slice", [s_ids, ax1, c2], name="/model/mask/Slice_S")], name="/model/mask/S")
    s_past = node("Shape", ["past_key_values.0.key"], name="/model/mask/Shape_past")
    c3 = const("i64_3", np.array([3], dtype=np.int64))
    P = node("Squeeze", [node("Slice", [s_past, c2, c3], name="/model/mask/Slice_P")], name="/model/mask/P")
    Tt = node("Add", [P, S], name="/model/mask/T")
    rows = node("Range", [P, Tt, c1], name="/model/mask/rows")
    cols = node("Range", [c0, Tt, c1], name="/model/mask/cols")
    rows2 = node("Unsqueeze", [rows, ax_last], name="/model/mask/rows2")
    allowed = node("LessOrEqual", [cols, rows2], name="/model/mask/causal")
    causal = node("Where", [allowed, zero, neg], name="/model/mask/causal_bias")
    pad = node("Equal", ["attention_mask", c0], name="/model/mask/pad")
    padb = node("Where", [pad, neg, zero], name="/model/mask/pad_bias")
    ax123 = const("axes_1_2_3", np.array([1, 2, 3], dtype=np.int64))
    padb = node("Unsqueeze", [padb, ax123], name="/model/mask/pad_bias_u")
    mask = node("Add", [causal, padb], name="/model/mask/bias")  # [B, 1, 1, S, T]

    def rope(t, c, s, prefix):
        half = const(nm("split_half"), np.array([D // 2, D // 2], dtype=np.int64))
        a, b = node("Split", [t, half], [nm("rope_a"), nm("rope_b")], name=prefix + "/Split", axis=-1)
        lo = node("Sub", [node("Mul", [a, c], name=prefix + "/Mul_ac"), node("Mul", [b, s], name=prefix + "/Mul_bs")],
                  name=prefix + "/Sub")
        hi = node("Add", [node("Mul", [b, c], name=prefix + "/Mul_bc"), node("Mul", [a, s], name=prefix + "/Mul_as")],
                  name=prefix + "/Add")
        return node("Concat", [lo, hi], name=prefix + "/Concat", axis=-1)

    graph_inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total_seq"]),
        helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "seq"]),
    ]
    graph_outputs = [helper.make_tensor_value_info("logits", T, ["batch", "seq", V])]
    o_std = 1.0 / math.sqrt(H) / math.sqrt(2 * L)
    d_std = 1.0 / math.sqrt(I) / math.sqrt(2 * L)
    for li in range(L):
        p = f"/model/layers.{li}"
        w = f"model.layers.{li}"
        pk, pv = f"past_key_values.{li}.key", f"past_key_values.{li}.value"
        ok, ov = f"present.{li}.key", f"present.{li}.value"
        graph_inputs += [helper.make_tensor_value_info(n, T, ["batch", KV, "past_seq", D]) for n in (pk, pv)]
        graph_outputs += [helper.make_tensor_value_info(n, T, ["batch", KV, "total_seq", D]) for n in (ok, ov)]
        h = rmsnorm(x, f"{w}.input_layernorm.weight", p + "/input_layernorm")
        q = linear(h, f"{w}.self_attn.q_proj.weight", H, NH * D, 1 / math.sqrt(H), p + "/self_attn/q_proj")
        k = linear(h, f"{w}.self_attn.k_proj.weight", H, KV * D, 1 / math.sqrt(H), p + "/self_attn/k_proj")
        v = linear(h, f"{w}.self_attn.v_proj.weight", H, KV * D, 1 / math.sqrt(H), p + "/self_attn/v_proj")
        q = node("Transpose", [node("Reshape", [q, shp_q], name=p + "/self_attn/Reshape_q")],
                 name=p + "/self_attn/Transpose_q", perm=[0, 2, 3, 1, 4])  # [B, KV, G, S, D]
        k = node("Transpose", [node("Reshape", [k, shp_kv], name=p + "/self_attn/Reshape_k")],
                 name=p + "/self_attn/Transpose_k", perm=[0, 2, 1, 3])  # [B, KV, S, D]
        v = node("Transpose", [node("Reshape", [v, shp_kv], name=p + "/self_attn/Reshape_v")],
                 name=p + "/self_attn/Transpose_v", perm=[0, 2, 1, 3])
        q = rope(q, cos_q, sin_q, p + "/self_attn/rope_q")
        k = rope(k, cos_k, sin_k, p + "/self_attn/rope_k")
        kall = node("Concat", [pk, k], [ok], name=p + "/self_attn/Concat_k", axis=2)
        vall = node("Concat", [pv, v], [ov], name=p + "/self_attn/Concat_v", axis=2)
        ku = node("Unsqueeze", [kall, const(f"axes_2_l{li}", np.array([2], dtype=np.int64))],
                  name=p + "/self_attn/Unsqueeze_k")  # [B, KV, 1, T, D]
        vu = node("Unsqueeze", [vall, f"axes_2_l{li}"], name=p + "/self_attn/Unsqueeze_v")
        kt = node("Transpose", [ku], name=p + "/self_attn/Transpose_kt", perm=[0, 1, 2, 4, 3])
        sc = node("MatMul", [node("Mul", [q, qscale], name=p + "/self_attn/Mul_scale"), kt],
                  name=p + "/self_attn/MatMul_qk")  # [B, KV, G, S, T]
        sc = node("Add", [sc, mask], name=p + "/self_attn/Add_mask")
        pr = node("Softmax", [sc], name=p + "/self_attn/Softmax", axis=-1)
        at = node("MatMul", [pr, vu], name=p + "/self_attn/MatMul_pv")  # [B, KV, G, S, D]
        at = node("Transpose", [at], name=p + "/self_attn/Transpose_out", perm=[0, 3, 1, 2, 4])
        at = node("Reshape", [at, shp_out], name=p + "/self_attn/Reshape_out")
        o = linear(at, f"{w}.self_attn.o_proj.weight", H, H, o_std, p + "/self_attn/o_proj")
        x = node("Add", [x, o], name=p + "/Add_attn")
        h = rmsnorm(x, f"{w}.post_attention_layernorm.weight", p + "/post_attention_layernorm")
        gt = linear(h, f"{w}.mlp.gate_proj.weight", H, I, 1 / math.sqrt(H), p + "/mlp/gate_proj")
        up = linear(h, f"{w}.mlp.up_proj.weight", H, I, 1 / math.sqrt(H), p + "/mlp/up_proj")
        act = node("Mul", [gt, node("Sigmoid", [gt], name=p + "/mlp/Sigmoid")], name=p + "/mlp/silu")
        m = node("Mul", [act, up], name=p + "/mlp/Mul")
        dn = linear(m, f"{w}.mlp.down_proj.weight", I, H, d_std, p + "/mlp/down_proj")
        x = node("Add", [x, dn], name=p + "/Add_mlp")
        if not quiet:
            print(f"make_decoder: layer {li + 1} of {L} ({dw.total / 1e9:.2f} GB written)", file=sys.stderr)
    x = rmsnorm(x, "model.norm.weight", "/model/norm")
    if tie:
        et = node("Transpose", [emb], name="/lm_head/Transpose", perm=[1, 0])
        node("MatMul", [x, et], ["logits"], name="/lm_head/MatMul")
    else:
        inits.append(dw.random("lm_head.weight", [H, V], dtype, 1 / math.sqrt(H), seed=seed))
        node("MatMul", [x, "lm_head.weight"], ["logits"], name="/lm_head/MatMul")
    dw.close()
    g = helper.make_graph(nodes, "decoder", graph_inputs, graph_outputs, initializer=inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="onnxq make_decoder")
    model.ir_version = 8
    meta = dict(hidden=H, layers=L, heads=NH, kv_heads=KV, head_dim=D, intermediate=I, vocab=V, max_positions=MP,
                dtype=dtype, tied=int(tie), seed=seed)
    for k, v in meta.items():
        e = model.metadata_props.add()
        e.key, e.value = f"decoder.{k}", str(v)
    with open(out, "wb") as f:
        f.write(model.SerializeToString())
    return dw.total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    for k in ("hidden", "layers", "heads", "kv_heads", "inter", "vocab", "max_pos"):
        ap.add_argument("--" + k.replace("_", "-"), type=int, help=f"override the preset's {k}")
    ap.add_argument("--dtype", choices=sorted(ONNX_DT), default="float32", help="weight and compute type")
    ap.add_argument("--tie", action="store_true", help="LM head = the embedding table (MatMul(x, Transpose(E)))")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-q", "--quiet", action="store_true")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    cfg = dict(PRESETS[a.preset])
    for k in cfg:
        v = getattr(a, k)
        if v is not None:
            cfg[k] = v
    n = build(cfg, a.dtype, a.tie, a.output, a.seed, a.quiet)
    if not a.quiet:
        print(f"make_decoder: wrote {a.output} and {a.output}.data ({n} bytes of weights, {a.dtype}, "
              f"{cfg})", file=sys.stderr)


if __name__ == "__main__":
    main()
