#!/usr/bin/python3
"""Eval-only text crops in fonts the tests do not use (WenQuanYi Zen Hei, URW base35).

    apt-get install -y fonts-wqy-zenhei fonts-urw-base35
    /usr/bin/python3 bench/other_fonts.py OUT [--seed S] [--cls N] [--rec N] [--det N]
        [--noise SIGMA] [--blur R] [--fonts GLOB,GLOB...]

Writes OUT/cls and OUT/rec (and OUT/det with --det N) in the layout of
models/make_text_images.py (images/NNN.png, labels.txt, tensors/NNN/x.npy), rendered by
that script's own functions and PaddleOCR preprocessing, only with other faces: by default
every URW base35 OpenType face except the symbol/dingbat ones, and WenQuanYi Zen Hei.
--noise and --blur set the largest Gaussian noise sigma and blur radius (defaults 8 and
0.8, as the project's sets). Nothing here is used for calibration: these crops are for
judging `onnxq run --target host` against onnxruntime on data the tests were not written
on (bench/target_agreement.py; docs/run.md "Float operations under an integer target").
"""
import argparse
import glob
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'models'))
import make_text_images as mti  # noqa: E402
from PIL import Image  # noqa: E402

DEFAULT_FONTS = ['/usr/share/fonts/opentype/urw-base35/*.otf',
                 '/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc']
SKIP = ('D050000L', 'StandardSymbols', 'Z003')  # dingbats, symbols, a script face


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('out')
    ap.add_argument('--seed', type=int, default=4242)
    ap.add_argument('--cls', type=int, default=100)
    ap.add_argument('--rec', type=int, default=32)
    ap.add_argument('--det', type=int, default=0)
    ap.add_argument('--noise', type=float, default=8.0)
    ap.add_argument('--blur', type=float, default=0.8)
    ap.add_argument('--fonts', default=','.join(DEFAULT_FONTS))
    a = ap.parse_args()
    fonts = sorted(f for g in a.fonts.split(',') for f in glob.glob(g)
                   if not any(s in f for s in SKIP))
    if not fonts:
        sys.exit('other_fonts.py: no fonts found (apt-get install fonts-wqy-zenhei fonts-urw-base35)')
    # make_line_crop's noise and blur are arguments of finish(); wrap it with ours.
    finish = mti.finish
    mti.finish = lambda rng, arr, n, b: finish(rng, arr, a.noise if n == 8.0 else n,
                                               a.blur if b == 0.8 else b)
    seeds = random.Random(a.seed)
    rng_det, rng_cls, rng_rec = (random.Random(seeds.getrandbits(64)) for _ in range(3))
    if a.det:
        root = mti.prepare(a.out, 'det')
        with open(os.path.join(root, 'labels.txt'), 'w', encoding='utf-8') as f:
            for i in range(a.det):
                img, _ = mti.make_det(rng_det, fonts, 320)
                mti.save_sample(root, '%03d' % i, img, mti.preprocess_det(img))
                f.write('images/%03d.png\t[]\n' % i)
    root = mti.prepare(a.out, 'cls')
    flips = [i % 2 for i in range(a.cls)]
    rng_cls.shuffle(flips)
    with open(os.path.join(root, 'labels.txt'), 'w', encoding='utf-8') as f:
        for i in range(a.cls):
            img, _ = mti.make_line_crop(rng_cls, fonts, 8.0, 1, 4)
            if flips[i]:
                img = img.transpose(Image.ROTATE_180)
            mti.save_sample(root, '%03d' % i, img, mti.preprocess_line(img, mti.CLS_SHAPE))
            f.write('images/%03d.png\t%d\n' % (i, flips[i]))
    root = mti.prepare(a.out, 'rec')
    with open(os.path.join(root, 'labels.txt'), 'w', encoding='utf-8') as f:
        for i in range(a.rec):
            img, text = mti.make_line_crop(rng_rec, fonts, mti.REC_SHAPE[2] / mti.REC_SHAPE[1], 1, 4)
            mti.save_sample(root, '%03d' % i, img, mti.preprocess_line(img, mti.REC_SHAPE))
            f.write('images/%03d.png\t%s\n' % (i, text))
    print('%s: seed %d: %d det, %d cls, %d rec, %d fonts' % (a.out, a.seed, a.det, a.cls, a.rec, len(fonts)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
