#!/usr/bin/python3
"""Run the docs examples listed below and compare their output with the pages.

usage: docs_examples.py SOURCE_DIR BINARY_DIR WORK_DIR

An example is a fenced block of a docs page whose commands start with "$ " (a line
ending in "\\" continues the command); the lines up to the next "$ " are the expected
output (stdout and stderr together). WORK_DIR gets the files of docs/examples/make.py,
`models` (the repo's) and `build` (BINARY_DIR, for the plugins), and `onnxq` is first on
PATH. Values that vary by machine or run are masked on both sides: times (ms, s, /s,
"seconds"), and lines the page elides with "...".
"""
import os
import re
import subprocess
import sys

# (page, a string that the first command of the block contains)
EXAMPLES = [
    ("docs/passes/eliminate-dead.md", "onnxq opt dead.onnx -o out.onnx --passes eliminate-dead"),
    ("docs/passes/dedupe-initializers.md", "onnxq opt dedupe.onnx"),
    ("docs/passes/fold-batchnorm.md", "onnxq opt bn.onnx -o out.onnx --passes fold-batchnorm"),
    ("docs/opt.md", "upgrade-opset{to=x17}"),
    ("docs/opt.md", "--print-after dedupe-initializers"),
    ("docs/opt.md", "--passes eliminate-dead --json -"),
    ("docs/opt.md", "abi-test{break=true},eliminate-identity' --verify-each"),
    ("docs/opt.md", "abi-test{break=true},eliminate-identity'\n"),
    ("docs/check.md", "onnxq check broken.onnx\n"),
    ("docs/check.md", "onnxq check broken.onnx --json -"),
    ("docs/run.md", "onnxq run nan_model.onnx"),
    ("docs/run.md", "onnxq run models/shapes_cnn.onnx --random --dim N=2 --json -"),
    ("docs/data.md", "--calib nan --quiet\n"),
    ("docs/data.md", "--calib nan --nan-policy ignore 2>&1 | grep warning"),
    ("docs/data.md", "--calib infcalib 2>&1 | grep note:"),
    ("docs/data.md", "--calib infcalib --nan-policy error --quiet"),
    ("docs/quantize.md", "-o r.onnx --calib-random 8 2>&1 | grep warning"),
    ("docs/quantize.md", "--calib models/calib --print-config\n"),
    ("docs/quantize.md", "--calib models/calib 2>&1 | grep bias"),
    ("docs/quantize.md", "--weight-rounding gptq 2>&1 | grep rounding"),
    ("docs/quantize.md", "--calib models/calib --target-sqnr 60 --target generic --quiet"),
    ("docs/quantize.md", "-o nodir/q.onnx"),
    ("docs/quantize.md", "grep -A7 '\"name\": \"insert-qdq\"'"),
    ("docs/data.md", "--calib models/calib/sample_000/image.npy"),
    ("docs/data.md", "mkdir flat"),
    ("docs/data.md", "onnxq run ints.onnx"),
    ("docs/data.md", "--calib wrong --quiet"),
    ("docs/verify.md", "-o g.onnx --calib models/calib --target generic --quiet"),
    ("docs/quantize.md", "--weight-dtype int8 --weight-asymmetric 2>&1 | grep warning"),
    ("docs/quantize.md", "2>&1 | grep saturation"),
    ("docs/quantize.md", "-o q.onnx --calib models/calib 2>&1 | grep \"saturation check\""),
    ("docs/weight-only.md", "-o wo.onnx --mode weight-only\n"),
    ("docs/weight-only.md", "--format matmulnbits --weight-asymmetric\n"),
    ("docs/weight-only.md", "--algo gptq --calib models/calib --quiet"),
    ("docs/quantize.md", "--smooth-quant 0.5 2>&1 | grep note: | cut"),
    ("docs/passes/smooth-quant.md", "smooth-quant{alpha=0.5,data=models/calib}"),
    ("docs/quantize.md", "onnxq quantize --mode dynamic models/shapes_cnn.onnx -o shapes_dyn.onnx"),
    ("docs/passes/quantize-dynamic.md", "--passes quantize-dynamic --stats"),
]

