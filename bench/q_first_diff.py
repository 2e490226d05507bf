#!/usr/bin/env python3
"""Which QuantizeLinear output first differs between `onnxq run --target T` and onnxruntime.

    VENV=$(bash .ci/venv.sh)
    $VENV/bin/python bench/q_first_diff.py build/onnxq Q.onnx x.npy [--target host]
        [--ort-opt on|off] [--all] [--keep CUT.onnx]

Makes every QuantizeLinear output (and the model's outputs) a graph output, runs the cut
model in onnxq (1 thread) and in onnxruntime (1 intra-op thread, optimizations on by
default), and lists in graph order the quantized tensors that differ: how many values,
the largest difference in steps, the first differing index with both values and the node
that produced the Q's input. Without --all it stops after the first 5 differing tensors.
A graph output keeps onnxruntime's fusions (a Q output may be a graph output), so the
cut model computes what the original computes. Under `qemu-x86_64 -cpu Haswell` with
ONNXQ_HOST_CPU=avx2 it shows the AVX2 arithmetic (docs/run.md).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('onnxq')
    ap.add_argument('model')
    ap.add_argument('x')
    ap.add_argument('--target', default='host')
    ap.add_argument('--ort-opt', choices=('on', 'off'), default='on')
    ap.add_argument('--all', action='store_true')
    ap.add_argument('--keep')
    a = ap.parse_args()
    m = onnx.load(a.model)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    have = {o.name for o in g.output}
    qouts = []
    for n in g.node:
        if n.op_type != 'QuantizeLinear':
            continue
        zp = inits.get(n.input[2]) if len(n.input) > 2 and n.input[2] else None
        et = zp.data_type if zp is not None else onnx.TensorProto.UINT8
        if n.output[0] not in have:
            g.output.append(helper.make_tensor_value_info(n.output[0], et, None))
        qouts.append((n.output[0], n.input[0]))
    with tempfile.TemporaryDirectory() as t:
        cut = a.keep or os.path.join(t, 'cut.onnx')
        onnx.save(m, cut)
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if a.ort_opt == 'on'
                                       else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
        sess = ort.InferenceSession(cut, so, providers=['CPUExecutionProvider'])
        iname = sess.get_inputs()[0].name
        names = [o.name for o in sess.get_outputs()]
        ref = dict(zip(names, sess.run(None, {iname: np.load(a.x)})))
        od = os.path.join(t, 'out')
        r = subprocess.run([a.onnxq, 'run', cut, '--input', f'{iname}={a.x}', '--output-dir', od,
                            '--npy', '--threads', '1', '--target', a.target],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode:
            print(r.stderr, file=sys.stderr)
            return 1
        got = {n: np.load(os.path.join(od, n + '.npy')) for n in names}
    ndiff = 0
    for q, src in qouts:
        x, y = ref[q].astype(np.int64), got[q].astype(np.int64)
        d = np.abs(x - y)
        if not d.any():
            continue
        ndiff += 1
        i = int(np.flatnonzero(d)[0])
        idx = np.unravel_index(i, x.shape)
        p = producer.get(src)
        print(f'{q}: {int((d > 0).sum())}/{d.size} differ, max {int(d.max())} steps; first at '
              f'{tuple(int(v) for v in idx)}: ort {int(x.flat[i])} onnxq {int(y.flat[i])}; '
              f'input from {p.op_type + " " + p.name if p else src}')
        if ndiff >= 5 and not a.all:
            break
    print(f'{len(qouts)} quantized tensors, {ndiff}{"+" if ndiff >= 5 and not a.all else ""} differ')
    return 0


if __name__ == '__main__':
    sys.exit(main())
