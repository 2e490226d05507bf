"""Writes $ONNXQ_CACHE/zoo/efficientnet-lite0/{model.onnx, calib/, eval/}.
Preprocessing as the package's README (torchvision ImageNet style): shorter side to 256
(bilinear), centre crop 224, RGB / 255, mean (0.485, 0.456, 0.406), std (0.229, 0.224,
0.225), NCHW float32. calib: Debian wallpapers; eval: pictures bundled in scikit-image /
scikit-learn / matplotlib wheels (bench/zoo/sources.py)."""
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
import sources  # noqa: E402
import zoolib  # noqa: E402

NAME = "efficientnet-lite0"
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def prep(im, size=224, short=256):
    from PIL import Image
    w, h = im.size
    k = short / min(w, h)
    im = im.resize((max(size, round(w * k)), max(size, round(h * k))), Image.BILINEAR)
    W, H = im.size
    x0, y0 = (W - size) // 2, (H - size) // 2
    im = im.crop((x0, y0, x0 + size, y0 + size))
    a = (np.asarray(im, np.float32) / 255.0 - MEAN) / STD
    return a.transpose(2, 0, 1)[None].astype(np.float32).copy()


def main():
    out = zoolib.zoo_cache(NAME)
    os.makedirs(out, exist_ok=True)
    model = os.path.join(out, "model.onnx")
    if not os.path.exists(model):
        subprocess.run([sys.executable, os.path.join(HERE, "export.py"), model + ".tmp"],
                       check=True, stderr=subprocess.DEVNULL)
        os.replace(model + ".tmp", model)
    sources.write_photo_sets(out, "input", prep)
    print("ok", NAME)


if __name__ == "__main__":
    main()
