"""The Python peers' quantizers, NNCF and AMD Quark, run as a separate process by run.py
(with the interpreter of bench/zoo/peers-venv.sh's venv) so that their wall time and
memory are their own. Same calibration samples as every other variant (the folder run.py
hands over, one subfolder per sample, <input name>.npy per input).

  peer_quant.py nncf  IN OUT --calib DIR [--transformer]
  peer_quant.py quark IN OUT --calib DIR [--algo cle|adaround|adaquant]

nncf: nncf.quantize on the ONNX model, its documented settings for a CPU
(target_device=CPU, preset left to NNCF: PERFORMANCE = symmetric int8 activations for a
CNN, MIXED for model_type=TRANSFORMER; fast bias correction on, its default), every
calibration sample (subset_size = their number); --transformer adds
model_type=nncf.ModelType.TRANSFORMER (NNCF's recommendation for transformer models).

quark: quark.onnx ModelQuantizer with Quark's CPU int8 configuration U8S8 (its preset
U8S8_AAWS in the QConfig API: uint8 asymmetric activations, int8 symmetric weights,
Percentile calibration, per-tensor, QDQ), nothing else; --algo adds one of its algorithms
with Quark's own preset values (CLEConfig(); AdaRoundConfig(lr 0.1, 1000 iterations) and
AdaQuantConfig(lr 1e-5, 3000 iterations) as in its A8W8_ADAROUND/ADAQUANT presets, on the
CPU).

Prints one JSON line: {"total_s": .., "note": ..} (time inside the process, imports not
counted, like ort_quant.py)."""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoolib  # noqa: E402


def load_calib(model_path, calib):
    import onnx
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    names = [i.name for i in m.graph.input if i.name not in inits]
    samples = []
    for d in zoolib.sample_dirs(calib):
        samples.append({n: np.load(os.path.join(d, n + ".npy")) for n in names
                        if os.path.exists(os.path.join(d, n + ".npy"))})
    return samples


def opset(model):
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)


def load_model(path):
    """The model, converted to opset 13 if its opset is below 10: NNCF refuses those ("ONNX
    models with opset version < 10 do not support quantization") and Quark writes int32
    bias DequantizeLinear nodes that onnxruntime refuses at that opset; a user converts."""
    import onnx
    model = onnx.load(path)
    if opset(model) >= 10:
        return model, ""
    note = "; model converted from opset %d to 13 (onnx.version_converter)" % opset(model)
    return onnx.version_converter.convert_version(model, 13), note


def run_nncf(a, samples):
    import nncf
    import onnx
    model, note = load_model(a.inp)
    kw = {"target_device": nncf.TargetDevice.CPU, "subset_size": len(samples)}
    if a.transformer:
        kw["model_type"] = nncf.ModelType.TRANSFORMER
    q = nncf.quantize(model, nncf.Dataset(samples), **kw)
    onnx.save(q, a.out)
    return "nncf %s %s%s" % (nncf.__version__, ", ".join(
        "%s=%s" % (k, getattr(v, "name", v)) for k, v in sorted(kw.items())), note)


def run_quark(a, samples):
    import quark
    from quark.onnx import ModelQuantizer, QConfig, QLayerConfig, UInt8Spec, Int8Spec
    from quark.onnx.quantization.config.algorithm import (AdaQuantConfig, AdaRoundConfig,
                                                          CLEConfig)
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(samples)

        def get_next(self):
            return next(self.it, None)

        def rewind(self):
            self.it = iter(samples)

    algos = {"cle": lambda: [CLEConfig()],
             "adaround": lambda: [AdaRoundConfig(learning_rate=0.1, num_iterations=1000)],
             "adaquant": lambda: [AdaQuantConfig(learning_rate=0.00001, num_iterations=3000)],
             None: lambda: []}[a.algo]()
    cfg = QConfig(global_config=QLayerConfig(activation=UInt8Spec(), weight=Int8Spec()),
                  algo_config=algos, ForceQuantizeNoInputCheck=True)
    import onnx
    model, note = load_model(a.inp)
    src = a.inp
    if note:
        src = os.path.abspath("opset13.onnx")
        onnx.save(model, src)
    del model
    ModelQuantizer(cfg).quantize_model(src, a.out, Reader())
    return "amd-quark %s U8S8 (UInt8Spec/Int8Spec, Percentile, per tensor)%s%s" % (
        getattr(quark, "__version__", "?"), " + " + a.algo if a.algo else "", note)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool", choices=["nncf", "quark"])
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--calib", required=True)
    ap.add_argument("--transformer", action="store_true")
    ap.add_argument("--algo", choices=["cle", "adaround", "adaquant"])
    a = ap.parse_args()
    a.inp, a.out, a.calib = (os.path.abspath(a.inp), os.path.abspath(a.out),
                             os.path.abspath(a.calib))
    # both write scratch files (Quark: its optimized/CLE'd copies, NNCF: statistics caches)
    # into the current directory: work in a temporary one
    scratch = tempfile.mkdtemp(prefix="peer_quant.")
    os.chdir(scratch)
    if a.tool == "nncf":
        import nncf  # noqa: F401  (import not counted)
    else:
        import quark.onnx  # noqa: F401
    t0 = time.perf_counter()
    samples = load_calib(a.inp, a.calib)
    note = (run_nncf if a.tool == "nncf" else run_quark)(a, samples)
    t1 = time.perf_counter()
    os.chdir("/")
    shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps({"total_s": t1 - t0, "note": note, "calib_samples": len(samples)}))


if __name__ == "__main__":
    main()
