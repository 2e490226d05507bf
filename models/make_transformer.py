#!/usr/bin/env python3
"""Trains the small text transformer of the tests and writes models/text_transformer.onnx.

The task (models/text_task.py): 6-class classification of templated restaurant reviews
(topic x sentiment of the main clause, with "but" and negations). The model is a BERT-
style encoder: token + learned positional embeddings, 2 post-LN (as BERT) encoder
layers of d_model 128, 4 heads, FFN 512 with GELU (erf), LayerNormalization,
then the [CLS] position through a tanh pooler (the embedding output) and a linear
classifier (the logits output).

    input  tokens     int64 [batch, 24]   token ids, 0 = padding, 1 = [CLS] first
    output logits     float [batch, 6]
    output embedding  float [batch, 128]  pooled [CLS] embedding (tanh)

Needs PyTorch (CPU) and onnx, e.g. a venv outside the repo:

    python3 -m venv ~/.cache/onnxq/torch-venv
    ~/.cache/onnxq/torch-venv/bin/pip install torch==2.13.0 numpy onnx==1.23.2
    ~/.cache/onnxq/torch-venv/bin/python models/make_transformer.py models/text_transformer.onnx

Deterministic: fixed seeds, one thread (torch.set_num_threads(1)), fixed step count.
Prints the training time and the accuracy on the eval set (seed 2002, text_task.py).
Also writes the calibration set (models/text_calib, seed 1001) next to the model.
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import text_task as task  # noqa: E402

D_MODEL, HEADS, LAYERS, FFN = 128, 4, 2, 512


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(D_MODEL, D_MODEL)
        self.k = nn.Linear(D_MODEL, D_MODEL)
        self.v = nn.Linear(D_MODEL, D_MODEL)
        self.o = nn.Linear(D_MODEL, D_MODEL)
        self.ln1 = nn.LayerNorm(D_MODEL)
        self.ff1 = nn.Linear(D_MODEL, FFN)
        self.ff2 = nn.Linear(FFN, D_MODEL)
        self.ln2 = nn.LayerNorm(D_MODEL)
        self.act = nn.GELU()

    def forward(self, x):
        b, s, _ = x.shape
        dh = D_MODEL // HEADS

        def heads(t):
            return t.reshape(b, s, HEADS, dh).transpose(1, 2)  # [b, h, s, dh]
        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        att = torch.softmax(torch.matmul(q, k.transpose(2, 3)) / math.sqrt(dh), dim=-1)
        ctx = torch.matmul(att, v).transpose(1, 2).reshape(b, s, D_MODEL)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.ff2(self.act(self.ff1(x))))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(task.VOCAB_SIZE, D_MODEL)
        self.pos = nn.Parameter(torch.randn(1, task.SEQ_LEN, D_MODEL) * 0.02)
        self.ln = nn.LayerNorm(D_MODEL)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.pool = nn.Linear(D_MODEL, D_MODEL)
        self.cls = nn.Linear(D_MODEL, task.NUM_CLASSES)

    def forward(self, tokens):
        x = self.ln(self.tok(tokens) + self.pos)
        for layer in self.layers:
            x = layer(x)
        emb = torch.tanh(self.pool(x[:, 0]))
        return self.cls(emb), emb


def accuracy(model, ids, labels):
    model.eval()
    with torch.no_grad():
        logits, _ = model(torch.from_numpy(ids))
    model.train()
    return float((logits.argmax(1).numpy() == labels).mean())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", help="the .onnx to write")
    ap.add_argument("--steps", type=int, default=2500)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--train", type=int, default=20000, help="training sentences")
    ap.add_argument("--ref", default="/tmp/text_transformer.torch_eval.npz",
                    help="where to write torch's outputs on the eval set (tokens, logits, embedding)")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    train_ids, train_labels, _ = task.make(task.SEEDS["train"], a.train)
    eval_ids, eval_labels, _ = task.make(task.SEEDS["eval"], task.COUNTS["eval"])
    cal_ids, cal_labels, cal_sent = task.make(task.SEEDS["calib"], task.COUNTS["calib"])
    seen = {r.tobytes() for r in train_ids}
    print(f"eval sentences also in the training set: "
          f"{sum(r.tobytes() in seen for r in eval_ids)}/{len(eval_ids)}; calib: "
          f"{sum(r.tobytes() in seen for r in cal_ids)}/{len(cal_ids)}")

    model = Encoder()
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=a.lr, total_steps=a.steps,
                                                pct_start=0.1)
    gen = np.random.default_rng(1)
    x_all, y_all = torch.from_numpy(train_ids), torch.from_numpy(train_labels)
    t0 = time.time()
    for step in range(a.steps):
        idx = torch.from_numpy(gen.integers(0, len(train_ids), a.batch))
        logits, _ = model(x_all[idx])
        loss = nn.functional.cross_entropy(logits, y_all[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if (step + 1) % 250 == 0:
            print(f"step {step + 1}: loss {loss.item():.4f}, eval accuracy "
                  f"{accuracy(model, eval_ids, eval_labels):.4f}, {time.time() - t0:.0f} s",
                  flush=True)
    print(f"trained {a.steps} steps of {a.batch} in {time.time() - t0:.0f} s; accuracy: "
          f"train {accuracy(model, train_ids[:2000], train_labels[:2000]):.4f} (first 2000), "
          f"eval {accuracy(model, eval_ids, eval_labels):.4f}, "
          f"calib {accuracy(model, cal_ids, cal_labels):.4f} (chance 1/6)")

    model.eval()
    example = torch.from_numpy(eval_ids[:2])
    export_kw = dict(input_names=["tokens"], output_names=["logits", "embedding"],
                     dynamic_axes={"tokens": {0: "batch"}, "logits": {0: "batch"},
                                   "embedding": {0: "batch"}},
                     opset_version=17, do_constant_folding=True)
    tmp = a.out + ".tmp"
    try:
        torch.onnx.export(model, (example,), tmp, dynamo=False, **export_kw)
    except TypeError:  # a torch without the dynamo switch
        torch.onnx.export(model, (example,), tmp, **export_kw)
    import onnx
    m = onnx.load(tmp)
    m.producer_name, m.doc_string = "models/make_transformer.py", (
        "text_task.py review classifier: tokens int64 [batch, 24] -> logits [batch, 6], "
        "embedding [batch, 128]")
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, tmp)
    os.replace(tmp, a.out)
    ops = {}
    for n in m.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    print(f"{a.out}: {os.path.getsize(a.out)} bytes, opset "
          f"{[o.version for o in m.opset_import if o.domain in ('', 'ai.onnx')][0]}, "
          f"{sum(p.numel() for p in model.parameters())} parameters, ops "
          + ", ".join(f"{k} {v}" for k, v in sorted(ops.items())))
    # torch's outputs on the eval set, for the check against onnxruntime
    with torch.no_grad():
        logits, emb = model(torch.from_numpy(eval_ids))
    np.savez(a.ref, logits=logits.numpy(), embedding=emb.numpy(),
             tokens=eval_ids)
    calib = os.path.join(os.path.dirname(os.path.abspath(a.out)), "text_calib")
    task.write_folder(calib, cal_ids, cal_labels, cal_sent)
    print(f"{calib}: {len(cal_ids)} calibration samples")


if __name__ == "__main__":
    main()
