#!/usr/bin/python3
"""Render an EVALUATION set of text images made another way than models/make_text_images.py.

EVAL ONLY: never calibrate on this set, and never choose a default on it (issue 22: pick
defaults on calibration data only). It exists to check that calibration made on the
project's own renders (models/make_text_images.py --set calib) generalizes to text that
looks different.

Usage:
    /usr/bin/python3 bench/other_renders.py OUT [--seed 5] [--det 24] [--cls 160] [--rec 64]

Writes the same layout as make_text_images.py (OUT/{det,cls,rec}/images/NNN.png,
labels.txt, tensors/NNN/x.npy) with PaddleOCR's preprocessing (imported from
make_text_images.py, so only the images differ). What differs from the project renders:
  - fonts: URW base35 (OpenType: Nimbus, C059, P052, URW Bookman, URW Gothic; Debian
    fonts-urw-base35) and WenQuanYi Zen Hei (fonts-wqy-zenhei, CJK), none of which
    make_text_images.py uses;
  - text: Chinese strings from PaddleOCR's dictionary (ppocr_keys_v1.txt) mixed with
    random Latin pseudo-words, codes, e-mail addresses and long numbers;
  - look: font sizes 10..64 px, textured and photo-like backgrounds (low-frequency noise,
    vignetting, shadows), coloured ink, underlines, JPEG compression (quality 15..70),
    salt-and-pepper noise, stronger blur, slanted (sheared) lines;
  - det pages are 320x320 (as the project's calib set) with denser, mixed-size lines.
Needs python3-pil, python3-numpy, fonts-urw-base35, fonts-wqy-zenhei.
"""

import argparse
import glob
import io
import json
import os
import random
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import make_text_images as mti  # noqa: E402  (preprocessing only)

URW = "/usr/share/fonts/opentype/urw-base35"
WQY = "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc"
URW_SKIP = ("StandardSymbols", "D050000L", "Z003")
KEYS = os.path.expanduser("~/.cache/onnxq/ocr/package/assets/ppocr_keys_v1.txt")


def fonts():
    latin = [f for f in sorted(glob.glob(os.path.join(URW, "*.otf"))) if not any(s in f for s in URW_SKIP)]
    cjk = [(WQY, 0), (WQY, 1)] if os.path.exists(WQY) else []
    if not latin or not cjk:
        sys.exit("other_renders.py: install fonts-urw-base35 and fonts-wqy-zenhei")
    return latin, cjk


def load_font(spec, size):
    if isinstance(spec, tuple):
        return ImageFont.truetype(spec[0], size, index=spec[1])
    return ImageFont.truetype(spec, size)


def hanzi(rng, keys, n):
    return "".join(rng.choice(keys) for _ in range(n))


def pseudo_word(rng):
    cons, vow = "bcdfghjklmnprstvwxz", "aeiouy"
    w = "".join(rng.choice(cons) + rng.choice(vow) for _ in range(rng.randint(1, 4)))
    return w.capitalize() if rng.random() < 0.4 else w


def text_line(rng, keys, cjk_font):
    k = rng.random()
    if cjk_font and k < 0.55:
        s = hanzi(rng, keys, rng.randint(2, 10))
        if rng.random() < 0.3:
            s += rng.choice(["：", "，", "。", " "]) + str(rng.randint(0, 9999))
        return s
    if k < 0.70:
        return " ".join(pseudo_word(rng) for _ in range(rng.randint(1, 4)))
    if k < 0.80:
        return "%s@%s.%s" % (pseudo_word(rng).lower(), pseudo_word(rng).lower(), rng.choice(["com", "org", "cn", "de"]))
    if k < 0.90:
        return "No.%d-%04d/%s" % (rng.randint(1, 999), rng.randint(0, 9999), pseudo_word(rng).upper()[:3])
    return "%d,%03d.%02d" % (rng.randint(1, 999), rng.randint(0, 999), rng.randint(0, 99))


