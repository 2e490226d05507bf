"""ViT-S encoder token embeddings [1, 1 + P, 384]. Image embeddings: the CLS token and the
mean of the patch tokens. Task metric: nearest-neighbour retrieval agreement over the
eval set (each image's nearest other image by CLS cosine, found with the quantized
embeddings, is the one float's embeddings find). Also mean cosine (float vs quantized)
of the CLS and mean-patch embeddings, and the same retrieval agreement on mean-patch."""
import numpy as np


def _nn(e):
    e = e / np.linalg.norm(e, axis=1, keepdims=True)
    s = e @ e.T
    np.fill_diagonal(s, -np.inf)
    return s.argmax(axis=1)


def _cos(a, b):
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def evaluate(float_outs, quant_outs, meta):
    f = np.stack([o["tokens"][0] for o in float_outs]).astype(np.float64)
    q = np.stack([o["tokens"][0] for o in quant_outs]).astype(np.float64)
    fc, qc = f[:, 0], q[:, 0]
    fm, qm = f[:, 1:].mean(axis=1), q[:, 1:].mean(axis=1)
    return {"task": {"name": "NN retrieval agreement (CLS)",
                     "value": float(np.mean(_nn(fc) == _nn(qc)))},
            "cls_cosine": float(np.mean(_cos(fc, qc))),
            "cls_cosine_min": float(np.min(_cos(fc, qc))),
            "meanpatch_cosine": float(np.mean(_cos(fm, qm))),
            "nn_agreement_meanpatch": float(np.mean(_nn(fm) == _nn(qm)))}