MASKS = [
    (re.compile(r"[0-9.]+(e-?[0-9]+)? ?ms\b"), "<ms>"),
    (re.compile(r"[0-9.]+(e-?[0-9]+)?/s\b"), "<rate>"),
    (re.compile(r"[0-9.]+s left"), "<left>"),
    (re.compile(r"\b[0-9]+\.[0-9] s$", re.M), "<s>"),  # quantize's bias correction / weight rounding lines end in their time
    (re.compile(r"ETA [0-9.]+s"), "ETA <s>"),
    (re.compile(r'"seconds": [0-9.e+-]+'), '"seconds": <s>'),
]


def mask(line):
    for rx, rep in MASKS:
        line = rx.sub(rep, line)
    return line.rstrip()


def blocks(text):
    """Fenced blocks as lists of (command, expected lines)."""
    out, inside, cur = [], False, None
    for line in text.split("\n"):
        if line.startswith("```"):
            if inside and cur:
                out.append(cur)
            inside, cur = not inside, []
            continue
        if not inside:
            continue
        if line.startswith("$ "):
            cur.append([line[2:], []])
        elif cur and cur[-1][0].endswith("\\") and not cur[-1][1]:
            cur[-1][0] += "\n" + line
        elif cur:
            cur[-1][1].append(line)
    return out


def same(got, want):
    """want may elide lines with '...'."""
    got = [mask(x) for x in got]
    want = [mask(x) for x in want]
    if "..." not in want:
        return got == want
    # each run of lines between '...' must appear in order
    i = 0
    parts, cur = [], []
    for w in want:
        if w == "...":
            parts.append(cur)
            cur = []
        else:
            cur.append(w)
    parts.append(cur)
    for k, part in enumerate(parts):
        if not part:
            continue
        while i + len(part) <= len(got) and got[i:i + len(part)] != part:
            if k == 0:
                return False
            i += 1
        if i + len(part) > len(got):
            return False
        i += len(part)
    return parts[-1] == [] or i == len(got)


def main(src, binary, work):
    os.makedirs(work, exist_ok=True)
    subprocess.run(["/usr/bin/python3", os.path.join(src, "docs/examples/make.py"), work], check=True,
                   stdout=subprocess.DEVNULL)
    for name, target in (("models", os.path.join(src, "models")), ("build", binary)):
        p = os.path.join(work, name)
        if not os.path.lexists(p):
            os.symlink(target, p)
    bindir = os.path.join(work, "bin")
    os.makedirs(bindir, exist_ok=True)
    exe = os.path.join(bindir, "onnxq")
    if not os.path.lexists(exe):
        os.symlink(os.path.join(binary, "onnxq"), exe)
    env = dict(os.environ, PATH=bindir + ":" + os.environ["PATH"])
    fails = 0
    for page, marker in EXAMPLES:
        text = open(os.path.join(src, page)).read()
        found = [b for b in blocks(text) if b and marker in b[0][0] + "\n"]
        if len(found) != 1:
            print("FAIL: %s: %d blocks match %r" % (page, len(found), marker))
            fails += 1
            continue
        last_rc = 0
        for cmd, want in found[0]:
            while want and want[-1] == "":
                want.pop()
            if cmd.strip() == "echo $?":  # the exit code of the previous command
                got = [str(last_rc)]
            else:
                r = subprocess.run(["bash", "-c", cmd.replace("\\\n", " ")], cwd=work, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                got = r.stdout.rstrip("\n").split("\n") if r.stdout.strip() else []
                last_rc = r.returncode
            if not same(got, want):
                fails += 1
                print("FAIL: %s: $ %s" % (page, cmd))
                print("  page:\n    " + "\n    ".join(want))
                print("  got:\n    " + "\n    ".join(got))
            else:
                print("ok: %s: $ %s" % (page, cmd.split("\n")[0][:90]))
    print("docs_examples: %d example(s) differ from their page" % fails if fails else "docs_examples: all ok")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
