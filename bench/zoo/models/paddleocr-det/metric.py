"""PaddleOCR PP-OCRv4 text detector: probability map [1, 1, H, W]. Boxes as PaddleOCR's
DB post-processing does in spirit: binarize at 0.3, connected components, a component's
box kept when its mean probability >= 0.6 and it has >= 3 px on each side (no unclip,
axis-aligned boxes). Task metric: the quantized model's boxes matched to float's at IoU
>= 0.5 -> F1. Also IoU of the binarized maps, and float's recall of the rendered lines."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import zoolib  # noqa: E402

THRESH = 0.3
BOX_THRESH = 0.6


def boxes(prob):
    from scipy import ndimage
    mask = prob > THRESH
    lab, n = ndimage.label(mask)
    out = []
    for i, sl in enumerate(ndimage.find_objects(lab), 1):
        if sl is None:
            continue
        ys, xs = sl
        if ys.stop - ys.start < 3 or xs.stop - xs.start < 3:
            continue
        if float(prob[sl][lab[sl] == i].mean()) < BOX_THRESH:
            continue
        out.append([xs.start, ys.start, xs.stop, ys.stop])
    return np.array(out, np.float64).reshape(-1, 4), mask


def evaluate(float_outs, quant_outs, meta):
    name = list(float_outs[0].keys())[0]
    tp = nf = nq = 0
    inter = union = 0
    gt_hit = gt_n = 0
    for fo, qo, m in zip(float_outs, quant_outs, meta):
        fb, fm = boxes(fo[name][0, 0])
        qb, qm = boxes(qo[name][0, 0])
        t, a, b = zoolib.match_f1((fb, np.zeros(len(fb))), (qb, np.zeros(len(qb))), 0.5)
        tp, nf, nq = tp + t, nf + a, nq + b
        inter += int(np.sum(fm & qm))
        union += int(np.sum(fm | qm))
        for g in m.get("label", []) if isinstance(m.get("label"), list) else []:
            x0, y0, x1, y1 = g["box"]
            gt_n += 1
            # a rendered line counts as found when float's map covers its mid-line
            ym = (y0 + y1) // 2
            if ym < fm.shape[0] and np.mean(fm[ym, x0:x1]) > 0.5:
                gt_hit += 1
    r = {"task": {"name": "box F1@0.5 vs float", "value": zoolib.f1_from_counts(tp, nf, nq)},
         "float_boxes": nf, "quant_boxes": nq, "matched": tp,
         "binary_map_iou": inter / union if union else 1.0}
    if gt_n:
        r["float_lines_found"] = gt_hit / gt_n
    return r
