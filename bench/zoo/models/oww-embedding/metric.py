"""openWakeWord speech embedding (output conv2d_19 [1, 1, 1, 96]): cosine of each
quantized embedding with the float one (task: mean; also min), and the classifier that
openWakeWord puts on top (hey_jarvis_v0.1, float) run on sequences of 16 float vs
16 quantized embeddings: score SQNR and detection agreement at 0.5, so the figure says
what the embedding's error does to a wake-word decision."""
import os

import numpy as np

_CLF = None


def _clf():
    global _CLF
    if _CLF is None:
        import sys
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "silero-vad"))
        import audiolib
        _CLF = audiolib.ort_session(os.path.join(audiolib.oww_models(), "hey_jarvis_v0.1.onnx"))
    return _CLF


def evaluate(float_outs, quant_outs, meta):
    key = list(float_outs[0].keys())[0]
    f = np.stack([o[key].reshape(-1) for o in float_outs]).astype(np.float64)
    q = np.stack([o[key].reshape(-1) for o in quant_outs]).astype(np.float64)
    cos = (f * q).sum(1) / np.maximum(np.linalg.norm(f, axis=1) * np.linalg.norm(q, axis=1), 1e-30)
    r = {"task": {"name": "emb_cos_mean", "value": float(cos.mean())}, "cos_min": float(cos.min())}
    # consecutive windows only (eval/ holds every window of the stream, in order)
    win = [m.get("window") for m in meta]
    if len(f) >= 16 and all(b == a + 1 for a, b in zip(win, win[1:])):
        s = _clf()
        name = s.get_inputs()[0].name
        sc = lambda e: np.array([s.run(None, {name: e[i:i + 16][None].astype(np.float32)})[0].reshape(-1)[0]
                                 for i in range(len(e) - 15)], np.float64)
        sf, sq = sc(f), sc(q)
        err = float(((sf - sq) ** 2).sum())
        r["hey_jarvis_score_sqnr_db"] = float("inf") if err == 0 else float(10 * np.log10((sf ** 2).sum() / err))
        r["hey_jarvis_agree@0.5"] = float(((sf >= 0.5) == (sq >= 0.5)).mean())
        r["hey_jarvis_fires_float"] = int((sf >= 0.5).sum())
        r["hey_jarvis_fires_quant"] = int((sq >= 0.5).sum())
    return r
