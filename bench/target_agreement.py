#!/usr/bin/env python3
"""How closely `onnxq run --target T` reproduces onnxruntime on a quantized model.

    VENV=$(bash .ci/venv.sh)
    $VENV/bin/python bench/target_agreement.py build/onnxq Q.onnx SETDIR [options]

SETDIR holds one folder per sample under SETDIR/tensors with the model's single input as
x.npy (the layout of models/make_text_images.py, e.g. build/textdata/eval/rec). For each
sample it runs onnxq (one process per sample, 1 thread) and onnxruntime (this Python
package, 1 intra-op thread, graph optimizations on: its fused integer kernels, or off:
the QDQ graph in float) and prints, over the first output of all samples together, the
SQNR of onnxq's result against onnxruntime's, the agreement of the argmax over the last
axis (cls: the class; rec: every time step) and the largest absolute difference;
--per-sample adds one line per sample. docs/run.md "Float operations under an integer
target" shows the numbers for today's default OCR models.

Options: --target T (default host), --ort-opt on|off (default on), --max N samples.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort


def sqnr(sig, noise):
    return float('inf') if noise == 0 else 10 * np.log10(sig / noise)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('onnxq')
    ap.add_argument('model')
    ap.add_argument('setdir')
    ap.add_argument('--target', default='host')
    ap.add_argument('--ort-opt', choices=('on', 'off'), default='on')
    ap.add_argument('--max', type=int, default=0)
    ap.add_argument('--per-sample', action='store_true')
    a = ap.parse_args()
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if a.ort_opt == 'on'
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    sess = ort.InferenceSession(a.model, so, providers=['CPUExecutionProvider'])
    iname, oname = sess.get_inputs()[0].name, sess.get_outputs()[0].name
    dirs = sorted(glob.glob(os.path.join(a.setdir, 'tensors', '*')))
    if a.max > 0:
        dirs = dirs[:a.max]
    if not dirs:
        print(f'target_agreement.py: no samples in {a.setdir}/tensors', file=sys.stderr)
        return 2
    sig = noise = 0.0
    agree = total = identical = 0
    maxd = 0.0
    for d in dirs:
        xf = os.path.join(d, 'x.npy')
        ref = sess.run(None, {iname: np.load(xf)})[0]
        with tempfile.TemporaryDirectory() as t:
            r = subprocess.run([a.onnxq, 'run', a.model, '--input', f'{iname}={xf}',
                                '--output-dir', t, '--npy', '--threads', '1', '--target', a.target],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                print(f'target_agreement.py: onnxq run failed on {xf}: {r.stderr.strip()}',
                      file=sys.stderr)
                return 1
            got = np.load(os.path.join(t, oname + '.npy'))
        r64, g64 = ref.astype(np.float64), got.astype(np.float64)
        s, n = float((r64 ** 2).sum()), float(((r64 - g64) ** 2).sum())
        sig, noise = sig + s, noise + n
        identical += int(np.array_equal(ref.view(np.uint32), got.view(np.uint32)))
        maxd = max(maxd, float(np.abs(r64 - g64).max()))
        am, bm = ref.reshape(-1, ref.shape[-1]).argmax(-1), got.reshape(-1, got.shape[-1]).argmax(-1)
        agree += int((am == bm).sum())
        total += am.size
        if a.per_sample:
            print(f'{os.path.basename(d)}: SQNR {sqnr(s, n):.1f} dB, argmax {int((am == bm).sum())}/{am.size}')
    print(f'{os.path.basename(a.model)}, {len(dirs)} samples, onnxq --target {a.target} vs onnxruntime '
          f'{ort.__version__} (optimizations {a.ort_opt}): SQNR {sqnr(sig, noise):.1f} dB, argmax '
          f'{agree}/{total} ({100 * agree / total:.2f} %), max |diff| {maxd:.3g}, '
          f'{identical} samples bit-identical')
    return 0


if __name__ == '__main__':
    sys.exit(main())
