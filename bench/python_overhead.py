"""The Python package's overhead against the command (issue 23): quantize PaddleOCR det with
the same samples through `onnxq quantize --calib DIR` and through onnxq.quantize with an
onnxruntime-style CalibrationDataReader over the same .npy files, interleaved, and print
the ratio of the medians (Python / command). The Python time includes reading the samples
in Python and handing them to the library.

usage: python bench/python_overhead.py [--rounds 5] [--samples 8] [--size 320]
(the venv of .ci/py-venv.sh with the package installed; PaddleOCR from .ci/fetch-models.sh;
samples rendered by models/make_text_images.py with the system python3 and PIL)
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import onnxq

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("ONNXQ_CACHE", Path.home() / ".cache" / "onnxq"))
DET = CACHE / "ocr" / "package" / "assets" / "ch_PP-OCRv4_det_infer.onnx"


class Reader:
    """onnxruntime's CalibrationDataReader interface over a folder of x.npy samples."""

    def __init__(self, folder):
        self.files = sorted(Path(folder).glob("*/x.npy"))
        self.it = None

    def get_next(self):
        if self.it is None:
            self.it = iter(self.files)
        f = next(self.it, None)
        return None if f is None else {"x": np.load(f)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--size", type=int, default=320)
    a = ap.parse_args()
    exe = Path(sys.prefix) / "bin" / "onnxq"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["/usr/bin/python3", str(ROOT / "models" / "make_text_images.py"), "--det", str(a.samples),
                        "--cls", "1", "--rec", "1", "--det-size", str(a.size), "--seed", "11", tmp],
                       check=True, capture_output=True)
        data = Path(tmp) / "det" / "tensors"
        cli_t, py_t = [], []
        for r in range(a.rounds):
            for which in ("cli", "py") if r % 2 == 0 else ("py", "cli"):
                out = Path(tmp) / f"{which}.onnx"
                t0 = time.perf_counter()
                if which == "cli":
                    subprocess.run([str(exe), "quantize", str(DET), "-o", str(out), "--calib", str(data), "--quiet"],
                                   check=True)
                    cli_t.append(time.perf_counter() - t0)
                else:
                    onnxq.quantize(str(DET), str(out), Reader(data))
                    py_t.append(time.perf_counter() - t0)
        c, p = statistics.median(cli_t), statistics.median(py_t)
        print(f"PaddleOCR det, {a.samples} samples {a.size}x{a.size}, {a.rounds} rounds interleaved")
        print("command: " + " ".join(f"{t:.2f}" for t in cli_t) + f" s (median {c:.2f})")
        print("python:  " + " ".join(f"{t:.2f}" for t in py_t) + f" s (median {p:.2f})")
        print(f"python / command: {p / c:.3f}")


if __name__ == "__main__":
    main()
