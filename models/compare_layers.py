#!/usr/bin/python3
"""Per-tensor comparison of a float model and its quantized version on one input.

    onnxq opt FLOAT.onnx -o F.onnx --passes constant-to-initializer,fold-batchnorm
    onnxq run F.onnx --input x=X.npy --dump-all fdump
    onnxq run Q.onnx --input x=X.npy --dump-all qdump
    /usr/bin/python3 models/compare_layers.py F.onnx fdump qdump [--ops Conv,Add]

(F.onnx: the float model after the passes `onnxq quantize` runs before calibrating, so
that the tensor names match.) For each node output T of F.onnx in graph order that both
dumps hold, prints the SQNR of the quantized model's T (the dequantized value, per the QDQ
naming conventions) against the float T, 20 log10(||f|| / ||f - q||), and, when T was
quantized, "own": the SQNR of T against T_prequant in the quantized run, i.e. the error
that quantizing T itself adds, as opposed to the error that arrives from upstream."""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def load(p):
    t = onnx.TensorProto()
    with open(p, 'rb') as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t).astype(np.float64)


def sqnr(a, b):
    e = np.linalg.norm(a - b)
    s = np.linalg.norm(a)
    return float('inf') if e == 0 else 20 * np.log10(s / e) if s > 0 else float('-inf')


def main():
    args = sys.argv[1:]
    ops = None
    if '--ops' in args:
        i = args.index('--ops')
        ops = set(args[i + 1].split(','))
        del args[i:i + 2]
    if len(args) != 3:
        sys.exit(__doc__)
    fm, fd, qd = args
    m = onnx.load(fm)
    print('%-28s %-18s %9s %9s  %s' % ('tensor', 'op', 'SQNR dB', 'own dB', 'float range'))
    for n in m.graph.node:
        if ops and n.op_type not in ops:
            continue
        for name in n.output:
            fp, qp = os.path.join(fd, name + '.pb'), os.path.join(qd, name + '.pb')
            if not (os.path.exists(fp) and os.path.exists(qp)):
                continue
            a, b = load(fp), load(qp)
            if a.shape != b.shape:
                continue
            pp = os.path.join(qd, name + '_prequant.pb')
            own = '%9.1f' % sqnr(load(pp), b) if os.path.exists(pp) else '%9s' % '-'
            print('%-28s %-18s %9.1f %s  [%.3g, %.3g]' % (name, n.op_type, sqnr(a, b), own, a.min(), a.max()))


main()
