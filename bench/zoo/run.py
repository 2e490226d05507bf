"""Run the real-model zoo: fetch each model and its data, quantize it with onnxq's
default and with onnxruntime's quantizer, judge every variant in onnxruntime (graph
optimizations on, 1 thread) on the eval samples (another source than the calibration
samples): task metric, SQNR per output and per slice, quantize wall time, file size,
latency quantized/float (interleaved runs, medians). See bench/zoo/README.md.

  VENV=$(bash bench/zoo/venv.sh)
  $VENV/bin/python bench/zoo/run.py [--models a,b] [--quick] [--variants onnxq,ort-static]
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

ZOO = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, ZOO)
import zoolib  # noqa: E402

ALL_VARIANTS = ["onnxq", "ort-static", "ort-static-rr", "onnxq-dynamic", "ort-dynamic"]
# The Python peers (bench/zoo/peer_quant.py, run with the interpreter of peers-venv.sh's venv;
# not in the default --variants): variant -> peer_quant.py arguments. nncf-transformer only
# on the models whose family is in TRANSFORMER_FAMILIES.
PEER_VARIANTS = {
    "nncf": ["nncf"],
    "nncf-transformer": ["nncf", "--transformer"],
    "quark": ["quark"],
    "quark-cle": ["quark", "--algo", "cle"],
    "quark-adaround": ["quark", "--algo", "adaround"],
    "quark-adaquant": ["quark", "--algo", "adaquant"],
}
TRANSFORMER_FAMILIES = ("bert-encoder", "vit")

# Issue 22's acceptance thresholds for onnxq's default, per family; info.json "accept"
# overrides: {"task": minimum task metric, "min_slice_db": minimum SQNR of every output
# and slice, "extra": {key: minimum of that metric.py number}}.
ACCEPT = {
    "yolo-detector": {"task": 0.95},
    "ocr-det": {"task": 0.95},
    "cnn-classifier": {"task": 0.99},
    "ocr-cls": {"task": 0.99},
    "ocr-rec": {"task": 0.99},
    "vit": {"task": 0.95},
}
ACCEPT_DEFAULT = {"task": 0.99, "min_slice_db": 25.0}


def acceptance(info):
    a = dict(ACCEPT_DEFAULT)
    a.update(ACCEPT.get(info.get("family"), {}))
    a.update(info.get("accept", {}))
    return a


def check(vres, acc):
    """List of failed conditions of one variant's result against acceptance acc."""
    fails = []
    if "error" in vres:
        return [vres["error"]]
    if vres["task"]["value"] < acc["task"]:
        fails.append("%s %.4f < %g" % (vres["task"]["name"], vres["task"]["value"], acc["task"]))
    for k, db in vres["sqnr_db"].items():
        if db < acc["min_slice_db"]:
            fails.append("%s %.1f dB < %g" % (k, db, acc["min_slice_db"]))
    for k, lo in acc.get("extra", {}).items():
        v = vres["extra"].get(k)
        if v is None or v < lo:
            fails.append("%s %s < %g" % (k, v, lo))
    return fails


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
            else:
                name = platform.processor()
        with open("/proc/cpuinfo") as f:
            flags = next((ln for ln in f if ln.startswith("flags")), "")
        feats = [x for x in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")
                 if " %s" % x in flags]
        return "%s (%s)" % (name, ", ".join(feats))
    except OSError:
        return platform.processor()


def timed(cmd, env=None, timeout=None):
    """Run cmd; return (wall seconds, max RSS MB of the process, stdout, returncode). With a
    timeout (seconds), the process and its children are killed then (returncode -9)."""
    import signal
    import tempfile
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe, env=env, start_new_session=bool(timeout))
        if timeout:
            while True:
                pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() - t0 > timeout:
                    os.killpg(p.pid, signal.SIGKILL)
                    _, status, ru = os.wait4(p.pid, 0)
                    break
                time.sleep(0.2)
        else:
            _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read(), fe.read()
    if p.returncode != 0:
        sys.stderr.write(err.decode(errors="replace")[-3000:])
    return wall, ru.ru_maxrss / 1024.0, out.decode(errors="replace"), p.returncode


def subset(src, n, dst):
    """A folder of symlinks to n samples of src, evenly spaced (the sample names are in
    source-picture order, so the first n would be few pictures)."""
    dirs = zoolib.sample_dirs(src)
    if n is None or n >= len(dirs):
        return src, len(dirs)
    idx = np.unique(np.linspace(0, len(dirs) - 1, n).round().astype(int))
    os.makedirs(dst, exist_ok=True)
    want = set()
    for i in idx:
        name = os.path.basename(dirs[i])
        want.add(name)
        link = os.path.join(dst, name)
        if not os.path.lexists(link):
            os.symlink(dirs[i], link)
    for name in os.listdir(dst):
        if name not in want:
            os.remove(os.path.join(dst, name))
    return dst, len(idx)


