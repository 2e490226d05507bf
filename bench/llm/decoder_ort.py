#!/usr/bin/env python3
"""Run a make_decoder.py graph (or its quantized version) in onnxruntime.

    python bench/llm/decoder_ort.py MODEL [--ref FLOAT_MODEL] [--prompts 4] [--prompt-len 32] [--generate 8]

Prefills a few random prompts (fixed seed) and greedily generates --generate tokens through
the KV cache (past_key_values.N.* fed back from present.N.*). With --ref, the same prompts
run through the reference model too and the logits SQNR (dB, over every prompt position and
every generated step, the generated tokens taken from the reference so both see the same
inputs) and the next-token agreement are printed; --ref-npz takes the reference's logits and
tokens from decoder_ref.py instead (models onnxruntime cannot load). Prints one JSON line.
"""
import argparse
import json
import sys
import time

import numpy as np
import onnxruntime as ort


def session(path, threads=0):
    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def meta(sess):
    m = sess.get_modelmeta().custom_metadata_map
    return {k.split(".", 1)[1]: v for k, v in m.items() if k.startswith("decoder.")}


def np_type(t):
    return {"tensor(float)": np.float32, "tensor(float16)": np.float16}.get(t, np.float32)


def empty_past(sess, batch):
    feeds = {}
    for i in sess.get_inputs():
        if i.name.startswith("past_key_values."):
            shape = [batch, i.shape[1], 0, i.shape[3]]
            feeds[i.name] = np.zeros(shape, dtype=np_type(i.type))
    return feeds


def step(sess, ids, past, pos0):
    """One forward: ids [B, S] after pos0 cached positions. Returns logits [B, S, V], new past."""
    b, s = ids.shape
    feeds = dict(past)
    feeds["input_ids"] = ids.astype(np.int64)
    feeds["attention_mask"] = np.ones((b, pos0 + s), dtype=np.int64)
    feeds["position_ids"] = np.broadcast_to(np.arange(pos0, pos0 + s, dtype=np.int64), (b, s)).copy()
    names = [o.name for o in sess.get_outputs()]
    outs = dict(zip(names, sess.run(names, feeds)))
    newpast = {n.replace("present.", "past_key_values."): v for n, v in outs.items() if n.startswith("present.")}
    return outs["logits"], newpast


def run(sess, prompt, n_gen, forced=None):
    """Prefill prompt [1, S], then n_gen greedy steps (or the tokens of `forced`).
    Returns (list of logits arrays [S + n_gen rows], generated tokens)."""
    past = empty_past(sess, 1)
    lg, past = step(sess, prompt, past, 0)
    rows = [lg[0].astype(np.float32)]
    toks = []
    pos = prompt.shape[1]
    for k in range(n_gen):
        t = int(np.argmax(rows[-1][-1])) if forced is None else forced[k]
        toks.append(t)
        lg, past = step(sess, np.array([[t]], dtype=np.int64), past, pos)
        pos += 1
        rows.append(lg[0].astype(np.float32))
    return np.concatenate(rows, axis=0), toks


def sqnr_db(ref, got):
    ref = ref.astype(np.float64)
    err = got.astype(np.float64) - ref
    return float(10 * np.log10(np.sum(ref * ref) / max(np.sum(err * err), 1e-300)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--ref")
    ap.add_argument("--ref-npz", help="reference logits and tokens from decoder_ref.py (same prompts)")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--generate", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    t0 = time.time()
    s = session(a.model, a.threads)
    load_s = time.time() - t0
    vocab = int(meta(s).get("vocab", 1000))
    rng = np.random.default_rng(a.seed)
    prompts = [rng.integers(0, vocab, size=(1, a.prompt_len), dtype=np.int64) for _ in range(a.prompts)]
    res = {"model": a.model, "load_s": round(load_s, 2)}
    t0 = time.time()
    outs = [run(s, p, a.generate) for p in prompts]
    res["run_s"] = round(time.time() - t0, 2)
    res["tokens"] = [o[1] for o in outs]
    res["finite"] = bool(all(np.isfinite(o[0]).all() for o in outs))
    if a.ref_npz:
        z = np.load(a.ref_npz)
        if not np.array_equal(z["prompts"], np.concatenate(prompts)):
            sys.exit("decoder_ort: %s was made for other prompts (--prompts/--prompt-len/--seed)" % a.ref_npz)
        got = [run(s, p, a.generate, forced=list(z["tokens"][i])) for i, p in enumerate(prompts)]
        ref_all = np.concatenate(list(z["logits"]))
        got_all = np.concatenate([g[0] for g in got])
        res["sqnr_db"] = round(sqnr_db(ref_all, got_all), 2)
        res["argmax_agreement"] = round(float(np.mean(np.argmax(ref_all, -1) == np.argmax(got_all, -1))), 4)
        res["ref_tokens"] = z["tokens"].tolist()
    elif a.ref:
        del s
        r = session(a.ref, a.threads)
        refs = [run(r, p, a.generate) for p in prompts]
        # the quantized model's logits with the reference's tokens fed (same inputs)
        del r
        s = session(a.model, a.threads)
        got = [run(s, p, a.generate, forced=ro[1]) for p, ro in zip(prompts, refs)]
        ref_all = np.concatenate([ro[0] for ro in refs])
        got_all = np.concatenate([g[0] for g in got])
        res["sqnr_db"] = round(sqnr_db(ref_all, got_all), 2)
        res["argmax_agreement"] = round(float(np.mean(np.argmax(ref_all, -1) == np.argmax(got_all, -1))), 4)
        res["ref_tokens"] = [ro[1] for ro in refs]
    print(json.dumps(res))
    return 0 if res["finite"] else 1


if __name__ == "__main__":
    sys.exit(main())
