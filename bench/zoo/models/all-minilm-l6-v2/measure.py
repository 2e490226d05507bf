#!/usr/bin/env python3
"""Measure one zoo model with the variants bench/zoo/run.py does not make (yet), through
the same contract (fetch.sh outputs, metric.evaluate, zoolib), in onnxruntime (graph
optimizations on, 1 thread). Used for this folder and the audio models beside it.

    python measure.py NAME ONNXQ_EXE [VARIANT,...] [--json OUT] [--calib-n 64]

Variants (default: all that apply):
  onnxq            onnxq quantize M -o Q --calib calib/              (defaults)
  onnxq-dynamic    onnxq quantize M -o Q --mode dynamic              (info.json "dynamic")
  ort-static       the settings of bench/zoo/ort_quant.py static: quant_pre_process (without
                   symbolic shapes where those fail), quantize_static(QDQ, U8S8,
                   per_channel, MinMax), same calibration samples
  ort-static-s8s8  the same with QInt8 activations (S8S8: the docs' first choice on
                   VNNI CPUs; reduce_range when the CPU has no VNNI)
  ort-dynamic      ort_quant.py dynamic: quant_pre_process, quantize_dynamic(QInt8,
                   per_channel)                                      (info.json "dynamic")
  ort-dynamic-pt   quant_pre_process, quantize_dynamic() with its defaults (per tensor)
  onnxq:ARGS       onnxq quantize M -o Q --calib calib/ ARGS (e.g. "onnxq:--smooth-quant 0.5")
Per variant: the task metric and metric.py's other numbers, SQNR per output, quantize
wall time (onnxruntime's: inside its process), file size, latency quantized / float.
"""
import importlib.util, json, os, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ZOO)
import zoolib  # noqa: E402


def has_vnni():
    flags = open("/proc/cpuinfo").read()
    return any(f in flags for f in ("avx512_vnni", "avx_vnni", "amx_int8"))


ORT_S8S8 = r'''
import sys, time, os, numpy as np, tempfile
sys.path.insert(0, sys.argv[4]); import zoolib
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static, quantize_dynamic
from onnxruntime.quantization.shape_inference import quant_pre_process
inp, out, calib, _, mode, rr, act = sys.argv[1:8]
t0 = time.perf_counter()
td = tempfile.mkdtemp(); pre = os.path.join(td, "pre.onnx")
try:
    quant_pre_process(inp, pre)
except Exception:
    quant_pre_process(inp, pre, skip_symbolic_shape=True)
if mode == "static":
    import onnx
    names = [i.name for i in onnx.load(pre, load_external_data=False).graph.input]
    dirs = zoolib.sample_dirs(calib)
    class R(CalibrationDataReader):
        def __init__(self): self.it = iter(dirs)
        def get_next(self):
            d = next(self.it, None)
            return None if d is None else zoolib.load_sample(d, names)
    quantize_static(pre, out, R(), quant_format=QuantFormat.QDQ, per_channel=True,
                    reduce_range=rr == "1", activation_type=getattr(QuantType, act), weight_type=QuantType.QInt8)
else:
    quantize_dynamic(pre, out)
print('{"total_s": %f}' % (time.perf_counter() - t0))
'''


