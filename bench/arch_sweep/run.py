"""Architecture sweep: quantize small random-init models with onnxq, judge them in onnxruntime.

    VENV=$(bash bench/arch_sweep/venv.sh)
    $VENV/bin/python bench/arch_sweep/run.py --onnxq build/onnxq [--out DIR] [--models a,b]
                                             [--json FILE] [--floor DB] [--threads N]

Exports the models of models.py into --out (default $ONNXQ_CACHE/arch_sweep, ONNXQ_CACHE
defaulting to ~/.cache/onnxq) unless they are there already from the same models.py, then
for each model and mode: `onnxq quantize` (defaults), the float and quantized models in
onnxruntime (CPU, ORT_ENABLE_ALL, 1 thread) on the eval samples (SQNR per output over all
samples), and `onnxq verify --target host`. Prints a markdown table; exits 1 if a row fails.
"""
import argparse
import hashlib
import json
import logging
import os
import platform
import re
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ beside models.py in the repo

# mode -> extra `onnxq quantize` arguments (static: calibrated on NAME_calib)
MODES = {
    "static": [],
    "dynamic": ["--mode", "dynamic"],
    "wo-int4": ["--mode", "weight-only", "--weight-dtype", "int4"],
}
EXTRA_MODES = {
    "transformer": ["dynamic", "wo-int4"],
    "transformer_u": ["dynamic", "wo-int4"],
    "vit": ["dynamic"],
    "vit_dyn": ["dynamic"],
    "gru": ["dynamic"],
    # second set
    "attn": ["dynamic", "wo-int4"],
    "bert": ["dynamic", "wo-int4"],
    "bert_dyn": ["dynamic", "wo-int4"],
    "gpt2": ["dynamic", "wo-int4"],
    "gpt2_dyn": ["dynamic", "wo-int4"],
    "t5enc": ["dynamic", "wo-int4"],
    "distilbert": ["dynamic", "wo-int4"],
    "whisper_enc": ["dynamic", "wo-int4"],
    "wav2vec2": ["dynamic", "wo-int4"],
    "wav2vec2_dyn": ["dynamic", "wo-int4"],
    "swin": ["dynamic", "wo-int4"],
    "mobilevit": ["dynamic", "wo-int4"],
    "clip_text": ["dynamic", "wo-int4"],
    "clip_vision": ["dynamic", "wo-int4"],
    # third set
    "llama": ["dynamic", "wo-int4"],
    "llama_dyn": ["dynamic", "wo-int4"],
    "qwen2": ["dynamic", "wo-int4"],
    "deberta": ["dynamic", "wo-int4"],
    "albert": ["dynamic", "wo-int4"],
    "dinov2": ["dynamic", "wo-int4"],
}
# int4 weight-only on random-init weights of width 64: per-row floors where onnxruntime's own
# MatMulNBitsQuantizer (block 32, RTN) gives the same SQNR (t5enc 18.2, clip_text 15.2 dB,
# llama 17.6, qwen2 16.9; gpt2's and albert's Gemms are int4 too in onnxq, which
# onnxruntime's quantizer leaves float: albert's pooler 16.5 dB against its 19.1)
FLOORS = {
    ("gpt2", "wo-int4"): 15.0,
    ("t5enc", "wo-int4"): 15.0,
    ("clip_text", "wo-int4"): 12.0,
    ("llama", "wo-int4"): 15.0,
    ("llama_dyn", "wo-int4"): 15.0,
    ("qwen2", "wo-int4"): 15.0,
    ("albert", "wo-int4"): 15.0,
}
PROGRESS = re.compile(r"^[a-z ]+: \d+/\d+, ")
TIMEOUT = 600


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def ensure_exported(out, names):
    """Export the models whose files are missing or came from another models.py."""
    src = sha256(os.path.join(HERE, "models.py"))
    stamp_path = os.path.join(out, "stamps.json")
    stamps = {}
    if os.path.exists(stamp_path):
        with open(stamp_path) as f:
            stamps = json.load(f)
    todo = [n for n in names if stamps.get(n) != src or not all(
        os.path.exists(os.path.join(out, p)) for p in (f"{n}.onnx", f"{n}_calib", f"{n}_eval"))]
    if not todo:
        return {}
    import torch  # only when exporting
    import models
    torch.set_num_threads(1)
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    os.makedirs(out, exist_ok=True)
    failed = {}
    for n in todo:
        t = time.monotonic()
        try:
            desc = models.export(n, out)
        except Exception as e:  # noqa: BLE001
            failed[n] = "export: " + (str(e).splitlines() or [repr(e)])[0][:160]
            print(f"{n}: {failed[n]}", file=sys.stderr, flush=True)
            stamps.pop(n, None)
            continue
        print(f"exported {desc} ({time.monotonic() - t:.1f} s)", file=sys.stderr, flush=True)
        stamps[n] = src
        with open(stamp_path, "w") as f:
            json.dump(stamps, f, indent=1)
    return failed


