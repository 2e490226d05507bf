#!/usr/bin/env python3
"""Float convolutions of dense CNNs (ResNet-50's and VGG16's layer shapes) in onnxq and in
onnxruntime, side by side: one Conv + Relu model per shape, each timed in both, alternating
round by round; the medians of the per-round medians and their ratio.

usage: VENV/bin/python bench/dense_conv.py --onnxq build/onnxq [--threads 1,2] [--rounds 5]
       [--runs 50] [--shapes all|resnet|vgg]
VENV: a venv with onnx, numpy and onnxruntime (.ci/venv.sh makes one).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

# (name, C, M, H, kernel, stride): ResNet-50's distinct Conv shapes at 224x224 (1x1 and 3x3,
# the strided ones) and VGG16's 3x3 layers at 224x224
RESNET = [("r50 1x1 256-64 @56", 256, 64, 56, 1, 1), ("r50 1x1 64-256 @56", 64, 256, 56, 1, 1),
          ("r50 3x3 64 @56", 64, 64, 56, 3, 1), ("r50 3x3 128 @28", 128, 128, 28, 3, 1),
          ("r50 3x3 128 s2 @56", 128, 128, 56, 3, 2), ("r50 1x1 512-128 @28", 512, 128, 28, 1, 1),
          ("r50 3x3 256 @14", 256, 256, 14, 3, 1), ("r50 1x1 1024-256 @14", 1024, 256, 14, 1, 1),
          ("r50 3x3 512 @7", 512, 512, 7, 3, 1), ("r50 1x1 2048-512 @7", 2048, 512, 7, 1, 1),
          ("r50 1x1 512-2048 @7", 512, 2048, 7, 1, 1)]
VGG = [("vgg 3x3 64 @224", 64, 64, 224, 3, 1), ("vgg 3x3 128 @112", 128, 128, 112, 3, 1),
       ("vgg 3x3 256 @56", 256, 256, 56, 3, 1), ("vgg 3x3 512 @28", 512, 512, 28, 3, 1),
       ("vgg 3x3 512 @14", 512, 512, 14, 3, 1)]


def conv_model(path, c, m, h, k, s):
    rng = np.random.default_rng(c * 1000 + m + h)
    w = (rng.standard_normal((m, c, k, k)) * (2.0 / (c * k * k)) ** 0.5).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32) * 0.1
    p = k // 2
    ho = (h + 2 * p - k) // s + 1
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[p] * 4, strides=[s, s]),
         helper.make_node("Relu", ["c"], ["y"])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, m, ho, ho])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


def onnxq_ms(exe, path, threads, runs):
    out = subprocess.run([exe, "run", path, "--random", "--time", str(runs), "--threads", str(threads)],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"median ([0-9.]+) ms", out).group(1))


def ort_ms(sess, x, runs):
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, {"x": x})
        t.append(time.perf_counter() - t0)
    return statistics.median(t) * 1000


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--onnxq", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--shapes", default="all", choices=["all", "resnet", "vgg"])
    a = ap.parse_args()
    shapes = {"all": RESNET + VGG, "resnet": RESNET, "vgg": VGG}[a.shapes]
    print(f"command: {' '.join(sys.argv)}")
    print(f"cpu: {cpu_name()}, {os.cpu_count()} cores online; onnxruntime {ort.__version__}; "
          f"load average {' '.join(open('/proc/loadavg').read().split()[:3])}")
    print("| layer | threads | onnxq ms | onnxruntime ms | onnxq / onnxruntime |")
    print("|---|---|---|---|---|")
    ratios = {}
    with tempfile.TemporaryDirectory() as td:
        for name, c, m, h, k, s in shapes:
            path = os.path.join(td, "conv.onnx")
            conv_model(path, c, m, h, k, s)
            x = np.random.default_rng(1).random((1, c, h, h), dtype=np.float32)
            for th in [int(t) for t in a.threads.split(",")]:
                so = ort.SessionOptions()
                so.intra_op_num_threads = th
                sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
                for _ in range(3):
                    sess.run(None, {"x": x})
                q, o = [], []
                for _ in range(a.rounds):  # alternating, round by round
                    q.append(onnxq_ms(a.onnxq, path, th, a.runs))
                    o.append(ort_ms(sess, x, a.runs))
                    time.sleep(0.2)  # onnxruntime's threads spin on after a run: not into onnxq's
                qm, om = statistics.median(q), statistics.median(o)
                ratios.setdefault(th, []).append(qm / om)
                print(f"| {name} | {th} | {qm:.3f} | {om:.3f} | {qm / om:.2f} |", flush=True)
    for th, r in ratios.items():
        print(f"threads {th}: geometric mean of onnxq / onnxruntime over {len(r)} layers: "
              f"{float(np.exp(np.mean(np.log(r)))):.2f}")


if __name__ == "__main__":
    main()
