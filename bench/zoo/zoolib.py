"""Shared code for the real-model zoo (bench/zoo): paths, sample folders, onnxruntime
sessions, quality figures (SQNR per output and per slice, cosine), detection helpers
(NMS, IoU, matching), CTC decoding, latency timing. Bench-only; never used by onnxq."""

import json
import os
import statistics
import time

import numpy as np

ZOO_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(ZOO_DIR))


def cache_dir():
    return os.environ.get("ONNXQ_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "onnxq")


def install_model(name, src):
    """$ONNXQ_CACHE/zoo/NAME/model.onnx: a copy of src (renamed into place, so an interrupted
    copy is never taken for the model), unless it is there already. Returns the folder."""
    import shutil
    out = zoo_cache(name)
    os.makedirs(out, exist_ok=True)
    model = os.path.join(out, "model.onnx")
    if not os.path.exists(model):
        shutil.copyfile(str(src), model + ".tmp")
        os.replace(model + ".tmp", model)
    return out


def load_metric(name):
    """models/NAME/metric.py as a module (run.py's loader; a model's metric.py may reuse
    another model's this way)."""
    import importlib.util
    path = os.path.join(ZOO_DIR, "models", name, "metric.py")
    spec = importlib.util.spec_from_file_location("zoo_metric_" + name.replace("-", "_"), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def zoo_cache(name=None):
    d = os.path.join(cache_dir(), "zoo")
    return os.path.join(d, name) if name else d


# ---------------------------------------------------------------- samples

def sample_dirs(folder, limit=None):
    """Sorted sample subfolders of a layout-1 folder (docs/data.md)."""
    subs = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    if limit:
        subs = subs[:limit]
    return [os.path.join(folder, d) for d in subs]


def load_sample(d, input_names):
    feed = {}
    for n in input_names:
        p = os.path.join(d, n + ".npy")
        feed[n] = np.load(p)
    return feed


def load_meta(d):
    p = os.path.join(d, "meta.json")
    m = {}
    if os.path.exists(p):
        with open(p) as f:
            m = json.load(f)
    m["_dir"] = d
    return m


def write_sample(folder, name, feed, meta=None):
    """Write one sample (layout 1) with optional meta.json."""
    d = os.path.join(folder, name)
    os.makedirs(d, exist_ok=True)
    for k, v in feed.items():
        np.save(os.path.join(d, k + ".npy"), np.ascontiguousarray(v))
    if meta is not None:
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump(meta, f)


# ---------------------------------------------------------------- onnxruntime

def ort_session(path, threads=1, optimize=True):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def input_names(sess):
    return [i.name for i in sess.get_inputs()]


def run_all(sess, feeds):
    names = [o.name for o in sess.get_outputs()]
    outs = []
    for feed in feeds:
        r = sess.run(names, feed)
        outs.append({n: np.asarray(v) for n, v in zip(names, r)})
    return outs


def latency(sess_f, sess_q, feed, reps=None, budget_s=4.0):
    """Median latency (s) of the float and the quantized session, runs interleaved on the
    same feed (f, q, f, q, ...), after one warm-up each. reps: fixed count, else as many as
    fit in budget_s (at least 7, at most 200)."""
    names_f = [o.name for o in sess_f.get_outputs()]
    names_q = [o.name for o in sess_q.get_outputs()]
    for _ in range(2):
        sess_f.run(names_f, feed)
        sess_q.run(names_q, feed)
    tf, tq = [], []
    t_start = time.perf_counter()
    i = 0
    while True:
        for sess, names, acc in ((sess_f, names_f, tf), (sess_q, names_q, tq)) if i % 2 == 0 else \
                ((sess_q, names_q, tq), (sess_f, names_f, tf)):
            t0 = time.perf_counter()
            sess.run(names, feed)
            acc.append(time.perf_counter() - t0)
        i += 1
        if reps is not None:
            if i >= reps:
                break
        elif (i >= 7 and time.perf_counter() - t_start > budget_s) or i >= 200:
            break
    return statistics.median(tf), statistics.median(tq), i


# ---------------------------------------------------------------- quality figures

def sqnr_db(ref, test):
    """10 log10(sum ref^2 / sum (ref - test)^2) over all given arrays (pooled)."""
    if isinstance(ref, (list, tuple)):
        s = sum(float(np.sum(np.square(r.astype(np.float64)))) for r in ref)
        n = sum(float(np.sum(np.square(r.astype(np.float64) - t.astype(np.float64))))
                for r, t in zip(ref, test))
    else:
        r = ref.astype(np.float64)
        s = float(np.sum(r * r))
        n = float(np.sum(np.square(r - test.astype(np.float64))))
    if n == 0:
        return float("inf")
    if s == 0:
        return float("-inf")
    return 10.0 * np.log10(s / n)


def cosine(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    d = np.linalg.norm(a) * np.linalg.norm(b)
    return float(np.dot(a, b) / d) if d > 0 else 0.0


def take_slice(arr, spec):
    axis = spec.get("axis", 0)
    if axis < 0:
        axis += arr.ndim
    sl = [slice(None)] * arr.ndim
    sl[axis] = slice(spec.get("start"), spec.get("stop"))
    return arr[tuple(sl)]


def slice_sqnr(float_outs, quant_outs, slices=None):
    """SQNR (dB, pooled over samples) per output and per slice (info.json "slices").
    Keys: "<output>" and "<output>[<slice name>]". Returns (dict, worst key)."""
    res = {}
    names = list(float_outs[0].keys())
    for n in names:
        ref = [o[n] for o in float_outs]
        tst = [o[n] for o in quant_outs]
        if not np.issubdtype(ref[0].dtype, np.floating):
            continue
        res[n] = sqnr_db(ref, tst)
        for spec in (slices or {}).get(n, []):
            res["%s[%s]" % (n, spec["name"])] = sqnr_db([take_slice(r, spec) for r in ref],
                                                      [take_slice(t, spec) for t in tst])
    worst = min(res, key=lambda k: res[k]) if res else None
    return res, worst


# ---------------------------------------------------------------- detection helpers

def box_iou(a, b):
    """IoU matrix of boxes a [N,4] and b [M,4] in x1,y1,x2,y2."""
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)))
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    aa = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    ab = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / np.maximum(aa[:, None] + ab[None, :] - inter, 1e-12)


