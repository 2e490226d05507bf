#!/usr/bin/python3
"""Render synthetic text images for calibrating and evaluating the PaddleOCR models.

Usage:
    /usr/bin/python3 models/make_text_images.py OUT --set calib
    /usr/bin/python3 models/make_text_images.py OUT --set eval
    /usr/bin/python3 models/make_text_images.py OUT --seed 7 --det 8 --cls 16 --rec 8

Writes, for each of det, cls and rec:
    OUT/<model>/images/NNN.png      the rendered image (RGB PNG)
    OUT/<model>/labels.txt          one line per image, "images/NNN.png<TAB>label"
                                    det: PaddleOCR det label (JSON list of
                                         {"transcription", "points"} quads)
                                    cls: 0 = upright, 1 = rotated 180 degrees
                                    rec: the text
    OUT/<model>/tensors/NNN/x.npy   the model input (float32, NCHW, N = 1), made
                                    with PaddleOCR's own preprocessing (see
                                    docs/accuracy.md); this folder is what
                                    `onnxq quantize --calib` reads.

Everything is a function of --seed: same seed, same bytes. Needs only Debian
packages: python3-pil, python3-numpy and TrueType fonts (fonts-dejavu-core,
fonts-liberation, fonts-freefont-ttf; whichever are installed are used).
"""

import argparse
import glob
import json
import math
import os
import random
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

# Named sets: different seeds so calibration and evaluation images differ.
SETS = {
    "calib": {"seed": 1001, "det": 32, "cls": 64, "rec": 32},
    "eval": {"seed": 2002, "det": 32, "cls": 200, "rec": 64},
}

FONT_DIRS = [
    "/usr/share/fonts/truetype/dejavu",
    "/usr/share/fonts/truetype/liberation",
    "/usr/share/fonts/truetype/freefont",
]
# Fonts that are not ordinary text faces (math) or too thin to be typical.
FONT_SKIP = ("MathTeXGyre", "ExtraLight")

# PaddleOCR preprocessing constants (docs/accuracy.md gives the sources).
DET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)  # applied to B, G, R
DET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
CLS_SHAPE = (3, 48, 192)
REC_SHAPE = (3, 48, 320)

WORDS = """
the of and to in is for on with as by at from this that be are was it or an
not have has will can all new more one about which their other data time
order total invoice date amount price item number name address phone email
account balance payment receipt customer service delivery report summary
page section table figure chapter note review version update system model
network image text line word value result sample test check status open
close start stop main street road avenue city state country code postal
office room floor building north south east west first second third
january february march april may june july august september october
november december monday tuesday wednesday thursday friday saturday sunday
coffee bread milk sugar water apple orange tea rice cheese butter
quality quantity discount tax subtotal cash card change thank you welcome
please call visit online store market center station airport hotel
hospital school library museum park garden bank post police fire exit
entrance parking ticket gate platform train bus taxi flight seat class
""".split()


def list_fonts():
    fonts = []
    for d in FONT_DIRS:
        for f in sorted(glob.glob(os.path.join(d, "*.ttf"))):
            if not any(s in f for s in FONT_SKIP):
                fonts.append(f)
    if not fonts:
        sys.exit("make_text_images.py: no TrueType fonts found in %s "
                 "(install fonts-dejavu-core)" % ", ".join(FONT_DIRS))
    return fonts


# ---------------------------------------------------------------- text


def random_word(rng):
    w = rng.choice(WORDS)
    r = rng.random()
    if r < 0.25:
        w = w.capitalize()
    elif r < 0.35:
        w = w.upper()
    return w


def random_text(rng, min_words, max_words):
    kind = rng.random()
    if kind < 0.60:
        n = rng.randint(min_words, max_words)
        words = [random_word(rng) for _ in range(n)]
        if rng.random() < 0.3:
            words[-1] += rng.choice([".", ",", ":", "!", "?"])
        return " ".join(words)
    if kind < 0.70:
        return "%s %d" % (random_word(rng).capitalize(), rng.randint(1, 99999))
    if kind < 0.80:
        return "%04d-%02d-%02d %02d:%02d" % (
            rng.randint(1990, 2030), rng.randint(1, 12), rng.randint(1, 28),
            rng.randint(0, 23), rng.randint(0, 59))
    if kind < 0.90:
        return "%s %s%d.%02d" % (random_word(rng).capitalize(),
                                 rng.choice(["$", "", "EUR "]),
                                 rng.randint(0, 999), rng.randint(0, 99))
    return "%s: %s" % (random_word(rng).upper(),
                       " ".join(random_word(rng) for _ in range(rng.randint(1, 3))))


