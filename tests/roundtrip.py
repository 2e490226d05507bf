#!/usr/bin/python3
"""Round-trip check: `onnxq convert IN OUT` must give a model that python3-onnx parses
and that compares equal (==) to IN; converting OUT again must give the same bytes.
usage: roundtrip.py ONNXQ MODEL... (directories are searched for model.onnx / *.onnx)"""
import os, subprocess, sys, tempfile
import onnx

def models(args):
    # ONNXQ_QUICK=1 (the sanitizer run in CI): every 4th backend-test model, all others;
    # the normal run covers every model.
    quick = os.environ.get("ONNXQ_QUICK") == "1"
    k = 0
    for a in args:
        if os.path.isdir(a):
            for root, _, files in sorted(os.walk(a)):
                for f in sorted(files):
                    if f.endswith(".onnx"):
                        k += 1
                        if quick and "libonnx-testdata" in root and k % 4:
                            continue
                        yield os.path.join(root, f)
        else:
            yield a

def main():
    exe = sys.argv[1]
    ok = bad = 0
    with tempfile.TemporaryDirectory() as td:
        for i, m in enumerate(models(sys.argv[2:])):
            out1 = os.path.join(td, "a%d.onnx" % i)
            out2 = os.path.join(td, "b%d.onnx" % i)
            why = None
            r = subprocess.run([exe, "convert", m, out1], capture_output=True, text=True)
            if r.returncode != 0:
                why = "convert failed: " + (r.stderr.strip().splitlines() or ["?"])[-1]
            else:
                try:
                    a = onnx.load(m, load_external_data=False)
                    b = onnx.load(out1, load_external_data=False)
                    if a != b:
                        why = "models differ after round trip"
                except Exception as e:
                    why = "python3-onnx cannot load the output: %s" % e
            if not why:
                r = subprocess.run([exe, "convert", out1, out2], capture_output=True, text=True)
                if r.returncode != 0 or open(out1, "rb").read() != open(out2, "rb").read():
                    why = "second write differs"
            for p in (out1, out2):
                if os.path.exists(p):
                    os.unlink(p)
            if why:
                bad += 1
                print("FAIL %s: %s" % (m, why))
            else:
                ok += 1
    print("%d passed, %d failed" % (ok, bad))
    return 1 if bad or ok == 0 else 0

if __name__ == "__main__":
    sys.exit(main())
