#!/usr/bin/env python3
"""Train a small Llama-style decoder LM on CPU, export it to ONNX, write calibration and
evaluation token files: the trained model that weight-only perplexity is measured on
(bench/llm/README.md "Trained decoder").

    VENV=$(bash bench/zoo/venv.sh)
    $VENV/bin/python bench/llm/train_decoder.py            # ~20 min on 2 cores, cached

Three text sources that share no file (never one text split by seed):
  train        docstrings of the Python files of transformers, torch and sympy (zoo venv)
  calibration  docstrings of the Python standard library (/usr/lib/python3.X)
  evaluation   docstrings of numpy and networkx (zoo venv)
Model: 4 decoder blocks, hidden 256, 4 heads (head dim 64), RMSNorm, rotary positions,
SwiGLU MLP (768), untied LM head, byte-level BPE vocabulary of 4096 trained with
`tokenizers` on the train text. Sequences of 128 tokens.

Writes under $ONNXQ_CACHE/llm/decoder (default ~/.cache/onnxq/llm/decoder), never in the repo:
  tokenizer.json, model.pt, model.onnx (input_ids int64 [batch, seq] -> logits
  [batch, seq, 4096]; opset 17; every Linear is MatMul with a constant B), calib/NNN/input_ids.npy
  (128 sequences of 128 tokens from the calibration source), eval.npy (int64 [n, 128], the
  evaluation source), unigram.json (the unigram perplexity of eval under train counts),
  train.json (steps, time, losses).
"""
import argparse
import ast
import glob
import json
import math
import os
import random
import sys
import sysconfig
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SEQ = 128
VOCAB = 4096