# ---------------------------------------------------------------- colours


def luminance(c):
    return 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2]


def random_colours(rng):
    """(background, foreground) with enough contrast to be legible."""
    while True:
        if rng.random() < 0.75:  # light paper, dark ink
            bg = tuple(rng.randint(170, 255) for _ in range(3))
            fg = tuple(rng.randint(0, 90) for _ in range(3))
        else:  # dark background, light ink
            bg = tuple(rng.randint(0, 90) for _ in range(3))
            fg = tuple(rng.randint(170, 255) for _ in range(3))
        if abs(luminance(bg) - luminance(fg)) >= 110:
            return bg, fg


def background(rng, w, h, base):
    """Solid colour, or a gentle linear gradient around it."""
    img = np.empty((h, w, 3), dtype=np.float32)
    img[:, :] = base
    if rng.random() < 0.5:
        d = np.array([rng.uniform(-40, 40) for _ in range(3)], dtype=np.float32)
        if rng.random() < 0.5:
            t = np.linspace(-0.5, 0.5, w, dtype=np.float32)[None, :, None]
        else:
            t = np.linspace(-0.5, 0.5, h, dtype=np.float32)[:, None, None]
        img = img + t * d
    return img


def finish(rng, arr, max_noise, max_blur):
    """Add Gaussian noise and blur to a float HxWx3 image; return uint8 PIL."""
    nrng = np.random.default_rng(rng.getrandbits(32))
    sigma = rng.uniform(0, max_noise)
    if sigma > 0:
        arr = arr + nrng.normal(0, sigma, arr.shape).astype(np.float32)
    img = Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8), "RGB")
    r = rng.uniform(0, max_blur)
    if r > 0.3:
        img = img.filter(ImageFilter.GaussianBlur(r))
    return img


# ---------------------------------------------------------------- rendering


def render_line(text, font, fg, angle):
    """Render text on a transparent layer rotated by angle (degrees, counter-
    clockwise). Returns (RGBA image, 4x2 quad of the ink box in its pixels)."""
    l, t, r, b = font.getbbox(text)
    pad = 4
    w, h = r - l + 2 * pad, b - t + 2 * pad
    layer = Image.new("RGBA", (w, h), fg + (0,))
    ImageDraw.Draw(layer).text((pad - l, pad - t), text, font=font, fill=fg + (255,))
    # Ink box (tight, without the padding), clockwise from top-left.
    quad = np.array([[pad, pad], [w - pad, pad], [w - pad, h - pad], [pad, h - pad]],
                    dtype=np.float64)
    if abs(angle) < 1e-6:
        return layer, quad
    rot = layer.rotate(angle, resample=Image.BICUBIC, expand=True)
    # PIL rotates counter-clockwise about the centre; with expand the new
    # centre is the centre of the enlarged canvas.
    a = math.radians(angle)
    c, s = math.cos(a), math.sin(a)
    cx, cy = w / 2.0, h / 2.0
    ncx, ncy = rot.size[0] / 2.0, rot.size[1] / 2.0
    out = np.empty_like(quad)
    for i, (x, y) in enumerate(quad):
        dx, dy = x - cx, y - cy
        out[i] = [ncx + dx * c + dy * s, ncy - dx * s + dy * c]
    return rot, out


