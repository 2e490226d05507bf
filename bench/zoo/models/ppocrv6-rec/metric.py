"""PP-OCRv6 small recogniser (CTC, 18710 classes: 0 blank, then the model's own dictionary,
metadata_props "character", then space). Greedy CTC decode of float and quantized outputs;
the same metric as paddleocr-rec: share of characters the quantized model reads as float
does (1 - edit distance / float length), exact-line and per-timestep agreement, and each
against the rendered text."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import zoolib  # noqa: E402

_KEYS = None


def keys():
    global _KEYS
    if _KEYS is None:
        import onnx
        m = onnx.load(os.path.join(zoolib.zoo_cache("ppocrv6-rec"), "model.onnx"), load_external_data=False)
        chars = dict((p.key, p.value) for p in m.metadata_props)["character"].split("\n")
        _KEYS = ["<blank>"] + chars + [" "]
    return _KEYS


def decode(logits):
    k = keys()
    return "".join(k[i] if i < len(k) else "?" for i in zoolib.ctc_greedy(logits, blank=0))


def evaluate(float_outs, quant_outs, meta):
    name = list(float_outs[0].keys())[0]
    ed = n = exact = 0
    steps = agree = 0
    ed_f = ed_q = n_gt = 0
    for fo, qo, m in zip(float_outs, quant_outs, meta):
        fl, ql = fo[name][0], qo[name][0]
        ft, qt = decode(fl), decode(ql)
        ed += zoolib.edit_distance(ft, qt)
        n += max(len(ft), 1)
        exact += int(ft == qt)
        steps += fl.shape[0]
        agree += int(np.sum(fl.argmax(-1) == ql.argmax(-1)))
        gt = m.get("label")
        if gt is not None:
            ed_f += zoolib.edit_distance(ft, gt)
            ed_q += zoolib.edit_distance(qt, gt)
            n_gt += len(gt)
    r = {"task": {"name": "char agreement", "value": 1.0 - ed / max(n, 1)},
         "line_agreement": exact / len(float_outs), "timestep_agreement": agree / max(steps, 1)}
    if n_gt:
        r["float_char_acc"] = 1.0 - ed_f / n_gt
        r["quant_char_acc"] = 1.0 - ed_q / n_gt
    return r
