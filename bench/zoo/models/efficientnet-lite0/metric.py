"""ImageNet classifier: top-1 agreement with the float model, top-5 overlap (mean share
of float's top-5 classes in the quantized top-5), mean KL(float || quant) of the softmax."""
import numpy as np


def _softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def evaluate(float_outs, quant_outs, meta):
    name = list(float_outs[0].keys())[0]
    agree, top5, kl = [], [], []
    for fo, qo in zip(float_outs, quant_outs):
        f = fo[name].reshape(-1).astype(np.float64)
        q = qo[name].reshape(-1).astype(np.float64)
        agree.append(int(np.argmax(f) == np.argmax(q)))
        top5.append(len(set(np.argsort(-f)[:5]) & set(np.argsort(-q)[:5])) / 5.0)
        pf, pq = _softmax(f), _softmax(q)
        kl.append(float(np.sum(pf * (np.log(pf + 1e-12) - np.log(pq + 1e-12)))))
    return {"task": {"name": "top-1 agreement", "value": float(np.mean(agree))},
            "top5_overlap": float(np.mean(top5)), "kl_mean": float(np.mean(kl))}
