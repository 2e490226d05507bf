#!/usr/bin/env python3
"""Perplexity of decoder LM ONNX models (input_ids int64 [batch, seq] -> logits [batch,
seq, vocab]) in onnxruntime on token sequences (eval.npy of bench/llm/train_decoder.py):
exp of the mean next-token cross-entropy over every position but the last of each sequence.

    PY=$(bash .ci/venv.sh)/bin/python
    $PY bench/llm/perplexity.py ~/.cache/onnxq/llm/decoder/model.onnx q.onnx [--eval E.npy] [--json out.json]

Prints one line per model: perplexity, its ratio to the first model's, mean |logit
difference| to the first model, the onnxruntime run time, the file size (with external data).
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort


def log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def model_bytes(path):
    import onnx
    n = os.path.getsize(path)
    m = onnx.load(path, load_external_data=False)
    seen = set()
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location" and e.value not in seen:
                seen.add(e.value)
                n += os.path.getsize(os.path.join(os.path.dirname(path), e.value))
    return n


def evaluate(path, ev, batch, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    nll, logits0 = [], []
    t0 = time.time()
    for i in range(0, len(ev), batch):
        x = ev[i:i + batch]
        lg = sess.run(["logits"], {"input_ids": x})[0].astype(np.float64)
        lp = log_softmax(lg[:, :-1])
        nll.append(-np.take_along_axis(lp, x[:, 1:, None], -1)[..., 0].ravel())
        if i == 0:
            logits0 = lg
    s = time.time() - t0
    return float(np.exp(np.concatenate(nll).mean())), s, logits0


def main():
    cache = os.path.join(os.environ.get("ONNXQ_CACHE", os.path.expanduser("~/.cache/onnxq")), "llm", "decoder")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--eval", default=os.path.join(cache, "eval.npy"))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args()
    ev = np.load(a.eval).astype(np.int64)
    rows, ref_ppl, ref_logits = [], None, None
    for p in a.models:
        try:
            ppl, s, lg = evaluate(p, ev, a.batch, a.threads)
        except Exception as e:  # a variant onnxruntime refuses is a result, not a crash
            print(f"{p}: onnxruntime failed: {str(e).splitlines()[0]}", flush=True)
            rows.append({"model": p, "error": str(e).splitlines()[0]})
            continue
        if ref_ppl is None:
            ref_ppl, ref_logits = ppl, lg
        dl = float(np.abs(lg - ref_logits).mean())
        size = model_bytes(p)
        rows.append({"model": p, "ppl": ppl, "ratio": ppl / ref_ppl, "mean_abs_logit_diff": dl, "ort_s": s,
                     "bytes": size})
        print(f"{p}: perplexity {ppl:.3f} ({100 * (ppl / ref_ppl - 1):+.2f} % vs first), |dlogit| {dl:.4f}, "
              f"onnxruntime {s:.1f} s for {ev.shape[0]}x{ev.shape[1]} tokens, {size / 1e6:.2f} MB", flush=True)
    if a.json:
        json.dump({"eval": a.eval, "sequences": list(ev.shape), "rows": rows}, open(a.json, "w"), indent=1)
    return 0 if all("ppl" in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
