#!/usr/bin/env python3
"""Streaming weight-only quantization of generated decoders (tests/llm_stream.sh).

    python tests/llm_stream.py ONNXQ_EXE SOURCE_DIR WORKDIR

Known answers on the tiny decoder of bench/llm/make_decoder.py (float32, and float16 with
a tied LM head), external data, quantized by `onnxq quantize --mode weight-only`:
 - every MatMulNBits / blocked DequantizeLinear weight equals the round to nearest of the
   float weight recomputed here (symmetric int4, blocks of 32 along K; the value of largest
   magnitude maps to -8 (a negative scale when it is positive), the scale's magnitude
   rounded to float16 first for a float16 weight; q = round_half_even(w / scale));
 - the embedding table (--embedding-dtype int4) is a GatherBlockQuantized whose data are
   the same rule along the rows, and the tied head a MatMulNBits of the same bytes;
 - the output loads and runs in onnxruntime, logits SQNR against the float model above
   SQNR_FLOOR over prompt and KV-cache generation steps; the graph inputs and outputs
   (past_key_values.N.*, present.N.*) are those of the float model;
 - peak RSS on a decoder with 394 MB of float32 weights stays under RSS_BOUND_MB (the
   largest weight is 16 MB: the run holds one weight at a time; measured 38 MB; not
   asserted in a sanitizer build, ONNXQ_SANITIZED=1, whose quarantine keeps freed memory);
 - SIGINT in the middle of that run leaves no file in the output directory;
 - a float16 decoder: GPTQ's sweeps on the cached boundary values (cache=true) write the
   bytes of sweeps from the model inputs (cache=false); AWQ's fold alone keeps the float
   function (logits > 40 dB); RTN, GPTQ and AWQ outputs run in onnxruntime above SQNR_FLOOR.
Exit 0 all passed, 1 a failure, 77 a module missing.
"""
import json
import os
import signal
import subprocess
import sys
import time

try:
    import numpy as np
    import onnx
    from onnx import numpy_helper
    import onnxruntime  # noqa: F401
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

SQNR_FLOOR = 14.0     # dB; measured 16.4-18.2 on these models (4 prompts of 32, 8 steps)
RSS_BOUND_MB = 120    # measured 38 MB; the weights are 394 MB

exe, src, work = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)
sys.path.insert(0, os.path.join(src, "bench", "llm"))
import decoder_ort  # noqa: E402

fails = 0


