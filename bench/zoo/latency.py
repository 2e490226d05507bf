"""Latency of quantized variants of one zoo model against its float model in onnxruntime,
interleaved: python bench/zoo/latency.py ZOO_MODEL_DIR VARIANT.onnx [MORE.onnx ...]
[--rounds R] [--runs N] [--threads T]

Every round runs each model (the float model.onnx first) N times on the first eval sample
of ZOO_MODEL_DIR (its eval/<sample>/<input>.npy files); the figure of a model is the
median of its per-round medians, printed with its ratio to the float model's. All
graph optimizations on, T intra-op threads (default 1)."""
import argparse
import glob
import os
import time

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("zoo_dir")
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    sample = sorted(glob.glob(os.path.join(a.zoo_dir, "eval", "*")))[0]
    models = [os.path.join(a.zoo_dir, "model.onnx")] + a.variants
    sessions = []
    for p in models:
        so = ort.SessionOptions()
        so.intra_op_num_threads = a.threads
        s = ort.InferenceSession(p, so, providers=["CPUExecutionProvider"])
        feed = {i.name: np.load(os.path.join(sample, i.name + ".npy")) for i in s.get_inputs()}
        for _ in range(5):
            s.run(None, feed)
        sessions.append((s, feed))
    med = [[] for _ in sessions]
    for _ in range(a.rounds):
        for k, (s, feed) in enumerate(sessions):
            t = []
            for _ in range(a.runs):
                t0 = time.perf_counter()
                s.run(None, feed)
                t.append(time.perf_counter() - t0)
            med[k].append(np.median(t))
    base = np.median(med[0])
    print("onnxruntime %s, %d thread(s), %d rounds of %d runs, sample %s" % (
        ort.__version__, a.threads, a.rounds, a.runs, os.path.basename(sample)))
    for k, p in enumerate(models):
        m = np.median(med[k])
        print("%-40s %9.3f ms  q/float %.3f" % (os.path.basename(p), m * 1e3, m / base))


if __name__ == "__main__":
    main()