def make_det(rng, fonts, size):
    """A page with several text lines. Returns (PIL RGB, list of label dicts)."""
    W = H = size
    bg, fg = random_colours(rng)
    arr = background(rng, W, H, bg)
    page = Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(page)
    # A few non-text distractors: rules and boxes, like forms and tables.
    for _ in range(rng.randint(0, 3)):
        col = tuple(int(v) for v in np.clip(np.array(fg) * 0.5 + np.array(bg) * 0.5, 0, 255))
        x0, y0 = rng.randint(0, W - 20), rng.randint(0, H - 20)
        if rng.random() < 0.5:
            draw.line([(x0, y0), (min(W - 1, x0 + rng.randint(40, W)), y0)],
                      fill=col, width=rng.randint(1, 2))
        else:
            draw.rectangle([x0, y0, min(W - 1, x0 + rng.randint(20, 120)),
                            min(H - 1, y0 + rng.randint(20, 120))], outline=col)
    labels = []
    y = rng.randint(4, 24)
    page_angle = rng.uniform(-4, 4) if rng.random() < 0.6 else 0.0
    while True:
        fsize = rng.randint(max(12, size // 26), max(16, size // 11))
        font = ImageFont.truetype(rng.choice(fonts), fsize)
        text = random_text(rng, 1, 5)
        col = fg
        if rng.random() < 0.2:  # some lines in another ink colour
            lo, hi = (170, 255) if luminance(bg) < 128 else (0, 100)
            col = tuple(rng.randint(lo, hi) for _ in range(3))
        angle = page_angle + rng.uniform(-1.5, 1.5)
        layer, quad = render_line(text, font, col, angle)
        lw, lh = layer.size
        if y + lh > H - 4:
            break
        if lw > W - 8:  # too long for the page: try another line
            y += 2
            continue
        x = rng.randint(4, W - 4 - lw)
        page.paste(layer, (x, y), layer)
        quad = quad + [x, y]
        labels.append({"transcription": text,
                       "points": [[int(round(px)), int(round(py))] for px, py in quad]})
        y += lh + rng.randint(2, fsize)
    img = finish(rng, np.asarray(page, dtype=np.float32), 8.0, 1.0)
    return img, labels


def make_line_crop(rng, fonts, max_ratio, min_words, max_words):
    """A single text line cropped with a margin, as a detector crop would be.
    Returns (PIL RGB, text). The width/height ratio is kept <= max_ratio."""
    while True:
        fsize = rng.randint(16, 44)
        font = ImageFont.truetype(rng.choice(fonts), fsize)
        text = random_text(rng, min_words, max_words)
        l, t, r, b = font.getbbox(text)
        ink_w, ink_h = r - l, b - t
        mx = int(round(fsize * rng.uniform(0.1, 0.5)))
        my = int(round(fsize * rng.uniform(0.1, 0.35)))
        w, h = ink_w + 2 * mx, ink_h + 2 * my
        if w <= max_ratio * h and len(text) >= 3:
            break
    bg, fg = random_colours(rng)
    arr = background(rng, w, h, bg)
    img = Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8), "RGB")
    angle = rng.uniform(-2, 2)
    layer, _ = render_line(text, font, fg, angle)
    # Centre the (possibly rotated) line on the crop.
    img.paste(layer, ((w - layer.size[0]) // 2, (h - layer.size[1]) // 2), layer)
    return finish(rng, np.asarray(img, dtype=np.float32), 8.0, 0.8), text


# ---------------------------------------------------------------- preprocessing


def resize_linear(img, new_w, new_h):
    """cv2.resize(img, (new_w, new_h)) with the default INTER_LINEAR on a uint8
    HxWxC image: half-pixel centres, edge replication, no antialiasing, result
    rounded to uint8. cv2 computes with 11-bit fixed-point weights, so a value
    may differ from it by one grey level."""
    h, w = img.shape[:2]
    if (h, w) == (new_h, new_w):
        return img.copy()

    def axis(n_out, n_in):
        f = (np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5
        i0 = np.floor(f).astype(np.int64)
        a = f - i0
        a[i0 < 0] = 0.0
        i0[i0 < 0] = 0
        i1 = np.minimum(i0 + 1, n_in - 1)
        hi = i0 >= n_in - 1
        a[hi] = 0.0
        i0[hi] = n_in - 1
        return i0, i1, a

    y0, y1, ay = axis(new_h, h)
    x0, x1, ax = axis(new_w, w)
    src = img.astype(np.float64)
    top = src[y0] * (1 - ay)[:, None, None] + src[y1] * ay[:, None, None]
    out = top[:, x0] * (1 - ax)[None, :, None] + top[:, x1] * ax[None, :, None]
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def to_bgr(img):
    """PaddleOCR reads images with cv2.imread, i.e. in B, G, R channel order."""
    return np.asarray(img.convert("RGB"), dtype=np.uint8)[:, :, ::-1]


def preprocess_det(img):
    """tools/infer/predict_det.py: DetResizeForTest(limit_side_len=960,
    limit_type='max') -> NormalizeImage(scale=1/255, mean, std, order='hwc')
    -> ToCHWImage, on the BGR image. Returns float32 [1, 3, H, W]."""
    bgr = to_bgr(img)
    h, w = bgr.shape[:2]
    ratio = 1.0
    if max(h, w) > 960:
        ratio = 960.0 / h if h > w else 960.0 / w
    rh = max(int(round(int(h * ratio) / 32.0) * 32), 32)
    rw = max(int(round(int(w * ratio) / 32.0) * 32), 32)
    bgr = resize_linear(bgr, rw, rh)
    x = (bgr.astype(np.float32) * np.float32(1.0 / 255.0) - DET_MEAN) / DET_STD
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None], dtype=np.float32)


def preprocess_line(img, shape):
    """TextClassifier.resize_norm_img (tools/infer/predict_cls.py) and, for a
    single image whose width/height <= imgW/imgH, TextRecognizer.resize_norm_img
    (tools/infer/predict_rec.py): resize to height imgH keeping the aspect ratio
    (width ceil(imgH*w/h), at most imgW), x/255, (x-0.5)/0.5, CHW, zero padding
    on the right. Returns float32 [1, 3, imgH, imgW]."""
    c, ih, iw = shape
    bgr = to_bgr(img)
    h, w = bgr.shape[:2]
    ratio = w / float(h)
    rw = iw if math.ceil(ih * ratio) > iw else int(math.ceil(ih * ratio))
    r = resize_linear(bgr, rw, ih).astype(np.float32)
    r = r.transpose(2, 0, 1) / 255
    r -= 0.5
    r /= 0.5
    out = np.zeros((c, ih, iw), dtype=np.float32)
    out[:, :, 0:rw] = r
    return out[None]


# ---------------------------------------------------------------- output


def save_sample(root, stem, img, tensor):
    img.save(os.path.join(root, "images", stem + ".png"), optimize=False)
    d = os.path.join(root, "tensors", stem)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "x.npy"), np.ascontiguousarray(tensor, dtype=np.float32))


