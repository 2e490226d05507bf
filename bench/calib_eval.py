#!/usr/bin/env python3
"""Output SQNR (and argmax agreement) of quantized models against the float model, in
onnxruntime with graph optimizations on (its fused integer kernels), 1 thread.

    VENV=$(bash .ci/venv.sh)
    $VENV/bin/python bench/calib_eval.py FLOAT.onnx SETDIR Q1.onnx [Q2.onnx ...]

SETDIR holds SETDIR/tensors/NNN/x.npy (make_text_images.py / other_renders.py layout; a
sample folder without x.npy: its one .npy file, e.g. models/calib's image.npy).
Prints one line per quantized model: SQNR over all samples together
(10 log10(sum f^2 / sum (f - q)^2)), the worst sample's SQNR, and the agreement of the
argmax over the last axis (cls: the class, rec: every time step). The float outputs are
cached beside the set (SETDIR/float_<model>.npz).
"""
import glob
import os
import sys

import numpy as np
import onnxruntime as ort


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, so, providers=['CPUExecutionProvider'])


def main():
    fmodel, setdir, qmodels = sys.argv[1], sys.argv[2], sys.argv[3:]
    # one input per sample folder: x.npy (make_text_images.py), else its one .npy file
    xs = [np.load(os.path.join(d, 'x.npy') if os.path.exists(os.path.join(d, 'x.npy'))
                  else glob.glob(os.path.join(d, '*.npy'))[0])
          for d in sorted(glob.glob(os.path.join(setdir, 'tensors', '*')))]
    cache = os.path.join(setdir, 'float_%s.npz' % os.path.basename(fmodel))
    if os.path.exists(cache):
        fy = list(np.load(cache).values())
    else:
        s = session(fmodel)
        fy = [s.run(None, {s.get_inputs()[0].name: x})[0] for x in xs]
        np.savez(cache, *fy)
    for q in qmodels:
        s = session(q)
        sig = noise = 0.0
        worst = float('inf')
        agree = rows = 0
        for x, f in zip(xs, fy):
            y = s.run(None, {s.get_inputs()[0].name: x})[0]
            e = float(((f.astype(np.float64) - y) ** 2).sum())
            p = float((f.astype(np.float64) ** 2).sum())
            sig += p
            noise += e
            worst = min(worst, 10 * np.log10(p / e) if e > 0 else 99.0)
            a, b = f.argmax(-1), y.argmax(-1)
            agree += int((a == b).sum())
            rows += a.size
        print('%-40s SQNR %6.2f dB  worst %6.2f dB  argmax agree %6.2f %%' %
              (os.path.basename(q), 10 * np.log10(sig / noise) if noise > 0 else 99.0, worst, 100.0 * agree / rows))


if __name__ == '__main__':
    main()