def main():
    a = sys.argv[1:]
    opts = {}
    for k in ("--json", "--calib-n"):
        if k in a:
            i = a.index(k); opts[k] = a[i + 1]; del a[i:i + 2]
    name, exe = a[0], os.path.abspath(a[1])
    mdir = os.path.join(ZOO, "models", name)
    info = json.load(open(os.path.join(mdir, "info.json")))
    dyn = info.get("dynamic", False)
    variants = a[2].split(";" if ";" in a[2] else ",") if len(a) > 2 else (
        ["onnxq", "onnxq-dynamic", "ort-static", "ort-static-s8s8", "ort-dynamic", "ort-dynamic-pt"]
        if dyn else ["onnxq", "ort-static", "ort-static-s8s8"])
    cdir = zoolib.zoo_cache(name)
    model = os.path.join(cdir, "model.onnx")
    n = int(opts.get("--calib-n", 64))
    # the calibration subset run.py uses (evenly spaced by name), in the same folder
    import run
    calib, _ = run.subset(os.path.join(cdir, "calib"), n, os.path.join(cdir, "work", "calib-%d" % n))
    spec = importlib.util.spec_from_file_location("m", os.path.join(mdir, "metric.py"))
    metric = importlib.util.module_from_spec(spec); spec.loader.exec_module(metric)
    dirs = zoolib.sample_dirs(os.path.join(cdir, "eval"))
    sf = zoolib.ort_session(model)
    feeds = [zoolib.load_sample(d, zoolib.input_names(sf)) for d in dirs]
    meta = [zoolib.load_meta(d) for d in dirs]
    fo = zoolib.run_all(sf, feeds)
    res = {"model": name, "cpu": open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": "),
           "calib_n": len(zoolib.sample_dirs(calib)), "eval_n": len(dirs),
           "float_size_mb": os.path.getsize(model) / 1e6, "variants": {}}
    wd = os.path.join(cdir, "work"); os.makedirs(wd, exist_ok=True)
    py = sys.executable
    for v in variants:
        q = os.path.join(wd, "m-%s.onnx" % "".join(c if c.isalnum() or c in "-." else "_" for c in v))
        if v == "onnxq":
            cmd = [exe, "quantize", model, "-o", q, "--calib", calib, "--quiet"] + info.get("onnxq_args", [])
        elif v.startswith("onnxq:"):  # onnxq with options: "onnxq:--method mse"
            cmd = [exe, "quantize", model, "-o", q, "--calib", calib, "--quiet"] + v[6:].split()
        elif v == "onnxq-dynamic":
            cmd = [exe, "quantize", model, "-o", q, "--mode", "dynamic", "--quiet"]
        elif v == "ort-dynamic":
            cmd = [py, os.path.join(ZOO, "ort_quant.py"), "dynamic", model, q]
        elif v in ("ort-static", "ort-static-s8s8", "ort-dynamic-pt"):
            # ort-static: the settings of ../../ort_quant.py static (U8S8, per_channel, no
            # reduce_range), inline so that its pre-processing fallback works on If models
            cmd = [py, "-c", ORT_S8S8, model, q, calib, ZOO,
                   "dynamic" if v == "ort-dynamic-pt" else "static",
                   "1" if v == "ort-static-s8s8" and not has_vnni() else "0",
                   "QInt8" if v == "ort-static-s8s8" else "QUInt8"]
        else:
            raise SystemExit("unknown variant " + v)
        t0 = time.perf_counter()
        r = subprocess.run(["nice"] + cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            print(v, "FAILED", r.stderr[-800:], flush=True)
            res["variants"][v] = {"error": r.stderr[-800:]}
            continue
        qt = wall
        if v.startswith("ort"):
            qt = json.loads(r.stdout.strip().splitlines()[-1])["total_s"]
        try:
            sq = zoolib.ort_session(q)
            qo = zoolib.run_all(sq, feeds)
        except Exception as e:  # noqa: BLE001 onnxruntime refuses the model or fails running it
            msg = str(e).strip().splitlines()[-1][:400] if str(e).strip() else type(e).__name__
            print(v, "ONNXRUNTIME FAILED", msg, flush=True)
            res["variants"][v] = {"error": "onnxruntime: " + msg, "quantize_s": round(qt, 2),
                                  "size_mb": round(os.path.getsize(q) / 1e6, 2)}
            continue
        m = metric.evaluate(fo, qo, meta)
        sl, worst = zoolib.slice_sqnr(fo, qo, info.get("slices"))
        sl.update(m.pop("slices", {}) or {})
        tf, tq, _ = zoolib.latency(sf, sq, feeds[0], budget_s=3.0)
        row = {"task": m.pop("task"), "extra": m, "sqnr_db": sl, "quantize_s": round(qt, 2),
               "size_mb": round(os.path.getsize(q) / 1e6, 2), "q_over_float": round(tq / tf, 3),
               "cmd": " ".join(cmd[:2] + [os.path.basename(c) for c in cmd[2:]]) if not v.startswith(("ort-static", "ort-dynamic-pt")) else v}
        res["variants"][v] = row
        print("%-16s %s %.5f | %s | sqnr %s | q %.1fs | %.2f MB | q/f %.2f" % (
            v, row["task"]["name"], row["task"]["value"],
            json.dumps({k: round(x, 4) for k, x in m.items()}),
            json.dumps({k: round(x, 2) for k, x in sl.items()}), qt, row["size_mb"], row["q_over_float"]), flush=True)
    if "--json" in opts:
        json.dump(res, open(opts["--json"], "w"), indent=1)


if __name__ == "__main__":
    main()
