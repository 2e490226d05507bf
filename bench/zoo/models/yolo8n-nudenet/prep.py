"""Writes $ONNXQ_CACHE/zoo/yolo8n-nudenet/{model.onnx, calib/, eval/}.
Preprocessing as nudenet.NudeDetector: pad right/bottom with black to a square, resize to
320x320 (bilinear), RGB, /255, NCHW float32. calib: Debian wallpapers; eval: pictures
bundled in scikit-image / scikit-learn / matplotlib wheels, plus 12 mosaics of 16 faces each
from the Labeled Faces in the Wild subset bundled in scikit-image (the photos hold few
people, so few detections) (bench/zoo/sources.py)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import sources  # noqa: E402
import zoolib  # noqa: E402

NAME = "yolo8n-nudenet"
SIZE = 320


def prep(im):
    from PIL import Image
    w, h = im.size
    s = max(w, h)
    canvas = Image.new("RGB", (s, s), (0, 0, 0))
    canvas.paste(im, (0, 0))
    canvas = canvas.resize((SIZE, SIZE), Image.BILINEAR)
    x = np.asarray(canvas, dtype=np.float32) / 255.0
    return x.transpose(2, 0, 1)[None].copy(), {"orig_w": w, "orig_h": h}


def main():
    out = zoolib.install_model(NAME, zoolib.package_file("nudenet", "320n.onnx"))
    sources.write_photo_sets(out, "images", prep, extra_eval=lambda: sources.face_mosaics(4))
    print("ok", NAME)


if __name__ == "__main__":
    main()
