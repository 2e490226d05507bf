#!/usr/bin/env python3
"""Deployment benchmark: onnxq's quantized models against onnxruntime's own quantizer, as
onnxruntime runs them.

    VENV=$(bash .ci/venv.sh)
    $VENV/bin/python bench/deploy.py --onnxq build/onnxq [options]

For each model (PaddleOCR det at 320x320, rec, cls from $ONNXQ_CACHE/ocr/package/assets,
and the bundled models/shapes_cnn.onnx) and each quantizer variant:

- onnxq variants: `onnxq quantize FLOAT -o Q --calib DIR --max-samples N ARGS` for each
  `--onnxq-variant NAME=ARGS` (defaults: onnxq = no ARGS, onnxq-u8u8 =
  "--act-dtype uint8 --weight-dtype uint8"; giving any --onnxq-variant replaces them);
- onnxruntime variants (`onnxruntime.quantization.quantize_static`, the same calibration
  samples through a CalibrationDataReader):
    ort-default  quantize_static's defaults (QDQ, S8S8, per tensor, MinMax), no pre-processing;
    ort-best     what onnxruntime's quantization docs recommend for the CPU: quant_pre_process
                 first, QDQ, S8S8 (the docs' "first choice"), per_channel=True, and
                 reduce_range=True when the target CPU has no VNNI;
    ort-u8u8     quant_pre_process, QDQ, per_channel=True, activations and weights QUInt8
                 (the docs' advice when U8S8/S8S8 saturate).

It measures, in onnxruntime (this Python package) on eval samples that are not the
calibration samples: the SQNR of every output against the float model (optimized, all
outputs of all samples together), with graph optimizations ON (ORT_ENABLE_ALL: fused
integer kernels) and OFF (ORT_DISABLE_ALL: QDQ computed in float, the ONNX reference
math); the argmax agreement with the float model (cls, shapes: class; rec: per time
step); and the latency of the quantized model as a ratio to the original float model,
both optimized, at 1 and 2 intra-op threads: runs interleaved (float, quantized, float,
...), median of the per-pair ratios.

Data: models/make_text_images.py's calib and eval sets (seeds 1001 and 2002, det pages
320x320; rendered into --data DIR when missing), the first --calib-n / --eval-n samples of
each; the bundled model uses models/calib and models/eval.

ONNXQ_ORT_CPU=haswell: models are quantized natively, then the measuring stage runs under
`qemu-x86_64 -cpu Haswell` (AVX2, no VNNI: onnxruntime's MLAS takes its AVX2 kernels)
for accuracy only; latency is not measured there (it means nothing under emulation), and
ort-best uses reduce_range. Prints a markdown table, writes --json.
"""

import argparse
import glob
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
CACHE = os.environ.get("ONNXQ_CACHE") or os.path.expanduser("~/.cache/onnxq")

DEFAULT_ONNXQ = [("onnxq", ""), ("onnxq-u8u8", "--act-dtype uint8 --weight-dtype uint8")]
ORT_VARIANTS = ("ort-default", "ort-best", "ort-u8u8")

# name: float model, calibration and eval sample folders (one subfolder per sample with
# <input>.npy), agreement kind, default sample counts (calib, eval).
def model_table(data, assets):
    return {
        "det": dict(model=os.path.join(assets, "ch_PP-OCRv4_det_infer.onnx"),
                    calib=os.path.join(data, "calib", "det", "tensors"),
                    eval=os.path.join(data, "eval", "det", "tensors"), agree=None, n=(8, 8)),
        "rec": dict(model=os.path.join(assets, "ch_PP-OCRv4_rec_infer.onnx"),
                    calib=os.path.join(data, "calib", "rec", "tensors"),
                    eval=os.path.join(data, "eval", "rec", "tensors"), agree="time step", n=(16, 32)),
        "cls": dict(model=os.path.join(assets, "ch_ppocr_mobile_v2.0_cls_infer.onnx"),
                    calib=os.path.join(data, "calib", "cls", "tensors"),
                    eval=os.path.join(data, "eval", "cls", "tensors"), agree="class", n=(32, 100)),
        "shapes": dict(model=os.path.join(SRC, "models", "shapes_cnn.onnx"),
                       calib=os.path.join(SRC, "models", "calib"),
                       eval=os.path.join(SRC, "models", "eval"), agree="class", n=(32, 64)),
    }


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def die(msg):
    print("bench/deploy.py: " + msg, file=sys.stderr)
    sys.exit(2)


