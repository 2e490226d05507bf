#!/usr/bin/env python3
"""Quantize the encoder four ways and judge each with metric.py (onnxruntime optimized,
1 thread); standalone until the zoo harness (bench/zoo/run.py) takes over.

    python measure.py ONNXQ_EXE WORKDIR [--json OUT]

WORKDIR holds model.onnx, calib/ and eval/ (prepare.py). Variants:
  onnxq-static    onnxq quantize M -o Q --calib calib            (the defaults)
  onnxq-dynamic   onnxq quantize M -o Q --mode dynamic
  ort-static      quant_pre_process, quantize_static(QDQ, S8S8, per_channel; reduce_range
                  when the CPU has no VNNI), MinMax, same calibration samples
  ort-dynamic     quant_pre_process, quantize_dynamic (defaults: QInt8 weights; per tensor)
"""
import json, os, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import metric  # noqa: E402


def has_vnni():
    flags = open("/proc/cpuinfo").read()
    return "avx512_vnni" in flags or "avx_vnni" in flags or "amx_int8" in flags


def main():
    a = sys.argv[1:]
    out = None
    if "--json" in a:
        i = a.index("--json"); out = a[i + 1]; del a[i:i + 2]
    exe, w = a[0], a[1]
    only = a[2].split(",") if len(a) > 2 else None
    fl = os.path.join(w, "model.onnx")
    calib, ev = os.path.join(w, "calib"), os.path.join(w, "eval")
    data = metric.samples(ev)
    hf = metric.run(fl, data)
    rows = {"float": {"size_bytes": os.path.getsize(fl)}}
    os.makedirs(os.path.join(w, "q"), exist_ok=True)

    def onnxq(q, *args):
        cmd = [exe, "quantize", fl, "-o", q, "--quiet", *args]
        subprocess.run(cmd, check=True)
        return " ".join(["onnxq", "quantize", "model.onnx", "-o", os.path.basename(q), *args])

    steps = {}

    def ort_pre():
        from onnxruntime.quantization import quant_pre_process
        pre = os.path.join(w, "q", "model.pre.onnx")
        if not os.path.exists(pre):
            try:
                quant_pre_process(fl, pre)
                steps["pre"] = "quant_pre_process"
            except Exception:  # noqa: BLE001 "Incomplete symbolic shape inference" on this export
                quant_pre_process(fl, pre, skip_symbolic_shape=True)
                steps["pre"] = "quant_pre_process(skip_symbolic_shape=True)"
        return pre

    def ort_static(q):
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
        t0 = time.perf_counter()
        pre = ort_pre()
        cdata = metric.samples(calib)

        class R(CalibrationDataReader):
            def __init__(self): self.it = iter(cdata)
            def get_next(self): return next(self.it, None)
        rr = not has_vnni()
        quantize_static(pre, q, R(), quant_format=QuantFormat.QDQ, per_channel=True, reduce_range=rr)
        return steps["pre"] + "; quantize_static(QDQ, S8S8, per_channel%s, MinMax)" % (", reduce_range" if rr else ""), time.perf_counter() - t0

    def ort_dynamic(q):
        from onnxruntime.quantization import quantize_dynamic
        t0 = time.perf_counter()
        pre = ort_pre()
        quantize_dynamic(pre, q)
        return steps["pre"] + "; quantize_dynamic(defaults)", time.perf_counter() - t0

    variants = {
        "onnxq-static": lambda q: onnxq(q, "--calib", calib),
        "onnxq-dynamic": lambda q: onnxq(q, "--mode", "dynamic"),
        "ort-static": ort_static,
        "ort-dynamic": ort_dynamic,
    }
    for name, fn in variants.items():
        if only and name not in only:
            continue
        q = os.path.join(w, "q", name + ".onnx")
        if os.path.exists(os.path.join(w, "q", "model.pre.onnx")) and name.startswith("ort"):
            os.remove(os.path.join(w, "q", "model.pre.onnx"))  # pre-processing counts in its time
        t0 = time.perf_counter()
        how = fn(q)
        dt = time.perf_counter() - t0
        if isinstance(how, tuple):
            how, dt = how
        r = metric.compare(data, hf, metric.run(q, data))
        r.update(how=how, quantize_s=round(dt, 2), size_bytes=os.path.getsize(q))
        rows[name] = r
        print(name, json.dumps(r), flush=True)
    if out:
        json.dump(rows, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