def textured_bg(rng, w, h, dark):
    nrng = np.random.default_rng(rng.getrandbits(32))
    base = np.array([rng.randint(20, 80) if dark else rng.randint(150, 250) for _ in range(3)], np.float32)
    # low-frequency texture: coarse noise upsampled
    gh, gw = max(2, h // 16), max(2, w // 16)
    coarse = nrng.normal(0, rng.uniform(5, 30), (gh, gw, 3)).astype(np.float32)
    tex = np.asarray(Image.fromarray(np.clip(coarse + 128, 0, 255).astype(np.uint8)).resize((w, h), Image.BICUBIC),
                     np.float32) - 128
    img = base + tex
    # vignetting / a shadow band
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    if rng.random() < 0.5:
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        r = np.sqrt((xx - cx) ** 2 + (yy - cy) ** 2) / max(w, h)
        img = img * (1.0 - rng.uniform(0.1, 0.5) * r[..., None])
    if rng.random() < 0.3:
        x0 = rng.uniform(0, w)
        img = img * np.where(xx[..., None] > x0, rng.uniform(0.5, 0.85), 1.0)
    return img


def ink(rng, dark_bg):
    if dark_bg:
        return tuple(rng.randint(180, 255) for _ in range(3))
    if rng.random() < 0.3:  # coloured ink
        return tuple(rng.choice([(rng.randint(120, 200), 0, 0), (0, 0, rng.randint(100, 180)),
                                 (0, rng.randint(60, 120), 0)])[i] for i in range(3))
    return tuple(rng.randint(0, 60) for _ in range(3))


def degrade(rng, img):
    arr = np.asarray(img, np.float32)
    nrng = np.random.default_rng(rng.getrandbits(32))
    if rng.random() < 0.4:  # salt and pepper
        m = nrng.random(arr.shape[:2])
        p = rng.uniform(0.002, 0.02)
        arr[m < p / 2] = 0
        arr[m > 1 - p / 2] = 255
    arr = arr + nrng.normal(0, rng.uniform(0, 12), arr.shape)
    img = Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8), "RGB")
    r = rng.uniform(0, 1.6)
    if r > 0.4:
        img = img.filter(ImageFilter.GaussianBlur(r))
    if rng.random() < 0.7:  # JPEG artefacts
        b = io.BytesIO()
        img.save(b, "JPEG", quality=rng.randint(15, 70))
        img = Image.open(io.BytesIO(b.getvalue())).convert("RGB")
    return img


def draw_line(rng, text, font, fg, underline):
    l, t, r, b = font.getbbox(text)
    pad = 3
    w, h = max(1, r - l + 2 * pad), max(1, b - t + 2 * pad)
    layer = Image.new("RGBA", (w, h), fg + (0,))
    d = ImageDraw.Draw(layer)
    d.text((pad - l, pad - t), text, font=font, fill=fg + (255,))
    if underline:
        d.line([(pad, h - 2), (w - pad, h - 2)], fill=fg + (255,), width=1)
    sh = rng.uniform(-0.25, 0.25) if rng.random() < 0.4 else 0.0  # slant
    if sh:
        layer = layer.transform((w + int(abs(sh) * h), h), Image.AFFINE,
                                (1, sh, -abs(sh) * h if sh > 0 else 0, 0, 1, 0), Image.BICUBIC)
    return layer


def pick_font(rng, latin, cjk, size):
    use_cjk = rng.random() < 0.5
    return load_font(rng.choice(cjk) if use_cjk else rng.choice(latin), size), use_cjk