def check(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        fails += 1


def gen(name, *args):
    path = os.path.join(work, name)
    subprocess.run([sys.executable, os.path.join(src, "bench", "llm", "make_decoder.py"), "-q", "-o", path, *args],
                   check=True)
    return path


def quantize(inp, out, *args):
    p = subprocess.run([exe, "quantize", inp, "-o", out, "--mode", "weight-only", "--quiet", *args],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr)
    return p.returncode


def rtn_ref(w, block, half):
    """w [K, N] float32 -> q int32 [K, N], scales float32 [nb, N] (onnxq's symmetric int4 rule)."""
    K, N = w.shape
    nb = -(-K // block)
    q = np.zeros((K, N), np.int32)
    s = np.zeros((nb, N), np.float32)
    for b in range(nb):
        blk = w[b * block:(b + 1) * block]
        mn, mx = blk.min(0).astype(np.float64), blk.max(0).astype(np.float64)
        ext = np.where(-mn >= mx, mn, mx)  # the value of largest magnitude goes to -8
        sc = np.abs(ext / 8).astype(np.float32)
        sc[sc == 0] = 1
        if half:
            sc = np.maximum(sc.astype(np.float16).astype(np.float32), np.float32(2.0 ** -24))
        sc = np.where(ext > 0, -sc, sc).astype(np.float32)
        q[b * block:(b + 1) * block] = np.clip(np.rint(blk / sc), -8, 7).astype(np.int32)
        s[b] = sc
    return q, s


def unpack4(b):
    b = b.astype(np.uint8)
    return np.stack([b & 15, b >> 4], -1).reshape(*b.shape[:-1], b.shape[-1] * 2).astype(np.int32)


def float_weights(path):
    m = onnx.load(path)  # tiny: loads the external data
    return m, {t.name: numpy_helper.to_array(t).astype(np.float32) for t in m.graph.initializer}


def check_model(fm_path, q_path, fmt, half, tied):
    fm, fw = float_weights(fm_path)
    qm = onnx.load(q_path)
    qw = {t.name: numpy_helper.to_array(t) for t in qm.graph.initializer}
    base = os.path.basename(q_path)
    # interface unchanged: the KV cache inputs and outputs
    sig = lambda g: [(v.name, v.type.SerializeToString()) for v in list(g.input) + list(g.output)]
    check(sig(fm.graph) == sig(qm.graph), f"{base}: inputs/outputs (past_key_values, present) unchanged")
    fnodes = {n.name: n for n in fm.graph.node}
    n_checked, worst = 0, 0
    for n in qm.graph.node:
        if fmt == "matmulnbits" and n.op_type == "MatMulNBits":
            orig = fnodes.get(n.name[:-len("_nbits")]) if n.name.endswith("_nbits") else None
            if orig is None or orig.input[1] not in fw:
                continue  # the tied head: checked with the embedding
            w = fw[orig.input[1]]
            q, s = rtn_ref(w, 32, half)
            K, N = w.shape
            got_q = unpack4(qw[n.input[1]].reshape(N, -1))[:, :K].T - 8
            got_s = qw[n.input[2]].astype(np.float32).reshape(N, -1).T
            ok = np.array_equal(got_q, q) and np.array_equal(got_s, s)
            worst = max(worst, int(np.abs(got_q - q).max()))
            n_checked += ok
        elif fmt == "qdq" and n.op_type == "DequantizeLinear" and n.input[0] in qw:
            wname = n.input[0][:-len("_wq")] if n.input[0].endswith("_wq") else None
            if wname not in fw:
                continue
            q, s = rtn_ref(fw[wname], 32, half)
            got_q = qw[n.input[0]].astype(np.int32)
            got_s = qw[n.input[1]].astype(np.float32)
            n_checked += np.array_equal(got_q, q) and np.array_equal(got_s, s)
    n_mm = sum(1 for n in fm.graph.node if n.op_type == "MatMul" and n.input[1] in fw)
    check(n_checked == n_mm, f"{base}: {n_checked} of {n_mm} weights equal numpy's RTN (worst q diff {worst})")
    if fmt == "matmulnbits":
        emb = fw["model.embed_tokens.weight"]
        gq = [n for n in qm.graph.node if n.op_type == "GatherBlockQuantized"]
        ok = len(gq) == 1 and not any(n.op_type == "Gather" and n.input[0] == "model.embed_tokens.weight"
                                      for n in qm.graph.node)
        if ok:
            q, s = rtn_ref(emb.T, 32, half)  # blocks along the rows: K = hidden
            n = gq[0]
            got_q = unpack4(qw[n.input[0]]) - 8
            got_s = qw[n.input[2]].astype(np.float32)
            ok = np.array_equal(got_q, q.T) and np.array_equal(got_s, s.T)
            if tied:
                heads = [m for m in qm.graph.node if m.op_type == "MatMulNBits" and m.output[0] == "logits"]
                ok = ok and len(heads) == 1 and np.array_equal(qw[heads[0].input[1]].reshape(qw[n.input[0]].shape),
                                                               qw[n.input[0]])
        check(ok, f"{base}: embedding is GatherBlockQuantized with numpy's RTN{' and the tied head its bytes' if tied else ''}")
    # onnxruntime: loads, runs, SQNR over prompts and cached generation steps
    rng = np.random.default_rng(7)
    sref, sq = decoder_ort.session(fm_path, 1), decoder_ort.session(q_path, 1)
    ref_all, got_all = [], []
    for _ in range(4):
        p = rng.integers(0, 1000, size=(1, 32), dtype=np.int64)
        r, toks = decoder_ort.run(sref, p, 8)
        g, _ = decoder_ort.run(sq, p, 8, forced=toks)
        ref_all.append(r)
        got_all.append(g)
    db = decoder_ort.sqnr_db(np.concatenate(ref_all), np.concatenate(got_all))
    check(np.isfinite(db) and db > SQNR_FLOOR, f"{base}: onnxruntime logits SQNR {db:.2f} dB > {SQNR_FLOOR}")


# ---- known answers on the tiny decoders
for name, args, half, tied in (("tiny32.onnx", [], False, False),
                               ("tiny16t.onnx", ["--dtype", "float16", "--tie"], True, True)):
    fpath = gen(name, "--preset", "tiny", *args)
    for fmt in ("matmulnbits", "qdq"):
        out = os.path.join(work, f"q_{fmt}_{name}")
        extra = ["--embedding-dtype", "int4"] if fmt == "matmulnbits" else []
        rc = quantize(fpath, out, "--format", fmt, *extra)
        check(rc == 0 and os.path.exists(out + ".data"), f"{name} {fmt}: quantized, external data {os.path.basename(out)}.data")
        if rc == 0:
            check_model(fpath, out, fmt, half, tied)

# ---- GPTQ and AWQ on a float16 decoder (the executor runs its float16 graph)
def ort_sqnr(fm_path, q_path):
    sref, sq = decoder_ort.session(fm_path, 1), decoder_ort.session(q_path, 1)
    rng = np.random.default_rng(3)
    ref_all, got_all = [], []
    for _ in range(2):
        p = rng.integers(0, 1000, (1, 24)).astype(np.int64)
        r, toks = decoder_ort.run(sref, p, 4)
        g, _ = decoder_ort.run(sq, p, 4, forced=toks)
        ref_all.append(r)
        got_all.append(g)
    return decoder_ort.sqnr_db(np.concatenate(ref_all), np.concatenate(got_all))


def opt(inp, out, passes, stat=None):
    js = out + ".json"
    p = subprocess.run([exe, "opt", inp, "-o", out, "--passes", passes, "--json", js], capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr)
    if stat is not None:  # the pass's counter `stat` anywhere in the summary (0 when absent)
        def find(o):
            if isinstance(o, dict):
                return o[stat] if stat in o else next((v for v in map(find, o.values()) if v), 0)
            return next((v for v in map(find, o) if v), 0) if isinstance(o, list) else 0
        return p.returncode, find(json.load(open(js))) if os.path.exists(js) else 0
    return p.returncode


f16 = gen("f16.onnx", "--preset", "tiny", "--dtype", "float16")
cal = os.path.join(work, "calib16")
fm = onnx.load(f16, load_external_data=False)
crng = np.random.default_rng(11)
for k in range(6):
    d = os.path.join(cal, f"{k:02d}")
    os.makedirs(d, exist_ok=True)
    S = 40 + 8 * k  # lengths differ: the cached boundary values have other shapes per sample
    for i in fm.graph.input:
        if i.name == "input_ids":
            a = crng.integers(0, 1000, (1, S)).astype(np.int64)
        elif i.name == "attention_mask":
            a = np.ones((1, S), np.int64)
        elif i.name == "position_ids":
            a = np.arange(S, dtype=np.int64)[None]
        else:  # past_key_values.N.*: [1, kv_heads, 0, head_dim]
            dims = [x.dim_value for x in i.type.tensor_type.shape.dim]
            a = np.zeros((1, dims[1], 0, dims[3]), np.float16)
        np.save(os.path.join(d, i.name + ".npy"), a)
outs = {}
for tag, extra in (("cache", ""), ("nocache", ",cache=false")):
    outs[tag] = os.path.join(work, f"gptq16_{tag}.onnx")
    rc, segs = opt(f16, outs[tag], f"quantize-weights{{algo=gptq,format=matmulnbits,data={cal}{extra}}}",
                   "gptq_segment_sweeps")
    # tiny decoder: 9 layer inputs, each its own segment (cache) or run from the model inputs
    want = "> 0" if tag == "cache" else "0"
    check(rc == 0 and (segs > 0 if tag == "cache" else segs == 0),
          f"float16 decoder: GPTQ {tag}: exit {rc}, {segs} sweeps on cached boundary values ({want})")
same = all(os.path.exists(o + ".data") for o in outs.values()) and \
    open(outs["cache"] + ".data", "rb").read() == open(outs["nocache"] + ".data", "rb").read()
check(same, "float16 GPTQ: sweeps on the cached boundary values give the bytes of sweeps from the model inputs")
rtn16 = os.path.join(work, "rtn16.onnx")
quantize(f16, rtn16, "--format", "matmulnbits")
awq_fold = os.path.join(work, "awqfold16.onnx")
rc = opt(f16, awq_fold, f"quantize-weights{{algo=awq,awq-fold-only=true,format=matmulnbits,data={cal}}}")
if rc == 0:
    db = ort_sqnr(f16, awq_fold)
    # measured 65.5 dB: the scaled float16 weights and norms rounded once more
    check(db > 40, f"float16 AWQ fold only: the float function kept, logits {db:.1f} dB > 40 dB")
else:
    check(False, f"float16 AWQ fold only: exit {rc}")
awq16 = os.path.join(work, "awq16.onnx")
rc = quantize(f16, awq16, "--format", "matmulnbits", "--algo", "awq", "--calib", cal)
for tag, path in (("RTN", rtn16), ("GPTQ", outs["cache"]), ("AWQ", awq16)):
    if os.path.exists(path + ".data"):
        db = ort_sqnr(f16, path)
        check(np.isfinite(db) and db > SQNR_FLOOR, f"float16 {tag}: runs in onnxruntime, logits {db:.1f} dB > {SQNR_FLOOR}")
    else:
        check(False, f"float16 {tag}: no output")

# ---- memory bound and Ctrl-C on a model much bigger than one weight
big = gen("big.onnx", "--preset", "small", "--hidden", "1024", "--inter", "2816", "--layers", "8", "--vocab", "4000")
wbytes = os.path.getsize(big + ".data")
out = os.path.join(work, "rss", "q.onnx")
os.makedirs(os.path.dirname(out), exist_ok=True)
probe = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]).returncode; "
         "print(r, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