def session(path):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def load_samples(folder, input_names):
    return [{n: np.load(os.path.join(folder, d, n + ".npy")) for n in input_names}
            for d in sorted(os.listdir(folder))]


def ort_error(e):
    """onnxruntime's message without its '[ONNXRuntimeError] : 1 : FAIL : Load model from P failed:'."""
    msg = (str(e).splitlines() or [repr(e)])[0]
    msg = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", msg)
    return re.sub(r"^Load model from \S+ failed:", "", msg)[:200]


def sqnr(num, den):
    if den == 0:
        return float("inf")
    return float(10 * np.log10(num / den)) if num > 0 else float("-inf")


def stderr_summary(text, rc):
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not PROGRESS.match(ln.strip())]
    short = lambda s: re.sub(r"^(onnxq quantize|\S+\.onnx): (warning: |error: )?", "", s)[:110]  # noqa: E731
    if rc != 0:
        errs = [ln for ln in lines if "error" in ln.lower()] or lines or ["(no output)"]
        return short(errs[0])
    parts = []
    m = re.search(r"calibration: ([^,;]+)", text)
    if m:
        parts.append("calibration " + m.group(1))
    m = re.search(r"weight-only: (\d+ weights)", text)
    if m:
        parts.append(m.group(1))
    warns = [ln for ln in lines if ": warning:" in ln]
    parts.append(f"{len(warns)} warning(s)" + (": " + short(warns[0]) if warns else ""))
    return "; ".join(parts)


def run_onnxq(args):
    t = time.monotonic()
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = "timeout", e.stdout or "", f"error: timeout after {TIMEOUT} s"
        out = out.decode() if isinstance(out, bytes) else out
    return rc, out, err, time.monotonic() - t


