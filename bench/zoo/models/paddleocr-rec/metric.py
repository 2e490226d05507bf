"""PaddleOCR PP-OCRv4 recogniser (CTC, 6625 classes: 0 blank, 1..6623 ppocr_keys_v1.txt,
6624 space). Greedy CTC decode of float and quantized outputs. Task metric: share of
characters the quantized model reads as float does (1 - edit distance / float length,
over all lines); also exact-line agreement, per-timestep argmax agreement, and the
accuracy of each against the rendered text (float's shows the eval data is readable)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import zoolib  # noqa: E402

_KEYS = None


def keys():
    global _KEYS
    if _KEYS is None:
        p = os.path.join(zoolib.cache_dir(), "ocr", "package", "assets", "ppocr_keys_v1.txt")
        with open(p, encoding="utf-8") as f:
            _KEYS = ["<blank>"] + [ln.rstrip("\n") for ln in f] + [" "]
    return _KEYS


def decode(logits):
    k = keys()
    return "".join(k[i] for i in zoolib.ctc_greedy(logits, blank=0))


def evaluate(float_outs, quant_outs, meta):
    return evaluate_ctc(float_outs, quant_outs, meta, decode)


def evaluate_ctc(float_outs, quant_outs, meta, decode):
    """The metric for any greedy-CTC recogniser; decode(logits [T, C]) -> text."""
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