def nms(boxes, scores, iou_thr):
    order = np.argsort(-scores, kind="stable")
    keep = []
    while len(order):
        i = order[0]
        keep.append(i)
        if len(order) == 1:
            break
        ious = box_iou(boxes[i:i + 1], boxes[order[1:]])[0]
        order = order[1:][ious <= iou_thr]
    return np.array(keep, dtype=np.int64)


def match_f1(ref_dets, test_dets, iou_thr=0.5):
    """Greedy matching of test detections to reference ones (same class, IoU >= iou_thr,
    highest IoU first). Each det list: (boxes [N,4], classes [N]). Returns (tp, n_ref, n_test)."""
    rb, rc = ref_dets
    tb, tc = test_dets
    if len(rb) == 0 or len(tb) == 0:
        return 0, len(rb), len(tb)
    iou = box_iou(rb, tb)
    iou[np.asarray(rc)[:, None] != np.asarray(tc)[None, :]] = 0
    tp = 0
    used_r, used_t = set(), set()
    for flat in np.argsort(-iou, axis=None):
        i, j = divmod(int(flat), iou.shape[1])
        if iou[i, j] < iou_thr:
            break
        if i in used_r or j in used_t:
            continue
        used_r.add(i)
        used_t.add(j)
        tp += 1
    return tp, len(rb), len(tb)


def f1_from_counts(tp, n_ref, n_test):
    if n_ref == 0 and n_test == 0:
        return 1.0
    return 2.0 * tp / max(n_ref + n_test, 1)


# ---------------------------------------------------------------- text helpers

def ctc_greedy(logits, blank=0):
    """logits [T, C] -> list of class ids after collapsing repeats and removing blank."""
    ids = np.argmax(logits, axis=-1)
    out = []
    prev = -1
    for i in ids:
        if i != prev and i != blank:
            out.append(int(i))
        prev = i
    return out


def edit_distance(a, b):
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def package_file(package, rel):
    """Path of a file inside an installed package, without importing the package (its
    __init__ may need dependencies the zoo does not install)."""
    import importlib.util
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("package %s is not installed (bash bench/zoo/venv.sh)" % package)
    return os.path.join(list(spec.submodule_search_locations)[0], rel)
