#!/usr/bin/env python3
"""Calibration samples for a make_decoder.py graph, in the --calib DIR layout.

    python bench/llm/make_calib.py MODEL OUT_DIR [--samples 128] [--tokens 512] [--seed 5]

One folder per sample with input_ids (uniform random token ids: the generated decoders
have random weights, so no text is more typical than another), attention_mask of ones,
position_ids 0..S-1 and empty past_key_values.N.key/.value [1, kv_heads, 0, head_dim] in
the model's float type. numpy and onnx only; reads the graph, not the weights.
"""
import argparse
import os

import numpy as np
import onnx

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("model")
ap.add_argument("out")
ap.add_argument("--samples", type=int, default=128)
ap.add_argument("--tokens", type=int, default=512)
ap.add_argument("--seed", type=int, default=5)
a = ap.parse_args()
g = onnx.load(a.model, load_external_data=False).graph
embed = [t for t in g.initializer if "embed" in t.name]
vocab = embed[0].dims[0] if embed else 1000
rng = np.random.default_rng(a.seed)
FLOAT = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.FLOAT16: np.float16}
for k in range(a.samples):
    d = os.path.join(a.out, f"{k:04d}")
    os.makedirs(d, exist_ok=True)
    S = a.tokens
    for i in g.input:
        if i.name == "input_ids":
            x = rng.integers(0, vocab, (1, S)).astype(np.int64)
        elif i.name == "attention_mask":
            x = np.ones((1, S), np.int64)
        elif i.name == "position_ids":
            x = np.arange(S, dtype=np.int64)[None]
        else:
            t = i.type.tensor_type
            dims = [x.dim_value for x in t.shape.dim]
            x = np.zeros((1, dims[1], 0, dims[3]), FLOAT[t.elem_type])
        np.save(os.path.join(d, i.name + ".npy"), x)
print(f"make_calib: {a.samples} samples of {a.tokens} tokens in {a.out}")