def cpu_info():
    """(model name, ISA) of the CPU onnxruntime's kernels will see."""
    name, flags = platform.processor() or "unknown", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k.strip() == "model name" and name in ("unknown", "x86_64", ""):
                    name = v.strip()
                if k.strip() == "flags":
                    flags = set(v.split())
    except OSError:
        pass
    cpu = os.environ.get("ONNXQ_ORT_CPU", "native") or "native"
    if cpu.lower() == "haswell":
        return name + " emulated as Haswell (qemu-x86_64 -cpu Haswell)", "avx2"
    if cpu != "native":
        return name + " emulated as " + cpu, "unknown"
    if "avx512_vnni" in flags:
        isa = "avx512-vnni"
    elif "avx_vnni" in flags:
        isa = "avx-vnni"
    elif "avx512f" in flags:
        isa = "avx512 (no VNNI)"
    elif "avx2" in flags:
        isa = "avx2"
    else:
        isa = "other"
    return name, isa


def samples(folder, n):
    dirs = sorted(d for d in glob.glob(os.path.join(folder, "*")) if os.path.isdir(d))[:n]
    if not dirs:
        die("%s: no sample folders" % folder)
    return dirs


def load_sample(d):
    import numpy as np
    return {os.path.basename(f)[:-4]: np.load(f) for f in sorted(glob.glob(os.path.join(d, "*.npy")))}


def ensure_data(data):
    for name in ("calib", "eval"):
        out = os.path.join(data, name)
        if os.path.isdir(os.path.join(out, "det", "tensors")):
            continue
        log("rendering %s (models/make_text_images.py --set %s)" % (out, name))
        subprocess.run(["/usr/bin/python3", os.path.join(SRC, "models", "make_text_images.py"),
                        out, "--set", name], check=True, stdout=sys.stderr)


# ------------------------------------------------------------------ quantizing


def quantize_onnxq(exe, model, calib, n, args, out):
    cmd = [exe, "quantize", model, "-o", out, "--calib", calib, "--max-samples", str(n),
           "--quiet"] + shlex.split(args)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), (r.stderr or r.stdout).strip()[-500:]))
    return ("onnxq quantize FLOAT -o OUT --calib DIR " + args).strip()


def quantize_ort(variant, model, calib_dirs, out, isa, work):
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quant_pre_process, quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(calib_dirs)

        def get_next(self):
            d = next(self.it, None)
            return None if d is None else load_sample(d)

    src = model
    kw = dict(quant_format=QuantFormat.QDQ)
    steps = []  # what was done before quantize_static, for the table
    if variant != "ort-default":
        import onnx
        import onnx.version_converter
        stem = os.path.join(work, os.path.basename(out)[:-5])
        m = onnx.load(model)
        opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)
        if opset < 13:
            # quantize_static(per_channel=True) writes DequantizeLinear with an axis, which
            # needs opset 13, but keeps the model's opset (cls, rec: 9; det: 11), and
            # onnxruntime then refuses the model: convert the float model first.
            onnx.save(onnx.version_converter.convert_version(m, 13), stem + ".op13.onnx")
            model = stem + ".op13.onnx"
            steps.append("onnx.version_converter opset %d -> 13" % opset)
        src = stem + ".pre.onnx"
        try:
            quant_pre_process(model, src)
            steps.append("quant_pre_process")
        except Exception as e:  # noqa: BLE001 (onnxruntime raises plain Exception)
            # Symbolic shape inference gives up on some models with dynamic sizes (det:
            # "Incomplete symbolic shape inference"); the docs recommend it for
            # transformers and ONNX shape inference for other models: keep the rest.
            log("  quant_pre_process: %s; again with skip_symbolic_shape=True" % str(e).strip()[:100])
            quant_pre_process(model, src, skip_symbolic_shape=True)
            steps.append("quant_pre_process(skip_symbolic_shape=True)")
        kw["per_channel"] = True
    if variant == "ort-best":
        kw["reduce_range"] = "vnni" not in isa
        args = "QDQ, S8S8, per_channel" + (", reduce_range" if kw["reduce_range"] else "")
    elif variant == "ort-u8u8":
        kw["activation_type"] = QuantType.QUInt8
        kw["weight_type"] = QuantType.QUInt8
        args = "QDQ, U8U8, per_channel"
    else:
        args = "defaults: QDQ, S8S8, per tensor, MinMax"
    quantize_static(src, out, Reader(), **kw)
    return "; ".join(steps + ["quantize_static(%s)" % args])