load_metric = zoolib.load_metric


def quantize(variant, model, out, calib, info, args):
    extra = info.get("ort_static", {})
    py = sys.executable
    oq = os.path.join(ZOO, "ort_quant.py")
    if variant == "onnxq":
        cmd = [args.onnxq, "quantize", model, "-o", out, "--calib", calib, "--quiet"]
        cmd += info.get("onnxq_args", [])
    elif variant == "onnxq-dynamic":
        cmd = [args.onnxq, "quantize", model, "-o", out, "--mode", "dynamic", "--quiet"]
    elif variant in ("ort-static", "ort-static-rr"):
        cmd = [py, oq, "static", model, out, "--calib", calib]
        if variant == "ort-static-rr":
            cmd.append("--reduce-range")
        if extra.get("per_channel") is False:
            cmd.append("--per-tensor")
    elif variant == "ort-dynamic":
        cmd = [py, oq, "dynamic", model, out]
    elif variant in args.extra:
        cmd = [args.onnxq, "quantize", model, "-o", out, "--calib", calib, "--quiet"]
        cmd += args.extra[variant]
    elif variant in PEER_VARIANTS:
        tool = PEER_VARIANTS[variant]
        cmd = [args.peers_python, os.path.join(ZOO, "peer_quant.py"), tool[0], model, out,
               "--calib", calib] + tool[1:]
    else:
        raise ValueError(variant)
    peer = variant in PEER_VARIANTS
    wall, rss, stdout, rc = timed(["nice"] + cmd, timeout=args.peer_timeout if peer else None)
    rec = {"cmd": " ".join(cmd), "wall_s": wall, "max_rss_mb": rss, "rc": rc}
    if peer and rc == -9 and args.peer_timeout and wall > args.peer_timeout:
        rec["timeout_s"] = args.peer_timeout
    if (variant.startswith("ort") or peer) and rc == 0:
        try:
            inner = json.loads(stdout.strip().splitlines()[-1])
            rec["inner_s"] = inner["total_s"]
            if inner.get("note"):
                rec["note"] = inner["note"]
        except (ValueError, IndexError, KeyError):
            pass
    # quantize time: onnxq's whole command; onnxruntime's pre-process + quantize, NNCF's and
    # Quark's quantize inside their process (Python start-up and imports not counted)
    rec["qtime_s"] = rec.get("inner_s", wall)
    return rec


def model_tag(variant, args, info):
    """Short hash naming what made a quantized model: the onnxq binary's bytes and its
    arguments, or onnxruntime's version and the quantizer settings. Quantized models in the
    shared cache are named by it, so runs with other builds or options never reuse them."""
    import hashlib
    h = hashlib.sha1()
    if variant in PEER_VARIANTS:
        # the peers' pinned versions, the script and its arguments
        h.update(" ".join(PEER_VARIANTS[variant]).encode())
        for f in ("peer_quant.py", "peers-venv.sh"):
            with open(os.path.join(ZOO, f), "rb") as fh:
                h.update(fh.read())
    elif variant.startswith("ort"):
        import onnxruntime
        h.update(("ort %s %s" % (onnxruntime.__version__,
                                 json.dumps(info.get("ort_static", {}), sort_keys=True))).encode())
        with open(os.path.join(ZOO, "ort_quant.py"), "rb") as f:
            h.update(f.read())
    else:
        with open(args.onnxq, "rb") as f:
            h.update(f.read())
        h.update(" ".join(args.extra.get(variant, []) + info.get("onnxq_args", [])).encode())
    return h.hexdigest()[:10]


