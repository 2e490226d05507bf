#!/usr/bin/env python3
"""The VAD as deployed: each model runs over the whole eval stream carrying its own LSTM
state (metric.py feeds every window the float model's state instead), in onnxruntime
(optimized, 1 thread). Prints the speech-probability SQNR and the decision agreement at
0.5 of each quantized model against the float model.
    python stream.py FLOAT QUANT [QUANT...]"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", ".."))
import audiolib  # noqa: E402
import zoolib  # noqa: E402
from prep import stream  # noqa: E402


def main():
    audio = audiolib.read_wav(audiolib.speech()[1])
    f = np.array([p for _, _, p in stream(zoolib.ort_session(sys.argv[1]), audio)])
    for q in sys.argv[2:]:
        p = np.array([p for _, _, p in stream(zoolib.ort_session(q), audio)])
        db = 10 * np.log10((f ** 2).sum() / max(((f - p) ** 2).sum(), 1e-30))
        print("%s: %d windows, stream SQNR %.2f dB, agreement@0.5 %.4f, speech windows float %d quant %d"
              % (os.path.basename(q), len(f), db, ((f >= 0.5) == (p >= 0.5)).mean(), (f >= 0.5).sum(), (p >= 0.5).sum()))


if __name__ == "__main__":
    main()
