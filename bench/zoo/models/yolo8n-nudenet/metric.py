"""YOLOv8 detector (nudenet 320n, 18 classes): output0 [1, 4+18, 2100], rows 0-3 box
cx,cy,w,h in input pixels, rows 4.. class probabilities (sigmoid).
Task metric: detections after score > 0.25 and class-agnostic NMS at IoU 0.45 (as
nudenet does), the quantized model's matched to the float model's (same class, IoU >= 0.5)
-> F1 over the eval set. Also: the IoU of the sets of anchors whose best score > 0.25."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import zoolib  # noqa: E402

SCORE = 0.25
NMS_IOU = 0.45


def detections(out):
    o = out["output0"][0].T  # [N, 4+C]
    cls = o[:, 4:]
    best = cls.max(axis=1)
    keep = best > SCORE
    o, cid, sc = o[keep], cls[keep].argmax(axis=1), best[keep]
    boxes = np.stack([o[:, 0] - o[:, 2] / 2, o[:, 1] - o[:, 3] / 2,
                      o[:, 0] + o[:, 2] / 2, o[:, 1] + o[:, 3] / 2], axis=1)
    k = zoolib.nms(boxes, sc, NMS_IOU) if len(sc) else np.zeros(0, np.int64)
    return boxes[k], cid[k], set(np.nonzero(keep)[0].tolist())


def evaluate(float_outs, quant_outs, meta):
    tp = nr = nt = 0
    inter = union = 0
    for fo, qo in zip(float_outs, quant_outs):
        fb, fc, fa = detections(fo)
        qb, qc, qa = detections(qo)
        t, a, b = zoolib.match_f1((fb, fc), (qb, qc), 0.5)
        tp, nr, nt = tp + t, nr + a, nt + b
        inter += len(fa & qa)
        union += len(fa | qa)
    return {"task": {"name": "det F1@0.5 vs float", "value": zoolib.f1_from_counts(tp, nr, nt)},
            "float_dets": nr, "quant_dets": nt, "matched": tp,
            "anchor_iou": inter / union if union else 1.0}