def docstrings(roots, limit_chars):
    """The docstrings of every .py file under roots, in sorted path order, up to limit_chars."""
    out, total = [], 0
    files = []
    for r in roots:
        files += sorted(glob.glob(os.path.join(r, "**", "*.py"), recursive=True))
    for f in files:
        if "/test" in f or "/tests/" in f:
            continue
        try:
            tree = ast.parse(open(f, encoding="utf-8", errors="replace").read())
        except (SyntaxError, ValueError, RecursionError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                ds = ast.get_docstring(node)
                if ds and len(ds) > 40:
                    out.append(ds)
                    total += len(ds)
                    if total >= limit_chars:
                        return out
    return out


def site_packages():
    return sysconfig.get_paths()["purelib"]


def stdlib():
    return sysconfig.get_paths()["stdlib"]


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Block(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.attn_norm = RMSNorm(d)
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)
        self.mlp_norm = RMSNorm(d)
        self.gate_proj = nn.Linear(d, ff, bias=False)
        self.up_proj = nn.Linear(d, ff, bias=False)
        self.down_proj = nn.Linear(ff, d, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, D = x.shape
        h = self.attn_norm(x)
        q = self.q_proj(h).view(B, T, self.h, self.dh).transpose(1, 2)
        k = self.k_proj(h).view(B, T, self.h, self.dh).transpose(1, 2)
        v = self.v_proj(h).view(B, T, self.h, self.dh).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(self.dh)) + mask
        y = torch.softmax(att, dim=-1) @ v
        x = x + self.o_proj(y.transpose(1, 2).reshape(B, T, D))
        h = self.mlp_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Decoder(nn.Module):
    def __init__(self, vocab=VOCAB, d=256, layers=4, heads=4, ff=768, max_len=SEQ):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([Block(d, heads, ff) for _ in range(layers)])
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        dh = d // heads
        inv = 1.0 / (10000 ** (torch.arange(0, dh, 2).float() / dh))
        f = torch.outer(torch.arange(max_len).float(), inv)
        emb = torch.cat((f, f), dim=-1)
        self.register_buffer("cos", emb.cos()[None, None], persistent=False)
        self.register_buffer("sin", emb.sin()[None, None], persistent=False)
        self.register_buffer("causal", torch.triu(torch.full((max_len, max_len), -1e9), 1)[None, None],
                             persistent=False)

    def forward(self, ids):
        T = ids.shape[1]
        x = self.embed(ids)
        cos, sin, mask = self.cos[:, :, :T], self.sin[:, :, :T], self.causal[:, :, :T, :T]
        for b in self.blocks:
            x = b(x, cos, sin, mask)
        return self.lm_head(self.norm(x))


def chunks(ids, n=None):
    m = len(ids) // SEQ
    a = np.asarray(ids[: m * SEQ], dtype=np.int64).reshape(m, SEQ)
    return a if n is None else a[:n]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.environ.get("ONNXQ_CACHE", os.path.expanduser("~/.cache/onnxq")),
                                                  "llm", "decoder"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--calib", type=int, default=128, help="calibration sequences")
    ap.add_argument("--eval", type=int, default=256, help="evaluation sequences")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    random.seed(0)
    os.makedirs(a.out, exist_ok=True)
    if os.path.exists(os.path.join(a.out, "model.onnx")) and not a.force:
        print(f"{a.out}/model.onnx exists (--force to retrain)")
        return 0

    sp = site_packages()
    train_txt = docstrings([os.path.join(sp, p) for p in ("transformers", "torch", "sympy")], 24_000_000)
    calib_txt = docstrings([stdlib()], 2_000_000)
    eval_txt = docstrings([os.path.join(sp, p) for p in ("numpy", "networkx")], 2_000_000)
    print(f"text: train {sum(map(len, train_txt))} chars, calibration {sum(map(len, calib_txt))}, "
          f"evaluation {sum(map(len, eval_txt))}", flush=True)

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(train_txt, trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<|end|>"],
                                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                           show_progress=False))
    tok.save(os.path.join(a.out, "tokenizer.json"))
    end = tok.token_to_id("<|end|>")

    def encode(texts):
        ids = []
        for e in tok.encode_batch(texts):
            ids += e.ids + [end]
        return ids

    train_ids = np.asarray(encode(train_txt), dtype=np.int64)
    calib = chunks(encode(calib_txt))
    ev = chunks(encode(eval_txt))
    rng = np.random.default_rng(0)
    calib = calib[np.sort(rng.choice(len(calib), min(a.calib, len(calib)), replace=False))]
    ev = ev[np.sort(rng.choice(len(ev), min(a.eval, len(ev)), replace=False))]
    print(f"tokens: train {len(train_ids)}, calibration {calib.shape}, evaluation {ev.shape}", flush=True)

    # unigram baseline: add-one smoothed train counts, perplexity on eval
    counts = np.bincount(train_ids, minlength=VOCAB).astype(np.float64) + 1.0
    p = counts / counts.sum()
    uni = float(np.exp(-np.log(p[ev[:, 1:]]).mean()))
    json.dump({"unigram_ppl": uni}, open(os.path.join(a.out, "unigram.json"), "w"))
    print(f"unigram perplexity on eval: {uni:.1f}", flush=True)

    model = Decoder()
    nparam = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    warm = 30
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / a.steps))))
    g = torch.Generator().manual_seed(0)
    t0 = time.time()
    log = []
    model.train()
    for step in range(a.steps):
        starts = torch.randint(0, len(train_ids) - SEQ - 1, (a.batch,), generator=g).numpy()
        x = torch.from_numpy(np.stack([train_ids[s:s + SEQ + 1] for s in starts]))
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 50 == 0 or step == a.steps - 1:
            el = time.time() - t0
            log.append({"step": step, "loss": loss.item(), "s": el})
            print(f"step {step}/{a.steps} loss {loss.item():.3f} {el:.0f}s", flush=True)
    train_s = time.time() - t0
    model.eval()
    torch.save(model.state_dict(), os.path.join(a.out, "model.pt"))
    with torch.no_grad():
        nll = []
        for i in range(0, len(ev), 32):
            x = torch.from_numpy(ev[i:i + 32])
            lg = model(x)
            nll.append(F.cross_entropy(lg[:, :-1].reshape(-1, VOCAB), x[:, 1:].reshape(-1), reduction="none"))
        torch_ppl = float(torch.exp(torch.cat(nll).mean()))
    print(f"torch perplexity on eval: {torch_ppl:.2f} (unigram {uni:.1f})", flush=True)

    onnx_path = os.path.join(a.out, "model.onnx")
    tmp = onnx_path + ".tmp"
    torch.onnx.export(model, (torch.from_numpy(calib[:1]),), tmp, input_names=["input_ids"], output_names=["logits"],
                      dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}},
                      opset_version=17, dynamo=False)
    os.replace(tmp, onnx_path)
    for i, s in enumerate(calib):
        d = os.path.join(a.out, "calib", f"{i:03d}")
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "input_ids.npy"), s[None])
    np.save(os.path.join(a.out, "eval.npy"), ev)
    json.dump({"params": nparam, "steps": a.steps, "batch": a.batch, "seq": SEQ, "train_s": train_s,
               "threads": a.threads, "train_tokens": int(len(train_ids)), "torch_eval_ppl": torch_ppl,
               "unigram_ppl": uni, "log": log}, open(os.path.join(a.out, "train.json"), "w"), indent=1)
    print(f"wrote {onnx_path} ({nparam} parameters, trained {train_s:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