def make_crop(rng, latin, cjk, keys, max_ratio):
    while True:
        size = rng.randint(10, 64)
        font, is_cjk = pick_font(rng, latin, cjk, size)
        text = text_line(rng, keys, is_cjk)
        dark = rng.random() < 0.2
        fg = ink(rng, dark)
        layer = draw_line(rng, text, font, fg, rng.random() < 0.15)
        mx = int(size * rng.uniform(0.05, 0.6))
        my = int(size * rng.uniform(0.05, 0.45))
        w, h = layer.size[0] + 2 * mx, layer.size[1] + 2 * my
        if w <= max_ratio * h and len(text) >= 2:
            break
    img = Image.fromarray(np.clip(np.rint(textured_bg(rng, w, h, dark)), 0, 255).astype(np.uint8), "RGB")
    img.paste(layer, (mx, my), layer)
    if rng.random() < 0.5:
        img = img.rotate(rng.uniform(-4, 4), resample=Image.BICUBIC, fillcolor=img.getpixel((0, 0)))
    return degrade(rng, img), text


def make_page(rng, latin, cjk, keys, size):
    dark = rng.random() < 0.15
    page = Image.fromarray(np.clip(np.rint(textured_bg(rng, size, size, dark)), 0, 255).astype(np.uint8), "RGB")
    labels = []
    y = rng.randint(2, 12)
    while y < size - 10:
        fsize = rng.randint(10, 40)
        font, is_cjk = pick_font(rng, latin, cjk, fsize)
        text = text_line(rng, keys, is_cjk)
        layer = draw_line(rng, text, font, ink(rng, dark), rng.random() < 0.1)
        lw, lh = layer.size
        if y + lh > size - 2:
            break
        if lw < size - 4:
            x = rng.randint(2, size - 2 - lw)
            page.paste(layer, (x, y), layer)
            labels.append({"transcription": text, "points": [[x, y], [x + lw, y], [x + lw, y + lh], [x, y + lh]]})
        y += lh + rng.randint(0, fsize)
    return degrade(rng, page), labels


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--det", type=int, default=24)
    ap.add_argument("--cls", type=int, default=160)
    ap.add_argument("--rec", type=int, default=64)
    ap.add_argument("--det-size", type=int, default=320)
    a = ap.parse_args()
    latin, cjk = fonts()
    keys = [k for k in open(KEYS, encoding="utf-8").read().split("\n") if len(k) == 1 and ord(k) > 0x2e80]
    seeds = random.Random(a.seed)
    rd, rc, rr = (random.Random(seeds.getrandbits(64)) for _ in range(3))

    root = mti.prepare(a.out, "det")
    with open(os.path.join(root, "labels.txt"), "w", encoding="utf-8") as f:
        for i in range(a.det):
            img, labels = make_page(rd, latin, cjk, keys, a.det_size)
            mti.save_sample(root, "%03d" % i, img, mti.preprocess_det(img))
            f.write("images/%03d.png\t%s\n" % (i, json.dumps(labels, ensure_ascii=False)))
    root = mti.prepare(a.out, "cls")
    flips = [i % 2 for i in range(a.cls)]
    rc.shuffle(flips)
    with open(os.path.join(root, "labels.txt"), "w", encoding="utf-8") as f:
        for i in range(a.cls):
            img, _ = make_crop(rc, latin, cjk, keys, 8.0)
            if flips[i]:
                img = img.transpose(Image.ROTATE_180)
            mti.save_sample(root, "%03d" % i, img, mti.preprocess_line(img, mti.CLS_SHAPE))
            f.write("images/%03d.png\t%d\n" % (i, flips[i]))
    root = mti.prepare(a.out, "rec")
    with open(os.path.join(root, "labels.txt"), "w", encoding="utf-8") as f:
        for i in range(a.rec):
            img, text = make_crop(rr, latin, cjk, keys, mti.REC_SHAPE[2] / mti.REC_SHAPE[1])
            mti.save_sample(root, "%03d" % i, img, mti.preprocess_line(img, mti.REC_SHAPE))
            f.write("images/%03d.png\t%s\n" % (i, text))
    print("%s: seed %d: %d det, %d cls, %d rec (EVAL ONLY: do not calibrate on it)" % (a.out, a.seed, a.det, a.cls, a.rec))


if __name__ == "__main__":
    main()
