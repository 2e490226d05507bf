"""PP-OCRv6 small recogniser (CTC, 18710 classes: 0 blank, then the model's own dictionary,
metadata_props "character", then space). Greedy CTC decode of float and quantized outputs;
the same metric as paddleocr-rec: share of characters the quantized model reads as float
does (1 - edit distance / float length), exact-line and per-timestep agreement, and each
against the rendered text."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import zoolib  # noqa: E402

_rec = zoolib.load_metric("paddleocr-rec")

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
    return _rec.evaluate_ctc(float_outs, quant_outs, meta, decode)