p = subprocess.run([sys.executable, "-c", probe, exe, "quantize", big, "-o", out, "--mode", "weight-only",
                    "--format", "matmulnbits", "--quiet"], capture_output=True, text=True)
rc, kb = (int(x) for x in p.stdout.split())
if os.environ.get("ONNXQ_SANITIZED") == "1":
    check(rc == 0, f"streaming: {wbytes / 1e6:.0f} MB of weights, peak RSS {kb / 1024:.0f} MB (sanitizer build: not bounded)")
else:
    check(rc == 0 and kb < RSS_BOUND_MB * 1024,
          f"streaming: {wbytes / 1e6:.0f} MB of weights, peak RSS {kb / 1024:.0f} MB < {RSS_BOUND_MB} MB")

sigdir = os.path.join(work, "sigint")
os.makedirs(sigdir, exist_ok=True)
proc = subprocess.Popen([exe, "quantize", big, "-o", os.path.join(sigdir, "q.onnx"), "--mode", "weight-only",
                         "--format", "matmulnbits", "--quiet"],
                        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # even if ours is ignored
t0, started = time.time(), False
while time.time() - t0 < 30 and proc.poll() is None and not started:
    tmp = [f for f in os.listdir(sigdir) if f.startswith(".q.onnx.data.tmp")]
    started = bool(tmp) and os.path.getsize(os.path.join(sigdir, tmp[0])) > 0
    time.sleep(0.01)
if proc.poll() is None:
    proc.send_signal(signal.SIGINT)
rc = proc.wait()
left = os.listdir(sigdir)
check(started and rc == -signal.SIGINT and not left,
      f"SIGINT mid-run: exit {rc} (want {-signal.SIGINT}), interrupted while writing: {started}, files left: {left}")

sys.exit(1 if fails else 0)