def judge(args, name, mode, float_outs, eval_samples):
    out = args.out
    fmodel = os.path.join(out, f"{name}.onnx")
    qmodel = os.path.join(out, "work", f"{name}.{mode}.q.onnx")
    os.makedirs(os.path.dirname(qmodel), exist_ok=True)
    for p in (qmodel, qmodel + ".data"):
        if os.path.exists(p):
            os.remove(p)
    calib = ["--calib", os.path.join(out, f"{name}_calib")] if mode == "static" else []
    cmd = [args.onnxq, "quantize", fmodel, "-o", qmodel, *calib, *MODES[mode], "--threads", str(args.threads)]
    rc, _, err, secs = run_onnxq(cmd)
    row = dict(model=name, mode=mode, quantize_cmd=cmd, quantize_rc=rc, quantize_s=round(secs, 2),
               quantize_summary=stderr_summary(err, rc), ort_sqnr_db={}, verify_worst_db=None,
               verify_sqnr_db={}, failures=[])
    fail = row["failures"]
    floor = FLOORS.get((name, mode), args.floor)
    if floor != args.floor:
        row["floor_db"] = floor
    if rc != 0:
        fail.append(f"quantize exit {rc}")
        return row

    # onnxruntime, float vs quantized, SQNR per output over all eval samples
    try:
        sq = session(qmodel)
    except Exception as e:  # noqa: BLE001
        fail.append("ORT load: " + ort_error(e))
        sq = None
    if sq is not None:
        names = [o.name for o in sq.get_outputs()]
        num, den = dict.fromkeys(names, 0.0), dict.fromkeys(names, 0.0)
        try:
            for feed, fo in zip(eval_samples, float_outs):
                for n, q in zip(names, sq.run(None, feed)):
                    f = fo[n].astype(np.float64)
                    q = np.asarray(q).astype(np.float64)
                    if f.shape != q.shape:
                        raise ValueError(f"output {n}: shape {q.shape}, float {f.shape}")
                    if not np.isfinite(q).all():
                        raise ValueError(f"output {n}: non-finite values")
                    num[n] += float((f * f).sum())
                    den[n] += float(((f - q) ** 2).sum())
            row["ort_sqnr_db"] = {n: sqnr(num[n], den[n]) for n in names}
        except Exception as e:  # noqa: BLE001
            fail.append("ORT run: " + ort_error(e))
        for n, v in row["ort_sqnr_db"].items():
            if v < floor:
                fail.append(f"ORT {n} {v:.1f} dB < {floor:g}")

    # onnxq verify with this CPU's onnxruntime arithmetic
    vcmd = [args.onnxq, "verify", fmodel, qmodel, "--data", os.path.join(out, f"{name}_eval"),
            "--target", "host", "--no-isolation", "--json", "-", "--quiet", "--threads", str(args.threads)]
    row["verify_cmd"] = vcmd
    vrc, vout, verr, _ = run_onnxq(vcmd)
    row["verify_rc"] = vrc
    if vrc != 0:
        fail.append(f"verify exit {vrc}: " + stderr_summary(verr, 1))
    else:
        try:
            v = json.loads(vout)
            db = lambda x: float("inf") if x is None else float(x)  # noqa: E731  (null: no error)
            row["verify_worst_db"] = db(v["worst"]["sqnr_db"])
            row["verify_target"] = f'{v.get("target")} ({v.get("arithmetic")})'
            row["verify_sqnr_db"] = {o["name"]: db(o["error"]["sqnr_db"]) for o in v["outputs"]}
            label = v["worst"].get("label")
            if row["verify_worst_db"] is not None and not row["verify_worst_db"] >= floor:
                fail.append(f'verify {label} {row["verify_worst_db"]:.1f} dB < {floor:g}')
        except (ValueError, KeyError, TypeError) as e:
            fail.append(f"verify JSON: {e}")
    # placement/arithmetic agreement (reported, not a failure): onnxruntime vs verify's host model
    row["gaps"] = {n: ort_db - row["verify_sqnr_db"][n] for n, ort_db in row["ort_sqnr_db"].items()
                   if n in row["verify_sqnr_db"] and np.isfinite(ort_db) and np.isfinite(row["verify_sqnr_db"][n])
                   and abs(ort_db - row["verify_sqnr_db"][n]) > args.gap}
    return row


def fmt_db(v):
    return "-" if v is None else f"{v:.1f}"


