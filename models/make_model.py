#!/usr/bin/python3
"""Train the bundled model: a small CNN that tells four shapes apart in 24x24 colour images.

Everything is generated and trained here with numpy (fixed seed), so the model in this
folder is trained, not random, and can be rebuilt byte for byte:
    /usr/bin/python3 models/make_model.py
Writes
    models/shapes_cnn.onnx        opset 13, input "image" [N,3,24,24] float32 in [0,1],
                                  output "logits" [N,4] and "probs" [N,4] (Softmax)
    models/calib/sample_NNN/image.npy   32 calibration samples (onnxq run/quantize format)
    models/eval/sample_NNN/image.npy    64 held-out samples, labels in models/eval/labels.txt
Classes: 0 horizontal bar, 1 vertical bar, 2 filled square, 3 ring.
"""
import os
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

HERE = os.path.dirname(os.path.abspath(__file__))
S = 24
CLASSES = ["hbar", "vbar", "square", "ring"]


def make_image(rng, label):
    img = np.zeros((3, S, S), np.float32)
    bg = rng.uniform(0.0, 0.3, size=3).astype(np.float32)
    img += bg[:, None, None]
    col = rng.uniform(0.5, 1.0, size=3).astype(np.float32)
    yy, xx = np.mgrid[0:S, 0:S]
    cy, cx = rng.uniform(8, 16, size=2)
    if label == 0:
        h, w = rng.uniform(2, 4), rng.uniform(7, 11)
        mask = (abs(yy - cy) < h / 2) & (abs(xx - cx) < w)
    elif label == 1:
        h, w = rng.uniform(7, 11), rng.uniform(2, 4)
        mask = (abs(yy - cy) < h) & (abs(xx - cx) < w / 2)
    elif label == 2:
        r = rng.uniform(3, 6)
        mask = (abs(yy - cy) < r) & (abs(xx - cx) < r)
    else:
        r = rng.uniform(4.5, 7)
        d = np.sqrt((yy - cy) ** 2 + (xx - cx) ** 2)
        mask = (d < r) & (d > r - 2)
    img[:, mask] = col[:, None]
    img += rng.normal(0, 0.05, size=img.shape).astype(np.float32)
    return np.clip(img, 0, 1)


def dataset(rng, n):
    y = rng.integers(0, 4, size=n)
    x = np.stack([make_image(rng, int(l)) for l in y])
    return x, y


def im2col(x, k, pad):
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    cols = np.empty((n, c, k, k, h, w), x.dtype)
    for i in range(k):
        for j in range(k):
            cols[:, :, i, j] = xp[:, :, i:i + h, j:j + w]
    return cols.reshape(n, c * k * k, h * w)


def conv_fwd(x, W, b):
    n, c, h, w = x.shape
    cols = im2col(x, 3, 1)
    out = np.einsum("ok,nkp->nop", W.reshape(W.shape[0], -1), cols) + b[None, :, None]
    return out.reshape(n, W.shape[0], h, w), cols


def conv_bwd(dout, cols, W, xshape):
    n, o, h, w = dout.shape
    d = dout.reshape(n, o, h * w)
    dW = np.einsum("nop,nkp->ok", d, cols).reshape(W.shape)
    db = d.sum(axis=(0, 2))
    dcols = np.einsum("ok,nop->nkp", W.reshape(o, -1), d).reshape(n, xshape[1], 3, 3, h, w)
    dx = np.zeros((n, xshape[1], h + 2, w + 2), dout.dtype)
    for i in range(3):
        for j in range(3):
            dx[:, :, i:i + h, j:j + w] += dcols[:, :, i, j]
    return dx[:, :, 1:-1, 1:-1], dW, db


