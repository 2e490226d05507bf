"""silero VAD: speech probability (output [1, 1]) of the quantized model against the float
model, window by window, each window fed the float model's state (so errors do not
accumulate here; the stream check in tests/silero_vad.sh carries each model's own state).
  task: decision agreement at p >= 0.5 (the package's default threshold)
  prob_sqnr_db, prob_max_abs_diff, speech windows float / quantized"""
import numpy as np


def evaluate(float_outs, quant_outs, meta):
    f = np.array([o["output"].reshape(-1)[0] for o in float_outs], np.float64)
    q = np.array([o["output"].reshape(-1)[0] for o in quant_outs], np.float64)
    err = float(((f - q) ** 2).sum())
    return {
        "task": {"name": "vad_agree@0.5", "value": float(((f >= 0.5) == (q >= 0.5)).mean())},
        "prob_sqnr_db": float("inf") if err == 0 else float(10 * np.log10((f ** 2).sum() / err)),
        "prob_max_abs_diff": float(np.abs(f - q).max()),
        "speech_windows_float": int((f >= 0.5).sum()),
        "speech_windows_quant": int((q >= 0.5).sum()),
    }
