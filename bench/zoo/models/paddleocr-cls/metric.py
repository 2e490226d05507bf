"""PaddleOCR text-orientation classifier (0 = upright, 1 = rotated 180 degrees):
top-1 agreement with float; accuracy of float and quantized against the rendered label."""
import numpy as np


def evaluate(float_outs, quant_outs, meta):
    name = list(float_outs[0].keys())[0]
    f = np.array([o[name].reshape(-1).argmax() for o in float_outs])
    q = np.array([o[name].reshape(-1).argmax() for o in quant_outs])
    lab = np.array([m.get("label", -1) for m in meta])
    return {"task": {"name": "top-1 agreement", "value": float(np.mean(f == q))},
            "float_acc": float(np.mean(f == lab)), "quant_acc": float(np.mean(q == lab))}