def main():
    cache = os.environ.get("ONNXQ_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "onnxq")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--onnxq", required=True, help="the onnxq binary")
    ap.add_argument("--out", default=os.path.join(cache, "arch_sweep"), help="models, samples, work files")
    ap.add_argument("--models", help="comma-separated names (default: all of models.py)")
    ap.add_argument("--json", help="write every row as JSON to this file")
    ap.add_argument("--floor", type=float, default=20.0, help="lowest acceptable SQNR per output, dB")
    ap.add_argument("--gap", type=float, default=0.5,
                    help="note (not a failure) an output whose ORT and verify SQNR differ by more, dB")
    ap.add_argument("--threads", type=int, default=1, help="onnxq --threads (default 1)")
    args = ap.parse_args()
    args.onnxq = os.path.abspath(args.onnxq)
    args.out = os.path.abspath(args.out)
    if not os.access(args.onnxq, os.X_OK):
        sys.exit(f"--onnxq {args.onnxq}: not an executable file")

    import models  # the list of names (torch is imported here too)
    names = list(models.MODELS)
    if args.models:
        names = [n.strip() for n in args.models.split(",") if n.strip()]
        bad = [n for n in names if n not in models.MODELS]
        if bad:
            sys.exit(f"unknown model(s) {','.join(bad)}; known: {','.join(models.MODELS)}")
    t0 = time.monotonic()
    failed = ensure_exported(args.out, names)

    rows = []
    for name in names:
        try:
            if name in failed:
                raise RuntimeError(failed[name])
            sf = session(os.path.join(args.out, f"{name}.onnx"))
            eval_samples = load_samples(os.path.join(args.out, f"{name}_eval"), [i.name for i in sf.get_inputs()])
            onames = [o.name for o in sf.get_outputs()]
            float_outs = [dict(zip(onames, sf.run(None, feed))) for feed in eval_samples]
        except Exception as e:  # noqa: BLE001
            msg = failed.get(name) or "float model in ORT: " + ort_error(e)
            rows.append(dict(model=name, mode="-", quantize_cmd=[], quantize_s=0.0, quantize_summary="",
                             ort_sqnr_db={}, verify_worst_db=None, failures=[msg]))
            print(f"{name}: FAIL {msg}", file=sys.stderr, flush=True)
            continue
        for mode in ["static"] + EXTRA_MODES.get(name, []):
            row = judge(args, name, mode, float_outs, eval_samples)
            rows.append(row)
            print(f"{name} {mode}: {'ok' if not row['failures'] else 'FAIL ' + '; '.join(row['failures'])}"
                  f" ({row['quantize_s']:.1f} s; {row['quantize_summary']})", file=sys.stderr, flush=True)

    targets = sorted({r["verify_target"] for r in rows if r.get("verify_target")})
    print(f"onnxq {args.onnxq} (sha256 {sha256(args.onnxq)[:12]}), onnxruntime {ort.__version__}, "
          f"CPU {cpu_name()}, verify --target host = {', '.join(targets) or '?'}, floor {args.floor:g} dB\n")
    print("| model | mode | quantize s | ORT SQNR dB per output | verify host dB | status |")
    print("|---|---|---:|---|---:|---|")
    for r in rows:
        ort_col = ", ".join(f"{n} {fmt_db(v)}" for n, v in r["ort_sqnr_db"].items()) or "-"
        status = "ok" if not r["failures"] else "FAIL: " + "; ".join(r["failures"])
        if r.get("gaps"):
            status += "; ORT-host gap " + ", ".join(f"{n} {g:+.1f} dB" for n, g in r["gaps"].items())
        if r.get("floor_db") is not None:
            status += f"; floor {r['floor_db']:g} dB"
        print(f"| {r['model']} | {r['mode']} | {r['quantize_s']:.1f} | {ort_col} | "
              f"{fmt_db(r['verify_worst_db'])} | {status} |")
    nfail = sum(1 for r in rows if r["failures"])
    print(f"\n{len(rows) - nfail} passed, {nfail} failed ({time.monotonic() - t0:.0f} s)")
    for r in rows:
        if r["failures"] and r["quantize_cmd"]:
            print(f"  {r['model']} {r['mode']}: " + " ".join(r["quantize_cmd"]))
    if args.json:
        doc = dict(onnxq=args.onnxq, onnxq_sha256=sha256(args.onnxq), onnxruntime=ort.__version__,
                   cpu=cpu_name(), floor_db=args.floor, out=args.out, rows=rows)
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1, default=str)
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