# ------------------------------------------------------------------ measuring


def session(path, opt, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if opt
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def run_all(sess, feeds):
    return [sess.run(None, f) for f in feeds]


def accuracy(ref, got, agree):
    """SQNR (dB) per output over all samples, and argmax agreement on the first output."""
    import numpy as np
    n_out = len(ref[0])
    sqnr = []
    for k in range(n_out):
        s = sum(float(np.sum(np.square(r[k].astype(np.float64)))) for r in ref)
        e = sum(float(np.sum(np.square(r[k].astype(np.float64) - g[k].astype(np.float64))))
                for r, g in zip(ref, got))
        sqnr.append(float("inf") if e == 0 else 10 * np.log10(s / e))
    agr = None
    if agree:
        same = total = 0
        for r, g in zip(ref, got):
            a, b = np.argmax(r[0], axis=-1), np.argmax(g[0], axis=-1)
            same += int(np.sum(a == b))
            total += a.size
        agr = same / total
    return sqnr, agr


def latency_ratio(fpath, qpath, feed, threads, runs):
    fs, qs = session(fpath, True, threads), session(qpath, True, threads)
    for _ in range(2):
        fs.run(None, feed)
        qs.run(None, feed)
    ratios, tf, tq = [], [], []
    start = time.perf_counter()
    # at least `runs` pairs, and for small models as many as fit in half a second
    while len(ratios) < runs or (time.perf_counter() - start < 0.5 and len(ratios) < 2000):
        t0 = time.perf_counter()
        fs.run(None, feed)
        t1 = time.perf_counter()
        qs.run(None, feed)
        t2 = time.perf_counter()
        tf.append(t1 - t0)
        tq.append(t2 - t1)
        ratios.append((t2 - t1) / (t1 - t0))
    return statistics.median(ratios), statistics.median(tf) * 1e3, statistics.median(tq) * 1e3, len(ratios)


def measure(plan, threads, runs, latency):
    """plan: list of {model, name, float, quant, eval_dirs, agree}; fills the results in."""
    feeds_cache, ref_cache = {}, {}
    for row in plan:
        if row.get("error"):
            continue
        key = row["model"]
        if key not in feeds_cache:
            feeds_cache[key] = [load_sample(d) for d in row["eval_dirs"]]
            ref_cache[key] = run_all(session(row["float"], True, 1), feeds_cache[key])
        feeds, ref = feeds_cache[key], ref_cache[key]
        t0 = time.time()
        try:
            for opt in (True, False):
                got = run_all(session(row["quant"], opt, 1), feeds)
                sq, ag = accuracy(ref, got, row["agree"])
                row["sqnr_db_opt" if opt else "sqnr_db_noopt"] = sq
                row["agreement_opt" if opt else "agreement_noopt"] = ag
            if latency:
                for t in threads:
                    r, mf, mq, n = latency_ratio(row["float"], row["quant"], feeds[0], t, runs)
                    row["pairs_%dt" % t] = n
                    row["latency_ratio_%dt" % t] = r
                    row["ms_float_%dt" % t] = mf
                    row["ms_quant_%dt" % t] = mq
        except Exception as e:  # an onnxruntime failure on one model must not end the run
            row["error"] = "onnxruntime: %s" % str(e).strip().splitlines()[0][:300]
        log("  measured %-6s %-12s %.0f s" % (row["model"], row["name"], time.time() - t0))
    return plan


# ------------------------------------------------------------------ output


def fmt_db(v):
    return "-" if v is None else ("inf" if v == float("inf") else "%.1f" % v)


def table(meta, plan, threads):
    out = []
    out.append("CPU: %s; ISA: %s; onnxruntime %s (Python); onnxq %s" % (
        meta["cpu"], meta["isa"], meta["onnxruntime"], meta["onnxq_version"]))
    out.append("calibration / eval samples: %s; latency: median of >= %s interleaved pairs%s" % (
        ", ".join("%s %d/%d" % (m, c, e) for m, (c, e) in meta["samples"].items()), meta["runs"],
        "" if meta["latency"] else (" (not measured: emulated CPU)" if meta.get("emulated")
                                    else " (not measured: --no-latency)")))
    out.append("SQNR: per output (%s), against the float model optimized" % "; ".join(
        "%s: %s" % (m, " / ".join(o)) for m, o in meta["outputs"].items()))
    out.append("")
    hdr = ["model", "quantizer", "SQNR opt (dB)", "SQNR no-opt (dB)", "agreement opt",
           "agreement no-opt"] + ["q/float %dT" % t for t in threads]
    out.append("| " + " | ".join(hdr) + " |")
    out.append("|" + "|".join("---" for _ in hdr) + "|")
    for r in plan:
        if r.get("error"):
            out.append("| %s | %s | error: %s |" % (r["model"], r["name"], r["error"][:120]))
            continue

        def sq(key):
            v = r.get(key)
            return "-" if v is None else " / ".join(fmt_db(x) for x in v)

        def ag(key):
            v = r.get(key)
            return "-" if v is None else "%.1f %%" % (100 * v)
        cells = [r["model"], r["name"], sq("sqnr_db_opt"), sq("sqnr_db_noopt"),
                 ag("agreement_opt"), ag("agreement_noopt")]
        for t in threads:
            v = r.get("latency_ratio_%dt" % t)
            cells.append("-" if v is None else "%.2f" % v)
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out.append("Quantizer settings:")
    hows = {}
    for r in plan:
        hows.setdefault((r["name"], r["how"]), []).append(r["model"])
    for (name, how), models in hows.items():
        out.append("- %s (%s): `%s`" % (name, ", ".join(models), how))
    return "\n".join(out)


# ------------------------------------------------------------------ main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--onnxq", default=os.path.join(SRC, "build", "onnxq"), help="onnxq program")
    ap.add_argument("--models", default="det,rec,cls,shapes", help="comma list of det,rec,cls,shapes")
    ap.add_argument("--onnxq-variant", action="append", default=[], metavar="NAME=ARGS",
                    help="onnxq quantize arguments for a variant named NAME (repeatable; "
                         "replaces the default onnxq and onnxq-u8u8 variants)")
    ap.add_argument("--ort-variants", default=",".join(ORT_VARIANTS),
                    help="comma list of %s, or none" % ",".join(ORT_VARIANTS))
    ap.add_argument("--calib-n", type=int, help="calibration samples per model (default det 8, "
                    "rec 16, cls 32, shapes 32)")
    ap.add_argument("--eval-n", type=int, help="eval samples per model (default det 8, rec 32, "
                    "cls 100, shapes 64)")
    ap.add_argument("--runs", type=int, default=15, help="interleaved latency pairs (default 15)")
    ap.add_argument("--threads", default="1,2", help="intra-op threads for latency (default 1,2)")
    ap.add_argument("--no-latency", action="store_true", help="accuracy only")
    ap.add_argument("--data", default=os.path.join(CACHE, "textdata"),
                    help="make_text_images.py sets (calib/, eval/; rendered when missing)")
    ap.add_argument("--assets", default=os.path.join(CACHE, "ocr", "package", "assets"),
                    help="PaddleOCR models")
    ap.add_argument("--work", default=os.path.join(CACHE, "bench-deploy"),
                    help="quantized models and plan (default $ONNXQ_CACHE/bench-deploy)")
    ap.add_argument("--json", help="write the results here (default WORK/results.json)")
    ap.add_argument("--stage", choices=("all", "measure"), default="all", help=argparse.SUPPRESS)
    a = ap.parse_args()

    threads = [int(t) for t in a.threads.split(",") if t]
    for k in ("onnxq", "data", "assets", "work", "json"):
        if getattr(a, k):
            setattr(a, k, os.path.abspath(getattr(a, k)))
    os.makedirs(a.work, exist_ok=True)
    os.chdir(a.work)  # quant_pre_process leaves sym_shape_infer_temp.onnx in the current folder
    cpu, isa = cpu_info()
    emulated = (os.environ.get("ONNXQ_ORT_CPU", "native") or "native") != "native"
    plan_file = os.path.join(a.work, "plan.json")
    json_out = a.json or os.path.join(a.work, "results.json")

    if a.stage == "all":
        import onnx
        import onnxruntime
        models = model_table(a.data, a.assets)
        chosen = [m for m in a.models.split(",") if m]
        for m in chosen:
            if m not in models:
                die("unknown model %s (det, rec, cls, shapes)" % m)
            if not os.path.isfile(models[m]["model"]):
                die("%s missing (run .ci/fetch-models.sh)" % models[m]["model"])
        if not os.access(a.onnxq, os.X_OK):
            die("%s: not an executable (build onnxq, or pass --onnxq)" % a.onnxq)
        variants = []
        for v in a.onnxq_variant:
            name, eq, args = v.partition("=")
            if not eq or not name:
                die("--onnxq-variant needs NAME=ARGS, got %r" % v)
            variants.append((name, args))
        variants = variants or DEFAULT_ONNXQ
        ort_variants = [] if a.ort_variants == "none" else [v for v in a.ort_variants.split(",") if v]
        for v in ort_variants:
            if v not in ORT_VARIANTS:
                die("unknown onnxruntime variant %s (%s)" % (v, ", ".join(ORT_VARIANTS)))
        if any(m in ("det", "rec", "cls") for m in chosen):
            ensure_data(a.data)
        os.makedirs(a.work, exist_ok=True)
        ver = subprocess.run([a.onnxq, "--version"], capture_output=True, text=True)
        meta = dict(cpu=cpu, isa=isa, onnxruntime=onnxruntime.__version__,
                    onnxq_version=(ver.stdout or ver.stderr).strip().splitlines()[0] if ver.stdout or ver.stderr else "?",
                    runs=a.runs, threads=threads, latency=not (a.no_latency or emulated), samples={},
                    outputs={})
        plan = []
        for m in chosen:
            spec = models[m]
            nc = a.calib_n or spec["n"][0]
            ne = a.eval_n or spec["n"][1]
            cdirs, edirs = samples(spec["calib"], nc), samples(spec["eval"], ne)
            meta["samples"][m] = (len(cdirs), len(edirs))
            meta["outputs"][m] = [o.name for o in onnx.load(spec["model"]).graph.output]
            for name, args in variants:
                out = os.path.join(a.work, "%s.%s.onnx" % (m, name))
                row = dict(model=m, name=name, float=spec["model"], quant=out, eval_dirs=edirs,
                           agree=spec["agree"])
                t0 = time.time()
                try:
                    row["how"] = quantize_onnxq(a.onnxq, spec["model"], spec["calib"], len(cdirs), args, out)
                except RuntimeError as e:
                    row["how"] = "onnxq quantize " + args
                    row["error"] = str(e)
                row["quantize_s"] = time.time() - t0
                log("quantized %-6s %-12s %.0f s" % (m, name, row["quantize_s"]))
                plan.append(row)
            for name in ort_variants:
                out = os.path.join(a.work, "%s.%s.onnx" % (m, name))
                row = dict(model=m, name=name, float=spec["model"], quant=out, eval_dirs=edirs,
                           agree=spec["agree"])
                t0 = time.time()
                try:
                    row["how"] = quantize_ort(name, spec["model"], cdirs, out, isa, a.work)
                except Exception as e:
                    row["how"] = name
                    row["error"] = "quantize_static: %s" % str(e).strip().splitlines()[0][:300]
                row["quantize_s"] = time.time() - t0
                log("quantized %-6s %-12s %.0f s" % (m, name, row["quantize_s"]))
                plan.append(row)
        with open(plan_file, "w") as f:
            json.dump(dict(meta=meta, plan=plan), f, indent=1)
        if emulated and os.environ.get("ONNXQ_DEPLOY_IN_QEMU") != "1":
            # Measure under qemu: the same script, stage "measure", on the plan above.
            qcpu = "Haswell" if os.environ["ONNXQ_ORT_CPU"].lower() == "haswell" else os.environ["ONNXQ_ORT_CPU"]
            if not shutil.which("qemu-x86_64"):
                die("ONNXQ_ORT_CPU=%s needs qemu-x86_64 (Debian qemu-user)" % qcpu)
            env = dict(os.environ, ONNXQ_DEPLOY_IN_QEMU="1")
            argv = ["qemu-x86_64", "-cpu", qcpu, sys.executable, os.path.abspath(__file__),
                    "--stage", "measure", "--work", a.work, "--threads", a.threads,
                    "--runs", str(a.runs), "--json", json_out]
            p = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
            for line in p.stderr:
                if "TCG doesn't support requested feature" not in line:
                    sys.stderr.write(line)
            sys.exit(p.wait())
    with open(plan_file) as f:
        saved = json.load(f)
    meta, plan = saved["meta"], saved["plan"]
    import onnxruntime
    meta["onnxruntime"] = onnxruntime.__version__
    if emulated:
        meta["latency"] = False
        meta["emulated"] = True
    measure(plan, meta["threads"], meta["runs"], meta["latency"])
    for r in plan:
        r.pop("eval_dirs", None)
    with open(json_out, "w") as f:
        json.dump(dict(meta=meta, results=plan), f, indent=1)
    print(table(meta, plan, meta["threads"]))
    log("wrote %s" % json_out)


if __name__ == "__main__":
    main()