def fmt_db(x):
    if x == float("inf"):
        return "inf"
    return "%.1f" % x


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="comma-separated names (default: every folder in models/)")
    ap.add_argument("--variants", default=",".join(ALL_VARIANTS))
    ap.add_argument("--quick", action="store_true", help="8 calib / 8 eval samples, short timing")
    ap.add_argument("--calib-n", type=int, default=64)
    ap.add_argument("--eval-n", type=int, default=0, help="0 = all eval samples")
    ap.add_argument("--onnxq", default=os.path.join(zoolib.REPO, "build-zoo", "onnxq"))
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse quantized models from an earlier run with the same settings")
    ap.add_argument("--no-fetch", action="store_true")
    ap.add_argument("--extra", action="append", default=[], metavar="NAME=ARGS",
                    help="an extra onnxq variant: onnxq quantize M -o Q --calib C ARGS, e.g. "
                         "--extra 'onnxq-mse=--method mse' (repeatable; added to --variants)")
    ap.add_argument("--check", action="store_true",
                    help="judge the onnxq variant against issue 22's acceptance thresholds "
                         "(ACCEPT in run.py, info.json \"accept\"); exit 1 if one fails")
    ap.add_argument("--ci", action="store_true",
                    help="CI subset: --check, only the onnxq variant, 16 calib / 16 eval samples, "
                         "short timing; models from --models or the fast ones")
    ap.add_argument("--latency-budget", type=float, default=4.0, help="seconds per variant")
    ap.add_argument("--peers-python",
                    default=os.path.join(zoolib.cache_dir(), "peers-venv", "bin", "python"),
                    help="interpreter for the peer variants %s (default: the venv of "
                         "bench/zoo/peers-venv.sh)" % ",".join(PEER_VARIANTS))
    ap.add_argument("--peer-timeout", type=float, default=0,
                    help="kill a peer quantizer after this many seconds (0 = no limit)")
    args = ap.parse_args()
    if args.ci:
        args.check = True
        args.variants = "onnxq"
        args.calib_n = min(args.calib_n, 16)
        args.eval_n = args.eval_n or 16
        args.latency_budget = min(args.latency_budget, 0.5)
        if not args.models:
            args.models = "paddleocr-cls,paddleocr-rec,paddleocr-det,yolo8n-nudenet"
    if args.quick:
        args.calib_n = min(args.calib_n, 8)
        args.eval_n = args.eval_n or 8
        args.latency_budget = min(args.latency_budget, 1.0)
    args.onnxq = os.path.abspath(args.onnxq)
    extra = {}
    for e in args.extra:
        k, _, v = e.partition("=")
        extra[k] = v.split()
    args.extra = extra

    names = args.models.split(",") if args.models else sorted(
        d for d in os.listdir(os.path.join(ZOO, "models"))
        if os.path.exists(os.path.join(ZOO, "models", d, "info.json")))
    variants = args.variants.split(",") + [k for k in args.extra if k not in args.variants]
    env = dict(os.environ, ZOO_PY=sys.executable)
    results = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
               "cpu": cpu_name(), "onnxq": args.onnxq, "calib_n": args.calib_n,
               "eval_n": args.eval_n, "models": {}}
    try:
        import onnxruntime
        results["onnxruntime"] = onnxruntime.__version__
    except ImportError:
        pass
    try:
        results["onnxq_commit"] = subprocess.run(
            ["git", "-C", zoolib.REPO, "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True).stdout.strip()
    except OSError:
        pass

    rows = []
    for name in names:
        mdir = os.path.join(ZOO, "models", name)
        with open(os.path.join(mdir, "info.json")) as f:
            info = json.load(f)
        print("== %s" % name, flush=True)
        if not args.no_fetch:
            r = subprocess.run(["bash", os.path.join(mdir, "fetch.sh")], env=env,
                               capture_output=True, text=True)
            if r.returncode != 0:
                print("fetch failed:\n" + r.stderr[-2000:])
                results["models"][name] = {"error": "fetch failed"}
                continue
        cdir = zoolib.zoo_cache(name)
        model = os.path.join(cdir, "model.onnx")
        work = os.path.join(cdir, "work")
        os.makedirs(work, exist_ok=True)
        calib, n_calib = subset(os.path.join(cdir, "calib"), args.calib_n,
                                os.path.join(work, "calib-%d" % args.calib_n))
        eval_dirs = zoolib.sample_dirs(os.path.join(cdir, "eval"))
        if args.eval_n:
            idx = np.unique(np.linspace(0, len(eval_dirs) - 1, args.eval_n).round().astype(int))
            eval_dirs = [eval_dirs[i] for i in idx]
        metric = load_metric(name)
        sess_f = zoolib.ort_session(model)
        inames = zoolib.input_names(sess_f)
        feeds = [zoolib.load_sample(d, inames) for d in eval_dirs]
        metas = [zoolib.load_meta(d) for d in eval_dirs]
        float_outs = zoolib.run_all(sess_f, feeds)
        mres = {"info": info, "calib_samples": n_calib, "eval_samples": len(feeds),
                "float_size_mb": os.path.getsize(model) / 1e6, "variants": {}}
        results["models"][name] = mres
        for v in variants:
            if v in ("ort-dynamic", "onnxq-dynamic") and not info.get("dynamic"):
                continue
            if v == "ort-static-rr" and args.quick:
                continue
            if v == "nncf-transformer" and info.get("family") not in TRANSFORMER_FAMILIES:
                continue
            q = os.path.join(work, "%s-c%d-%s.onnx" % (v, args.calib_n, model_tag(v, args, info)))
            if args.reuse and os.path.exists(q) and os.path.exists(q + ".json"):
                with open(q + ".json") as f:
                    qrec = json.load(f)
            else:
                qrec = quantize(v, model, q, calib, info, args)
                with open(q + ".json", "w") as f:
                    json.dump(qrec, f)
            vres = {"quantize": qrec}
            mres["variants"][v] = vres
            if qrec["rc"] != 0 or not os.path.exists(q):
                vres["error"] = ("quantize stopped after %d s" % qrec["timeout_s"]
                                 if qrec.get("timeout_s") else "quantize failed (rc %d)" % qrec["rc"])
                rows.append((name, v, "FAILED", "", "", "", "", ""))
                print("  %s: quantize failed" % v, flush=True)
                continue
            try:
                sess_q = zoolib.ort_session(q)
            except Exception as e:  # onnxruntime refuses the model
                vres["error"] = "onnxruntime refuses it: %s" % str(e)[:300]
                rows.append((name, v, "ORT-REFUSED", "", "", "", "", ""))
                continue
            quant_outs = zoolib.run_all(sess_q, feeds)
            m = metric.evaluate(float_outs, quant_outs, metas)
            sq, worst = zoolib.slice_sqnr(float_outs, quant_outs, info.get("slices"))
            sq.update(m.pop("slices", {}) or {})
            worst = min(sq, key=lambda k: sq[k]) if sq else None
            tf, tq, nrep = zoolib.latency(sess_f, sess_q, feeds[0], budget_s=args.latency_budget)
            vres.update({"task": m.pop("task"), "extra": m, "sqnr_db": sq, "worst": worst,
                         "size_mb": os.path.getsize(q) / 1e6,
                         "latency_float_ms": tf * 1e3, "latency_quant_ms": tq * 1e3,
                         "latency_reps": nrep, "q_over_float": tq / tf})
            slices_txt = ", ".join("%s %s" % (k, fmt_db(x)) for k, x in sq.items())
            row = (name, v, "%s %.4f" % (vres["task"]["name"], vres["task"]["value"]),
                   "%s %s" % (worst, fmt_db(sq[worst])) if worst else "",
                   "%.1f" % qrec["qtime_s"], "%.2f" % vres["size_mb"],
                   "%.2f" % vres["q_over_float"], slices_txt)
            rows.append(row)
            print("  %-14s %s | worst %s | q %.1fs | %.2f MB | q/f %.2f (%.2f/%.2f ms) | %s" % (
                v, row[2], row[3], qrec["qtime_s"], vres["size_mb"], vres["q_over_float"],
                tq * 1e3, tf * 1e3, slices_txt), flush=True)
            if m:
                print("                 %s" % json.dumps(
                    {k: (round(x, 4) if isinstance(x, float) else x) for k, x in m.items()}),
                    flush=True)
            del sess_q

    print()
    print("CPU: %s; onnxruntime %s, graph optimizations on, 1 thread; calib %d samples"
          % (results["cpu"], results.get("onnxruntime"), args.calib_n))
    hdr = ("model", "variant", "task metric", "worst slice (dB)", "quant s", "MB", "q/float",
           "SQNR per output / slice (dB)")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    out = args.json or os.path.join(zoolib.zoo_cache("results"),
                                    results["date"].replace(":", "") + ".json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(results, f, indent=1, default=float)
    print("\nwrote %s" % out)
    if args.check:
        bad = 0
        print("\nacceptance (issue 22) of the onnxq default:")
        for name, m in results["models"].items():
            if "variants" not in m or "onnxq" not in m["variants"]:
                print("FAIL %s: not measured" % name)
                bad += 1
                continue
            fails = check(m["variants"]["onnxq"], acceptance(m["info"]))
            m["variants"]["onnxq"]["accept_fails"] = fails
            print("%s %s%s" % ("FAIL" if fails else "ok  ", name,
                               (": " + "; ".join(fails)) if fails else ""))
            bad += bool(fails)
        n = len(results["models"])
        print("%d passed, %d failed" % (n - bad, bad))
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
