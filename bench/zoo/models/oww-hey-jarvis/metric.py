"""openWakeWord "hey jarvis" classifier (output [1, 1], a score in [0, 1]) on every
window of 16 embeddings of the eval stream: detection agreement with the float model at
openWakeWord's default threshold 0.5 (task), score SQNR, max |diff|, how many windows
fire in float and in the quantized model, and whether each flite "hey jarvis" in the
stream (a run of windows where float fires) is still detected."""
import numpy as np


def evaluate(float_outs, quant_outs, meta):
    key = list(float_outs[0].keys())[0]
    f = np.array([o[key].reshape(-1)[0] for o in float_outs], np.float64)
    q = np.array([o[key].reshape(-1)[0] for o in quant_outs], np.float64)
    err = float(((f - q) ** 2).sum())
    ff, qf = f >= 0.5, q >= 0.5
    # events: maximal runs of windows where float fires; detected if quant fires in the run
    ev = det = 0
    i = 0
    while i < len(ff):
        if ff[i]:
            j = i
            while j < len(ff) and ff[j]:
                j += 1
            ev += 1
            det += bool(qf[i:j].any())
            i = j
        else:
            i += 1
    return {
        "task": {"name": "wake_agree@0.5", "value": float((ff == qf).mean())},
        "score_sqnr_db": float("inf") if err == 0 else float(10 * np.log10((f ** 2).sum() / err)),
        "score_max_abs_diff": float(np.abs(f - q).max()),
        "fires_float": int(ff.sum()), "fires_quant": int(qf.sum()),
        "events_float": ev, "events_detected_quant": det,
    }