def prepare(out, name):
    root = os.path.join(out, name)
    os.makedirs(os.path.join(root, "images"), exist_ok=True)
    os.makedirs(os.path.join(root, "tensors"), exist_ok=True)
    return root


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="output folder (det/, cls/, rec/ are made in it)")
    ap.add_argument("--set", choices=sorted(SETS), help="named set: seed and counts")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--det", type=int, help="number of det pages")
    ap.add_argument("--cls", type=int, help="number of cls crops (half rotated)")
    ap.add_argument("--rec", type=int, help="number of rec crops")
    ap.add_argument("--det-size", type=int, default=320,
                    help="det page side in pixels, a multiple of 32 (default 320)")
    a = ap.parse_args()
    cfg = dict(SETS[a.set]) if a.set else {"seed": 1, "det": 8, "cls": 16, "rec": 8}
    for k in ("seed", "det", "cls", "rec"):
        if getattr(a, k) is not None:
            cfg[k] = getattr(a, k)
    if a.det_size % 32 or not 32 <= a.det_size <= 960:
        ap.error("--det-size must be a multiple of 32 between 32 and 960")

    fonts = list_fonts()
    # One generator per kind, so changing one count leaves the others alone.
    seeds = random.Random(cfg["seed"])
    rng_det, rng_cls, rng_rec = (random.Random(seeds.getrandbits(64)) for _ in range(3))

    root = prepare(a.out, "det")
    with open(os.path.join(root, "labels.txt"), "w", encoding="utf-8") as f:
        for i in range(cfg["det"]):
            img, labels = make_det(rng_det, fonts, a.det_size)
            stem = "%03d" % i
            save_sample(root, stem, img, preprocess_det(img))
            f.write("images/%s.png\t%s\n" % (stem, json.dumps(labels, ensure_ascii=False)))

    root = prepare(a.out, "cls")
    flips = [i % 2 for i in range(cfg["cls"])]
    rng_cls.shuffle(flips)
    with open(os.path.join(root, "labels.txt"), "w", encoding="utf-8") as f:
        for i in range(cfg["cls"]):
            img, _ = make_line_crop(rng_cls, fonts, 8.0, 1, 4)
            if flips[i]:
                img = img.transpose(Image.ROTATE_180)
            stem = "%03d" % i
            save_sample(root, stem, img, preprocess_line(img, CLS_SHAPE))
            f.write("images/%s.png\t%d\n" % (stem, flips[i]))

    root = prepare(a.out, "rec")
    with open(os.path.join(root, "labels.txt"), "w", encoding="utf-8") as f:
        for i in range(cfg["rec"]):
            img, text = make_line_crop(rng_rec, fonts, REC_SHAPE[2] / REC_SHAPE[1], 1, 4)
            stem = "%03d" % i
            save_sample(root, stem, img, preprocess_line(img, REC_SHAPE))
            f.write("images/%s.png\t%s\n" % (stem, text))

    print("%s: seed %d: %d det (%dx%d), %d cls, %d rec, %d fonts"
          % (a.out, cfg["seed"], cfg["det"], a.det_size, a.det_size, cfg["cls"],
             cfg["rec"], len(fonts)))


if __name__ == "__main__":
    main()
