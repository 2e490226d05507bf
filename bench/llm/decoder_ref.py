#!/usr/bin/env python3
"""The float32 reference of a make_decoder.py graph, in numpy, one layer's weights at a time.

    python bench/llm/decoder_ref.py MODEL -o REF.npz [--prompts 4] [--prompt-len 32] [--generate 8] [--seed 1234]

For the models whose float16 graph onnxruntime cannot load on this machine (the 7B shape
needs more than 24 GB there): the same computation as the graph (RMSNorm, rotary embedding
from the model's own cos/sin tables, grouped-query causal attention with a KV cache,
SwiGLU, LM head), in float32 from the model's float16/float32 weights, read from its
external data file one tensor at a time (peak memory: one layer's weights in float32, about
0.75 GB at the 7B shape, plus the LM head). The prompts are decoder_ort.py's (same seed and
sizes): each prompt is prefilled, then --generate greedy steps through the cache. Writes
REF.npz with `logits` [prompts, prompt_len + generate, vocab] float32, `tokens` [prompts,
generate] and `prompts`; `decoder_ort.py QUANT --ref-npz REF.npz` compares a model with it.

Checked against onnxruntime on the 1B shape (float16 graph; bench/llm/README.md).
"""
import argparse
import os
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper

NP = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.FLOAT16: np.float16}


class Weights:
    def __init__(self, path):
        self.model = onnx.load(path, load_external_data=False)
        self.dir = os.path.dirname(os.path.abspath(path))
        self.inits = {t.name: t for t in self.model.graph.initializer}
        self.meta = {p.key.split(".", 1)[1]: p.value for p in self.model.metadata_props
                     if p.key.startswith("decoder.")}

    def get(self, name, rows=None):
        """Tensor `name` as float32 (only `rows` of its first axis when given)."""
        t = self.inits[name]
        if t.data_location != onnx.TensorProto.EXTERNAL:
            a = numpy_helper.to_array(t)
        else:
            ext = {e.key: e.value for e in t.external_data}
            a = np.memmap(os.path.join(self.dir, ext["location"]), dtype=NP[t.data_type], mode="r",
                          offset=int(ext.get("offset", 0)), shape=tuple(t.dims))
        return np.asarray(a if rows is None else a[rows], dtype=np.float32)


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(t, c, s):
    h = t.shape[-1] // 2
    a, b = t[..., :h], t[..., h:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


class Decoder:
    def __init__(self, w):
        m = w.meta
        self.w = w
        self.H, self.L, self.NH = int(m["hidden"]), int(m["layers"]), int(m["heads"])
        self.KV, self.D, self.V = int(m["kv_heads"]), int(m["head_dim"]), int(m["vocab"])
        self.G = self.NH // self.KV
        self.tied = m.get("tied", "0") == "1"
        self.eps = float(w.get("rms_eps"))
        self.scale = float(w.get("attn_scale"))
        self.cos, self.sin = w.get("rope_cos"), w.get("rope_sin")

    def forward(self, ids, pos0, cache):
        """ids [B, S] after pos0 cached positions; cache: per layer (K, V) [B, KV, pos0, D] or
        None. Returns logits [B, S, V] and the new cache."""
        B, S = ids.shape
        H, KV, G, D = self.H, self.KV, self.G, self.D
        x = self.w.get("model.embed_tokens.weight", ids.reshape(-1)).reshape(B, S, H)
        pos = np.arange(pos0, pos0 + S)
        c, s = self.cos[pos], self.sin[pos]                  # [S, D/2]
        T = pos0 + S
        allowed = np.arange(T)[None, :] <= (pos0 + np.arange(S))[:, None]   # [S, T]
        bias = np.where(allowed, 0.0, -1e30).astype(np.float32)
        new = []
        for li in range(self.L):
            p = f"model.layers.{li}"
            h = rmsnorm(x, self.w.get(f"{p}.input_layernorm.weight"), self.eps)
            q = (h @ self.w.get(f"{p}.self_attn.q_proj.weight")).reshape(B, S, KV, G, D).transpose(0, 2, 3, 1, 4)
            k = (h @ self.w.get(f"{p}.self_attn.k_proj.weight")).reshape(B, S, KV, D).transpose(0, 2, 1, 3)
            v = (h @ self.w.get(f"{p}.self_attn.v_proj.weight")).reshape(B, S, KV, D).transpose(0, 2, 1, 3)
            q = rope(q, c, s)
            k = rope(k, c, s)
            if cache is not None:
                k = np.concatenate([cache[li][0], k], axis=2)
                v = np.concatenate([cache[li][1], v], axis=2)
            new.append((k, v))
            sc = (q * self.scale) @ k[:, :, None].transpose(0, 1, 2, 4, 3)   # [B, KV, G, S, T]
            pr = softmax(sc + bias)
            at = (pr @ v[:, :, None]).transpose(0, 3, 1, 2, 4).reshape(B, S, H)
            x = x + at @ self.w.get(f"{p}.self_attn.o_proj.weight")
            h = rmsnorm(x, self.w.get(f"{p}.post_attention_layernorm.weight"), self.eps)
            g = h @ self.w.get(f"{p}.mlp.gate_proj.weight")
            u = h @ self.w.get(f"{p}.mlp.up_proj.weight")
            x = x + (g / (1.0 + np.exp(-g)) * u) @ self.w.get(f"{p}.mlp.down_proj.weight")
        x = rmsnorm(x, self.w.get("model.norm.weight"), self.eps)
        head = self.w.get("model.embed_tokens.weight").T if self.tied else self.w.get("lm_head.weight")
        return x @ head, new


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--generate", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    t0 = time.time()
    dec = Decoder(Weights(a.model))
    rng = np.random.default_rng(a.seed)   # decoder_ort.py's prompts
    prompts = np.concatenate([rng.integers(0, dec.V, size=(1, a.prompt_len), dtype=np.int64)
                              for _ in range(a.prompts)])
    lg, cache = dec.forward(prompts, 0, None)
    rows = [lg]
    toks = []
    pos = a.prompt_len
    for k in range(a.generate):
        t = np.argmax(rows[-1][:, -1], axis=-1)
        toks.append(t)
        lg, cache = dec.forward(t[:, None].astype(np.int64), pos, cache)
        pos += 1
        rows.append(lg)
        print(f"decoder_ref: step {k + 1} of {a.generate}, {time.time() - t0:.0f} s", file=sys.stderr)
    np.savez(a.output, logits=np.concatenate(rows, axis=1).astype(np.float32),
             tokens=np.stack(toks, axis=1) if toks else np.zeros((a.prompts, 0), np.int64), prompts=prompts)
    print(f"decoder_ref: wrote {a.output} in {time.time() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
