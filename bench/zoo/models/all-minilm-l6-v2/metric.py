#!/usr/bin/env python3
"""Task metric of a sentence encoder (output last_hidden_state [1, L, H]): the quantized
model against the float model on the evaluation sentences, through the pooling the model
is used with (sentence-transformers: attention-masked mean, then L2 normalization).

  cos_mean, cos_min   cosine of the sentence embeddings, quantized against float
                      (task value: cos_mean)
  nn_agree            retrieval agreement: for each eval sentence, its nearest neighbour
                      among the other eval sentences (cosine) with float embeddings and
                      with quantized ones: share where they are the same sentence
  sqnr_tokens_min     the worst sentence's SQNR of last_hidden_state (dB)

As a module: evaluate(float_outs, quant_outs, meta) (bench/zoo/README.md). Standalone, in
onnxruntime (graph optimizations on, 1 thread):
    python metric.py FLOAT QUANT EVALDIR
"""
import json
import os
import sys

import numpy as np


def pool(h, mask):
    m = mask.reshape(-1).astype(np.float64)[:, None]
    e = (h.reshape(m.shape[0], -1).astype(np.float64) * m).sum(0) / max(m.sum(), 1e-9)
    return e / max(np.linalg.norm(e), 1e-30)


def nearest(e):
    s = e @ e.T
    np.fill_diagonal(s, -np.inf)
    return s.argmax(1)


def compare(hf, hq, masks):
    ef = np.stack([pool(h, m) for h, m in zip(hf, masks)])
    eq = np.stack([pool(h, m) for h, m in zip(hq, masks)])
    cos = (ef * eq).sum(1)
    per = []
    for f, q, m in zip(hf, hq, masks):
        k = m.reshape(-1).astype(bool)
        f = f.reshape(k.shape[0], -1)[k].astype(np.float64)
        q = q.reshape(k.shape[0], -1)[k].astype(np.float64)
        per.append(10 * np.log10((f ** 2).sum() / max(((f - q) ** 2).sum(), 1e-30)))
    return {
        "task": {"name": "emb_cos_mean", "value": float(cos.mean())},
        "cos_min": float(cos.min()),
        "nn_agree": float((nearest(ef) == nearest(eq)).mean()) if len(hf) > 2 else float("nan"),
        "sqnr_tokens_min": float(min(per)),
    }


def evaluate(float_outs, quant_outs, meta):
    key = "last_hidden_state"
    masks = [np.load(os.path.join(m["_dir"], "attention_mask.npy")) for m in meta]
    return compare([o[key] for o in float_outs], [o[key] for o in quant_outs], masks)


def main():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    import zoolib
    fl, q, ev = sys.argv[1:4]
    dirs = zoolib.sample_dirs(ev)
    sf, sq = zoolib.ort_session(fl), zoolib.ort_session(q)
    feeds = [zoolib.load_sample(d, zoolib.input_names(sf)) for d in dirs]
    meta = [zoolib.load_meta(d) for d in dirs]
    fo, qo = zoolib.run_all(sf, feeds), zoolib.run_all(sq, feeds)
    r = evaluate(fo, qo, meta)
    r["sqnr_db"] = zoolib.slice_sqnr(fo, qo, None)[0]
    print(json.dumps(r))


if __name__ == "__main__":
    main()