def pool_fwd(x):
    n, c, h, w = x.shape
    r = x.reshape(n, c, h // 2, 2, w // 2, 2)
    out = r.max(axis=(3, 5))
    mask = r == out[:, :, :, None, :, None]
    return out, mask


def pool_bwd(dout, mask):
    d = mask * dout[:, :, :, None, :, None]
    n, c, h2, _, w2, _ = d.shape
    return d.reshape(n, c, h2 * 2, w2 * 2)


def forward(p, x, cache=None):
    a1, c1 = conv_fwd(x, p["w1"], p["b1"])
    r1 = np.maximum(a1, 0)
    p1, m1 = pool_fwd(r1)
    a2, c2 = conv_fwd(p1, p["w2"], p["b2"])
    r2 = np.maximum(a2, 0)
    p2, m2 = pool_fwd(r2)
    f = p2.reshape(len(x), -1)
    logits = f @ p["w3"].T + p["b3"]
    if cache is not None:
        cache.update(locals())
    return logits


def train():
    rng = np.random.default_rng(20261121)
    xtr, ytr = dataset(rng, 3000)
    p = {
        "w1": rng.normal(0, np.sqrt(2 / 27), (8, 3, 3, 3)).astype(np.float32),
        "b1": np.zeros(8, np.float32),
        "w2": rng.normal(0, np.sqrt(2 / 72), (16, 8, 3, 3)).astype(np.float32),
        "b2": np.zeros(16, np.float32),
        "w3": rng.normal(0, np.sqrt(2 / 576), (4, 16 * 6 * 6)).astype(np.float32),
        "b3": np.zeros(4, np.float32),
    }
    vel = {k: np.zeros_like(v) for k, v in p.items()}
    lr, mom, bs = 0.05, 0.9, 50
    for epoch in range(6):
        perm = rng.permutation(len(xtr))
        for s in range(0, len(xtr), bs):
            idx = perm[s:s + bs]
            x, y = xtr[idx], ytr[idx]
            c = {}
            logits = forward(p, x, c)
            z = logits - logits.max(axis=1, keepdims=True)
            pr = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
            dl = pr.copy()
            dl[np.arange(len(y)), y] -= 1
            dl /= len(y)
            g = {"w3": dl.T @ c["f"], "b3": dl.sum(0)}
            df = (dl @ p["w3"]).reshape(c["p2"].shape)
            dr2 = pool_bwd(df, c["m2"]) * (c["a2"] > 0)
            dp1, g["w2"], g["b2"] = conv_bwd(dr2, c["c2"], p["w2"], c["p1"].shape)
            dr1 = pool_bwd(dp1, c["m1"]) * (c["a1"] > 0)
            _, g["w1"], g["b1"] = conv_bwd(dr1, c["c1"], p["w1"], x.shape)
            for k in p:
                vel[k] = mom * vel[k] - lr * g[k].astype(np.float32)
                p[k] = (p[k] + vel[k]).astype(np.float32)
    return p, rng


def export(p, path):
    init = [numpy_helper.from_array(v, k) for k, v in sorted(p.items())]
    init.append(numpy_helper.from_array(np.array([-1, 16 * 6 * 6], np.int64), "flat_shape"))
    nodes = [
        helper.make_node("Conv", ["image", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["p2", "flat_shape"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "w3", "b3"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    g = helper.make_graph(
        nodes, "shapes_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, S, S])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 4])],
        init)
    m = helper.make_model(g, producer_name="onnxq models/make_model.py", producer_version="1",
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    m.doc_string = "Four-shape classifier (hbar, vbar, square, ring), 24x24 RGB in [0,1]; trained by models/make_model.py"
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)


def save_samples(folder, xs, labels=None):
    os.makedirs(folder, exist_ok=True)
    for i, x in enumerate(xs):
        d = os.path.join(folder, "sample_%03d" % i)
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "image.npy"), x[None].astype(np.float32))
    if labels is not None:
        with open(os.path.join(folder, "labels.txt"), "w") as f:
            for i, l in enumerate(labels):
                f.write("sample_%03d %d %s\n" % (i, l, CLASSES[l]))


def main():
    p, rng = train()
    xte, yte = dataset(rng, 500)
    acc = (forward(p, xte).argmax(1) == yte).mean()
    print("held-out accuracy: %.3f" % acc)
    assert acc > 0.9, "training did not converge"
    export(p, os.path.join(HERE, "shapes_cnn.onnx"))
    xc, _ = dataset(rng, 32)
    save_samples(os.path.join(HERE, "calib"), xc)
    xe, ye = dataset(rng, 64)
    save_samples(os.path.join(HERE, "eval"), xe, ye)


if __name__ == "__main__":
    main()
