"""Helpers shared by the end-to-end quantize tests that judge in onnxruntime-node
(tests/bias_correction.py, tests/weight_rounding.py)."""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper


def run(exe, args, want=0):
    """onnxq ARGS; exits the test (1) when the exit code is not `want`."""
    p = subprocess.run([exe] + args, capture_output=True, text=True)
    if p.returncode != want:
        print("FAIL: onnxq %s -> exit %d, want %d\n%s%s" % (" ".join(args), p.returncode, want, p.stdout, p.stderr))
        sys.exit(1)
    return p


def ort(src, path, batch, level, outputs=()):
    """Run model `path` in onnxruntime-node (tests/ortnode.bash) on the batch file (input
    x) with graph optimizations `level` ("all" or "disabled"); extra value names become
    graph outputs. {name: array} for y and those; exits 77 without onnxruntime-node."""
    mp = path
    if outputs:
        m = onnx.load(path)
        for name in outputs:
            m.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
        mp = path[:-5] + "_probe.onnx"
        onnx.save(m, mp)
    od = mp[:-5] + "_" + level + "_" + os.path.basename(batch)[:-4]
    env = dict(os.environ, ONNXQ_ORT_OPT=level)
    p = subprocess.run(["bash", os.path.join(src, "tests/ortnode.bash"), os.path.join(src, "tests/quantize_ort.js"),
                        mp, od, "x=" + batch], capture_output=True, text=True, env=env)
    if p.returncode == 77:
        print(p.stdout.strip())
        sys.exit(77)
    if p.returncode != 0:
        print("FAIL: onnxruntime on %s: %s%s" % (mp, p.stdout, p.stderr))
        sys.exit(1)
    return {n: np.load(os.path.join(od, n + ".npy")) for n in ["y"] + list(outputs)}


def sqnr(ref, got):
    ref, got = ref.astype(np.float64), got.astype(np.float64)
    return 10 * np.log10(np.sum(ref * ref) / max(np.sum((ref - got) ** 2), 1e-300))
